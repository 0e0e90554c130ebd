import { useRef, type ReactNode } from "react";
import type { Translate } from "../../i18n";
import { minute } from "./format";

// When is a time from the API in the reader's time zone, to the minute;
// the element keeps the exact instant. No time is "never".
export function When({ iso, t }: { iso?: string; t: Translate }) {
  if (!iso) return <>{t("never")}</>;
  return (
    <time dateTime={iso} title={iso}>
      {minute(iso)}
    </time>
  );
}

// SecretBox shows a secret (a new key, a set-password link) once, from
// the answer that made it: Copy selects it and copies it where the
// browser allows, Hide drops it from the page.
export function SecretBox(props: { id: string; value: string; label: string; onHide: () => void; t: Translate; children: ReactNode }) {
  const { id, value, label, onHide, t, children } = props;
  const input = useRef<HTMLInputElement>(null);
  const copy = async () => {
    input.current?.select();
    // The clipboard API needs a secure context; elsewhere the secret
    // stays selected for the user to copy.
    if (navigator.clipboard) await navigator.clipboard.writeText(value).catch(() => undefined);
  };
  return (
    <div id={id} className="secret" hidden={!value}>
      {children}
      <div className="secret-row">
        <input ref={input} type="text" readOnly spellCheck={false} aria-label={label} value={value} />{" "}
        <button type="button" data-role="copy" onClick={copy}>
          {t("copy")}
        </button>{" "}
        <button type="button" className="secondary" data-role="hide" onClick={onHide}>
          {t("hide")}
        </button>
      </div>
    </div>
  );
}

import { useRef, type ReactNode } from "react";
import type { Translate } from "../i18n";

// CopyField is a text to copy (a link, a secret) with a Copy button: Copy
// selects it and puts it on the clipboard. The clipboard API needs a
// secure context; elsewhere the text stays selected for the user to copy.
// children are more buttons after Copy.
export function CopyField(props: { value: string; label: string; t: Translate; className: string; primary?: boolean; children?: ReactNode }) {
  const { value, label, t, className, primary = false, children } = props;
  const input = useRef<HTMLInputElement>(null);
  const copy = async () => {
    input.current?.select();
    if (navigator.clipboard) await navigator.clipboard.writeText(value).catch(() => undefined);
  };
  return (
    <div className={className}>
      <input ref={input} type="text" readOnly spellCheck={false} aria-label={label} value={value} />{" "}
      <button type="button" className={primary ? undefined : "secondary"} data-role="copy" onClick={copy}>
        {t("copy")}
      </button>
      {children}
    </div>
  );
}

// SecretBox shows a secret (a new key, a set-password link) once, from
// the answer that made it: it can be copied, and Hide drops it from the
// page. children say what the secret is; after, how to use it.
export function SecretBox(props: { id: string; value: string; label: string; onHide: () => void; t: Translate; children: ReactNode; after?: ReactNode }) {
  const { id, value, label, onHide, t, children, after } = props;
  return (
    <div id={id} className="secret" hidden={!value}>
      {children}
      <CopyField value={value} label={label} t={t} className="secret-row" primary>
        {" "}
        <button type="button" className="secondary" data-role="hide" onClick={onHide}>
          {t("hide")}
        </button>
      </CopyField>
      {after}
    </div>
  );
}

import { useState, type FormEvent, type ReactNode } from "react";
import type { Translate } from "../i18n";

// Composer is where a question is written (E3): Send starts a run and is
// disabled while one goes, when Stop takes its place beside it. Enter
// sends, Shift+Enter is a new line. The ids are the old page's, which the
// browser tests use (#chat-form, textarea[name=q]).
export function Composer({
  t,
  running,
  onSend,
  onStop,
  before,
  above,
  files = false,
}: {
  t: Translate;
  running: boolean;
  /** onSend sends the text; false when nothing was sent (the text stays) */
  onSend: (text: string) => boolean | void;
  onStop: () => void;
  /** what goes left of the text box: the attach button and chips */
  before?: ReactNode;
  /** what goes above it: the attached files' chips */
  above?: ReactNode;
  /** files are attached, so a message may be sent without text */
  files?: boolean;
}) {
  const [text, setText] = useState("");
  const submit = (e?: FormEvent) => {
    e?.preventDefault();
    if (running || (!text.trim() && !files)) return;
    if (onSend(text.trim()) === false) return;
    setText("");
  };
  return (
    <form id="chat-form" className="composer" onSubmit={submit}>
      {above}
      <div className="composer-row">
      {before}
      <textarea
        name="q"
        aria-label={t("askPlaceholder")}
        placeholder={t("askPlaceholder")}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) submit(e);
        }}
      />
      <div className="composer-actions">
        {running && (
          <button type="button" className="danger" data-role="stop" onClick={onStop}>
            {t("stop")}
          </button>
        )}
        <button type="submit" data-role="send" disabled={running || (!text.trim() && !files)}>
          {t("send")}
        </button>
      </div>
      </div>
    </form>
  );
}

import { useState } from "react";
import type { Translate } from "../i18n";
import { humanSize, type Uploaded } from "./files/api";

const lead = "Attached files: ";

// attachedLine is how the engine stores a message's attachments, as its
// last paragraph; a live turn says its files the same way, so live and
// stored messages are drawn alike.
export function attachedLine(files: Uploaded[]): string {
  return lead + files.map((f) => `${f.sandboxPath} (${humanSize(f.size)})`).join(", ");
}

// splitAttached finds a message's attachments in its last paragraph,
// "Attached files: /workspace/uploads/a.csv (12 B), ...": null when it
// has none.
export function splitAttached(text: string): { text: string; files: { sandboxPath: string; size: string }[] } | null {
  const at = text.lastIndexOf(lead);
  if (at < 0 || (at > 0 && text.slice(at - 2, at) !== "\n\n")) return null;
  const line = text.slice(at + lead.length);
  const item = /(\/workspace\/uploads\/[^\n]+?) \((\d+(?:\.\d+)? (?:B|[KMGTPE]iB))\)(?:, |$)/g;
  const files: { sandboxPath: string; size: string }[] = [];
  let m: RegExpExecArray | null;
  let end = 0;
  while ((m = item.exec(line)) !== null && m.index === end) {
    files.push({ sandboxPath: m[1], size: m[2] });
    end = item.lastIndex;
  }
  if (!files.length || end !== line.length) return null;
  return { text: text.slice(0, at).trimEnd(), files };
}

// UserMessage is the person's side of a turn: the text as typed, and
// the files it attached as chips. With onEdit (a stored question of the
// reader's own chat, R2), it can be changed and sent again.
export function UserMessage({ text, t, onEdit }: { text: string; t: Translate; onEdit?: (text: string) => void }) {
  const found = splitAttached(text);
  const [editing, setEditing] = useState<string | null>(null);
  if (editing !== null && onEdit) {
    return (
      <form
        className="msg user msg-edit"
        onSubmit={(e) => {
          e.preventDefault();
          if (editing.trim()) onEdit(editing);
        }}
      >
        <textarea aria-label={t("editMessage")} value={editing} onChange={(e) => setEditing(e.target.value)} rows={Math.min(8, editing.split("\n").length + 1)} />
        <div className="msg-actions">
          <button type="button" className="secondary" data-role="edit-cancel" onClick={() => setEditing(null)}>
            {t("editCancel")}
          </button>
          <button type="submit" data-role="edit-send" disabled={!editing.trim()}>
            {t("editSend")}
          </button>
        </div>
      </form>
    );
  }
  return (
    <div className="msg user">
      {found ? found.text : text}
      {found && (
        <ul className="msg-attachments" aria-label={t("attachedFiles")}>
          {found.files.map((f) => (
            <li key={f.sandboxPath} className="attachment" data-path={f.sandboxPath} title={f.sandboxPath}>
              <span className="attachment-name" data-role="name">
                {f.sandboxPath.split("/").pop()}
              </span>{" "}
              <span className="attachment-size" data-role="size">
                {f.size}
              </span>
            </li>
          ))}
        </ul>
      )}
      {onEdit && (
        <div className="msg-actions">
          <button type="button" className="link" data-role="edit" title={t("editMessageTitle")} onClick={() => setEditing(found ? found.text : text)}>
            {t("editMessage")}
          </button>
        </div>
      )}
    </div>
  );
}

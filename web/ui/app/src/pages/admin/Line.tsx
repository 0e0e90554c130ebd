import { useCallback, useState } from "react";
import type { Translate } from "../../i18n";
import { ApiError } from "../http";

// Note is what a status line says: how an action went (ok true or
// false), or, with ok undefined, what is under way.
export interface Note {
  text: string;
  ok?: boolean;
  // the HTTP status of a refusal: 401 adds a way to sign in again
  status?: number;
  // n tells notes apart: each is drawn as a new line, so a line read
  // out, or cleared by hand, shows the next note whatever the last was
  n: number;
}

let notes = 0;

// noteOf is a new note: text, and how the action went (none while it runs).
export const noteOf = (text: string, ok?: boolean): Note => ({ text, ok, n: ++notes });

// failed is the note of an action that failed with err; prefix, when
// given, says what failed and takes the reason at {reason}.
export function failed(err: unknown, prefix?: string): Note {
  const reason = err instanceof Error ? err.message : String(err);
  return { ...noteOf(prefix ? prefix.replace("{reason}", reason) : reason, false), status: err instanceof ApiError ? err.status : undefined };
}

// useLine keeps one status line: say(text, ok) after an action,
// fail(err) when it failed, note(text) while it runs.
export function useLine() {
  const [line, setLine] = useState<Note | null>(null);
  const say = useCallback((text: string, ok = true) => setLine(noteOf(text, ok)), []);
  const note = useCallback((text: string) => setLine(noteOf(text)), []);
  const fail = useCallback((err: unknown) => setLine(failed(err)), []);
  const clear = useCallback(() => setLine(null), []);
  return { line, say, note, fail, clear };
}

// Line is a status line read out by screen readers as it changes.
export function Line({ line, t, id, role = true }: { line: Note | null; t: Translate; id?: string; role?: boolean }) {
  const tone = line?.ok === true ? " ok" : line?.ok === false ? " error" : "";
  return (
    <p key={line?.n ?? 0} className={"status" + tone} id={id} data-role={role ? "status" : undefined} role="status">
      {line?.text}
      {line?.status === 401 && (
        <>
          {" "}
          <a href="/login">{t("signIn")}</a>
        </>
      )}
    </p>
  );
}

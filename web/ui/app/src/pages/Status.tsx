import { useCallback, useState, type ReactNode } from "react";
import type { Translate } from "../i18n";
import { ApiError } from "./http";

// Said is what a status line says: how an action went (ok true or
// false), or, with ok undefined, what is under way.
export interface Said {
  text: string;
  ok?: boolean;
  // the HTTP status of a refusal: 401 adds a way to sign in again
  status?: number;
  // n tells lines apart: each is drawn as a new element, so a line read
  // out, or cleared by hand, shows the next one whatever the last was
  n: number;
}

let lines = 0;

// saidOf is a new line: text, and how the action went (none while it runs).
export const saidOf = (text: string, ok?: boolean): Said => ({ text, ok, n: ++lines });

// failure is the line of an action that failed with err; prefix, when
// given, says what failed and takes the reason at {reason}.
export function failure(err: unknown, prefix?: string): Said {
  const reason = err instanceof Error ? err.message : String(err);
  return { ...saidOf(prefix ? prefix.replace("{reason}", reason) : reason, false), status: err instanceof ApiError ? err.status : undefined };
}

// useStatus keeps one status line: say(text) after an action went well
// (say(text, false) when it did not, in the page's own words), fail(err)
// with the engine's, note(text) while it runs.
export function useStatus() {
  const [said, setSaid] = useState<Said | null>(null);
  const say = useCallback((text: string, ok = true) => setSaid(saidOf(text, ok)), []);
  const note = useCallback((text: string) => setSaid(saidOf(text)), []);
  const fail = useCallback((err: unknown) => setSaid(failure(err)), []);
  const clear = useCallback(() => setSaid(null), []);
  return { said, say, note, fail, clear };
}

// Status is a status line read out by screen readers as it changes.
// marked (the default) tags it data-role=status, as forms' own lines are;
// a page's line has an id instead. children follow the text.
export function Status(props: { said: Said | null; t: Translate; id?: string; marked?: boolean; children?: ReactNode }) {
  const { said, t, id, marked = true, children } = props;
  const tone = said?.ok === true ? " ok" : said?.ok === false ? " error" : "";
  return (
    <p key={said?.n ?? 0} className={"status" + tone} id={id} data-role={marked ? "status" : undefined} role="status">
      {said?.text}
      {said?.status === 401 && (
        <>
          {" "}
          <a href="/login">{t("signIn")}</a>
        </>
      )}
      {children}
    </p>
  );
}

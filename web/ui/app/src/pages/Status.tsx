import { useCallback, useState } from "react";
import type { Translate } from "../i18n";
import { ApiError } from "./http";

// Said is what an action did, or why it failed, as a status line shows it.
export interface Said {
  text: string;
  ok: boolean;
  // the HTTP status of a refusal: 401 adds a way to sign in again
  status?: number;
}

// useStatus keeps one status line: say(text) after an action went well,
// fail(err) when it did not.
export function useStatus() {
  const [said, setSaid] = useState<Said | null>(null);
  const say = useCallback((text: string) => setSaid({ text, ok: true }), []);
  const fail = useCallback(
    (err: unknown) =>
      setSaid({ text: err instanceof Error ? err.message : String(err), ok: false, status: err instanceof ApiError ? err.status : undefined }),
    [],
  );
  const clear = useCallback(() => setSaid(null), []);
  return { said, say, fail, clear };
}

// Status is a status line read out by screen readers as it changes.
export function Status({ said, t, id, className = "status" }: { said: Said | null; t: Translate; id?: string; className?: string }) {
  return (
    <p className={className + (said ? (said.ok ? " ok" : " error") : "")} id={id} data-role="status" role="status">
      {said?.text}
      {said?.status === 401 && (
        <>
          {" "}
          <a href="/login">{t("signIn")}</a>
        </>
      )}
    </p>
  );
}

import { useCallback, useEffect, useRef, useState, type FormEvent } from "react";
import { stamp } from "../../pages/format";
import { filesPort, listPreviews, openPreview, revokePreview, sharePreview } from "./api";
import type { Preview, Where } from "./api";

// Previews are the chat's preview links (L2): a server the agent runs in
// the sandbox, opened by its port in a new tab, and the link to the
// workspace's files that an HTML file opened rendered made. Each link says whether it
// is the owner's alone or shared, and until when; in write mode it can be
// shared, unshared and revoked. A port is opened from the form.
export function Previews({ where, mode, refresh, t }: { where: Where; mode: "read" | "write"; refresh: number; t: (key: string) => string }) {
  const [list, setList] = useState<Preview[]>([]);
  const [error, setError] = useState("");
  const [port, setPort] = useState("");
  // seq orders the list's changes: a listing that started before the
  // latest change is not shown over it.
  const seq = useRef(0);
  const load = useCallback(async () => {
    const mine = ++seq.current;
    try {
      const got = await listPreviews(where);
      if (mine !== seq.current) return;
      // Keep the ready-to-open paths the engine gave this page.
      setList((old) => got.map((p) => ({ ...p, open: old.find((o) => o.port === p.port && o.path === p.path)?.open })));
      setError("");
    } catch (err) {
      if (mine === seq.current) setError((err as Error).message);
    }
  }, [where]);
  useEffect(() => {
    load();
  }, [load, refresh]);

  const act = async (f: () => Promise<unknown>) => {
    try {
      await f();
      setError("");
    } catch (err) {
      setError((err as Error).message);
    }
    await load();
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const n = Number(port);
    if (!Number.isInteger(n) || n < 1 || n > 65535) {
      setError(t("previewBadPort"));
      return;
    }
    try {
      const p = await openPreview(where, n);
      seq.current++;
      setList((old) => [...old.filter((o) => o.port !== p.port), p].sort((a, b) => a.port - b.port));
      setPort("");
      setError("");
    } catch (err) {
      setError((err as Error).message);
    }
  };

  return (
    <section className="previews" data-role="previews" aria-label={t("previews")}>
      <h4>{t("previews")}</h4>
      <form className="preview-form" noValidate onSubmit={submit}>
        <label>
          {t("previewPort")}{" "}
          <input type="number" inputMode="numeric" min={1} max={65535} value={port} data-role="preview-port" onChange={(e) => setPort(e.target.value)} />
        </label>
        <button type="submit" className="secondary" data-role="preview-open">
          {t("previewOpen")}
        </button>
      </form>
      {error && (
        <p className="status error" data-role="previews-error" role="alert">
          {error}
        </p>
      )}
      <ul>
        {[...list]
          .sort((a, b) => a.port - b.port)
          .map((p) => (
            <li key={p.port} data-preview={p.port} data-state={p.expired ? "expired" : p.shared ? "shared" : "private"}>
              <div className="process-head">
                {p.expired ? (
                  <code>{p.port === filesPort ? t("previewFiles") : ":" + p.port}</code>
                ) : (
                  <a href={p.open ?? p.path} target="_blank" rel="noopener noreferrer" data-role="preview-link">
                    {p.port === filesPort ? t("previewFiles") : ":" + p.port}
                  </a>
                )}
                <span className={"badge " + (p.expired ? "ended" : p.shared ? "running" : "")} data-role="preview-state">
                  {p.expired ? t("previewExpired") : p.shared ? t("previewShared") : t("previewPrivate")}
                </span>
                {!p.expired && <span className="hint">{t("previewUntil").replace("{time}", stamp(p.expiresAt))}</span>}
                {mode === "write" && !p.expired && (
                  <button type="button" className="secondary" data-role="preview-share" onClick={() => act(() => sharePreview(where, p.port, !p.shared))}>
                    {p.shared ? t("previewUnshare") : t("previewShare")}
                  </button>
                )}
                {mode === "write" && (
                  <button type="button" className="secondary" data-role="preview-revoke" onClick={() => act(() => revokePreview(where, p.port))}>
                    {t("previewRevoke")}
                  </button>
                )}
              </div>
            </li>
          ))}
      </ul>
    </section>
  );
}

// The pages' calls to the engine's JSON API: the session's cookie and
// CSRF token go with every call; an error answer becomes an ApiError
// carrying the engine's message (what happened and what to do).
import { ApiError } from "../api";
import { useCallback, useEffect, useState } from "react";

export { ApiError };

const csrf = () => document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? "";

// request calls the API; body, when given, is sent as JSON, or as
// multipart/form-data when it is FormData. An empty answer is undefined.
export async function request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { "X-CSRF-Token": csrf() };
  let payload: BodyInit | undefined;
  if (body instanceof FormData) payload = body;
  else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const resp = await fetch(path, { method, credentials: "same-origin", headers, body: payload });
  const text = await resp.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!resp.ok) {
    const b = parsed as { message?: string; error?: string | { message?: string } } | undefined;
    const message =
      b?.message || (typeof b?.error === "object" ? b.error?.message : b?.error) || text.trim() || resp.statusText;
    throw new ApiError(resp.status, message);
  }
  return parsed as T;
}

// useLoaded is what GET path answers, read when the page opens and again
// on reload() (after a change); null until the first answer. A failure
// goes to fail, the page's status line.
export function useLoaded<T>(path: string, fail: (err: unknown) => void): [T | null, () => Promise<void>] {
  const [data, setData] = useState<T | null>(null);
  const reload = useCallback(async () => {
    try {
      setData(await request<T>("GET", path));
    } catch (err) {
      fail(err);
    }
  }, [path, fail]);
  useEffect(() => {
    reload();
  }, [reload]);
  return [data, reload];
}

// The chat's file API (F1, F2, K2): the workspace listing, reading and
// writing a file, downloads, and uploads into /workspace/uploads. Every
// call names the chat by where (the share link's prefix, app, chat, and
// the owner when an admin reads another user's chat).

// Where names the chat whose files are shown.
export interface Where {
  apiBase: string;
  appId: string;
  chatId: string;
  userId?: string;
  csrf: string;
}

// Entry is one line of a listing (sandbox.FileInfo); readOnly marks the
// read-only skills, which are shown but never edited.
export interface Entry {
  name: string;
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  readOnly?: boolean;
}

// Uploaded is a stored upload as POST /api/uploads/:chatId answers it.
export interface Uploaded {
  name: string;
  path: string;
  sandboxPath: string;
  size: number;
}

// FileError is the engine's refusal: its message says what happened and
// what to do; status 415 means a binary file, to be downloaded instead.
export class FileError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export const workspaceRoot = "/workspace";
export const uploadsRoot = "/workspace/uploads";

async function post<T>(w: Where, path: string, body: object): Promise<T> {
  const resp = await fetch(w.apiBase + path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": w.csrf },
    body: JSON.stringify({ appId: w.appId, chatId: w.chatId, userId: w.userId || undefined, ...body }),
  });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new FileError(resp.status, data?.message || data?.error || `${resp.status} ${resp.statusText}`);
  return data as T;
}

export async function listFiles(w: Where, path: string): Promise<Entry[]> {
  const data = await post<{ files: Entry[] | null }>(w, "/api/core/ai/sandbox/file", { action: "list", path });
  return data.files ?? [];
}

export async function readFile(w: Where, path: string): Promise<string> {
  const data = await post<{ content: string }>(w, "/api/core/ai/sandbox/file", { action: "read", path });
  return data.content;
}

export async function writeFile(w: Where, path: string, content: string): Promise<void> {
  await post(w, "/api/core/ai/sandbox/file", { action: "write", path, content });
}

// download fetches a file, or a directory as a ZIP, and hands it to the
// browser under its name.
export async function download(w: Where, path: string, name: string, directory: boolean): Promise<void> {
  const resp = await fetch(w.apiBase + "/api/core/ai/sandbox/download", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": w.csrf },
    body: JSON.stringify({ appId: w.appId, chatId: w.chatId, userId: w.userId || undefined, path }),
  });
  if (!resp.ok) {
    const data = await resp.json().catch(() => ({}));
    throw new FileError(resp.status, data?.message || `${resp.status} ${resp.statusText}`);
  }
  const blob = await resp.blob();
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = directory ? (name || "workspace") + ".zip" : name;
  document.body.append(a);
  a.click();
  a.remove();
}

// Upload is one file on its way: progress reports percentages, done
// settles with the stored file or the server's reason, cancel aborts it.
export interface Upload {
  done: Promise<{ file?: Uploaded; error?: string; cancelled?: boolean }>;
  cancel: () => void;
}

// uploadFile sends one file to the chat's uploads (into dir when given,
// a folder under /workspace/uploads). XMLHttpRequest, because fetch
// reports no upload progress. networkLost is the reason shown when the
// connection drops.
export function uploadFile(w: Where, file: File, dir: string, progress: (pct: number) => void, networkLost: string): Upload {
  const q = new URLSearchParams({ appId: w.appId });
  if (dir) q.set("dir", dir);
  if (w.userId) q.set("userId", w.userId);
  const xhr = new XMLHttpRequest();
  const done = new Promise<{ file?: Uploaded; error?: string; cancelled?: boolean }>((resolve) => {
    xhr.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable && e.total > 0) progress(Math.round((e.loaded / e.total) * 100));
    });
    xhr.addEventListener("load", () => {
      let data: { files?: Uploaded[]; message?: string } = {};
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        // not JSON: a proxy's page
      }
      if (xhr.status !== 201 || !data.files?.length) {
        resolve({ error: data.message || `${xhr.status} ${xhr.statusText}` });
        return;
      }
      resolve({ file: data.files[0] });
    });
    xhr.addEventListener("error", () => resolve({ error: networkLost }));
    xhr.addEventListener("abort", () => resolve({ cancelled: true }));
  });
  xhr.open("POST", w.apiBase + "/api/uploads/" + encodeURIComponent(w.chatId) + "?" + q);
  xhr.setRequestHeader("X-CSRF-Token", w.csrf);
  const body = new FormData();
  body.append("file", file);
  xhr.send(body);
  return { done, cancel: () => xhr.abort() };
}

// deleteUpload removes a stored upload (path as the upload answered it).
export async function deleteUpload(w: Where, path: string): Promise<void> {
  const q = new URLSearchParams({ appId: w.appId, area: "uploads", path });
  if (w.userId) q.set("userId", w.userId);
  const resp = await fetch(w.apiBase + "/api/uploads/" + encodeURIComponent(w.chatId) + "/files?" + q, {
    method: "DELETE",
    credentials: "same-origin",
    headers: { "X-CSRF-Token": w.csrf },
  });
  if (!resp.ok) {
    const data = await resp.json().catch(() => ({}));
    throw new FileError(resp.status, data?.message || `${resp.status} ${resp.statusText}`);
  }
}

// humanSize writes a size as the server does (workspace.HumanSize).
export function humanSize(n: number): string {
  if (n < 1024) return n + " B";
  let exp = 0;
  let div = 1024;
  for (let m = Math.floor(n / 1024); m >= 1024 && exp < 5; m = Math.floor(m / 1024)) {
    div *= 1024;
    exp++;
  }
  return (n / div).toFixed(1).replace(/\.0$/, "") + " " + "KMGTPE"[exp] + "iB";
}

// parentOf is the folder above path, never above /workspace.
export function parentOf(path: string): string {
  const up = path.replace(/\/[^/]+\/?$/, "");
  return up.length < workspaceRoot.length ? workspaceRoot : up;
}

// uploadDirFor is where the panel uploads: the folder shown when it is
// inside the uploads, else the uploads themselves.
export function uploadDirFor(cwd: string): string {
  return cwd === uploadsRoot || cwd.startsWith(uploadsRoot + "/") ? cwd : uploadsRoot;
}

// Process is a background process of the chat's sandbox (L3).
export interface Process {
  id: string;
  command: string;
  running: boolean;
  exitCode?: number;
  stopped?: boolean;
  startedAt: string;
  output: number;
}

const processes = "/api/core/ai/sandbox/processes";

export async function listProcesses(w: Where): Promise<Process[]> {
  return (await post<{ processes: Process[] | null }>(w, processes, { action: "list" })).processes ?? [];
}

// readProcess reads a process's output from offset on; next is where the
// following read starts.
export async function readProcess(w: Where, id: string, offset: number): Promise<{ process: Process; offset: number; output: string; next: number }> {
  return post(w, processes, { action: "read", id, offset });
}

export async function stopProcess(w: Where, id: string): Promise<Process> {
  return (await post<{ process: Process }>(w, processes, { action: "stop", id })).process;
}

// Preview is a preview link of the chat's sandbox (L2): path leads to
// the port (for the chat's owner, signed in, unless shared); open, when
// the engine gave one, works at once for the caller. The link of port
// filesPort (files: true) serves the workspace's files: path +
// "site/index.html" is /workspace/site/index.html.
export interface Preview {
  port: number;
  files?: boolean;
  path: string;
  open?: string;
  shared: boolean;
  createdAt: string;
  expiresAt: string;
  expired: boolean;
}

const previews = "/api/core/ai/sandbox/previews";

export async function listPreviews(w: Where): Promise<Preview[]> {
  return (await post<{ previews: Preview[] | null }>(w, previews, { action: "list" })).previews ?? [];
}

export const filesPort = 0;

// target names a link's port, or the workspace's files, in a request.
const target = (port: number) => (port === filesPort ? { files: true } : { port });

// openPreview returns the chat's link to port, made when there is none.
export async function openPreview(w: Where, port: number): Promise<Preview> {
  return (await post<{ preview: Preview }>(w, previews, { action: "open", ...target(port) })).preview;
}

export async function sharePreview(w: Where, port: number, shared: boolean): Promise<Preview> {
  return (await post<{ preview: Preview }>(w, previews, { action: "update", ...target(port), shared })).preview;
}

export async function revokePreview(w: Where, port: number): Promise<void> {
  await post(w, previews, { action: "revoke", ...target(port) });
}

// renderedURL is where a workspace file opens rendered: the files link's
// path (with the caller's grant when the engine gave one) and the file's
// path below /workspace.
export function renderedURL(p: Preview, path: string): string {
  const base = p.open ?? p.path;
  return base + path.replace(/^\/workspace\/?/, "").split("/").map(encodeURIComponent).join("/");
}

// isHTML tells a file that opens rendered.
export const isHTML = (path: string) => /\.html?$/i.test(path);

// SandboxStatus is whether the chat has a sandbox, its state, and what it
// uses while it runs (L4).
export interface SandboxStatus {
  exists: boolean;
  status?: string;
  metrics?: import("../../pages/usage").Usage;
}

export async function sandboxStatus(w: Where): Promise<SandboxStatus> {
  return post(w, "/api/core/ai/sandbox/status", {});
}

import type { Graph } from "./graph";

// App is what GET /api/apps/:appId answers (the fields the canvas uses).
export interface App {
  appId: string;
  name: string;
  public: boolean;
  graph: Graph;
}

// ApiError is an answer of the engine's error shape: its message says
// what happened and what to do.
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function answer<T>(resp: Response): Promise<T> {
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    throw new ApiError(resp.status, (body && (body.message || body.error)) || resp.statusText);
  }
  return body as T;
}

export function loadApp(appId: string): Promise<App> {
  return fetch("/api/apps/" + encodeURIComponent(appId), { credentials: "same-origin" }).then(answer<App>);
}

// saveApp stores the app's name, visibility and graph; the engine checks
// the graph and refuses one it could not run, saying why.
export function saveApp(app: App, csrf: string): Promise<App> {
  return fetch("/api/apps/" + encodeURIComponent(app.appId), {
    method: "PUT",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify({ name: app.name, public: app.public, graph: app.graph }),
  }).then(answer<App>);
}

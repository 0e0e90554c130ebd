import type { Graph } from "./graph";
import type { Template, Templates } from "./templates";

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
    // what the engine found wrong with a graph, node by node
    readonly problems: Problem[] = [],
  ) {
    super(message);
  }
}

// Problem is one thing the engine refuses in a graph: the node and field
// it concerns (empty for the graph as a whole) and what to do.
export interface Problem {
  nodeId?: string;
  field?: string;
  message: string;
}

async function answer<T>(resp: Response): Promise<T> {
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const problems = Array.isArray(body?.problems) ? (body.problems as Problem[]) : [];
    throw new ApiError(resp.status, (body && (body.message || body.error)) || resp.statusText, problems);
  }
  return body as T;
}

export interface Catalog {
  templates: Templates;
  variableTypes: string[];
  systemVariables: Record<string, string>;
}

// loadTemplates reads the node types the engine offers.
export async function loadTemplates(): Promise<Catalog> {
  const body = await get<{ templates: Template[]; variableTypes: string[]; systemVariables: Record<string, string> }>(
    "/api/node-templates",
  );
  return {
    templates: Object.fromEntries(body.templates.map((t) => [t.type, t])),
    variableTypes: body.variableTypes,
    systemVariables: body.systemVariables,
  };
}

// Choice is one skill or tool a tool-call node may be given.
export interface Choice {
  value: string;
  name: string;
  about: string;
  // label keys of what to know about it: where it runs, whether it
  // only reads, how it is reached
  badges?: string[];
}

export async function loadSkills(): Promise<Choice[]> {
  const body = await get<{ skills: { name: string; description: string }[] }>("/api/skills");
  return body.skills.map((s) => ({ value: s.name, name: s.name, about: s.description }));
}

export async function loadTools(): Promise<Choice[]> {
  const body = await get<{
    execTools: { name: string; description: string; runIn: string; readOnly: boolean; destructive: boolean }[];
    mcpServers: { id: string; name: string; transport: string; tools?: { name: string; description: string; readOnly: boolean }[] }[];
  }>("/api/tools");
  const out: Choice[] = body.execTools.map((t) => ({
    value: t.name,
    name: t.name,
    about: t.description,
    badges: [t.runIn === "sandbox" ? "toolRunsSandbox" : "toolRunsHost", ...(t.readOnly ? ["toolReadOnly"] : []), ...(t.destructive ? ["toolDestructive"] : [])],
  }));
  for (const s of body.mcpServers) {
    const transport = "transport" + s.transport;
    out.push({ value: "mcp:" + s.id, name: s.name, about: "ID: " + s.id, badges: [transport] });
    for (const t of s.tools ?? [])
      out.push({
        value: "mcp:" + s.id + "/" + t.name,
        name: s.name + " / " + t.name,
        about: t.description,
        badges: [transport, ...(t.readOnly ? ["toolReadOnly"] : [])],
      });
  }
  return out;
}

const get = <T>(path: string) => fetch(path, { credentials: "same-origin" }).then(answer<T>);

// loadApp reads an app; a graph's missing lists (the engine writes null
// for none) are empty ones.
export async function loadApp(appId: string): Promise<App> {
  const app = await get<App>("/api/apps/" + encodeURIComponent(appId));
  const g = app.graph ?? { nodes: [], edges: [] };
  app.graph = { ...g, nodes: g.nodes ?? [], edges: g.edges ?? [] };
  for (const n of app.graph.nodes) if (n.inputs === null) delete n.inputs;
  return app;
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

// runNode runs one node of the app's saved graph by itself with the given
// inputs (by key) and question; it answers the node's run record.
export function runNode(
  appId: string,
  nodeId: string,
  body: { inputs: Record<string, unknown>; question: string },
  csrf: string,
): Promise<{ response: import("./sse").NodeRun; answer: string }> {
  return fetch("/api/apps/" + encodeURIComponent(appId) + "/nodes/" + encodeURIComponent(nodeId) + "/run", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  }).then(answer<{ response: import("./sse").NodeRun; answer: string }>);
}

// Version is one published version of an app (its graph left out).
export interface Version {
  versionId: string;
  number: number;
  note: string;
  author: string;
  createdAt: string;
}

const post = <T>(path: string, body: unknown, csrf: string) =>
  fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  }).then(answer<T>);

const appPath = (appId: string) => "/api/apps/" + encodeURIComponent(appId);

export function listVersions(appId: string): Promise<{ list: Version[]; total: number; publishedVersionId: string }> {
  return get(appPath(appId) + "/versions?pageSize=50");
}

// publish makes the saved draft a version with a note; chats, keys and
// share links run it from then on.
export function publish(appId: string, note: string, csrf: string): Promise<Version> {
  return post(appPath(appId) + "/versions", { note }, csrf);
}

// rollback makes a version the draft again (publish: and the published
// one at once).
export function rollback(appId: string, versionId: string, publishToo: boolean, csrf: string): Promise<App> {
  return post(appPath(appId) + "/versions/" + encodeURIComponent(versionId) + "/rollback", { publish: publishToo }, csrf);
}

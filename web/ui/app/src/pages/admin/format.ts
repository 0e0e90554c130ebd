// What the admin pages compute from the engine's answers and from their
// forms, apart from drawing: the audit's query, a command line,
// an MCP server as its form says.
import type { Translate } from "../../i18n";

// auditFields are the audit filters sent as they are typed; auditTimes are
// sent as UTC instants to the second.
export const auditFields = ["user", "app", "chat", "kind", "decision", "status"] as const;
export const auditTimes = ["since", "until"] as const;

// auditQuery is the query of /admin/api/audit and of its export for the
// filters' values (as the form's fields hold them): empty ones left out.
export function auditQuery(values: Record<string, string>): URLSearchParams {
  const q = new URLSearchParams();
  for (const name of auditFields) {
    const v = (values[name] ?? "").trim();
    if (v) q.set(name, v);
  }
  for (const name of auditTimes) {
    const v = values[name] ?? "";
    if (v) q.set(name, new Date(v).toISOString().replace(/\.\d+Z$/, "Z"));
  }
  return q;
}

// argv shows a command's arguments on one line, quoting those a reader
// could not tell apart otherwise.
export const argv = (args: string[] | null | undefined) =>
  (args ?? []).map((a) => (a === "" || /[\s"'\\]/.test(a) ? JSON.stringify(a) : a)).join(" ");

// masked is what the form shows for a stored secret; sent back, it keeps
// the secret.
export const masked = "•••";

// MCPForm is the MCP server form's fields as typed.
export interface MCPForm {
  id: string;
  name: string;
  transport: string;
  enabled: boolean;
  url: string;
  headers: string;
  token: string;
  command: string;
}

// MCPBody is a server as the API takes it.
export interface MCPBody {
  id: string;
  name: string;
  transport: string;
  enabled: boolean;
  url?: string;
  token?: string;
  headers?: Record<string, string>;
  command?: string[];
}

// mcpBody is the server as the form says: headers from "Name: value"
// lines, the command from one argument per line (blank lines dropped). A
// header line without a colon is an Error naming the line.
export function mcpBody(f: MCPForm, t: Translate): MCPBody {
  const body: MCPBody = { id: f.id.trim(), name: f.name.trim(), transport: f.transport, enabled: f.enabled };
  if (body.transport !== "http") {
    body.command = f.command
      .split("\n")
      .map((l) => l.replace(/\r$/, ""))
      .filter((l) => l.trim() !== "");
    return body;
  }
  body.url = f.url.trim();
  body.token = f.token.trim();
  const headers: Record<string, string> = {};
  f.headers.split("\n").forEach((l, i) => {
    if (l.trim() === "") return;
    const colon = l.indexOf(":");
    if (colon <= 0) throw new Error(t("mcpHeaderLine").replace("{n}", String(i + 1)));
    headers[l.slice(0, colon).trim()] = l.slice(colon + 1).trim();
  });
  body.headers = headers;
  return body;
}

// mcpForm is a registered server (its public view: secrets masked) as the
// edit form shows it.
export function mcpForm(s: { id: string; name: string; transport: string; enabled: boolean; url?: string; headers?: Record<string, string> | null; hasToken?: boolean; command?: string[] | null }): MCPForm {
  return {
    id: s.id,
    name: s.name,
    transport: s.transport,
    enabled: s.enabled,
    url: s.url ?? "",
    headers: Object.entries(s.headers ?? {})
      .map(([name, value]) => name + ": " + value)
      .join("\n"),
    token: s.hasToken ? masked : "",
    command: (s.command ?? []).join("\n"),
  };
}

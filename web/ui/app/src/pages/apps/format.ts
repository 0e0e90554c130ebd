// What the app list, the chat list and the Publish page compute from the
// engine's data: the links and the import report's lines.
import type { Translate } from "../../i18n";

// chatHref is where a chat list's title leads: another user's chat (an
// admin's or the app owner's view) names its user.
export function chatHref(base: string, chat: { chatId: string; userId: string }, me: string): string {
  const href = base + "/chat/" + encodeURIComponent(chat.chatId);
  return chat.userId === me ? href : href + "?userId=" + encodeURIComponent(chat.userId);
}

// ImportReport is what the engine says of an imported workflow (W6).
export interface ImportReport {
  imported?: unknown[];
  skipped?: { nodeId: string; name?: string; type: string; reason: string }[];
  fields?: { nodeId: string; field: string; reason: string }[];
  problems?: { nodeId?: string; message: string }[];
}

// importSummary is the report's first line: how many nodes came and how
// many were left out.
export function importSummary(t: Translate, name: string, r: ImportReport): string {
  return t("importDone")
    .replace("{name}", name)
    .replace("{imported}", String((r.imported ?? []).length))
    .replace("{skipped}", String((r.skipped ?? []).length));
}

// importLines are the report's details: each node left out, each field
// dropped and each problem, and why.
export function importLines(r: ImportReport): string[] {
  return [
    ...(r.skipped ?? []).map((s) => (s.name || s.nodeId) + " (" + s.type + "): " + s.reason),
    ...(r.fields ?? []).map((f) => f.nodeId + " · " + f.field + ": " + f.reason),
    ...(r.problems ?? []).map((p) => (p.nodeId ? p.nodeId + ": " : "") + p.message),
  ];
}

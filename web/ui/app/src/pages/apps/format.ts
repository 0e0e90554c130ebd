// What the app list, the chat list and the Publish page compute from the
// engine's data: times in the reader's zone, picked dates, the links and
// the import report's lines.
import type { Translate } from "../../i18n";

const p2 = (n: number) => String(n).padStart(2, "0");

// minute writes an instant in the reader's time zone, to the minute.
export function minute(iso: string): string {
  const d = new Date(iso);
  return d.getFullYear() + "-" + p2(d.getMonth() + 1) + "-" + p2(d.getDate()) + " " + p2(d.getHours()) + ":" + p2(d.getMinutes());
}

// dayAfter is the date input's value of the day after now: a date picked
// today would make a key or link that is already expired.
export function dayAfter(now: Date): string {
  const d = new Date(now);
  d.setDate(d.getDate() + 1);
  return d.getFullYear() + "-" + p2(d.getMonth() + 1) + "-" + p2(d.getDate());
}

// expiryOf turns a picked date into the instant the key or link stops
// working: the start of that day in the owner's time zone.
export function expiryOf(date: string): string | undefined {
  if (!date) return undefined;
  const [y, m, d] = date.split("-").map(Number);
  return new Date(y, m - 1, d).toISOString();
}

// positive reads an optional whole number from a form field.
export function positive(value: string): number | undefined {
  const n = parseInt(value, 10);
  return n > 0 ? n : undefined;
}

export const perMinute = (t: Translate, n?: number) => (n && n > 0 ? t("publishPerMinute").replace("{n}", String(n)) : t("publishNoLimit"));

// named puts a key's or link's name into a sentence.
export const named = (t: Translate, key: string, name: string) => t(key).replace("{name}", name);

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

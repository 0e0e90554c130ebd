// What the account pages compute rather than draw: times as the pages
// show them, a key's last valid second, the words of a deletion.

const pad = (n: number) => String(n).padStart(2, "0");

// minute writes an instant in the reader's time zone, to the minute.
export function minute(iso: string): string {
  const d = new Date(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// utcMinute writes an instant in UTC, to the minute, as the engine writes
// a set-password link's expiry.
export function utcMinute(iso: string): string {
  const d = new Date(iso);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
}

// endOfDay is the last second of a chosen day (YYYY-MM-DD) here: a key
// is valid through the day its owner picks.
export function endOfDay(day: string): string {
  const [y, m, d] = day.split("-").map(Number);
  return new Date(y, m - 1, d, 23, 59, 59).toISOString();
}

// today is the reader's date as a date input writes it (YYYY-MM-DD).
export function today(now = new Date()): string {
  return `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
}

// fill puts values into a label's {placeholders}.
export function fill(label: string, values: Record<string, string | number>): string {
  return label.replace(/\{(\w+)\}/g, (all, k: string) => (k in values ? String(values[k]) : all));
}

// AppsChoice is what becomes of a deleted user's apps.
export type AppsChoice = "transfer" | "delete";

// deletePath is the API call that deletes user id, with their apps given
// to user to, or deleted.
export function deletePath(id: string, apps: AppsChoice, to: string): string {
  let query = "?apps=" + apps;
  if (apps === "transfer") query += "&to=" + encodeURIComponent(to);
  return "/admin/api/users/" + encodeURIComponent(id) + query;
}

// deletedLabel is the label that says what a deletion did with n apps.
export function deletedLabel(n: number, apps: AppsChoice): string {
  if (n === 0) return "userDeleted";
  return apps === "transfer" ? "userDeletedTransfer" : "userDeletedApps";
}

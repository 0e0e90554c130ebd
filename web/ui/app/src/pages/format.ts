// What every page writes the same way: instants, picked days, rates and
// labels with values in them.
import type { Translate } from "../i18n";

const p2 = (n: number) => String(n).padStart(2, "0");
const day = (d: Date) => d.getFullYear() + "-" + p2(d.getMonth() + 1) + "-" + p2(d.getDate());

// stamp writes an instant in the reader's time zone, to the minute or,
// with seconds, to the second.
export function stamp(iso: string, seconds = false): string {
  const d = new Date(iso);
  return day(d) + " " + p2(d.getHours()) + ":" + p2(d.getMinutes()) + (seconds ? ":" + p2(d.getSeconds()) : "");
}

// utcMinute writes an instant in UTC, to the minute, as the engine writes
// a set-password link's expiry.
export function utcMinute(iso: string): string {
  const d = new Date(iso);
  return `${d.getUTCFullYear()}-${p2(d.getUTCMonth() + 1)}-${p2(d.getUTCDate())} ${p2(d.getUTCHours())}:${p2(d.getUTCMinutes())} UTC`;
}

// today is the reader's date as a date input writes it (YYYY-MM-DD): the
// first day a key or link can be valid through.
export function today(now = new Date()): string {
  return day(now);
}

// endOfDay is the last second of a picked day (YYYY-MM-DD) in the reader's
// zone: a key or link is valid through the day its owner picks. No day:
// no expiry.
export function endOfDay(picked: string): string | undefined {
  if (!picked) return undefined;
  const [y, m, d] = picked.split("-").map(Number);
  return new Date(y, m - 1, d, 23, 59, 59).toISOString();
}

// positive reads an optional whole number from a form field.
export function positive(value: string): number | undefined {
  const n = parseInt(value, 10);
  return n > 0 ? n : undefined;
}

// fill puts values into a label's {placeholders}.
export function fill(label: string, values: Record<string, string | number>): string {
  return label.replace(/\{(\w+)\}/g, (all, k: string) => (k in values ? String(values[k]) : all));
}

// named is a label with a key's, link's or server's name in it.
export const named = (t: Translate, key: string, name: string) => fill(t(key), { name });

// rate is a limit of requests a minute as lists show it.
export const rate = (t: Translate, n?: number) => (n && n > 0 ? fill(t("perMinute"), { n }) : t("noLimit"));

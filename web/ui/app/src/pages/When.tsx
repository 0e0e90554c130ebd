import type { Translate } from "../i18n";
import { stamp } from "./format";

// When is an instant from the API in the reader's time zone, to the minute
// or the second; the element keeps the exact instant. No instant: never.
export function When({ iso, t, seconds = false }: { iso?: string | null; t: Translate; seconds?: boolean }) {
  if (!iso) return <>{t("never")}</>;
  return (
    <time dateTime={iso} title={iso}>
      {stamp(iso, seconds)}
    </time>
  );
}

// Expiry is when a key or link stops working: never, when, or when it
// did, marked expired. expired, when given, is the engine's word for it;
// otherwise the instant is compared with now.
export function Expiry({ iso, expired, t }: { iso?: string; expired?: boolean; t: Translate }) {
  if (!iso || !(expired ?? new Date(iso) <= new Date())) return <When iso={iso} t={t} />;
  return (
    <span className="expired-key">
      <When iso={iso} t={t} /> · <strong data-role="expired">{t("expired")}</strong>
    </span>
  );
}

import type { Translate } from "../../i18n";
import { minute } from "./format";

// When is a time from the API in the reader's time zone, to the minute;
// the element keeps the exact instant. No time is "never".
export function When({ iso, t }: { iso?: string | null; t: Translate }) {
  if (!iso) return <>{t("never")}</>;
  return (
    <time dateTime={iso} title={iso}>
      {minute(iso)}
    </time>
  );
}

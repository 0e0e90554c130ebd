import type { Translate } from "../../i18n";
import { stamp } from "./format";

// When is an instant from the API in the reader's time zone; the element
// keeps the exact instant. No instant: never.
export function When({ iso, t, seconds = false }: { iso?: string | null; t: Translate; seconds?: boolean }) {
  if (!iso) return <>{t("never")}</>;
  return (
    <time dateTime={iso} title={iso}>
      {stamp(iso, seconds)}
    </time>
  );
}

import type { Translate } from "../i18n";

// User is the caller as the engine's page data names them: nobody (no
// id), a share link's visitor (linkId set), a user or an admin.
export interface User {
  id?: string;
  name?: string;
  admin?: boolean;
  linkId?: string;
}

// PageProps are what every page gets: its own data (the engine's, from
// the page's <script id="page-data">), the words of the reader's language
// and the caller.
export interface PageProps<D = unknown> {
  data: D;
  t: Translate;
  lang: string;
  user: User;
}

import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { translator } from "../i18n";
import { ChatPage, type PageData } from "./ChatPage";

// The chat page's own entry: it loads neither the canvas nor its styles.
// The engine hands it the chat in <script type="application/json"
// id="page-data">, which the CSP does not run, and the session's CSRF
// token in <meta name="csrf-token">.
const csrf = document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? "";
const lang = document.documentElement.lang || "en";
const data = JSON.parse(document.getElementById("page-data")?.textContent || "{}") as PageData;

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <ChatPage data={data} csrf={csrf} t={translator(lang)} />
  </StrictMode>,
);

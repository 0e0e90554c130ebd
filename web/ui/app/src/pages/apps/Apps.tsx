import { useState } from "react";
import { request } from "../http";
import type { PageProps } from "../types";
import { ImportApp } from "./ImportApp";
import { Table } from "../Table";

// AppsData is the app list's data (appsPage in web/ui/ui.go).
export interface AppsData {
  apps: { appId: string; name: string; ownerId: string; public: boolean }[];
  // the graph a new app starts from: the tool-call node, sandbox off
  starterGraph: unknown;
}

// Apps is the home page: the apps the caller may use, a new app (from the
// starter graph, opened on the canvas) and importing a workflow. Until the
// caller has an app of their own (a first-time user sees only the demo
// app), it says how to make one.
export function Apps({ data, t, user }: PageProps<AppsData>) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const create = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const name = (e.currentTarget.elements.namedItem("name") as HTMLInputElement).value;
    setBusy(true);
    try {
      const app = await request<{ appId: string }>("POST", "/api/apps", { name, public: false, graph: data.starterGraph });
      location.href = "/apps/" + encodeURIComponent(app.appId) + "/flow";
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  const list = data.apps ?? [];
  const ownsNone = !list.some((a) => a.ownerId === user.id);
  return (
    <>
      <h2>{t("apps")}</h2>
      <form id="new-app" className="card" onSubmit={create}>
        <label htmlFor="new-app-name">{t("newApp")}</label>
        <input type="text" id="new-app-name" name="name" required />
        <button type="submit" disabled={busy}>
          {t("create")}
        </button>
        <span className="error" data-role="status" role="alert">
          {error}
        </span>
      </form>
      <ImportApp t={t} />
      {ownsNone && (
        <p className="card" id="apps-empty">
          {t("appsNoneOwn")}
        </p>
      )}
      {list.length > 0 && (
        <Table id="app-list" heads={[t("name"), t("owner")]} actions={t("actions")}>
          {list.map((a) => {
            const base = "/apps/" + encodeURIComponent(a.appId);
            return (
              <tr key={a.appId} data-app={a.appId}>
                <td data-role="name">{a.name}</td>
                <td data-role="owner">
                  {a.ownerId}
                  {a.public && " · " + t("public")}
                </td>
                <td className="app-actions">
                  <a className="button" href={base + "/chat/new"}>
                    {t("newChat")}
                  </a>{" "}
                  <a className="button secondary" href={base + "/flow"}>
                    {t("edit")}
                  </a>{" "}
                  <a href={base + "/edit"}>{t("publishTab")}</a> <a href={base + "/chats"}>{t("chats")}</a>
                </td>
              </tr>
            );
          })}
        </Table>
      )}
    </>
  );
}

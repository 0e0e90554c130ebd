import { useRef, useState } from "react";
import { request, useLoaded } from "../http";
import type { PageProps } from "../types";
import { named } from "../format";
import { failure, saidOf, Status, useStatus } from "../Status";
import { argv, mcpBody, mcpForm, type MCPForm } from "./format";
import { MCPTools, type Listing, type Tool } from "./MCPTools";
import { Table } from "../Table";

// Server is a registered MCP server's public view: a header's value or
// the token, when stored, shows masked.
export interface Server {
  id: string;
  name: string;
  transport: string;
  url?: string;
  headers?: Record<string, string> | null;
  hasToken?: boolean;
  command?: string[] | null;
  enabled: boolean;
}

// MCP is the admins' MCP servers page: the registered servers; a form
// that adds one, or edits one filled from its public view (a masked
// header value or token sent back keeps the stored secret); deleting;
// listing a server's tools as the model would see them.
export function MCP({ t }: PageProps) {
  const [editing, setEditing] = useState("");
  const [transport, setTransport] = useState("http");
  const [listing, setListing] = useState<Listing | null>(null);
  const shown = useRef("");
  const form = useRef<HTMLFormElement>(null);
  const page = useStatus();
  const formLine = useStatus();
  const { fail } = page;

  const [listed, load] = useLoaded<{ servers: Server[] | null }>("/admin/api/mcp-servers", fail);
  const servers = listed && (listed.servers ?? []);

  const fields = () => form.current!.elements as unknown as Record<keyof MCPForm, HTMLInputElement>;

  // reset empties the form for a new server; the fields of the transport
  // not chosen are disabled, so they are neither checked nor sent.
  const reset = () => {
    form.current!.reset();
    fields().id.readOnly = false;
    setEditing("");
    setTransport(fields().transport.value);
  };

  const edit = (s: Server) => {
    reset();
    const f = fields();
    const v = mcpForm(s);
    f.id.value = v.id;
    f.id.readOnly = true;
    f.name.value = v.name;
    f.transport.value = v.transport;
    f.url.value = v.url;
    f.headers.value = v.headers;
    f.token.value = v.token;
    f.command.value = v.command;
    f.enabled.checked = v.enabled;
    setTransport(v.transport);
    setEditing(s.id);
    formLine.clear();
    form.current!.scrollIntoView({ block: "nearest" });
    f.name.focus();
  };

  const save = async (e: React.FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const f = fields();
    try {
      const body = mcpBody(
        {
          id: f.id.value,
          name: f.name.value,
          transport: f.transport.value,
          enabled: f.enabled.checked,
          url: f.url.value,
          headers: f.headers.value,
          token: f.token.value,
          command: f.command.value,
        },
        t,
      );
      const { server } = editing
        ? await request<{ server: Server }>("PUT", "/admin/api/mcp-servers/" + encodeURIComponent(editing), body)
        : await request<{ server: Server }>("POST", "/admin/api/mcp-servers", body);
      reset();
      formLine.say(named(t, editing ? "mcpSaved" : "mcpAdded", server.name));
    } catch (err) {
      formLine.fail(err);
      return;
    }
    await load();
  };

  const remove = async (s: Server) => {
    if (!confirm(named(t, "mcpDeleteConfirm", s.name))) return;
    try {
      await request("DELETE", "/admin/api/mcp-servers/" + encodeURIComponent(s.id));
      page.say(named(t, "mcpDeleted", s.name));
      if (editing === s.id) reset();
      if (shown.current === s.id) {
        shown.current = "";
        setListing(null);
      }
    } catch (err) {
      page.fail(err);
    }
    await load();
  };

  // tools asks the server for its tools now and shows them, or why they
  // could not be listed. An answer for a server no longer shown (the
  // admin asked another one meanwhile) is dropped.
  const tools = async (s: Server) => {
    shown.current = s.id;
    setListing({ server: s, line: saidOf(named(t, "mcpToolsListing", s.name)) });
    let listed: Tool[];
    try {
      const answer = await request<{ tools: Tool[] | null }>("POST", "/admin/api/mcp-servers/" + encodeURIComponent(s.id) + "/refresh");
      listed = answer.tools ?? [];
    } catch (err) {
      if (shown.current === s.id) setListing({ server: s, line: failure(err, named(t, "mcpToolsFailed", s.name)) });
      return;
    }
    if (shown.current !== s.id) return;
    const said = listed.length ? t("mcpToolsCount").replace("{n}", String(listed.length)) : t("mcpNoTools");
    setListing({ server: s, line: saidOf(said, true), tools: listed });
  };

  const list = servers ?? [];
  return (
    <>
      <h2>{t("mcpServers")}</h2>
      <p className="hint">{t("mcpHint")}</p>
      <form id="mcp-form" className="card" noValidate ref={form} onSubmit={save}>
        <h3 data-role="title">{editing ? t("mcpEditTitle").replace("{id}", editing) : t("mcpAdd")}</h3>
        <div className="fields">
          <div>
            <label htmlFor="mcp-id">{t("mcpId")}</label>
            <input type="text" id="mcp-id" name="id" maxLength={32} autoComplete="off" spellCheck={false} aria-describedby="mcp-id-hint" required />
          </div>
          <div>
            <label htmlFor="mcp-name">{t("name")}</label>
            <input type="text" id="mcp-name" name="name" maxLength={100} autoComplete="off" required />
          </div>
          <div>
            <label htmlFor="mcp-transport">{t("mcpTransport")}</label>
            <select id="mcp-transport" name="transport" defaultValue="http" onChange={(e) => setTransport(e.target.value)}>
              <option value="http">{t("mcpTransportHttp")}</option>
              <option value="stdio">{t("mcpTransportStdio")}</option>
            </select>
          </div>
        </div>
        <p className="hint" id="mcp-id-hint">
          {t("mcpIdHint")}
        </p>
        <fieldset className="transport-fields" data-transport="http" hidden={transport !== "http"} disabled={transport !== "http"}>
          <label htmlFor="mcp-url">{t("mcpURL")}</label>
          <input type="text" id="mcp-url" name="url" inputMode="url" placeholder="https://mcp.example.com/mcp" autoComplete="off" spellCheck={false} />
          <label htmlFor="mcp-headers">{t("mcpHeaders")}</label>
          <textarea id="mcp-headers" name="headers" rows={3} spellCheck={false} placeholder="X-Team: research" aria-describedby="mcp-headers-hint" />
          <p className="hint" id="mcp-headers-hint">
            {t("mcpHeadersHint")}
          </p>
          <label htmlFor="mcp-token">{t("mcpToken")}</label>
          <input type="password" id="mcp-token" name="token" autoComplete="new-password" spellCheck={false} aria-describedby="mcp-token-hint" />
          <p className="hint" id="mcp-token-hint">
            {t("mcpTokenHint")}
          </p>
        </fieldset>
        <fieldset className="transport-fields" data-transport="stdio" hidden={transport !== "stdio"} disabled={transport !== "stdio"}>
          <label htmlFor="mcp-command">{t("mcpCommand")}</label>
          <textarea id="mcp-command" name="command" rows={3} spellCheck={false} placeholder="/workspace/mcp-server" aria-describedby="mcp-command-hint" />
          <p className="hint" id="mcp-command-hint">
            {t("mcpCommandHint")}
          </p>
        </fieldset>
        <label className="switch" htmlFor="mcp-enabled">
          <input type="checkbox" id="mcp-enabled" name="enabled" defaultChecked /> {t("mcpEnabled")}
        </label>
        <p>
          <button type="submit" data-role="submit">
            {editing ? t("save") : t("mcpAddButton")}
          </button>{" "}
          <button
            type="button"
            className="secondary"
            data-role="cancel"
            hidden={!editing}
            onClick={() => {
              reset();
              formLine.clear();
            }}
          >
            {t("cancel")}
          </button>
        </p>
        <Status said={formLine.said} t={t} />
      </form>
      <Status said={page.said} t={t} id="mcp-status" marked={false} />
      <Table id="mcp-servers" heads={[t("mcpId"), t("name"), t("mcpTransport"), t("mcpWhere"), t("mcpHasToken"), t("state")]} actions={t("edit") + " / " + t("mcpListTools") + " / " + t("delete")}>
        {list.map((s) => {
          const headers = Object.keys(s.headers ?? {});
          const action = (name: string, label: string, fn: () => void) => (
            <button type="button" className="secondary" data-mcp-action={name} aria-label={label + " " + s.name} onClick={fn}>
              {label}
            </button>
          );
          return (
            <tr key={s.id} data-server={s.id}>
              <td data-role="id">
                <code>{s.id}</code>
              </td>
              <td data-role="name">{s.name}</td>
              <td data-role="transport">{t("transport" + s.transport)}</td>
              <td data-role="where">
                <code>{s.transport === "stdio" ? argv(s.command) : s.url || ""}</code>
                {headers.length > 0 && (
                  <div className="hint" data-role="headers">
                    {t("mcpHeaderNames").replace("{names}", headers.join(", "))}
                  </div>
                )}
              </td>
              <td data-role="token">{t(s.hasToken ? "mcpYes" : "mcpNo")}</td>
              <td data-role="enabled">
                <span className={"state " + (s.enabled ? "active" : "disabled")}>{t(s.enabled ? "mcpOn" : "mcpOff")}</span>
              </td>
              <td className="actions">
                {action("edit", t("edit"), () => edit(s))} {action("tools", t("mcpListTools"), () => tools(s))}{" "}
                {action("delete", t("delete"), () => remove(s))}
              </td>
            </tr>
          );
        })}
      </Table>
      <p className="hint" id="mcp-empty" hidden={!servers || list.length > 0}>
        {t("mcpNone")}
      </p>
      <MCPTools
        listing={listing}
        t={t}
        close={() => {
          shown.current = "";
          setListing(null);
        }}
      />
    </>
  );
}

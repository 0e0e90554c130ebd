import { useEffect, useRef } from "react";
import type { Translate } from "../../i18n";
import { named } from "../format";
import { Status, type Said } from "../Status";
import { Table } from "../Table";

// Listing is a server's tools being listed, listed, or why not, as its
// status line says.
export interface Listing {
  server: { id: string; name: string };
  line: Said;
  tools?: Tool[];
}

export interface Tool {
  name: string;
  tool: string;
  description?: string;
  readOnly?: boolean;
}

// MCPTools shows the tools a server offers, as the model sees them.
// Without a listing it is there, hidden.
export function MCPTools({ listing, t, close }: { listing: Listing | null; t: Translate; close: () => void }) {
  const box = useRef<HTMLElement>(null);
  const id = listing?.server.id;
  useEffect(() => {
    if (id) box.current?.scrollIntoView({ block: "nearest" });
  }, [id]);
  const tools = listing?.tools ?? [];
  return (
    <section id="mcp-tools" className="card" aria-labelledby="mcp-tools-title" data-server={id} ref={box} hidden={!listing}>
      <div className="chat-head">
        <h3 id="mcp-tools-title" data-role="title">
          {listing && named(t, "mcpToolsOf", listing.server.name)}
        </h3>
        <button type="button" className="secondary" data-role="close" onClick={close}>
          {t("close")}
        </button>
      </div>
      <Status said={listing?.line ?? null} t={t} />
      <Table data-role="tools" hidden={tools.length === 0} heads={[t("mcpModelName"), t("mcpToolName"), t("mcpToolDescription"), t("mcpReadOnly")]}>
        {tools.map((tool) => (
          <tr key={tool.name} data-tool={tool.name}>
            <td data-role="name">
              <code>{tool.name}</code>
            </td>
            <td data-role="tool">{tool.tool}</td>
            <td data-role="description">{tool.description || ""}</td>
            <td data-role="read-only">{t(tool.readOnly ? "mcpYes" : "mcpNo")}</td>
          </tr>
        ))}
      </Table>
    </section>
  );
}

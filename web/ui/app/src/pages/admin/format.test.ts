import { describe, expect, it } from "vitest";
import { translator } from "../../i18n";
import { argv, auditQuery, masked, mcpBody, mcpForm, type MCPForm } from "./format";

const t = translator("en");

describe("auditQuery", () => {
  it("leaves out empty filters and trims the typed ones", () => {
    expect(auditQuery({ user: "  u:alice ", app: "", chat: "", kind: "command", decision: "", status: "client_gone", since: "", until: "" }).toString()).toBe(
      "user=u%3Aalice&kind=command&status=client_gone",
    );
  });
  it("sends the times as UTC instants to the second", () => {
    const q = auditQuery({ since: "2026-03-04T05:06", until: "2026-03-05T00:00" });
    expect(q.get("since")).toBe(new Date("2026-03-04T05:06").toISOString().replace(".000Z", "Z"));
    expect(q.get("since")).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:00Z$/);
    expect(q.get("until")).toBe(new Date("2026-03-05T00:00").toISOString().replace(".000Z", "Z"));
  });
  it("is empty with no filters", () => {
    expect(auditQuery({}).toString()).toBe("");
  });
});

describe("argv", () => {
  it("quotes the arguments a reader could not tell apart", () => {
    expect(argv(["/workspace/mcp-server", "--root", "/workspace/my uploads", "", 'say "hi"'])).toBe(
      '/workspace/mcp-server --root "/workspace/my uploads" "" "say \\"hi\\""',
    );
    expect(argv(null)).toBe("");
  });
});

const form = (f: Partial<MCPForm>): MCPForm => ({ id: "", name: "", transport: "http", enabled: true, url: "", headers: "", token: "", command: "", ...f });

describe("mcpBody", () => {
  it("reads an HTTP server's headers from Name: value lines", () => {
    expect(mcpBody(form({ id: " team ", name: "Team", url: " https://x.example/mcp ", headers: "X-Team: blue\n\nX-Key: a:b ", token: masked }), t)).toEqual({
      id: "team",
      name: "Team",
      transport: "http",
      enabled: true,
      url: "https://x.example/mcp",
      token: masked,
      headers: { "X-Team": "blue", "X-Key": "a:b" },
    });
  });
  it("names a header line without a colon", () => {
    expect(() => mcpBody(form({ headers: "X-Team: blue\nX-Other blue" }), t)).toThrow('Header line 2 is not "Name: value".');
    expect(() => mcpBody(form({ headers: ": no name" }), t)).toThrow("Header line 1");
  });
  it("reads a stdio server's command, one argument a line, blank lines dropped", () => {
    const body = mcpBody(form({ transport: "stdio", command: "/workspace/mcp-server\r\n--root\n\n/workspace/my uploads\n", url: "ignored", enabled: false }), t);
    expect(body).toEqual({ id: "", name: "", transport: "stdio", enabled: false, command: ["/workspace/mcp-server", "--root", "/workspace/my uploads"] });
  });
});

describe("mcpForm", () => {
  it("shows a server's stored secrets masked, as the API gives them", () => {
    expect(mcpForm({ id: "team", name: "Team", transport: "http", enabled: true, url: "u", headers: { "X-Team": masked }, hasToken: true })).toEqual(
      form({ id: "team", name: "Team", url: "u", headers: "X-Team: " + masked, token: masked }),
    );
    expect(mcpForm({ id: "l", name: "L", transport: "stdio", enabled: false, command: ["a", "b c"] }).command).toBe("a\nb c");
  });
});

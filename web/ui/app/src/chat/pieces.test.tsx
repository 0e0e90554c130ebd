import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { translator } from "../i18n";
import { ChatPage, type PageData } from "./ChatPage";

// The engine is faked at the HTTP boundary only (fetch and the uploads'
// XMLHttpRequest): every request is kept, the chat list and the chat
// requests are answered as the engine answers them.
interface Seen {
  method: string;
  url: string;
  body: any;
}
let seen: Seen[];
let chats: { chatId: string; appId: string; title: string; updatedAt: string }[];
let replies: string[];

const sse = (...events: [string, unknown][]) => events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join("") + "data: [DONE]\n\n";

class FakeXHR {
  static sent: FakeXHR[] = [];
  url = "";
  status = 0;
  statusText = "";
  responseText = "";
  private on: Record<string, ((e: unknown) => void)[]> = {};
  upload = { addEventListener: () => {} };
  addEventListener(k: string, f: (e: unknown) => void) {
    (this.on[k] ??= []).push(f);
  }
  open(_method: string, url: string) {
    this.url = url;
  }
  setRequestHeader() {}
  send() {
    FakeXHR.sent.push(this);
  }
  abort() {}
  answer(status: number, body: unknown) {
    this.status = status;
    this.responseText = JSON.stringify(body);
    (this.on.load ?? []).forEach((f) => f({}));
  }
}

beforeEach(() => {
  seen = [];
  replies = [];
  FakeXHR.sent = [];
  localStorage.clear();
  chats = [
    { chatId: "old", appId: "a1", title: "first question", updatedAt: "2026-05-01T10:00:00Z" },
    { chatId: "c1", appId: "a1", title: "this chat", updatedAt: "2026-05-03T10:00:00Z" },
    { chatId: "mid", appId: "a1", title: "列出文件", updatedAt: "2026-05-02T10:00:00Z" },
  ];
  vi.stubGlobal("XMLHttpRequest", FakeXHR);
  vi.stubGlobal("fetch", async (url: string, init: RequestInit = {}) => {
    const method = init.method ?? "GET";
    const body = init.body ? JSON.parse(String(init.body)) : undefined;
    seen.push({ method, url, body });
    if (url.endsWith("/api/v1/chat/completions"))
      return new Response(replies.shift() ?? sse(), { headers: { "Content-Type": "text/event-stream" } });
    if (method === "GET" && url.startsWith("/api/uploads/")) return new Response(JSON.stringify({ files: [] }));
    if (method === "GET" && url === "/api/apps/a1/chats") return new Response(JSON.stringify({ chats }));
    if (method === "PATCH") return new Response(JSON.stringify({ chatId: url.split("/").pop(), title: body.title }));
    if (method === "DELETE" && url === "/api/apps/a1/chats") return new Response(JSON.stringify({ deleted: body.chatIds }));
    return new Response(JSON.stringify({ message: "not here" }), { status: 404 });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

const page = (data: Partial<PageData> = {}, lang = "en") =>
  render(<ChatPage csrf="tok" t={translator(lang)} data={{ appId: "a1", chatId: "c1", apiBase: "", own: true, ...data }} />).container;

const ask = async (question: string) => {
  fireEvent.change(screen.getByRole("textbox", { name: translator("en")("askPlaceholder") }), { target: { value: question } });
  await act(async () => fireEvent.click(screen.getByRole("button", { name: "Send" })));
};
const runs = () => seen.filter((s) => s.url === "/api/v1/chat/completions").map((s) => s.body);

describe("the chat variables form", () => {
  const variables = [
    { key: "city", label: "City", type: "string", required: true },
    { key: "days", type: "number", defaultValue: 3 },
    { key: "verbose", type: "boolean" },
    { key: "opts", type: "json" },
    { key: "tone", type: "select", options: ["dry", "warm"] },
  ];

  it("asks the graph's variables by type and sends them, typed, with every message", async () => {
    const root = page({ variables });
    const form = root.querySelector("#chat-variables")!;
    expect(form.querySelector<HTMLInputElement>("#var-days")?.value).toBe("3");
    expect(form.querySelector("#var-verbose")?.getAttribute("type")).toBe("checkbox");
    expect(form.querySelector("#var-opts")?.tagName).toBe("TEXTAREA");
    expect(form.querySelector("#var-tone")?.tagName).toBe("SELECT");
    expect(form.querySelector('label[for="var-city"]')?.textContent).toBe("City *");

    fireEvent.change(form.querySelector("#var-city")!, { target: { value: "Lyon" } });
    fireEvent.click(form.querySelector("#var-verbose")!);
    fireEvent.change(form.querySelector("#var-opts")!, { target: { value: '{"a":[1]}' } });
    fireEvent.change(form.querySelector("#var-tone")!, { target: { value: "warm" } });
    await ask("weather?");
    await waitFor(() => expect(runs()).toHaveLength(1));
    expect(runs()[0].variables).toEqual({ city: "Lyon", days: 3, verbose: true, opts: { a: [1] }, tone: "warm" });
    expect(runs()[0].messages).toEqual([{ role: "user", content: "weather?" }]);
    await waitFor(() => expect(screen.getByRole("button", { name: "Send" })).toBeTruthy());

    // kept in this browser for the chat
    cleanup();
    const again = page({ variables });
    expect(again.querySelector<HTMLInputElement>("#var-city")?.value).toBe("Lyon");
    expect(again.querySelector<HTMLInputElement>("#var-verbose")?.checked).toBe(true);
  });

  it("is not shown on another user's chat, nor without variables", () => {
    expect(page({ variables, own: false }).querySelector("#chat-variables")).toBeNull();
    cleanup();
    expect(page().querySelector("#chat-variables")).toBeNull();
  });
});

describe("run details", () => {
  const responses = [
    { nodeId: "n1", moduleName: "Ask the model", moduleType: "chatNode", runningTime: 1.25, tokens: 42, inputs: { q: "hi" }, outputs: { answerText: "**bold** <img src=x onerror=alert(1)>" } },
    { nodeId: "n2", moduleName: "Branch", moduleType: "ifElseNode", runningTime: 0.01, branches: ["yes"], error: "no such field" },
  ];

  it("shows a live run's nodes and a stored turn's to builders, answers as sanitised Markdown", async () => {
    replies.push(sse(["answer", { choices: [{ delta: { content: "done" } }] }], ["flowResponses", responses]));
    const root = page({ runDetails: true, items: [{ role: "user", text: "before" }, { role: "assistant", text: "old", responses: responses.slice(1) } as any] });
    const stored = root.querySelectorAll(".run-details");
    expect(stored).toHaveLength(1);
    expect(stored[0].querySelector('[data-node="n2"]')?.className).toBe("run-node run-failed");
    expect(stored[0].querySelector('[data-node="n2"] summary')?.textContent).toBe("Branch ifElseNode · 10 ms · → yes no such field");

    await ask("go");
    await waitFor(() => expect(root.querySelectorAll(".run-details")).toHaveLength(2));
    const live = root.querySelectorAll(".run-details")[1];
    expect(live.querySelector('[data-node="n1"] summary')?.textContent).toBe("Ask the model chatNode · 1250 ms · 42 tokens");
    expect(live.querySelector(".run-answer strong")?.textContent).toBe("bold");
    expect(live.querySelector(".run-answer img[onerror]")).toBeNull();
    expect(live.querySelectorAll("pre")[0].textContent).toBe(JSON.stringify({ q: "hi" }, null, 2));
  });

  it("is left out for those who do not build the app", async () => {
    replies.push(sse(["flowResponses", responses]));
    const root = page({ runDetails: false, items: [{ role: "assistant", text: "old", responses } as any] });
    await ask("go");
    await waitFor(() => expect(root.querySelectorAll(".msg.assistant")).toHaveLength(2));
    await waitFor(() => expect(screen.getByRole("button", { name: "Send" })).toBeTruthy());
    expect(root.querySelector(".run-details")).toBeNull();
  });
});

describe("Delete chat", () => {
  it("asks first, then deletes the chat", async () => {
    const confirm = vi.fn(() => false);
    vi.stubGlobal("confirm", confirm);
    page({ canDelete: true });
    await act(async () => fireEvent.click(screen.getByRole("button", { name: "Delete chat" })));
    expect(confirm).toHaveBeenCalledWith(translator("en")("deleteChatConfirm"));
    expect(seen.some((s) => s.method === "DELETE")).toBe(false);

    confirm.mockReturnValue(true);
    await act(async () => fireEvent.click(screen.getByRole("button", { name: "Delete chat" })));
    await waitFor(() => expect(seen.find((s) => s.method === "DELETE")?.body).toEqual({ chatIds: ["c1"] }));
  });

  it("names another user's chat, and shows the engine's refusal", async () => {
    vi.stubGlobal("confirm", () => true);
    page({ canDelete: true, own: false, userId: "bob", appId: "nope" });
    await act(async () => fireEvent.click(screen.getByRole("button", { name: "Delete chat" })));
    await waitFor(() => expect(screen.getByRole("alert").textContent).toBe("not here"));
    expect(seen.find((s) => s.method === "DELETE")?.body).toEqual({ chatIds: ["c1"], userId: "bob" });
  });

  it("is not offered to those who may not delete, nor to visitors", () => {
    page({ canDelete: false });
    expect(screen.queryByRole("button", { name: "Delete chat" })).toBeNull();
    cleanup();
    page({ canDelete: true, visitor: true, apiBase: "/share/lnk" });
    expect(screen.queryByRole("button", { name: "Delete chat" })).toBeNull();
  });
});

describe("the chat list", () => {
  it("lists the caller's chats newest first, marks this one, and renames in place", async () => {
    const root = page();
    await waitFor(() => expect(root.querySelectorAll("#chat-list li")).toHaveLength(3));
    expect([...root.querySelectorAll("#chat-list li a")].map((a) => a.textContent)).toEqual(["this chat", "列出文件", "first question"]);
    expect(root.querySelector('#chat-list [aria-current="page"]')?.getAttribute("href")).toBe("/apps/a1/chat/c1");
    expect(root.querySelector("#new-chat")?.getAttribute("href")).toBe("/apps/a1/chat/new");

    fireEvent.click(screen.getByRole("button", { name: "Rename 列出文件" }));
    const input = screen.getByRole("textbox", { name: "Rename" });
    fireEvent.change(input, { target: { value: "the files" } });
    await act(async () => fireEvent.keyDown(input, { key: "Enter" }));
    await waitFor(() => expect(root.querySelector('#chat-list [data-chat="mid"] a')?.textContent).toBe("the files"));
    expect(seen.filter((s) => s.method === "PATCH")).toEqual([{ method: "PATCH", url: "/api/apps/a1/chats/mid", body: { title: "the files" } }]);

    // Esc gives the title back unchanged
    fireEvent.click(screen.getByRole("button", { name: "Rename the files" }));
    fireEvent.change(screen.getByRole("textbox", { name: "Rename" }), { target: { value: "nope" } });
    fireEvent.keyDown(screen.getByRole("textbox", { name: "Rename" }), { key: "Escape" });
    expect(root.querySelector('#chat-list [data-chat="mid"] a')?.textContent).toBe("the files");
    expect(seen.filter((s) => s.method === "PATCH")).toHaveLength(1);
  });

  it("opens as a drawer from its button and closes on Esc, on the overlay and on a choice", async () => {
    const root = page({}, "zh");
    const toggle = screen.getByRole("button", { name: "对话" });
    const list = root.querySelector("#chat-list")!;
    expect(list.className).toBe("chat-list");
    fireEvent.click(toggle);
    expect(list.className).toBe("chat-list open");
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
    fireEvent.keyDown(document, { key: "Escape" });
    expect(list.className).toBe("chat-list");
    fireEvent.click(toggle);
    fireEvent.click(root.querySelector('[data-role="chat-list-overlay"]')!);
    expect(list.className).toBe("chat-list");
    fireEvent.click(toggle);
    fireEvent.click(root.querySelector("#new-chat")!);
    expect(list.className).toBe("chat-list");
  });

  it("gives a share link's visitors the link's chats and a new chat, and asks no list of the engine", async () => {
    const root = page({ visitor: true, apiBase: "/share/lnk" });
    expect(root.querySelector("#new-chat")?.getAttribute("href")).toBe("/share/lnk/chat/new");
    expect(root.querySelector('[data-role="visitor-chats"]')?.getAttribute("href")).toBe("/share/lnk");
    await act(async () => {});
    expect(seen.some((s) => s.url.includes("/chats"))).toBe(false);
  });
});

describe("uploads in the composer", () => {
  const stored = { name: "a.csv", path: "uploads/a.csv", sandboxPath: "/workspace/uploads/a.csv", size: 12 };

  it("attaches files, sends them as the message's content parts and refreshes the files", async () => {
    const root = page({ files: "write" });
    const input = root.querySelector<HTMLInputElement>("#attach-input")!;
    await act(async () => fireEvent.change(input, { target: { files: [new File(["a,b"], "a.csv")] } }));
    expect(FakeXHR.sent[0].url).toBe("/api/uploads/c1?appId=a1");
    const listed = seen.filter((s) => s.url.includes("/sandbox/") || s.url.includes("/files")).length;
    await act(async () => FakeXHR.sent[0].answer(201, { files: [stored] }));
    await waitFor(() => expect(root.querySelector('#attachments [data-state="done"]')?.getAttribute("data-path")).toBe("uploads/a.csv"));
    await waitFor(() => expect(seen.filter((s) => s.url.includes("/sandbox/") || s.url.includes("/files")).length).toBeGreaterThan(listed));

    // a message of files alone may be sent
    await act(async () => fireEvent.click(screen.getByRole("button", { name: "Send" })));
    await waitFor(() => expect(runs()).toHaveLength(1));
    expect(runs()[0].messages).toEqual([{ role: "user", content: [{ type: "file_url", name: "uploads/a.csv" }] }]);
    expect(root.querySelector("#attachments li")).toBeNull();
    const chip = root.querySelector(".msg.user .msg-attachments .attachment");
    expect(chip?.getAttribute("data-path")).toBe("/workspace/uploads/a.csv");
    expect(chip?.textContent).toBe("a.csv 12 B");
  });

  it("shows a stored message's files as chips, apart from its text", () => {
    const root = page({ items: [{ role: "user", text: "sum it\n\nAttached files: /workspace/uploads/a.csv (12 B), /workspace/uploads/b c.txt (1.5 KiB)" }] });
    expect(root.querySelector(".msg.user")?.firstChild?.textContent).toBe("sum it");
    expect([...root.querySelectorAll(".msg.user .attachment")].map((c) => c.textContent)).toEqual(["a.csv 12 B", "b c.txt 1.5 KiB"]);
    cleanup();
    // a message that only mentions the words keeps them
    const plain = page({ items: [{ role: "user", text: "what are Attached files: in the docs?" }] });
    expect(plain.querySelector(".msg.user")?.textContent).toBe("what are Attached files: in the docs?");
  });

  it("keeps the question while an upload is under way", async () => {
    const root = page({ files: "write" });
    await act(async () => fireEvent.change(root.querySelector("#attach-input")!, { target: { files: [new File(["x"], "b.txt")] } }));
    await ask("read it");
    expect(runs()).toHaveLength(0);
    expect(root.querySelector('[data-role="upload-status"]')?.textContent).toBe(translator("en")("waitUploads"));
    expect(screen.getByRole<HTMLTextAreaElement>("textbox", { name: translator("en")("askPlaceholder") }).value).toBe("read it");
  });

  it("has no attach button where the page's files are read-only", () => {
    page({ files: "read" });
    expect(screen.queryByRole("button", { name: translator("en")("attach") })).toBeNull();
  });
});

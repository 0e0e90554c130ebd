import { fireEvent, render, screen, waitFor } from "@testing-library/react";
import { translator } from "../i18n";
import { ChatPage } from "./ChatPage";

// Only the engine's HTTP side is faked: the chat list beside the chat.
beforeEach(() => vi.stubGlobal("fetch", async () => new Response(JSON.stringify({ chats: [] }))));
afterEach(() => vi.unstubAllGlobals());

describe("ChatPage", () => {
  it("shows the history's answers as Markdown and how to start an empty chat", () => {
    const { container, unmount } = render(
      <ChatPage
        csrf="tok"
        t={translator("en")}
        data={{ appId: "a", chatId: "c", apiBase: "", own: true, items: [{ role: "user", text: "**not bold**" }, { role: "assistant", text: "| f |\n|---|\n| a.txt |" }] }}
      />,
    );
    expect(container.querySelector(".msg.user")?.textContent).toBe("**not bold**");
    expect(container.querySelector(".msg.assistant td")?.textContent).toBe("a.txt");
    expect(screen.getByRole("button", { name: "Send" })).toBeTruthy();
    unmount();

    render(<ChatPage csrf="tok" t={translator("zh")} data={{ appId: "a", chatId: "c", apiBase: "", own: true }} />);
    const zh = translator("zh");
    expect(document.querySelector(".chat-empty")?.textContent).toBe(zh("chatEmptyTitle") + zh("chatEmptyHint"));
    expect(zh("chatEmptyHint")).toContain("发送");
  });

  it("shows another user's chat read-only", () => {
    render(<ChatPage csrf="tok" t={translator("en")} data={{ appId: "a", chatId: "c", apiBase: "", own: false, items: [{ role: "assistant", text: "hi" }] }} />);
    expect(document.querySelector("[data-role=not-own]")).toBeTruthy();
    expect(screen.queryByRole("textbox")).toBeNull();
  });

  it("offers regenerate on the last answer, edit on questions and branch on answers, and regenerates by a rewind and the question again", async () => {
    const calls: { url: string; body?: string }[] = [];
    vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
      calls.push({ url, body: init?.body as string | undefined });
      if (url.includes("/item/delete")) return new Response(JSON.stringify({ chatId: "c", items: 2, redo: true, sandbox: "restored" }));
      if (url.includes("?before=")) return new Response(JSON.stringify({ items: [{ role: "user", text: "q1", dataId: "c/00000000" }, { role: "assistant", text: "a1", dataId: "c/00000001" }], redo: true }));
      return new Response(JSON.stringify({ chats: [] }));
    });
    const items = [
      { role: "user", text: "q1", dataId: "c/00000000" },
      { role: "assistant", text: "a1", dataId: "c/00000001" },
      { role: "user", text: "q2", dataId: "c/00000002" },
      { role: "assistant", text: "a2", dataId: "c/00000003" },
    ];
    const { container, unmount } = render(<ChatPage csrf="tok" t={translator("en")} data={{ appId: "a", chatId: "c", apiBase: "", own: true, rewind: true, fork: true, items }} />);
    expect(container.querySelectorAll("[data-role=regenerate]")).toHaveLength(1);
    expect(container.querySelectorAll(".msg.assistant")[1].querySelector("[data-role=regenerate]")).toBeTruthy();
    expect(container.querySelectorAll("[data-role=edit]")).toHaveLength(2);
    expect(container.querySelectorAll("[data-role=branch]")).toHaveLength(2);
    fireEvent.click(container.querySelector("[data-role=regenerate]")!);
    await waitFor(() => expect(calls.some((c) => c.url.includes("/chat/completions"))).toBe(true));
    const rewind = calls.find((c) => c.url.includes("/api/core/chat/item/delete"));
    expect(JSON.parse(rewind!.body!)).toEqual({ appId: "a", chatId: "c", contentId: "c/00000003" });
    const sent = calls.find((c) => c.url.includes("/chat/completions"));
    expect(JSON.parse(sent!.body!).messages).toEqual([{ role: "user", content: "q2" }]);
    // The rewound turn is gone from the page, and redo is offered.
    await waitFor(() => expect(container.querySelector("[data-role=redo]")).toBeTruthy());
    unmount();

    // Another user's chat, or an engine without checkpoints: none.
    const other = render(<ChatPage csrf="tok" t={translator("en")} data={{ appId: "a", chatId: "c", apiBase: "", own: false, rewind: true, fork: true, items }} />);
    expect(other.container.querySelector("[data-role=regenerate], [data-role=edit], [data-role=branch]")).toBeNull();
    other.unmount();
    const off = render(<ChatPage csrf="tok" t={translator("en")} data={{ appId: "a", chatId: "c", apiBase: "", own: true, items }} />);
    expect(off.container.querySelector("[data-role=regenerate], [data-role=edit], [data-role=branch]")).toBeNull();
  });
});

import { render, screen } from "@testing-library/react";
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
});

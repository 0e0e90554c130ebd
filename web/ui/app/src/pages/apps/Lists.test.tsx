import { cleanup, render } from "@testing-library/react";
import { translator } from "../../i18n";
import { Apps } from "./Apps";
import { Chats } from "./Chats";

afterEach(cleanup);

describe("the app list", () => {
  const t = translator("en");
  const demo = { appId: "demo", name: "Demo <b>agent</b>", ownerId: "u:admin", public: true };

  it("tells a user who owns no app how to make one, and lists what they may use", () => {
    const { container } = render(<Apps data={{ apps: [demo], starterGraph: {} }} t={t} lang="en" user={{ id: "u:dora", name: "dora" }} />);
    expect(container.querySelector("#apps-empty")?.textContent).toBe(t("appsNoneOwn"));
    const row = container.querySelector('#app-list tr[data-app="demo"]')!;
    expect(row.querySelector("[data-role=name]")?.textContent).toBe("Demo <b>agent</b>");
    expect(row.querySelector("b")).toBeNull();
    expect(row.querySelector("[data-role=owner]")?.textContent).toBe("u:admin · public");
    expect([...row.querySelectorAll("a")].map((a) => a.getAttribute("href"))).toEqual([
      "/apps/demo/chat/new",
      "/apps/demo/flow",
      "/apps/demo/edit",
      "/apps/demo/chats",
    ]);
  });

  it("says nothing of it once they own one; with no app at all there is no table", () => {
    const own = { appId: "a1", name: "Desk", ownerId: "u:dora", public: false };
    const { container, unmount } = render(<Apps data={{ apps: [demo, own], starterGraph: {} }} t={t} lang="en" user={{ id: "u:dora" }} />);
    expect(container.querySelector("#apps-empty")).toBeNull();
    expect(container.querySelector('tr[data-app="a1"] [data-role=owner]')?.textContent).toBe("u:dora");
    unmount();
    const empty = render(<Apps data={{ apps: [], starterGraph: {} }} t={t} lang="en" user={{ id: "u:dora" }} />);
    expect(empty.container.querySelector("#apps-empty")).not.toBeNull();
    expect(empty.container.querySelector("#app-list")).toBeNull();
  });
});

describe("a chat list", () => {
  const t = translator("en");
  const chats = [
    { chatId: "c1", userId: "u:me", title: "Mine", updatedAt: "2026-01-05T07:03:00Z" },
    { chatId: "c2", userId: "share:l1:v1", title: "", updatedAt: "2026-01-06T08:00:00Z" },
  ];

  it("links the caller's chats plainly, others' with their user, and names owners", () => {
    const { container } = render(
      <Chats data={{ appId: "a", name: "Desk", base: "/apps/a", me: "u:me", visitor: false, chats }} t={t} lang="en" user={{ id: "u:me" }} />,
    );
    const links = [...container.querySelectorAll("#chat-list [data-role=title] a")];
    expect(links.map((a) => [a.getAttribute("href"), a.textContent])).toEqual([
      ["/apps/a/chat/c1", "Mine"],
      ["/apps/a/chat/c2?userId=share%3Al1%3Av1", "c2"],
    ]);
    expect(container.querySelector('tr[data-chat="c2"] [data-role=owner]')?.textContent).toBe("share:l1:v1");
    expect(container.querySelector('tr[data-chat="c1"] time')?.getAttribute("datetime")).toBe("2026-01-05T07:03:00Z");
    expect(container.querySelector("#new-chat")?.getAttribute("href")).toBe("/apps/a/chat/new");
  });

  it("shows a visitor their chats at the link, without owners, and how to start when there are none", () => {
    const { container, unmount } = render(
      <Chats data={{ appId: "a", name: "Desk", base: "/share/l1", me: "share:l1:v1", visitor: true, chats: [chats[1]] }} t={t} lang="en" user={{ linkId: "l1" }} />,
    );
    expect(container.querySelector("#chat-list a")?.getAttribute("href")).toBe("/share/l1/chat/c2");
    expect(container.querySelectorAll("#chat-list th").length).toBe(2);
    expect(container.querySelector("[data-role=owner]")).toBeNull();
    unmount();
    const empty = render(<Chats data={{ appId: "a", name: "Desk", base: "/share/l1", me: "v", visitor: true, chats: [] }} t={t} lang="en" user={{}} />);
    expect(empty.container.querySelector("#chats-empty")?.textContent).toBe(t("chatsEmpty"));
    expect(empty.container.querySelector("#new-chat")?.getAttribute("href")).toBe("/share/l1/chat/new");
  });
});

import { cleanup, fireEvent, render } from "@testing-library/react";
import { translator } from "../../i18n";
import { SetPassword } from "./SetPassword";

const t = translator("en");
afterEach(cleanup);

describe("the set-password page", () => {
  it("says why a link does not work, in the reader's words, and offers no form", () => {
    const { container } = render(<SetPassword data={{ problem: "linkExpired" }} t={translator("zh")} lang="zh" user={{}} />);
    expect(container.querySelector("[data-role=problem]")?.textContent).toBe("此链接已过期。请向管理员索取新的链接。");
    expect(container.querySelector("#set-password")).toBeNull();
  });

  it("names the account, shows the link's expiry in UTC and refuses two different passwords without calling the engine", () => {
    const calls: unknown[] = [];
    vi.stubGlobal("fetch", (...args: unknown[]) => {
      calls.push(args);
      return Promise.reject(new Error("no network in this test"));
    });
    const { container } = render(
      <SetPassword data={{ token: "fbp_x", name: "<b>cleo</b>", expiresAt: "2026-12-01T17:33:20.5Z" }} t={t} lang="en" user={{}} />,
    );
    expect(container.querySelector("[data-role=name]")?.textContent).toBe("<b>cleo</b>");
    expect(container.querySelector("b")).toBeNull();
    expect(container.querySelector("time")?.textContent).toBe("2026-12-01 17:33 UTC");
    fireEvent.change(container.querySelector("#set-password-new")!, { target: { value: "one password" } });
    fireEvent.change(container.querySelector("#set-password-repeat")!, { target: { value: "another one" } });
    fireEvent.submit(container.querySelector("#set-password")!);
    const status = container.querySelector("[data-role=status]")!;
    expect(status.textContent).toBe("The two new passwords differ.");
    expect(status.className).toBe("status error");
    expect(calls).toHaveLength(0);
    vi.unstubAllGlobals();
  });
});

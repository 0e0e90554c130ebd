import { act, render } from "@testing-library/react";
import { translator } from "../../i18n";
import { ApprovalCard } from "./ApprovalCard";

describe("ApprovalCard", () => {
  it("lapses by itself when its time is up, and can no longer be answered", async () => {
    // The clock is the test's: on a busy machine a real one could pass
    // the expiry before the first look.
    vi.useFakeTimers();
    const sent: unknown[] = [];
    const expiresAt = new Date(Date.now() + 60_000).toISOString();
    const { container } = render(
      <ApprovalCard approval={{ approvalId: "apr_1", command: "rm x", expiresAt }} t={translator("en")} send={async (said, request) => (sent.push([said, request]), true)} />,
    );
    expect(container.querySelector('[data-role="approval-expires"]')?.textContent).toContain("Expires");
    expect(container.querySelector<HTMLButtonElement>('[data-answer="approve"]')?.disabled).toBe(false);
    act(() => vi.advanceTimersByTime(59_000));
    expect(container.querySelector('[data-role="approval-outcome"]')?.textContent).toBe("");
    act(() => vi.advanceTimersByTime(1_001));
    vi.useRealTimers();
    expect(container.querySelector('[data-role="approval-outcome"]')?.textContent).toBe("expired");
    expect(container.querySelector("button")).toBeNull();
    expect(container.querySelector(".approval.answered")).toBeTruthy();
    expect(sent).toEqual([]);
  });
});

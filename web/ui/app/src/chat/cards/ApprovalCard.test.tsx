import { render, waitFor } from "@testing-library/react";
import { translator } from "../../i18n";
import { ApprovalCard } from "./ApprovalCard";

describe("ApprovalCard", () => {
  it("lapses by itself when its time is up, and can no longer be answered", async () => {
    const sent: unknown[] = [];
    const expiresAt = new Date(Date.now() + 150).toISOString();
    const { container } = render(
      <ApprovalCard approval={{ approvalId: "apr_1", command: "rm x", expiresAt }} t={translator("en")} send={async (said, request) => (sent.push([said, request]), true)} />,
    );
    expect(container.querySelector('[data-role="approval-expires"]')?.textContent).toContain("Expires");
    expect(container.querySelector<HTMLButtonElement>('[data-answer="approve"]')?.disabled).toBe(false);
    await waitFor(() => expect(container.querySelector('[data-role="approval-outcome"]')?.textContent).toBe("expired"));
    expect(container.querySelector("button")).toBeNull();
    expect(container.querySelector(".approval.answered")).toBeTruthy();
    expect(sent).toEqual([]);
  });
});

import { act, cleanup, render } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { translator } from "../i18n";
import { ApiError } from "./http";
import { Status, useStatus } from "./Status";

const t = translator("en");
afterEach(cleanup);

let line: ReturnType<typeof useStatus>;
function Probe() {
  line = useStatus();
  return <Status said={line.said} t={t} id="probe" />;
}

describe("Status", () => {
  it("draws each note as a new line, so a line cleared by hand shows the next one", () => {
    const { container } = render(<Probe />);
    act(() => line.say("Saved."));
    const first = container.querySelector("#probe")!;
    expect(first.className).toBe("status ok");
    expect(first.textContent).toBe("Saved.");
    first.className = "status";
    first.textContent = "";
    act(() => line.say("Saved."));
    const second = container.querySelector("#probe")!;
    expect(second).not.toBe(first);
    expect(second.className).toBe("status ok");
    expect(second.textContent).toBe("Saved.");
  });
  it("says a failure with the engine's words, and a way to sign in after a 401", () => {
    const { container } = render(<Probe />);
    act(() => line.fail(new ApiError(401, "sign in again")));
    const p = container.querySelector("#probe")!;
    expect(p.className).toBe("status error");
    expect(p.textContent).toBe("sign in again Sign in");
    expect(p.querySelector("a")?.getAttribute("href")).toBe("/login");
    act(() => line.note("Listing…"));
    expect(container.querySelector("#probe")!.className).toBe("status");
  });
});

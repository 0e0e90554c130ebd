import { fireEvent, render, screen } from "@testing-library/react";
import { useState } from "react";
import { translator } from "../i18n";
import { Composer } from "./Composer";

// A page's run as far as the composer sees it: sending starts it, Stop
// ends it.
function Page({ lang = "en", sent, stopped }: { lang?: string; sent: string[]; stopped: () => void }) {
  const [running, setRunning] = useState(false);
  return (
    <Composer
      t={translator(lang)}
      running={running}
      onSend={(q) => {
        sent.push(q);
        setRunning(true);
      }}
      onStop={() => {
        stopped();
        setRunning(false);
      }}
    />
  );
}

describe("Composer", () => {
  it("sends a question, disables Send and shows Stop while the run goes, and stops it", () => {
    const sent: string[] = [];
    let stops = 0;
    render(<Page sent={sent} stopped={() => stops++} />);
    const send = screen.getByRole("button", { name: "Send" });
    expect((send as HTMLButtonElement).disabled).toBe(true);
    expect(screen.queryByRole("button", { name: "Stop" })).toBeNull();

    fireEvent.change(screen.getByRole("textbox"), { target: { value: "  list the files " } });
    expect((send as HTMLButtonElement).disabled).toBe(false);
    fireEvent.click(send);
    expect(sent).toEqual(["list the files"]);
    expect((screen.getByRole("textbox") as HTMLTextAreaElement).value).toBe("");

    // While it runs, a second question cannot be sent, by button or Enter.
    fireEvent.change(screen.getByRole("textbox"), { target: { value: "and again" } });
    expect((send as HTMLButtonElement).disabled).toBe(true);
    fireEvent.keyDown(screen.getByRole("textbox"), { key: "Enter" });
    expect(sent).toHaveLength(1);

    fireEvent.click(screen.getByRole("button", { name: "Stop" }));
    expect(stops).toBe(1);
    expect(screen.queryByRole("button", { name: "Stop" })).toBeNull();
    fireEvent.keyDown(screen.getByRole("textbox"), { key: "Enter" });
    expect(sent).toEqual(["list the files", "and again"]);
  });

  it("keeps Shift+Enter as a new line and speaks Chinese", () => {
    const sent: string[] = [];
    render(<Page lang="zh" sent={sent} stopped={() => {}} />);
    fireEvent.change(screen.getByRole("textbox"), { target: { value: "第一行" } });
    fireEvent.keyDown(screen.getByRole("textbox"), { key: "Enter", shiftKey: true });
    expect(sent).toEqual([]);
    fireEvent.click(screen.getByRole("button", { name: "发送" }));
    expect(sent).toEqual(["第一行"]);
    expect(screen.getByRole("button", { name: "停止" })).toBeTruthy();
  });
});

import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { translator } from "../../i18n";
import { ChatPage, type PageData } from "../ChatPage";
import { SHOWN } from "./model";

// The engine is faked at the HTTP boundary only: each chat request is
// kept, and answered with the server-sent events the test queues.
let requests: Record<string, any>[];
let replies: (string | { status: number; message: string })[];

const sse = (...events: [string, unknown][]) => events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join("") + "data: [DONE]\n\n";

beforeEach(() => {
  requests = [];
  replies = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    // the chat list beside the chat
    if (url === "/api/apps/a1/chats" && !init.method) return new Response(JSON.stringify({ chats: [] }));
    expect(url).toBe("/api/v1/chat/completions");
    requests.push(JSON.parse(String(init.body)));
    const r = replies.shift() ?? sse();
    if (typeof r !== "string") return new Response(JSON.stringify({ message: r.message }), { status: r.status });
    return new Response(r, { headers: { "Content-Type": "text/event-stream" } });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

const page = (data: Partial<PageData> = {}, lang = "en") =>
  render(<ChatPage csrf="tok" t={translator(lang)} data={{ appId: "a1", chatId: "c1", apiBase: "", own: true, ...data }} />).container;

const ask = async (question: string) => {
  fireEvent.change(screen.getByRole("textbox"), { target: { value: question } });
  await act(async () => fireEvent.click(screen.getByRole("button", { name: "Send" })));
};

const approval = {
  interactive: {
    type: "commandApproval",
    params: { approvalId: "apr_1", toolCallId: "call_1", tool: "sandbox_shell", command: "rm -rf build", rule: "ask-rm", justification: "deleting files needs a person" },
  },
};

describe("the chat's cards", () => {
  it("draws a run's tool card and the approval it waits for; a rejection with a reason is the next request", async () => {
    replies.push(
      sse(
        ["toolCall", { tool: { id: "call_0", toolName: "sandbox_shell", params: '{"command":"ls"}', response: "" } }],
        ["toolOutput", { tool: { id: "call_0", stream: "stdout", text: "build\n" } }],
        ["toolResponse", { tool: { id: "call_0", response: '{"stdout":"build\\n","exitCode":0}', durationMs: 12, status: "success" } }],
        ["toolCall", { tool: { id: "call_1", toolName: "sandbox_shell", params: '{"command":"rm -rf build"}', response: "" } }],
        ["toolResponse", { tool: { id: "call_1", response: "{}", durationMs: 0, status: "awaiting approval" } }],
        ["interactive", approval],
      ),
    );
    const root = page();
    await ask("clean up");
    const cards = await waitFor(() => {
      const c = root.querySelectorAll<HTMLDetailsElement>(".tool-card");
      expect(c.length).toBe(2);
      return c;
    });
    expect(cards[0].querySelector('[data-role="stdout"]')?.textContent).toBe("build\n");
    expect(cards[0].querySelector('[data-role="status"]')?.textContent).toBe("success");
    expect(cards[0].open).toBe(false);
    const card = root.querySelector<HTMLElement>('.approval[data-approval-id="apr_1"]')!;
    expect(cards[1].nextElementSibling).toBe(card);
    expect(card.querySelector('[data-role="approval-command"]')?.textContent).toBe("rm -rf build");
    expect(card.querySelector('[data-role="approval-why"]')?.textContent).toBe("ask-rm: deleting files needs a person");

    const reject = card.querySelector<HTMLButtonElement>('[data-answer="reject"]')!;
    await waitFor(() => expect(reject.disabled).toBe(false));
    fireEvent.click(reject);
    fireEvent.change(card.querySelector('[data-role="approval-reason"]')!, { target: { value: "keep it" } });
    replies.push(sse(["answer", { choices: [{ delta: { content: "Kept the build." } }] }]));
    await act(async () => fireEvent.click(reject));
    await waitFor(() => expect(root.querySelectorAll(".msg.assistant")[1]?.textContent).toContain("Kept the build."));
    expect(requests[1]).toEqual({ stream: true, detail: true, appId: "a1", chatId: "c1", interactive: { approvalId: "apr_1", decision: "reject", reason: "keep it" } });
    expect(root.querySelectorAll(".msg.user")[1].textContent).toBe("Rejected: rm -rf build (keep it)");
    expect(card.querySelector('[data-role="approval-outcome"]')?.textContent).toBe("Rejected: keep it");
    expect(card.querySelector("button")).toBeNull();
  });

  it("edits a command before approving it, in Chinese", async () => {
    replies.push(sse(["interactive", approval]));
    const root = page({}, "zh");
    fireEvent.change(screen.getByRole("textbox"), { target: { value: "清理" } });
    await act(async () => fireEvent.click(screen.getByRole("button", { name: translator("zh")("send") })));
    const edit = await waitFor(() => root.querySelector<HTMLButtonElement>('[data-answer="edit"]:not(:disabled)')!);
    expect(edit.textContent).toBe(translator("zh")("edit"));
    fireEvent.click(edit);
    fireEvent.change(root.querySelector('[data-role="approval-edit"]')!, { target: { value: "rm -rf build/tmp" } });
    await act(async () => fireEvent.click(edit));
    await waitFor(() => expect(requests.length).toBe(2));
    expect(requests[1].interactive).toEqual({ approvalId: "apr_1", decision: "edit", command: "rm -rf build/tmp" });
    expect(root.querySelector('[data-role="approval-outcome"]')?.textContent).toBe(`${translator("zh")("edited")}: rm -rf build/tmp`);
  });

  it("gives a refused answer's card back, with the engine's reason", async () => {
    replies.push(sse(["interactive", approval]), { status: 409, message: "this approval was already answered" });
    const root = page();
    await ask("clean up");
    const approve = await waitFor(() => root.querySelector<HTMLButtonElement>('[data-answer="approve"]:not(:disabled)')!);
    await act(async () => fireEvent.click(approve));
    await waitFor(() => expect(root.querySelector('[role="alert"]')?.textContent).toBe("this approval was already answered"));
    expect(root.querySelectorAll(".msg.user").length).toBe(1);
    expect(root.querySelector('[data-role="approval-outcome"]')?.textContent).toBe("");
    await waitFor(() => expect(root.querySelector<HTMLButtonElement>('[data-answer="approve"]')?.disabled).toBe(false));
  });

  it("answers a workflow's choice with the option's key, and a form with its fields", async () => {
    replies.push(
      sse([
        "interactive",
        { interactive: { type: "userSelect", params: { interactiveId: "q1", description: "Which report?", userSelectOptions: [{ key: "w", value: "Weekly" }, { key: "m", value: "Monthly" }] } } },
      ]),
    );
    const root = page();
    await ask("a report");
    const monthly = await waitFor(() => root.querySelector<HTMLButtonElement>('[data-option="m"]:not(:disabled)')!);
    expect(root.querySelector('[data-role="question-description"]')?.textContent).toBe("Which report?");
    replies.push(
      sse([
        "interactive",
        {
          interactive: {
            type: "userInput",
            params: {
              interactiveId: "q2",
              description: "",
              inputForm: [
                { type: "input", key: "name", label: "Name", required: true },
                { type: "numberInput", key: "weeks", label: "Weeks", defaultValue: 4 },
                { type: "switch", key: "charts", label: "Charts" },
                { type: "select", key: "fmt", label: "Format", list: [{ label: "PDF file", value: "pdf" }, { value: "csv" }] },
              ],
            },
          },
        },
      ]),
    );
    await act(async () => fireEvent.click(monthly));
    await waitFor(() => expect(requests.length).toBe(2));
    expect(requests[1].interactive).toEqual({ interactiveId: "q1", value: "m" });
    expect(root.querySelectorAll(".msg.user")[1].textContent).toBe("Monthly");
    expect(root.querySelector('[data-question-id="q1"] [data-role="question-outcome"]')?.textContent).toBe("Answered: Monthly");

    const form = await waitFor(() => root.querySelector<HTMLFormElement>('[data-question-id="q2"] form')!);
    expect(root.querySelector('[data-question-id="q2"] [data-role="question-description"]')?.textContent).toBe("Fill in the form");
    expect(screen.getByLabelText("Name *")).toBeTruthy();
    fireEvent.change(screen.getByLabelText("Name *"), { target: { value: "Ops" } });
    fireEvent.change(screen.getByLabelText("Format"), { target: { value: "pdf" } });
    await waitFor(() => expect(root.querySelector<HTMLButtonElement>('[data-role="question-submit"]')?.disabled).toBe(false));
    await act(async () => fireEvent.submit(form));
    await waitFor(() => expect(requests.length).toBe(3));
    expect(requests[2].interactive).toEqual({ interactiveId: "q2", value: { name: "Ops", weeks: 4, charts: false, fmt: "pdf" } });
    expect(root.querySelectorAll(".msg.user")[2].textContent).toBe("Name: Ops\nWeeks: 4\nCharts: false\nFormat: PDF file");
  });

  it("draws a reloaded chat's cards: decided, expired and lapsed approvals, answered and open questions", () => {
    const waiting = (id: string, expiresAt?: string) => ({
      id: "call_" + id,
      toolName: "sandbox_shell",
      params: '{"command":"rm x"}',
      response: "{}",
      durationMs: 0,
      status: "awaiting approval",
      approval: { id, command: "rm x", rule: "ask-rm", expiresAt },
    });
    const root = page({
      items: [
        { role: "user", text: "one" },
        {
          role: "assistant",
          text: "",
          calls: [
            { id: "c0", toolName: "sandbox_shell", params: '{"command":"make"}', response: '{"stdout":"ok","stderr":"warn","exitCode":2}', durationMs: 30, status: "failed" },
            waiting("apr_a"),
            waiting("apr_b", "2020-01-01T00:00:00Z"),
            waiting("apr_c"),
          ],
          questions: [{ request: { id: "q1", kind: "userSelect", options: [{ key: "y", value: "Yes" }] }, answer: { choice: "y" }, said: "Yes" }],
        },
        { role: "user", text: "Approved: rm x" },
        {
          role: "assistant",
          text: "done",
          calls: [{ ...waiting("apr_a"), status: "success", approval: { id: "apr_a", command: "rm x", decision: "approve" } }],
          questions: [{ request: { id: "q2", kind: "userSelect", options: [{ key: "n", value: "No" }] } }],
        },
      ],
    });
    const make = root.querySelector<HTMLDetailsElement>('[data-tool-id="c0"]')!;
    expect(make.open).toBe(false);
    expect(make.querySelector('[data-role="status"]')?.textContent).toBe("failed · exit 2");
    expect(make.querySelector('[data-role="duration"]')?.textContent).toBe("30 ms");
    expect(make.querySelector('[data-role="stderr"]')?.textContent).toBe("warn");
    const outcome = (id: string) => root.querySelector(`[data-approval-id="${id}"] [data-role="approval-outcome"]`)?.textContent;
    expect(outcome("apr_a")).toBe("Approved");
    expect(outcome("apr_b")).toBe("expired");
    expect(outcome("apr_c")).toBe("Not answered: the chat went on");
    expect(root.querySelector('[data-question-id="q1"] [data-role="question-outcome"]')?.textContent).toBe("Answered: Yes");
    expect(root.querySelector<HTMLButtonElement>('[data-question-id="q2"] [data-option="n"]')?.disabled).toBe(false);
  });

  it("keeps a 5 MB live output to its last 64 KiB in the page", async () => {
    const line = "y".repeat(1023) + "\n";
    const out = Array.from({ length: 5 * 1024 }, (): [string, unknown] => ["toolOutput", { tool: { id: "big", stream: "stdout", text: line } }]);
    replies.push(sse(["toolCall", { tool: { id: "big", toolName: "sandbox_shell", params: '{"command":"yes | head -c 5M"}' } }], ...out, ["toolOutput", { tool: { id: "big", stream: "stdout", text: "last line\n" } }]));
    const root = page();
    await ask("print a lot");
    const pre = await waitFor(() => {
      const p = root.querySelector('[data-tool-id="big"] [data-role="stdout"]');
      expect(p?.textContent?.endsWith("last line\n")).toBe(true);
      return p!;
    });
    expect(pre.textContent!.length).toBe(SHOWN);
    expect(root.querySelector<HTMLDetailsElement>('[data-tool-id="big"]')?.open).toBe(true);
    expect(root.querySelector('[data-tool-id="big"] [data-role="cut"]')?.textContent).toContain("Earlier output cut");
    expect(root.textContent!.length).toBeLessThan(SHOWN + 4096);
  });

  it("shows another user's open question without a way to answer it", () => {
    const root = page({ own: false, items: [{ role: "assistant", text: "", questions: [{ request: { id: "q9", kind: "userSelect", options: [{ key: "y", value: "Yes" }] } }] }] });
    expect(root.querySelector<HTMLButtonElement>('[data-option="y"]')?.disabled).toBe(true);
  });
});

import { act, cleanup, fireEvent, render, waitFor } from "@testing-library/react";
import { useState } from "react";
import { translator } from "../../i18n";
import { AttachButton, Attachments, DropZone, useAttachments } from "./Attachments";
import type { ContentPart } from "./Attachments";

// XMLHttpRequest and fetch are faked at the HTTP boundary only: each
// upload waits here until the test answers, fails or loses it.
const t = translator("en");

class FakeXHR {
  static sent: FakeXHR[] = [];
  method = "";
  url = "";
  headers: Record<string, string> = {};
  body: FormData | null = null;
  status = 0;
  statusText = "";
  responseText = "";
  aborted = false;
  private on: Record<string, ((e: unknown) => void)[]> = {};
  private up: Record<string, ((e: unknown) => void)[]> = {};
  upload = { addEventListener: (k: string, f: (e: unknown) => void) => (this.up[k] ??= []).push(f) };
  addEventListener(k: string, f: (e: unknown) => void) {
    (this.on[k] ??= []).push(f);
  }
  open(method: string, url: string) {
    this.method = method;
    this.url = url;
  }
  setRequestHeader(k: string, v: string) {
    this.headers[k] = v;
  }
  send(body: FormData) {
    this.body = body;
    FakeXHR.sent.push(this);
  }
  abort() {
    this.aborted = true;
    this.fire("abort");
  }
  fire(k: string, e: unknown = {}) {
    (this.on[k] ?? []).forEach((f) => f(e));
  }
  progress(loaded: number, total: number) {
    (this.up.progress ?? []).forEach((f) => f({ lengthComputable: true, loaded, total }));
  }
  answer(status: number, body: unknown) {
    this.status = status;
    this.responseText = JSON.stringify(body);
    this.fire("load");
  }
  get fileName() {
    return (this.body!.get("file") as File).name;
  }
}

let deletes: string[];
let deleteRefusal: string | null;
beforeEach(() => {
  FakeXHR.sent = [];
  deletes = [];
  deleteRefusal = null;
  vi.stubGlobal("XMLHttpRequest", FakeXHR);
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    deletes.push(init.method + " " + url);
    if (deleteRefusal) return new Response(JSON.stringify({ message: deleteRefusal }), { status: 403 });
    return new Response("{}", { status: 200 });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

const stored = (name: string, size: number) => ({
  files: [{ name, path: name, sandboxPath: "/workspace/uploads/" + name, size }],
});

// Form is the chat form's upload parts as the chat page composes them.
function Form(props: { sent: (string | ContentPart[])[] }) {
  const state = useAttachments({ apiBase: "/s/link", appId: "app1", chatId: "chat1", csrf: "tok" }, t);
  const [q, setQ] = useState("");
  return (
    <DropZone state={state} t={t} className="chat-main">
      <form
        id="chat-form"
        onSubmit={(e) => {
          e.preventDefault();
          const m = state.take(q.trim());
          if (m.content !== undefined) {
            props.sent.push(m.content);
            setQ("");
          }
        }}
      >
        <Attachments state={state} t={t} />
        <AttachButton state={state} t={t} />
        <textarea name="q" value={q} onChange={(e) => setQ(e.target.value)} />
        <button type="submit">send</button>
      </form>
    </DropZone>
  );
}

const file = (name: string, text = "x") => new File([text], name, { type: "text/plain" });
const chips = (c: HTMLElement) => [...c.querySelectorAll("#attachments .attachment")] as HTMLElement[];
const attach = (c: HTMLElement, ...files: File[]) =>
  fireEvent.change(c.querySelector("#attach-input")!, { target: { files } });

test("an upload shows progress, then the stored file, and the message names it", async () => {
  const sent: (string | ContentPart[])[] = [];
  const { container } = render(<Form sent={sent} />);
  attach(container, file("data.csv"));
  await waitFor(() => expect(FakeXHR.sent.length).toBe(1));
  const xhr = FakeXHR.sent[0];
  expect(xhr.url).toBe("/s/link/api/uploads/chat1?appId=app1");
  expect(xhr.headers["X-CSRF-Token"]).toBe("tok");
  expect(xhr.fileName).toBe("data.csv");
  expect(chips(container)[0].dataset.state).toBe("uploading");

  act(() => xhr.progress(40, 100));
  expect((chips(container)[0].querySelector("progress") as HTMLProgressElement).value).toBe(40);

  // Sending while it goes is refused with a reason.
  fireEvent.change(container.querySelector("textarea")!, { target: { value: "sum it" } });
  fireEvent.submit(container.querySelector("form")!);
  expect(container.querySelector('[data-role="upload-status"]')!.textContent).toBe(t("waitUploads"));
  expect(sent).toEqual([]);

  act(() => xhr.answer(201, stored("data.csv", 2048)));
  await waitFor(() => expect(chips(container)[0].dataset.state).toBe("done"));
  expect(chips(container)[0].querySelector('[data-role="size"]')!.textContent).toBe("2 KiB");
  expect(chips(container)[0].title).toBe("/workspace/uploads/data.csv");

  fireEvent.submit(container.querySelector("form")!);
  expect(sent).toEqual([
    [
      { type: "text", text: "sum it" },
      { type: "file_url", name: "data.csv" },
    ],
  ]);
  expect(chips(container)).toEqual([]);
});

test("a refused upload shows the server's reason and is dismissed without a request", async () => {
  const { container } = render(<Form sent={[]} />);
  attach(container, file("big.bin"));
  await waitFor(() => expect(FakeXHR.sent.length).toBe(1));
  act(() => FakeXHR.sent[0].answer(413, { message: "the file is 20 MiB, the limit is 10 MiB" }));
  await waitFor(() => expect(chips(container)[0].dataset.state).toBe("error"));
  expect(chips(container)[0].querySelector('[data-role="error"]')!.textContent).toBe(
    "big.bin was not uploaded: the file is 20 MiB, the limit is 10 MiB",
  );
  const remove = chips(container)[0].querySelector('[data-role="remove"]')!;
  expect(remove.getAttribute("aria-label")).toBe(t("dismiss"));
  fireEvent.click(remove);
  await waitFor(() => expect(chips(container)).toEqual([]));
  expect(deletes).toEqual([]);
});

test("a lost connection says so", async () => {
  const { container } = render(<Form sent={[]} />);
  attach(container, file("a.txt"));
  await waitFor(() => expect(FakeXHR.sent.length).toBe(1));
  act(() => FakeXHR.sent[0].fire("error"));
  await waitFor(() => expect(chips(container)[0].dataset.state).toBe("error"));
  expect(chips(container)[0].textContent).toContain(t("uploadNetwork"));
});

test("removing an upload under way cancels it; removing a stored one deletes it", async () => {
  const { container } = render(<Form sent={[]} />);
  attach(container, file("a.txt"), file("b.txt"));
  await waitFor(() => expect(FakeXHR.sent.length).toBe(2));
  const [a, b] = FakeXHR.sent;
  fireEvent.click(chips(container)[0].querySelector('[data-role="remove"]')!);
  await waitFor(() => expect(chips(container).map((c) => c.dataset.name)).toEqual(["b.txt"]));
  expect(a.aborted).toBe(true);

  act(() => b.answer(201, stored("b.txt", 3)));
  await waitFor(() => expect(chips(container)[0].dataset.state).toBe("done"));
  fireEvent.click(chips(container)[0].querySelector('[data-role="remove"]')!);
  await waitFor(() => expect(chips(container)).toEqual([]));
  expect(deletes).toEqual(["DELETE /s/link/api/uploads/chat1/files?appId=app1&area=uploads&path=b.txt"]);
});

test("a delete the server refuses keeps the chip and says why", async () => {
  deleteRefusal = "this share link only reads files";
  const { container } = render(<Form sent={[]} />);
  attach(container, file("c.txt"));
  await waitFor(() => expect(FakeXHR.sent.length).toBe(1));
  act(() => FakeXHR.sent[0].answer(201, stored("c.txt", 1)));
  await waitFor(() => expect(chips(container)[0].dataset.state).toBe("done"));
  fireEvent.click(chips(container)[0].querySelector('[data-role="remove"]')!);
  await waitFor(() => expect(container.querySelector('[data-role="upload-status"]')!.textContent).toBe("this share link only reads files"));
  expect(chips(container).length).toBe(1);
});

test("files dropped on the chat are attached; the hint shows while dragging", async () => {
  const { container } = render(<Form sent={[]} />);
  const zone = container.querySelector(".chat-main")!;
  const hint = container.querySelector('[data-role="drop-hint"]') as HTMLElement;
  expect(hint.hidden).toBe(true);
  const dataTransfer = { types: ["Files"], files: [file("d.txt")], dropEffect: "" };
  fireEvent.dragEnter(zone, { dataTransfer });
  expect(hint.hidden).toBe(false);
  fireEvent.drop(zone, { dataTransfer });
  expect(hint.hidden).toBe(true);
  await waitFor(() => expect(FakeXHR.sent.map((x) => x.fileName)).toEqual(["d.txt"]));
});

import { act, cleanup, fireEvent, render, waitFor } from "@testing-library/react";
import { translator } from "../../i18n";
import { FilesPanel } from "./FilesPanel";
import type { Entry } from "./api";

// The engine is faked at the HTTP boundary only: fetch answers the file
// API's requests from a small workspace held here.
const t = translator("en");
type Call = { url: string; body: Record<string, unknown> };
let calls: Call[];
let tree: Record<string, Entry[]>;
let contents: Record<string, string>;
let refuse: Record<string, { status: number; message: string }>;
let hold: ((dir: string) => Promise<void> | undefined) | null;

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });

beforeEach(() => {
  calls = [];
  hold = null;
  refuse = {};
  tree = {
    "/workspace": [
      { name: "notes.md", path: "/workspace/notes.md", type: "file", size: 5 },
      { name: "my page.html", path: "/workspace/my page.html", type: "file", size: 30 },
      { name: "out", path: "/workspace/out", type: "directory", size: 0 },
      { name: "skills", path: "/workspace/skills", type: "directory", size: 0, readOnly: true },
    ],
    "/workspace/out": [{ name: "chart.png", path: "/workspace/out/chart.png", type: "file", size: 900 }],
    "/workspace/skills": [{ name: "SKILL.md", path: "/workspace/skills/SKILL.md", type: "file", size: 7, readOnly: true }],
  };
  contents = { "/workspace/my page.html": "<h1>hi</h1><img src=a.png>", "/workspace/notes.md": "hello", "/workspace/skills/SKILL.md": "# skill" };
  vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
    // The background processes (Processes.test.tsx): none here.
    if (url.endsWith("/api/core/ai/sandbox/processes")) return json(200, { processes: [] });
    // The sandbox's state and use (UsageLine): not running here.
    if (url.endsWith("/api/core/ai/sandbox/status")) return json(200, { exists: false });
    const body = JSON.parse(String(init.body));
    // The preview links (Previews.test.tsx): none listed here; the link
    // to the workspace's files opens with a grant.
    if (url.endsWith("/api/core/ai/sandbox/previews")) {
      if (body.action === "open" && body.files === true) {
        calls.push({ url, body });
        return json(200, { preview: { port: 0, files: true, path: "/preview/sb-0-s3cr3t/", open: "/preview/sb-0-s3cr3t~g1/", shared: false, expired: false } });
      }
      return json(200, { previews: [] });
    }
    calls.push({ url, body });
    if (body.action === "list") {
      const wait = hold?.(body.path);
      if (wait) await wait;
      return json(200, { action: "list", files: tree[body.path] ?? [] });
    }
    if (body.action === "read") {
      if (body.path.endsWith(".png")) return json(415, { message: `${body.path} is a binary file (900 bytes): download it instead` });
      return json(200, { action: "read", content: contents[body.path] });
    }
    if (body.action === "write") {
      const r = refuse[body.path];
      if (r) return json(r.status, { message: r.message });
      contents[body.path] = body.content;
      return json(200, { action: "write", success: true });
    }
    return json(400, { message: "unexpected" });
  });
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

function panel(props: Partial<Parameters<typeof FilesPanel>[0]> = {}) {
  return render(<FilesPanel apiBase="" appId="app1" chatId="chat1" mode="write" csrf="tok" t={t} refresh={0} {...props} />);
}
const names = (c: HTMLElement) => [...c.querySelectorAll('[data-role="file-list"] li a')].map((a) => a.textContent);
const editorOf = (c: HTMLElement) =>
  waitFor(() => {
    const e = c.querySelector("textarea");
    if (!e) throw new Error("no editor yet");
    return e;
  });
const click = (c: HTMLElement, text: string) =>
  fireEvent.click([...c.querySelectorAll('[data-role="file-list"] li a')].find((a) => a.textContent === text)!);

test("lists the workspace and navigates into a folder and back up", async () => {
  const { container } = panel({ apiBase: "/s/abc", userId: "u2" });
  await waitFor(() => expect(names(container)).toEqual(["notes.md", "my page.html", "out/", "skills/"]));
  expect(container.querySelector('[data-role="cwd"]')!.textContent).toBe("/workspace");
  expect(calls[0].url).toBe("/s/abc/api/core/ai/sandbox/file");
  expect(calls[0].body).toMatchObject({ action: "list", appId: "app1", chatId: "chat1", userId: "u2", path: "/workspace" });

  click(container, "out/");
  await waitFor(() => expect(names(container)).toEqual(["..", "chart.png"]));
  expect(container.querySelector('[data-role="cwd"]')!.textContent).toBe("/workspace/out");

  click(container, "..");
  await waitFor(() => expect(names(container)).toEqual(["notes.md", "my page.html", "out/", "skills/"]));
});

test("no editor until a file is opened; opening and saving one", async () => {
  const { container } = panel();
  await waitFor(() => expect(names(container)).toContain("notes.md"));
  expect(container.querySelector("textarea")).toBeNull();
  expect(container.querySelector("#save-file")).toBeNull();

  click(container, "notes.md");
  const editor = await editorOf(container);
  expect(editor.value).toBe("hello");
  expect(editor.readOnly).toBe(false);
  expect(container.querySelector('[data-role="file-status"]')!.textContent).toBe("/workspace/notes.md");
  fireEvent.change(editor, { target: { value: "hello world" } });
  fireEvent.click(container.querySelector("#save-file")!);
  await waitFor(() => expect(container.querySelector('[data-role="file-status"]')!.textContent).toBe("/workspace/notes.md saved"));
  expect(contents["/workspace/notes.md"]).toBe("hello world");
  expect(calls.find((c) => c.body.action === "write")!.body).toMatchObject({ path: "/workspace/notes.md", content: "hello world" });
});

test("a refused save shows the server's reason", async () => {
  refuse["/workspace/notes.md"] = { status: 403, message: "this share link only reads files" };
  const { container } = panel();
  await waitFor(() => expect(names(container)).toContain("notes.md"));
  click(container, "notes.md");
  await editorOf(container);
  fireEvent.click(container.querySelector("#save-file")!);
  const status = container.querySelector('[data-role="file-status"]')!;
  await waitFor(() => expect(status.textContent).toBe("/workspace/notes.md was not saved: this share link only reads files"));
  expect(status.className).toContain("error");
  expect(contents["/workspace/notes.md"]).toBe("hello");
});

test("read-only entries are marked and open without editing", async () => {
  const { container } = panel();
  await waitFor(() => expect(names(container)).toContain("skills/"));
  const skills = container.querySelector('li[data-path="/workspace/skills"]')!;
  expect(skills.querySelector('[data-role="read-only"]')!.textContent).toBe("read-only");
  expect(container.querySelector('li[data-path="/workspace/notes.md"] [data-role="read-only"]')).toBeNull();

  click(container, "skills/");
  await waitFor(() => expect(names(container)).toContain("SKILL.md"));
  click(container, "SKILL.md");
  const editor = await editorOf(container);
  expect(editor.value).toBe("# skill");
  expect(editor.readOnly).toBe(true);
  expect(container.querySelector("#save-file")).toBeNull();
  expect(container.querySelector('[data-role="open-read-only"]')).not.toBeNull();
});

test("read mode opens files without a save button", async () => {
  const { container } = panel({ mode: "read" });
  await waitFor(() => expect(names(container)).toContain("notes.md"));
  expect(container.querySelector("#files-upload")).toBeNull();
  click(container, "notes.md");
  const editor = await editorOf(container);
  expect(editor.readOnly).toBe(true);
  expect(container.querySelector("#save-file")).toBeNull();
});

test("a binary file is offered for download only", async () => {
  const { container } = panel();
  await waitFor(() => expect(names(container)).toContain("out/"));
  click(container, "out/");
  await waitFor(() => expect(names(container)).toContain("chart.png"));
  click(container, "chart.png");
  await waitFor(() => expect(container.querySelector('[data-role="binary"]')).not.toBeNull());
  expect(container.querySelector("textarea")).toBeNull();
  expect(container.querySelector("#save-file")).toBeNull();
  expect(container.querySelector('[data-role="download-open"]')).not.toBeNull();
});

test("an empty workspace says where files will come from", async () => {
  tree["/workspace"] = [];
  const { container } = panel();
  await waitFor(() => expect(container.querySelector('[data-role="files-empty"]')!.textContent).toBe(t("filesEmpty")));
  expect(t("filesEmpty")).toMatch(/no files yet/i);
});

test("a listing overtaken by a later one is dropped", async () => {
  let release!: () => void;
  const slow = new Promise<void>((r) => (release = r));
  const { container, rerender } = panel();
  await waitFor(() => expect(names(container)).toContain("out/"));
  // The page's refresh (of /workspace) is slow; the click into out/ answers first.
  hold = (dir) => (dir === "/workspace" ? slow : undefined);
  rerender(<FilesPanel apiBase="" appId="app1" chatId="chat1" mode="write" csrf="tok" t={t} refresh={1} />);
  await waitFor(() => expect(calls.filter((c) => c.body.action === "list").length).toBe(2));
  click(container, "out/");
  await waitFor(() => expect(names(container)).toEqual(["..", "chart.png"]));
  await act(async () => {
    release();
    await slow;
  });
  expect(names(container)).toEqual(["..", "chart.png"]);
  expect(container.querySelector('[data-role="cwd"]')!.textContent).toBe("/workspace/out");
});

test("a listing the server refuses says why", async () => {
  vi.stubGlobal("fetch", async () => json(503, { message: "the sandbox is not available; try again in a minute" }));
  const { container } = panel();
  await waitFor(() =>
    expect(container.querySelector('[data-role="list-error"]')!.textContent).toBe(
      "The files could not be listed: the sandbox is not available; try again in a minute",
    ),
  );
  expect(container.querySelector('[data-role="files-empty"]')).toBeNull();
});

test("uploading from the panel goes into the uploads and lists them; a refusal stays as a chip", async () => {
  const sent: { url: string; name: string; answer: (status: number, body: unknown) => void }[] = [];
  class XHR {
    status = 0;
    statusText = "";
    responseText = "";
    url = "";
    private on: Record<string, () => void> = {};
    upload = { addEventListener: () => {} };
    addEventListener(k: string, f: () => void) {
      this.on[k] = f;
    }
    open(_m: string, url: string) {
      this.url = url;
    }
    setRequestHeader() {}
    send(body: FormData) {
      sent.push({
        url: this.url,
        name: (body.get("file") as File).name,
        answer: (status, b) => {
          this.status = status;
          this.responseText = JSON.stringify(b);
          this.on.load();
        },
      });
    }
    abort() {}
  }
  vi.stubGlobal("XMLHttpRequest", XHR);
  tree["/workspace/uploads"] = [];
  const { container } = panel();
  await waitFor(() => expect(names(container)).toContain("notes.md"));
  expect(container.querySelector('[data-role="upload-target"]')!.textContent).toBe("Files go to /workspace/uploads");
  fireEvent.change(container.querySelector("#files-upload-input")!, {
    target: { files: [new File(["a"], "a.txt"), new File(["b"], "b.exe")] },
  });
  await waitFor(() => expect(sent.length).toBe(2));
  expect(sent[0].url).toBe("/api/uploads/chat1?appId=app1&dir=%2Fworkspace%2Fuploads");
  tree["/workspace/uploads"] = [{ name: "a.txt", path: "/workspace/uploads/a.txt", type: "file", size: 1 }];
  act(() => {
    sent[0].answer(201, { files: [{ name: "a.txt", path: "a.txt", sandboxPath: "/workspace/uploads/a.txt", size: 1 }] });
    sent[1].answer(415, { message: "executables are not accepted" });
  });
  await waitFor(() => expect(names(container)).toEqual(["..", "a.txt"]));
  expect(container.querySelector('[data-role="cwd"]')!.textContent).toBe("/workspace/uploads");
  const left = [...container.querySelectorAll("#files-uploads .attachment")];
  expect(left.map((c) => c.textContent)).toEqual(["b.exeb.exe was not uploaded: executables are not accepted×"]);
});

test("an HTML file shows rendered in a sandboxed frame through the files link, and its source again", async () => {
  const { container } = panel();
  await waitFor(() => expect(names(container)).toContain("my page.html"));
  // Other files have no rendered view.
  click(container, "notes.md");
  await editorOf(container);
  expect(container.querySelector('[data-role="render-file"]')).toBeNull();
  click(container, "my page.html");
  await waitFor(() => expect(container.querySelector('[data-role="open-path"]')?.textContent).toBe("/workspace/my page.html"));
  fireEvent.click(container.querySelector('[data-role="render-file"]')!);
  const frame = await waitFor(() => {
    const f = container.querySelector<HTMLIFrameElement>('iframe[data-role="rendered"]');
    if (!f) throw new Error("no frame yet");
    return f;
  });
  expect(calls.find((c) => c.body.action === "open")?.body).toMatchObject({ action: "open", files: true, appId: "app1", chatId: "chat1" });
  expect(frame.getAttribute("src")).toBe("/preview/sb-0-s3cr3t~g1/my%20page.html");
  expect(frame.getAttribute("sandbox")).toBe("allow-scripts allow-forms allow-popups allow-modals");
  expect(container.querySelector("textarea")).toBeNull();
  expect(container.querySelector("#save-file")).toBeNull();
  fireEvent.click(container.querySelector('[data-role="render-file"]')!);
  expect((await editorOf(container)).value).toBe("<h1>hi</h1><img src=a.png>");
});

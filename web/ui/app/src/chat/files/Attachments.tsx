import { useCallback, useRef, useState } from "react";
import type { DragEvent, ReactNode } from "react";
import { deleteUpload, humanSize, uploadFile } from "./api";
import type { Uploaded, Where } from "./api";
import "./files.css";

type Translate = (key: string) => string;

// Chip is one file given to the chat: on its way (with its progress),
// stored, or refused with the server's reason.
export interface Chip {
  id: number;
  name: string;
  state: "uploading" | "done" | "error";
  pct: number;
  file?: Uploaded;
  error?: string;
  cancel?: () => void;
}

// ContentPart is one part of a chat message's content.
export type ContentPart = { type: "text"; text: string } | { type: "file_url"; name: string };

let chipIds = 0;
const named = (t: Translate, key: string, name: string) => t(key).replace("{name}", name);

// useUploads keeps a list of chips: upload adds files (into dir, empty
// for the uploads folder), remove takes one back: an upload under way is
// cancelled, a stored one deleted from the chat, a failed one dismissed.
export function useUploads(where: Where, t: Translate, onStored?: () => void) {
  const [chips, setChips] = useState<Chip[]>([]);
  const [status, setStatus] = useState("");
  const patch = (id: number, p: Partial<Chip>) => setChips((cs) => cs.map((c) => (c.id === id ? { ...c, ...p } : c)));

  const upload = useCallback(
    async (files: File[], dir = ""): Promise<Chip[]> => {
      setStatus("");
      const started = files.map((f) => {
        const id = ++chipIds;
        const u = uploadFile(where, f, dir, (pct) => patch(id, { pct }), t("uploadNetwork"));
        return { chip: { id, name: f.name, state: "uploading", pct: 0, cancel: u.cancel } as Chip, done: u.done };
      });
      setChips((cs) => [...cs, ...started.map((s) => s.chip)]);
      const ended = await Promise.all(
        started.map(async ({ chip, done }) => {
          const r = await done;
          if (r.cancelled) return null;
          const c: Chip = r.file
            ? { ...chip, state: "done", file: r.file, name: r.file.name, pct: 100, cancel: undefined }
            : { ...chip, state: "error", error: r.error, cancel: undefined };
          patch(chip.id, c);
          return c;
        }),
      );
      const out = ended.filter((c): c is Chip => c !== null);
      if (out.some((c) => c.state === "done")) onStored?.();
      return out;
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [where.apiBase, where.appId, where.chatId, where.userId, where.csrf, t, onStored],
  );

  const remove = useCallback(
    async (chip: Chip) => {
      if (chip.state === "uploading") chip.cancel?.();
      if (chip.state === "done" && chip.file) {
        try {
          await deleteUpload(where, chip.file.path);
          onStored?.();
        } catch (err) {
          setStatus((err as Error).message);
          return;
        }
      }
      setStatus("");
      setChips((cs) => cs.filter((c) => c.id !== chip.id));
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [where.apiBase, where.appId, where.chatId, where.userId, where.csrf, onStored],
  );

  const drop = useCallback((ids: number[]) => setChips((cs) => cs.filter((c) => !ids.includes(c.id))), []);
  return { chips, setChips, status, setStatus, upload, remove, drop };
}

// UploadChips draws chips: a progress bar while a file goes, then its
// name and size, or the reason it was refused; × takes it back.
export function UploadChips(props: { id?: string; label: string; chips: Chip[]; t: Translate; remove: (c: Chip) => void }) {
  const { t } = props;
  return (
    <ul className="attachments" id={props.id} aria-label={props.label} aria-live="polite">
      {props.chips.map((c) => {
        const removeLabel = c.state === "error" ? t("dismiss") : named(t, "removeFile", c.name);
        return (
          <li
            key={c.id}
            className="attachment"
            data-state={c.state}
            data-name={c.name}
            data-path={c.file?.path}
            data-sandbox-path={c.file?.sandboxPath}
            data-size={c.file?.size}
            title={c.file?.sandboxPath}
          >
            <span className="attachment-name" data-role="name">
              {c.name}
            </span>
            {c.state === "uploading" && <progress max={100} value={c.pct} aria-label={named(t, "uploading", c.name)} />}
            {c.state === "done" && c.file && (
              <span className="attachment-size" data-role="size">
                {humanSize(c.file.size)}
              </span>
            )}
            {c.state === "error" && (
              <span className="attachment-error" data-role="error">
                {t("uploadFailed").replace("{name}", c.name).replace("{reason}", c.error ?? "")}
              </span>
            )}
            <button type="button" className="chip-remove" data-role="remove" aria-label={removeLabel} title={removeLabel} onClick={() => props.remove(c)}>
              ×
            </button>
          </li>
        );
      })}
    </ul>
  );
}

// useAttachments is the chat form's side of uploads: the files attached
// to the next message. take() gives the message's content for a question
// (text, then a file_url part per stored file, as the engine expects),
// or a reason when uploads are still under way; restore() gives the
// files back when the engine refused the message.
export function useAttachments(where: Where, t: Translate, onStored?: () => void) {
  const u = useUploads(where, t, onStored);
  const take = (question: string): { content?: string | ContentPart[]; files: Uploaded[]; wait?: string } => {
    if (u.chips.some((c) => c.state === "uploading")) {
      u.setStatus(t("waitUploads"));
      return { files: [], wait: t("waitUploads") };
    }
    const files = u.chips.filter((c) => c.state === "done" && c.file).map((c) => c.file!);
    if (!question && !files.length) return { files };
    u.setChips([]);
    u.setStatus("");
    if (!files.length) return { content: question, files };
    const parts: ContentPart[] = question ? [{ type: "text", text: question }] : [];
    return { content: parts.concat(files.map((f) => ({ type: "file_url", name: f.path }))), files };
  };
  const restore = (files: Uploaded[]) =>
    u.setChips((cs) => [...cs, ...files.map((f) => ({ id: ++chipIds, name: f.name, state: "done" as const, pct: 100, file: f }))]);
  return { ...u, attach: (files: File[]) => u.upload(files, ""), take, restore };
}

export type AttachmentsState = ReturnType<typeof useAttachments>;

// Attachments is the chips above the chat input and their status line.
export function Attachments(props: { state: AttachmentsState; t: Translate }) {
  const { state, t } = props;
  return (
    <>
      <UploadChips id="attachments" label={t("attachedFiles")} chips={state.chips} t={t} remove={state.remove} />
      <p className="status error" data-role="upload-status" role="status">
        {state.status}
      </p>
    </>
  );
}

// AttachButton is the form's "Attach files" button and its file input.
export function AttachButton(props: { state: AttachmentsState; t: Translate }) {
  const { state, t } = props;
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <input
        type="file"
        id="attach-input"
        multiple
        hidden
        ref={input}
        onChange={(e) => {
          const files = [...(e.currentTarget.files ?? [])];
          e.currentTarget.value = "";
          if (files.length) state.attach(files);
        }}
      />
      <button type="button" className="secondary attach" id="attach" title={t("attachHint")} aria-describedby="attach-hint" onClick={() => input.current?.click()}>
        {t("attach")}
      </button>
      <span id="attach-hint" className="visually-hidden">
        {t("attachHint")}
      </span>
    </>
  );
}

const carriesFiles = (e: DragEvent) => !!e.dataTransfer && [...e.dataTransfer.types].includes("Files");

// DropZone wraps the chat: files dropped anywhere on it are attached,
// with a hint shown while they are dragged over.
export function DropZone(props: { state: AttachmentsState; t: Translate; className?: string; children: ReactNode }) {
  const [depth, setDepth] = useState(0); // dragenter and dragleave come for every child crossed
  const dropping = depth > 0;
  return (
    <section
      className={(props.className ?? "") + (dropping ? " dropping" : "")}
      onDragEnter={(e) => {
        if (carriesFiles(e)) {
          e.preventDefault();
          setDepth((d) => d + 1);
        }
      }}
      onDragOver={(e) => {
        if (carriesFiles(e)) {
          e.preventDefault();
          e.dataTransfer.dropEffect = "copy";
        }
      }}
      onDragLeave={() => setDepth((d) => Math.max(0, d - 1))}
      onDrop={(e) => {
        if (!carriesFiles(e)) return;
        e.preventDefault();
        setDepth(0);
        props.state.attach([...e.dataTransfer.files]);
      }}
    >
      {props.children}
      <div className="drop-hint" data-role="drop-hint" aria-hidden="true" hidden={!dropping}>
        {props.t("dropFiles")}
      </div>
    </section>
  );
}

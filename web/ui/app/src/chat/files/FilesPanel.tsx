import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { FileError, download, filesPort, isHTML, listFiles, openPreview, parentOf, readFile, renderedURL, uploadDirFor, workspaceRoot, writeFile } from "./api";
import type { Entry, Where } from "./api";
import { UploadChips, useUploads } from "./Attachments";
import { Previews } from "./Previews";
import { Processes } from "./Processes";
import { UsageLine } from "./UsageLine";
import "./files.css";

export interface FilesPanelProps {
  // "" for signed-in users, the share link's path for its visitors
  apiBase: string;
  appId: string;
  chatId: string;
  // the chat's owner, when an admin reads another user's chat
  userId?: string;
  mode: "read" | "write";
  csrf: string;
  t: (key: string) => string;
  // the page bumps it when a run ends, so the agent's files show
  refresh: number;
  onClose?: () => void;
}

// Open is the file in the editor; binary files and read-only entries
// are shown but never edited.
interface Open {
  path: string;
  content: string;
  readOnly: boolean;
  binary?: string;
  dirty: boolean;
}

type Status = { text: string; ok: boolean } | null;

// FilesPanel is the chat's workspace (F1, F2, K2): the tree, one folder
// at a time; the file opened, in an editor that saves it in write mode;
// downloads of a file or a folder as a ZIP; uploads into the uploads.
export function FilesPanel(props: FilesPanelProps) {
  const { t, mode } = props;
  const where: Where = useMemo(
    () => ({ apiBase: props.apiBase, appId: props.appId, chatId: props.chatId, userId: props.userId, csrf: props.csrf }),
    [props.apiBase, props.appId, props.chatId, props.userId, props.csrf],
  );
  const [cwd, setCwd] = useState(workspaceRoot);
  const [entries, setEntries] = useState<Entry[] | null>(null);
  const [listError, setListError] = useState("");
  const [open, setOpen] = useState<Open | null>(null);
  const [status, setStatus] = useState<Status>(null);
  const [saving, setSaving] = useState(false);
  // rendered is where the open HTML file shows rendered, when it does
  const [rendered, setRendered] = useState<string | null>(null);
  // shown counts listings, so that an answer overtaken by a later
  // listing (a click while the chat refreshes) is dropped
  const shown = useRef(0);

  const list = useCallback(
    async (dir: string) => {
      const seq = ++shown.current;
      setCwd(dir);
      try {
        const files = await listFiles(where, dir);
        if (seq !== shown.current) return;
        setEntries(files);
        setListError("");
      } catch (err) {
        if (seq !== shown.current) return;
        setEntries([]);
        setListError((err as Error).message);
      }
    },
    [where],
  );
  const cwdRef = useRef(cwd);
  cwdRef.current = cwd;
  const relist = useCallback(() => list(cwdRef.current), [list]);
  useEffect(() => {
    relist();
  }, [relist, props.refresh]);

  const uploads = useUploads(where, t);

  // opened counts reads the same way: the file clicked last wins
  const opened = useRef(0);
  const openFile = async (e: Entry) => {
    const seq = ++opened.current;
    setStatus(null);
    setRendered(null);
    const readOnly = mode === "read" || !!e.readOnly;
    try {
      const content = await readFile(where, e.path);
      if (seq !== opened.current) return;
      setOpen({ path: e.path, content, readOnly, dirty: false });
      setStatus({ text: e.path, ok: true });
    } catch (err) {
      if (seq !== opened.current) return;
      if (err instanceof FileError && err.status === 415) {
        setOpen({ path: e.path, content: "", readOnly: true, binary: err.message, dirty: false });
        return;
      }
      setStatus({ text: (err as Error).message, ok: false });
    }
  };

  const save = async () => {
    if (!open || open.readOnly) return;
    setSaving(true);
    try {
      await writeFile(where, open.path, open.content);
      setOpen({ ...open, dirty: false });
      setStatus({ text: t("filesSavedAs").replace("{path}", open.path), ok: true });
      relist();
    } catch (err) {
      setStatus({ text: t("filesNotSaved").replace("{path}", open.path).replace("{reason}", (err as Error).message), ok: false });
    } finally {
      setSaving(false);
    }
  };

  // render shows the open HTML file as a page, through the link to the
  // workspace's files (its relative links lead to the workspace's files).
  const render = async () => {
    if (!open) return;
    const seq = opened.current;
    try {
      const p = await openPreview(where, filesPort);
      if (seq === opened.current) setRendered(renderedURL(p, open.path));
    } catch (err) {
      setStatus({ text: (err as Error).message, ok: false });
    }
  };

  const fetchDown = async (path: string, name: string, dir: boolean) => {
    try {
      await download(where, path, name, dir);
    } catch (err) {
      setStatus({ text: t("filesNotDownloaded").replace("{path}", path).replace("{reason}", (err as Error).message), ok: false });
    }
  };

  const uploadInput = useRef<HTMLInputElement>(null);
  const uploadHere = async (files: File[]) => {
    const dir = uploadDirFor(cwd);
    const ended = await uploads.upload(files, dir);
    uploads.drop(ended.filter((c) => c.state === "done").map((c) => c.id));
    await list(dir);
  };

  const cwdName = cwd.split("/").pop() || "workspace";
  return (
    <aside className="card files-panel" id="files" data-app={props.appId} data-chat={props.chatId} data-user={props.userId} data-mode={mode}>
      <div className="files-head">
        <h3>{t("files")}</h3>
        {props.onClose && (
          <button type="button" className="secondary files-close" data-role="close-files" aria-label={t("close")} title={t("close")} onClick={props.onClose}>
            ×
          </button>
        )}
      </div>
      <div className="files-cwd">
        <code data-role="cwd">{cwd}</code>
        <button type="button" className="secondary" data-role="download-zip" onClick={() => fetchDown(cwd, cwdName, true)}>
          {t("downloadZip")}
        </button>
      </div>
      <ul data-role="file-list" className="file-list" aria-busy={entries === null}>
        {cwd !== workspaceRoot && (
          <li className="directory up">
            <a
              href="#"
              data-role="up"
              aria-label={t("filesUp")}
              onClick={(e) => {
                e.preventDefault();
                list(parentOf(cwd));
              }}
            >
              ..
            </a>
          </li>
        )}
        {entries?.map((f) => (
          <li key={f.path} className={f.type + (open?.path === f.path ? " open" : "")} data-path={f.path} data-readonly={f.readOnly ? "true" : undefined}>
            <a
              href="#"
              onClick={(e) => {
                e.preventDefault();
                if (f.type === "directory") list(f.path);
                else openFile(f);
              }}
            >
              {f.name + (f.type === "directory" ? "/" : "")}
            </a>
            {f.readOnly && (
              <span className="badge read-only" data-role="read-only" title={t("filesReadOnlyHint")}>
                {t("filesReadOnly")}
              </span>
            )}
            <button
              type="button"
              className="download"
              data-role="download"
              title={t("download") + " " + f.name}
              aria-label={t("download") + " " + f.name}
              onClick={() => fetchDown(f.path, f.name, f.type === "directory")}
            >
              ⤓
            </button>
          </li>
        ))}
      </ul>
      {entries !== null && entries.length === 0 && !listError && cwd === workspaceRoot && (
        <p className="hint" data-role="files-empty">
          {t("filesEmpty")}
        </p>
      )}
      {entries !== null && entries.length === 0 && !listError && cwd !== workspaceRoot && (
        <p className="hint" data-role="files-empty">
          {t("filesEmptyFolder")}
        </p>
      )}
      {listError && (
        <p className="status error" data-role="list-error" role="alert">
          {t("filesNotListed").replace("{reason}", listError)}
        </p>
      )}
      {mode === "write" && (
        <>
          <div className="files-upload">
            <input
              type="file"
              id="files-upload-input"
              multiple
              hidden
              ref={uploadInput}
              onChange={(e) => {
                const files = [...(e.currentTarget.files ?? [])];
                e.currentTarget.value = "";
                if (files.length) uploadHere(files);
              }}
            />
            <button type="button" className="secondary" id="files-upload" aria-describedby="files-upload-target" onClick={() => uploadInput.current?.click()}>
              {t("uploadHere")}
            </button>
            <span className="hint" id="files-upload-target" data-role="upload-target">
              {t("uploadTo").replace("{dir}", uploadDirFor(cwd))}
            </span>
          </div>
          <UploadChips id="files-uploads" label={t("uploadHere")} chips={uploads.chips} t={t} remove={uploads.remove} />
        </>
      )}
      <UsageLine where={where} t={t} />
      <Processes where={where} mode={mode} refresh={props.refresh} t={t} />
      <Previews where={where} mode={mode} refresh={props.refresh} t={t} />
      <div className={"status" + (status && !status.ok ? " error" : "")} data-role="file-status" role="status">
        {status?.text ?? uploads.status}
      </div>
      {open && (
        <div className="file-open" data-role="file-open" data-path={open.path}>
          <div className="file-open-head">
            <code data-role="open-path">{open.path}</code>
            {open.readOnly && !open.binary && (
              <span className="badge read-only" data-role="open-read-only">
                {t("filesReadOnly")}
              </span>
            )}
            {open.dirty && <span className="hint">{t("filesUnsaved")}</span>}
            {isHTML(open.path) && !open.binary && (
              <button type="button" className="secondary" data-role="render-file" onClick={() => (rendered ? setRendered(null) : render())}>
                {rendered ? t("filesSource") : t("filesRendered")}
              </button>
            )}
            <button type="button" className="secondary" data-role="close-file" onClick={() => setOpen(null)}>
              {t("filesCloseFile")}
            </button>
          </div>
          {rendered ? (
            <div className="file-rendered">
              <iframe
                src={rendered}
                title={open.path}
                sandbox="allow-scripts allow-forms allow-popups allow-modals"
                data-role="rendered"
                onLoad={(e) => (e.currentTarget.dataset.loaded = "true")}
              />
              <p className="hint">
                {t("filesRenderedNote")}{" "}
                <a href={rendered} target="_blank" rel="noopener noreferrer" data-role="rendered-tab">
                  {t("filesRenderedTab")}
                </a>
              </p>
            </div>
          ) : open.binary ? (
            <p className="hint" data-role="binary">
              {t("filesBinary")}{" "}
              <button type="button" className="secondary" data-role="download-open" onClick={() => fetchDown(open.path, open.path.split("/").pop() ?? "", false)}>
                {t("download")}
              </button>
            </p>
          ) : (
            <textarea
              spellCheck={false}
              aria-label={open.path}
              readOnly={open.readOnly}
              value={open.content}
              onChange={(e) => setOpen({ ...open, content: e.target.value, dirty: true })}
            />
          )}
          {!open.readOnly && !rendered && (
            <p>
              <button type="button" id="save-file" className="secondary" disabled={saving} onClick={save}>
                {t("saveFile")}
              </button>
            </p>
          )}
        </div>
      )}
    </aside>
  );
}

import { lazy, Suspense, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import type { Translate } from "../i18n";
import { apply, emptyRun, type NodeRun, type Run } from "../sse";
import { chatAPI } from "./api";
import { Composer } from "./Composer";
import { FilesPanel } from "./files/FilesPanel";
// The terminal (xterm.js) loads when it is first opened.
const TerminalPane = lazy(() => import("./terminal/TerminalPane").then((m) => ({ default: m.TerminalPane })));
import { AttachButton, Attachments, DropZone, useAttachments } from "./files/Attachments";
import { ChatList } from "./ChatList";
import { RunDetails } from "./RunDetails";
import { UserMessage, attachedLine } from "./UserMessage";
import { ChatVariables, useVariables, type Variable } from "./Variables";
import { Markdown } from "./Markdown";
import { startRun, type ChatRun, type RunRequest } from "./run";
import { CardList } from "./cards/CardList";
import { historyCards, type HistoryItem } from "./cards/history";
import { applyCard, noCards, type Cards } from "./cards/model";
import "./chat.css";

// PageData is what the engine hands the chat page in its
// <script type="application/json" id="page-data"> block.
export interface PageData {
  appId: string;
  chatId: string;
  /** "" on the signed-in page, the link's path on a share link */
  apiBase: string;
  own: boolean;
  /** the chat's owner, when a builder reads another user's chat */
  userId?: string;
  /** the files panel: absent when the page has none */
  files?: "read" | "write";
  /** the history: each answer with its tool calls (toolcall.Call's JSON) and questions (pageQuestion's) */
  items?: PageItem[];
  appName?: string;
  title?: string;
  /** a share link's visitor */
  visitor?: boolean;
  canDelete?: boolean;
  /** the nodes' responses are shown: for those who build the app */
  runDetails?: boolean;
  /** the graph's global variables, asked above the chat */
  variables?: Variable[];
  /** the seq of the first item held, when the chat has earlier ones */
  earlier?: number;
  /** the terminal into the chat's sandbox is offered (L1) */
  terminal?: boolean;
  /** regenerate and edit are offered: the chat's sandbox has checkpoints (R2) */
  rewind?: boolean;
  /** branch is offered (R3) */
  fork?: boolean;
  /** a rewind set turns aside, which redo brings back */
  redo?: boolean;
}

// The last deferAbove items of the history render their answers at once;
// those above them, out of view when the page opens at its end, when the
// browser is idle (Markdown).
const deferAbove = 8;

type PageItem = HistoryItem & { dataId?: string; responses?: NodeRun[] };

interface Turn {
  question: string;
  run: Run;
  cards: Cards;
}

// ChatPage is the chat: its turns, answers rendered as Markdown, and the
// composer whose Stop ends a run (E1, E3).
export function ChatPage({ data, csrf, t }: { data: PageData; csrf: string; t: Translate }) {
  const [turns, setTurns] = useState<Turn[]>([]);
  const [running, setRunning] = useState(false);
  const [error, setError] = useState("");
  const [refresh, setRefresh] = useState(0);
  const [filesOpen, setFilesOpen] = useState(false);
  const [termOpen, setTermOpen] = useState(false);
  const [listOpen, setListOpen] = useState(false);
  const [title, setTitle] = useState(data.title || data.chatId);
  const [runs, setRuns] = useState(0);
  const current = useRef<ChatRun | null>(null);
  const api = useMemo(() => chatAPI(data.apiBase, csrf), [data.apiBase, csrf]);
  const vars = useVariables(data.own ? (data.variables ?? []) : [], data.chatId);
  const where = useMemo(
    () => ({ apiBase: data.apiBase, appId: data.appId, chatId: data.chatId, userId: data.userId, csrf }),
    [data.apiBase, data.appId, data.chatId, data.userId, csrf],
  );
  const stored = useCallback(() => setRefresh((n) => n + 1), []);
  const attachments = useAttachments(where, t, stored);
  const uploads = data.own && data.files === "write";
  const closeList = useCallback(() => setListOpen(false), []);

  // runTurn runs one chat request (a message, or the answer to an
  // approval or a question) as a new turn whose message is said. It
  // resolves false when the run failed; an answer's failed turn is taken
  // back, so its card can be answered again.
  const runTurn = (said: string, request: Partial<RunRequest>, answer = false): Promise<boolean> => {
    setError("");
    setTurns((ts) => [...ts, { question: said, run: emptyRun(), cards: noCards() }]);
    setRunning(true);
    const run = startRun(data.apiBase, csrf, api, { appId: data.appId, chatId: data.chatId, ...(data.variables?.length && data.own ? { variables: vars.values() } : {}), ...request }, (ev) =>
      setTurns((ts) => ts.map((turn, i) => (i === ts.length - 1 ? { ...turn, run: apply(turn.run, ev), cards: applyCard(turn.cards, ev) } : turn))),
    );
    current.current = run;
    return run.done
      .then(
        () => true,
        (e: Error) => {
          setError(e.message);
          if (answer) setTurns((ts) => ts.slice(0, -1));
          return false;
        },
      )
      .finally(() => {
        current.current = null;
        setRunning(false);
        setRefresh((n) => n + 1);
        setRuns((n) => n + 1);
        // The stored turns carry the ids a rewind or a branch names.
        if (data.rewind) void reload();
      });
  };
  // send sends a question with the files attached to it as the
  // message's content parts; the engine's refusal gives the files back.
  const send = (question: string): boolean => {
    const taken = attachments.take(question);
    if (taken.wait || taken.content === undefined) return false;
    const said = taken.files.length ? (question ? question + "\n\n" : "") + attachedLine(taken.files) : question;
    void runTurn(said, { messages: [{ role: "user", content: taken.content }] }).then((ok) => {
      if (!ok && taken.files.length) attachments.restore(taken.files);
    });
    return true;
  };
  const deleteChat = async () => {
    if (!confirm(t("deleteChatConfirm"))) return;
    try {
      await api.deleteChats(data.appId, [data.chatId], data.userId);
      location.assign(`/apps/${encodeURIComponent(data.appId)}/chats`);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const sendAnswer = data.own ? (said: string, request: Record<string, unknown>) => runTurn(said, request, true) : undefined;

  // The page holds the chat's last turns; "earlier messages" fetches
  // the turns before them, a window at a time.
  const [older, setOlder] = useState<PageItem[]>([]);
  const [latest, setLatest] = useState<PageItem[]>(data.items ?? []);
  const [earlier, setEarlier] = useState(data.earlier ?? 0);
  const [fetching, setFetching] = useState(false);
  const history = useMemo(() => [...older, ...latest], [older, latest]);
  const storedCards = useMemo(() => historyCards(history), [history]);
  const loadEarlier = async () => {
    setFetching(true);
    try {
      const got = await api.earlier<PageItem>(location.pathname, earlier, data.userId);
      setOlder((o) => [...(got.items ?? []), ...o]);
      setEarlier(got.earlier ?? 0);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setFetching(false);
    }
  };
  // reload reads the chat's latest turns as stored, in place of the
  // live ones (R2: after a run, a rewind or a redo).
  const [redo, setRedo] = useState(!!data.redo);
  const reload = async () => {
    const got = await api.earlier<PageItem>(location.pathname, 2 ** 30, data.userId);
    setOlder([]);
    setLatest(got.items ?? []);
    setEarlier(got.earlier ?? 0);
    setRedo(!!got.redo);
    setTurns([]);
  };
  // again takes the chat back to before the turn holding item dataId,
  // its sandbox too, then sends question in its place (regenerate, edit).
  // One rewind, redo or branch at a time: the actions wait for it.
  const [moving, setMoving] = useState(false);
  const move = async (step: () => Promise<void>): Promise<boolean> => {
    setError("");
    setMoving(true);
    try {
      await step();
      return true;
    } catch (e) {
      setError((e as Error).message);
      return false;
    } finally {
      setMoving(false);
    }
  };
  // After a rewind or a redo, the files panel lists the chat's files as
  // they were restored.
  const again = async (dataId: string, question: string) => {
    const ok = await move(async () => {
      await api.rewind(data.appId, data.chatId, dataId);
      await reload();
      stored();
    });
    if (ok) void runTurn(question, { messages: [{ role: "user", content: question }] });
  };
  const redoNow = () =>
    move(async () => {
      await api.redo(data.appId, data.chatId);
      await reload();
      stored();
    });
  const branch = (dataId: string) =>
    move(async () => {
      // The branch's title, in the reader's language, marked once.
      const mark = t("branchSuffix");
      const forked = await api.fork(data.appId, data.chatId, dataId, title.endsWith(mark) ? title : title + mark);
      location.assign(`/apps/${encodeURIComponent(data.appId)}/chat/${encodeURIComponent(forked.chatId)}`);
    });
  const rewinds = !!data.rewind && data.own && !running && !moving;
  const lastAnswer = history.map((item) => item.role).lastIndexOf("assistant");
  // The page opens at its end, the newest turn in view; while a run
  // writes, the page follows it as long as the reader stays at the end.
  const following = useRef(true);
  useLayoutEffect(() => {
    if (history.length) window.scrollTo(0, document.documentElement.scrollHeight);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  useEffect(() => {
    const onScroll = () => {
      const doc = document.documentElement;
      following.current = doc.scrollHeight - doc.clientHeight - window.scrollY < 80;
    };
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => window.removeEventListener("scroll", onScroll);
  }, []);
  useEffect(() => {
    if (turns.length && following.current) window.scrollTo(0, document.documentElement.scrollHeight);
  }, [turns]);
  return (
    <div className={filesOpen ? "chat-layout files-open" : "chat-layout"}>
      <ChatList api={api} appId={data.appId} chatId={data.chatId} base={data.apiBase} visitor={!!data.visitor} t={t} open={listOpen} onClose={closeList} runs={runs} onTitle={setTitle} />
      <DropZone state={attachments} t={t} className="chat-page">
        <header className="chat-head">
          <button type="button" className="secondary chat-list-toggle" aria-controls="chat-list" aria-expanded={listOpen} onClick={() => setListOpen((o) => !o)}>
            {t("chats")}
          </button>
          <a className="chat-home" href={data.visitor ? data.apiBase || "/" : "/"} title={t("apps")}>
            {data.appName || t("apps")}
          </a>
          <h1 className="chat-title">{title}</h1>
          <div className="chat-actions">
          {data.canDelete && !data.visitor && (
            <button type="button" className="secondary" id="delete-chat" onClick={() => void deleteChat()}>
              {t("deleteChat")}
            </button>
          )}
          {data.terminal && (
            <button type="button" className="secondary terminal-toggle" aria-expanded={termOpen} aria-controls="terminal" onClick={() => setTermOpen((o) => !o)}>
              {t("terminal")}
            </button>
          )}
          {data.files && (
            <button type="button" className="secondary files-toggle" aria-expanded={filesOpen} onClick={() => setFilesOpen((o) => !o)}>
              {t("files")}
            </button>
          )}
          </div>
        </header>
        {termOpen && (
          <Suspense fallback={<p className="hint">{t("terminal")}…</p>}>
            <TerminalPane apiBase={data.apiBase} appId={data.appId} chatId={data.chatId} userId={data.userId} t={t} onClose={() => setTermOpen(false)} />
          </Suspense>
        )}
        {data.own && !!data.variables?.length && <ChatVariables vars={data.variables} typed={vars.typed} set={vars.set} t={t} />}
        <div id="messages" className="messages">
          {history.length === 0 && turns.length === 0 && (
            <div className="chat-empty">
              <p className="chat-empty-title">{t("chatEmptyTitle")}</p>
              <p className="hint">{t(uploads ? "chatEmptyHintFiles" : "chatEmptyHint")}</p>
            </div>
          )}
          {earlier > 0 && (
            <button type="button" className="secondary earlier" data-role="earlier" disabled={fetching} onClick={() => void loadEarlier()}>
              {t("earlierMessages")}
            </button>
          )}
          {history.map((item, i) =>
            item.role === "user" ? (
              <UserMessage
                key={item.dataId ?? i}
                text={item.text}
                t={t}
                onEdit={rewinds && item.dataId && turns.length === 0 ? (text) => void again(item.dataId!, text) : undefined}
              />
            ) : (
              <div key={item.dataId ?? i} className="msg assistant">
                <CardList cards={storedCards[i]} t={t} send={sendAnswer} current={turns.length === 0 && i === lastAnswer} busy={running}>
                  <Markdown className="text" text={item.text} defer={i < history.length - deferAbove} />
                </CardList>
                {data.runDetails && Array.isArray(item.responses) && <RunDetails responses={item.responses} t={t} />}
                {rewinds && item.dataId && turns.length === 0 && (
                  <div className="msg-actions">
                    {i === lastAnswer && i > 0 && history[i - 1].role === "user" && (
                      <button type="button" className="link" data-role="regenerate" title={t("regenerateTitle")} onClick={() => void again(item.dataId!, history[i - 1].text)}>
                        {t("regenerate")}
                      </button>
                    )}
                    {data.fork && (
                      <button type="button" className="link" data-role="branch" title={t("branchTitle")} onClick={() => void branch(item.dataId!)}>
                        {t("branch")}
                      </button>
                    )}
                  </div>
                )}
              </div>
            ),
          )}
          {turns.map((turn, i) => (
            <div key={"t" + i}>
              <UserMessage text={turn.question} t={t} />
              <div className="msg assistant">
                <CardList cards={turn.cards} t={t} send={sendAnswer} current={i === turns.length - 1} busy={running}>
                  <Markdown className="text" text={turn.run.answer} />
                </CardList>
                {data.runDetails && <RunDetails responses={turn.run.details} t={t} />}
                {turn.run.errors.map((e, j) => (
                  <div key={j} className="error">{e}</div>
                ))}
              </div>
            </div>
          ))}
          {error && <div className="error" role="alert">{error}</div>}
        </div>
        {redo && data.rewind && data.own && turns.length === 0 && (
          <div className="redo-bar" role="status">
            <span className="hint">{t("redoNotice")}</span>
            <button type="button" className="secondary" data-role="redo" disabled={running || moving} onClick={() => void redoNow()}>
              {t("redo")}
            </button>
          </div>
        )}
        {data.own ? (
          <Composer
            t={t}
            running={running}
            onSend={send}
            onStop={() => void current.current?.stop().catch((e: Error) => setError(e.message))}
            above={uploads ? <Attachments state={attachments} t={t} /> : undefined}
            before={uploads ? <AttachButton state={attachments} t={t} /> : undefined}
            files={uploads ? attachments.chips.some((c) => c.state === "done") : false}
          />
        ) : (
          <p className="hint" data-role="not-own">{t("otherUsersChat")}</p>
        )}
      </DropZone>
      {data.files && (
        <aside className="chat-files">
          <FilesPanel
            apiBase={data.apiBase}
            appId={data.appId}
            chatId={data.chatId}
            userId={data.userId}
            mode={data.files}
            csrf={csrf}
            t={t}
            refresh={refresh}
            onClose={() => setFilesOpen(false)}
          />
        </aside>
      )}
    </div>
  );
}

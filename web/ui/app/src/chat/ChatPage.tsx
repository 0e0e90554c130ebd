import { useRef, useState } from "react";
import type { Translate } from "../i18n";
import { apply, emptyRun, type Run } from "../sse";
import { chatAPI } from "./api";
import { Composer } from "./Composer";
import { FilesPanel } from "./files/FilesPanel";
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
  items?: HistoryItem[];
}

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
  const current = useRef<ChatRun | null>(null);
  const api = chatAPI(data.apiBase, csrf);

  // runTurn runs one chat request (a message, or the answer to an
  // approval or a question) as a new turn whose message is said. It
  // resolves false when the run failed; an answer's failed turn is taken
  // back, so its card can be answered again.
  const runTurn = (said: string, request: Partial<RunRequest>, answer = false): Promise<boolean> => {
    setError("");
    setTurns((ts) => [...ts, { question: said, run: emptyRun(), cards: noCards() }]);
    setRunning(true);
    const run = startRun(data.apiBase, csrf, api, { appId: data.appId, chatId: data.chatId, ...request }, (ev) =>
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
      });
  };
  const send = (question: string) => void runTurn(question, { messages: [{ role: "user", content: question }] });
  const sendAnswer = data.own ? (said: string, request: Record<string, unknown>) => runTurn(said, request, true) : undefined;

  const history = data.items ?? [];
  const [stored] = useState(() => historyCards(history));
  const lastAnswer = history.map((item) => item.role).lastIndexOf("assistant");
  return (
    <div className={filesOpen ? "chat-layout files-open" : "chat-layout"}>
      <main className="chat-page">
        {data.files && (
          <button type="button" className="secondary files-toggle" aria-expanded={filesOpen} onClick={() => setFilesOpen((o) => !o)}>
            {t("files")}
          </button>
        )}
        <div id="messages" className="messages">
          {history.length === 0 && turns.length === 0 && <p className="hint chat-empty">{t("askPlaceholder")}</p>}
          {history.map((item, i) =>
            item.role === "user" ? (
              <div key={i} className="msg user">{item.text}</div>
            ) : (
              <div key={i} className="msg assistant">
                <CardList cards={stored[i]} t={t} send={sendAnswer} current={turns.length === 0 && i === lastAnswer} busy={running}>
                  <Markdown className="text" text={item.text} />
                </CardList>
              </div>
            ),
          )}
          {turns.map((turn, i) => (
            <div key={"t" + i}>
              <div className="msg user">{turn.question}</div>
              <div className="msg assistant">
                <CardList cards={turn.cards} t={t} send={sendAnswer} current={i === turns.length - 1} busy={running}>
                  <Markdown className="text" text={turn.run.answer} />
                </CardList>
                {turn.run.errors.map((e, j) => (
                  <div key={j} className="error">{e}</div>
                ))}
              </div>
            </div>
          ))}
          {error && <div className="error" role="alert">{error}</div>}
        </div>
        {data.own ? (
          <Composer t={t} running={running} onSend={send} onStop={() => void current.current?.stop().catch((e: Error) => setError(e.message))} />
        ) : (
          <p className="hint" data-role="not-own">{t("otherUsersChat")}</p>
        )}
      </main>
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

import { useEffect, useRef, useState } from "react";
import type { Translate } from "../i18n";
import type { ChatAPI, ChatSummary } from "./api";

export interface ChatListProps {
  api: ChatAPI;
  appId: string;
  chatId: string;
  /** "" for signed-in users, the share link's path for its visitors */
  base: string;
  visitor: boolean;
  t: Translate;
  /** on phones: the drawer is open */
  open: boolean;
  onClose: () => void;
  /** bumped by the page when a run ends: the list is read again */
  runs?: number;
  /** the current chat's title as the list has it (a new chat gets one with its first question) */
  onTitle?: (title: string) => void;
}

const chatHref = (appId: string, chatId: string) => `/apps/${encodeURIComponent(appId)}/chat/${encodeURIComponent(chatId)}`;

// ChatList is the caller's chats of the app, newest first, the current
// one marked, with "New chat" and renaming in place (E2). A sidebar on
// wide screens, a drawer on phones, which closes on a choice, on its
// overlay or on Esc. A share link's visitors have no list API: they get
// the link's own pages, their chats and a new chat.
export function ChatList(props: ChatListProps) {
  const { api, appId, chatId, t, open, onClose } = props;
  const [chats, setChats] = useState<ChatSummary[]>([]);
  const [error, setError] = useState("");
  const [editing, setEditing] = useState("");
  const [draft, setDraft] = useState("");
  // the chat being renamed: Enter and the input's blur both end it, once
  const renaming = useRef("");

  useEffect(() => {
    if (props.visitor) return;
    let live = true;
    api.listChats(appId).then(
      (cs) => {
        if (!live) return;
        setChats([...cs].sort((a, b) => (b.updatedAt || "").localeCompare(a.updatedAt || "")));
        const current = cs.find((c) => c.chatId === chatId);
        if (current?.title) props.onTitle?.(current.title);
      },
      (e: Error) => live && setError(t("chatListFailed").replace("{reason}", e.message)),
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [appId, props.visitor, props.runs]);

  useEffect(() => {
    if (!open) return;
    const esc = (e: KeyboardEvent) => e.key === "Escape" && onClose();
    document.addEventListener("keydown", esc);
    return () => document.removeEventListener("keydown", esc);
  }, [open, onClose]);

  const rename = async (c: ChatSummary) => {
    if (renaming.current !== c.chatId) return;
    renaming.current = "";
    const title = draft.trim();
    setEditing("");
    if (!title || title === c.title) return;
    try {
      const r = await api.renameChat(appId, c.chatId, title);
      setChats((cs) => cs.map((x) => (x.chatId === c.chatId ? { ...x, title: r.title } : x)));
      setError("");
    } catch (e) {
      setError(t("chatRenameFailed").replace("{reason}", (e as Error).message));
    }
  };

  const newChat = props.visitor ? props.base + "/chat/new" : `/apps/${encodeURIComponent(appId)}/chat/new`;
  return (
    <>
      {open && <div className="chat-list-overlay" data-role="chat-list-overlay" onClick={onClose} />}
      <nav id="chat-list" className={open ? "chat-list open" : "chat-list"} aria-label={t("chats")}>
        <a className="button" id="new-chat" href={newChat} onClick={onClose}>
          {t("newChat")}
        </a>
        {props.visitor ? (
          <a className="chat-list-all" data-role="visitor-chats" href={props.base} onClick={onClose}>
            {t("chats")}
          </a>
        ) : (
          <ul>
            {chats.map((c) => (
              <li key={c.chatId} className={c.chatId === chatId ? "current" : undefined} data-chat={c.chatId}>
                {editing === c.chatId ? (
                  <input
                    aria-label={t("chatRename")}
                    value={draft}
                    autoFocus
                    onChange={(e) => setDraft(e.target.value)}
                    onBlur={() => void rename(c)}
                    onKeyDown={(e) => {
                      if (e.key === "Enter") void rename(c);
                      if (e.key === "Escape") {
                        e.stopPropagation();
                        renaming.current = "";
                        setEditing("");
                      }
                    }}
                  />
                ) : (
                  <>
                    <a href={chatHref(appId, c.chatId)} aria-current={c.chatId === chatId ? "page" : undefined} title={c.title} onClick={onClose}>
                      {c.title || c.chatId}
                    </a>
                    <button
                      type="button"
                      className="secondary chat-rename"
                      aria-label={t("chatRenameNamed").replace("{name}", c.title || c.chatId)}
                      title={t("chatRename")}
                      onClick={() => {
                        setDraft(c.title);
                        renaming.current = c.chatId;
                        setEditing(c.chatId);
                      }}
                    >
                      ✎
                    </button>
                  </>
                )}
              </li>
            ))}
          </ul>
        )}
        {error && (
          <p className="error" role="status">
            {error}
          </p>
        )}
      </nav>
    </>
  );
}

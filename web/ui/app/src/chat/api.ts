// The chat page's calls to the engine, in one place. base is "" on the
// signed-in page and the link's path ("/share/{linkId}") on a share link,
// whose chat routes answer under it; the chat list belongs to signed-in
// users only.
import { ApiError } from "../api";

// ChatSummary is one of the caller's chats as GET /api/apps/:appId/chats
// lists it.
export interface ChatSummary {
  chatId: string;
  appId: string;
  title: string;
  updatedAt: string;
  createdAt?: string;
}

async function answer<T>(resp: Response): Promise<T> {
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new ApiError(resp.status, (body && (body.message || body.error)) || resp.statusText);
  return body as T;
}

export interface ChatAPI {
  listChats(appId: string): Promise<ChatSummary[]>;
  renameChat(appId: string, chatId: string, title: string): Promise<{ chatId: string; title: string }>;
  /** userId names the chats' owner when an admin deletes another user's. */
  deleteChats(appId: string, chatIds: string[], userId?: string): Promise<{ deleted: string[] }>;
  /** stop asks the engine to end the chat's running turn (E3). */
  stop(appId: string, chatId: string): Promise<{ stopped: boolean }>;
  /** earlier asks the chat page at path for its items before seq before
   * (the page holds a chat's last turns; the rest come on request). */
  earlier<T>(path: string, before: number, userId?: string): Promise<{ items: T[]; earlier?: number; redo?: boolean }>;
  /** rewind takes the chat, and its sandbox, back to before the turn
   * holding item contentId (R2); redo undoes the last rewind. */
  rewind(appId: string, chatId: string, contentId: string): Promise<RewindAnswer>;
  redo(appId: string, chatId: string): Promise<RewindAnswer>;
  /** fork makes a new chat with the turns up to contentId's (R3). */
  fork(appId: string, chatId: string, contentId: string, title?: string): Promise<{ chatId: string; title: string; items: number; sandbox: string }>;
}

/** RewindAnswer is what a rewind or a redo did. */
export interface RewindAnswer {
  chatId: string;
  items: number;
  redo: boolean;
  sandbox: "restored" | "emptied" | "none";
}

export function chatAPI(base: string, csrf: string, origin = ""): ChatAPI {
  const at = (path: string) => origin + base + path;
  const send = <T>(method: string, path: string, body: unknown) =>
    fetch(at(path), {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body),
    }).then(answer<T>);
  const chats = (appId: string) => `/api/apps/${encodeURIComponent(appId)}/chats`;
  return {
    async listChats(appId) {
      const body = await fetch(at(chats(appId)), { credentials: "same-origin" }).then(answer<{ chats: ChatSummary[] | null }>);
      return body.chats ?? [];
    },
    renameChat: (appId, chatId, title) => send("PATCH", `${chats(appId)}/${encodeURIComponent(chatId)}`, { title }),
    deleteChats: (appId, chatIds, userId) => send("DELETE", chats(appId), { chatIds, userId: userId || undefined }),
    stop: (appId, chatId) => send("POST", "/api/v1/chat/stop", { appId, chatId }),
    earlier<T>(path: string, before: number, userId?: string) {
      const query = `?before=${before}${userId ? `&userId=${encodeURIComponent(userId)}` : ""}`;
      return fetch(origin + path + query, { credentials: "same-origin" }).then(answer<{ items: T[]; earlier?: number; redo?: boolean }>);
    },
    rewind: (appId, chatId, contentId) => send("POST", "/api/core/chat/item/delete", { appId, chatId, contentId }),
    redo: (appId, chatId) => send("POST", "/api/core/chat/item/redo", { appId, chatId }),
    fork: (appId, chatId, contentId, title) => send("POST", "/api/core/chat/fork", { appId, chatId, contentId, title }),
  };
}

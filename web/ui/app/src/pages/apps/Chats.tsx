import type { PageProps } from "../types";
import { chatHref } from "./format";
import { When } from "../When";
import { Table } from "../Table";

// ChatsData is a chat list's data (ChatsPage in web/ui/ui.go): the
// signed-in users' list of an app, or a share link's visitor's.
export interface ChatsData {
  appId: string;
  name: string;
  // where the app's chat pages are: /apps/{id}, or the share link's URL
  base: string;
  me: string;
  visitor: boolean;
  chats: { chatId: string; userId: string; title: string; updatedAt: string }[];
}

// Chats lists the chats the caller may read, newest first, with a new one.
// A visitor's list has no owner column: every chat in it is theirs.
export function Chats({ data, t }: PageProps<ChatsData>) {
  const chats = data.chats ?? [];
  return (
    <>
      <h2>
        {data.name} · {t("chats")}
      </h2>
      <p>
        <a className="button" id="new-chat" href={data.base + "/chat/new"}>
          {t("newChat")}
        </a>
      </p>
      {chats.length === 0 ? (
        <p className="hint" id="chats-empty">
          {t("chatsEmpty")}
        </p>
      ) : (
        <Table id="chat-list" heads={[t("title"), !data.visitor && t("owner"), t("updated")]}>
          {chats.map((c) => (
            <tr key={c.userId + "/" + c.chatId} data-chat={c.chatId}>
              <td data-role="title">
                <a href={chatHref(data.base, c, data.me)}>{c.title || c.chatId}</a>
              </td>
              {!data.visitor && <td data-role="owner">{c.userId}</td>}
              <td data-role="updated">
                <When iso={c.updatedAt} t={t} />
              </td>
            </tr>
          ))}
        </Table>
      )}
    </>
  );
}

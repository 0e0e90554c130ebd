import type { ReactNode } from "react";
import type { Translate } from "../../i18n";
import type { SendAnswer } from "./answer";
import { ApprovalCard } from "./ApprovalCard";
import type { Cards } from "./model";
import { QuestionCard } from "./QuestionCard";
import { ToolCard } from "./ToolCard";

// CardList is an answer's cards around its text: the tool calls, each
// followed by the approval it waits for, then the text, then the
// workflow's questions. current says the answer is the chat's last, whose
// questions can still be answered; the others' lapse.
export function CardList({ cards, t, send, current, busy, children }: { cards: Cards; t: Translate; send?: SendAnswer; current: boolean; busy?: boolean; children?: ReactNode }) {
  const placed = new Set<string>();
  const approvalsOf = (id?: string) =>
    cards.approvals
      .filter((a) => a.toolCallId === id || (id === undefined && !placed.has(a.approvalId)))
      .map((a) => {
        placed.add(a.approvalId);
        return <ApprovalCard key={a.approvalId} approval={a} t={t} send={current ? send : undefined} lapsed={!current} busy={busy} />;
      });
  return (
    <>
      {cards.calls.map((c) => [<ToolCard key={c.id} call={c} t={t} />, ...approvalsOf(c.id)])}
      {approvalsOf(undefined)}
      {children}
      {cards.asks.map((q) => (
        <QuestionCard key={q.id} ask={q} t={t} send={current ? send : undefined} lapsed={!current} busy={busy} />
      ))}
    </>
  );
}

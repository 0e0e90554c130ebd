// A chat's history as the engine hands it to the page: each answer's
// tool calls (toolcall.Call's JSON, with the approval a call waited for)
// and the questions the turn paused at (the engine's pageQuestion).
import { finish, noCards, noOutput, type Ask, type Cards, type Field } from "./model";

export interface HistoryCall {
  id: string;
  toolName: string;
  params: string;
  response: string;
  durationMs: number;
  status: string;
  approval?: {
    id: string;
    command: string;
    rule?: string;
    justification?: string;
    expiresAt?: string;
    decision?: string;
    edited?: string;
    reason?: string;
  };
}

export interface HistoryQuestion {
  request: { id: string; kind: string; description?: string; options?: { key: string; value: string }[]; fields?: Field[] };
  expiresAt?: string;
  answer?: unknown;
  said?: string;
}

export interface HistoryItem {
  role: string;
  text: string;
  calls?: HistoryCall[];
  questions?: HistoryQuestion[];
}

// historyCards draws the cards of each item of a chat's history. A call
// that waited for approval gets its approval card, with the decision
// the turn that answered it recorded (on the same approval's call).
export function historyCards(items: HistoryItem[]): Cards[] {
  const decided = new Map<string, NonNullable<HistoryCall["approval"]>>();
  for (const item of items) for (const c of item.calls ?? []) if (c.approval?.decision) decided.set(c.approval.id, c.approval);
  return items.map((item) => {
    const cards = noCards();
    for (const c of item.calls ?? []) {
      const call = finish({ id: c.id, tool: c.toolName || "sandbox_shell", params: c.params, status: "", stdout: noOutput, stderr: noOutput }, c.response, c.status, c.durationMs);
      cards.calls.push(call);
      if (c.status === "awaiting approval" && c.approval) {
        const a = decided.get(c.approval.id);
        cards.approvals.push({
          approvalId: c.approval.id,
          toolCallId: c.id,
          command: c.approval.command,
          rule: c.approval.rule,
          justification: c.approval.justification,
          expiresAt: c.approval.expiresAt,
          decision: a?.decision,
          detail: a ? a.edited || a.reason || "" : undefined,
        });
      }
    }
    for (const q of item.questions ?? []) {
      const ask: Ask = {
        id: q.request.id,
        kind: q.request.kind === "formInput" ? "formInput" : "userSelect",
        description: q.request.description ?? "",
        options: q.request.options ?? [],
        fields: q.request.fields ?? [],
        expiresAt: q.expiresAt,
        answered: q.answer !== undefined && q.answer !== null,
        said: q.said,
      };
      cards.asks.push(ask);
    }
    return cards;
  });
}

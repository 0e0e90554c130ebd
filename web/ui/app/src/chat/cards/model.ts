// The cards of a chat's answer, as the run's events build them: a card per
// tool call (its live output while the command runs), the approvals a
// command waits for, and the questions the workflow asks (F4, E3, P10).
import type { SseEvent } from "../../sse";

/** SHOWN is how much of a stream a card keeps in the page: the last 64 KiB. */
export const SHOWN = 64 * 1024;

// Output is one stream of a call. tail is its end, what the card shows;
// chunks keeps all of it, newest first, for the download; total counts
// its characters. Appending copies nothing, so a 5 MB output streamed in
// small pieces stays cheap.
export interface Output {
  tail: string;
  total: number;
  chunks?: { text: string; prev?: Output["chunks"] };
}

export const noOutput: Output = { tail: "", total: 0 };

export function append(o: Output, text: string): Output {
  if (!text) return o;
  let tail = o.tail + text;
  if (tail.length > 2 * SHOWN) tail = tail.slice(-SHOWN);
  return { tail, total: o.total + text.length, chunks: { text, prev: o.chunks } };
}

/** shown is what a card draws of a stream; cut says there was more. */
export function shown(o: Output): { text: string; cut: boolean } {
  return { text: o.tail.length > SHOWN ? o.tail.slice(-SHOWN) : o.tail, cut: o.total > SHOWN };
}

/** whole is a stream's full text, for its download. */
export function whole(o: Output): string {
  const parts: string[] = [];
  for (let c = o.chunks; c; c = c.prev) parts.push(c.text);
  return parts.reverse().join("");
}

export interface ToolCall {
  id: string;
  tool: string;
  params: string;
  /** "running" until the response; then a registry status */
  status: string;
  durationMs?: number;
  exitCode?: number;
  stdout: Output;
  stderr: Output;
}

// Approval is a command a rule wants a person to approve (P10), with
// what became of it once known.
export interface Approval {
  approvalId: string;
  toolCallId?: string;
  command: string;
  rule?: string;
  justification?: string;
  expiresAt?: string;
  decision?: string;
  detail?: string;
}

export interface Field {
  key: string;
  label?: string;
  type?: string;
  required?: boolean;
  description?: string;
  defaultValue?: unknown;
  min?: number | null;
  max?: number | null;
  maxLength?: number;
  list?: { label?: string; value: string }[];
}

// Ask is a question of an interactive node: a userSelect's options or a
// formInput's fields; said is its answer as the person's message said
// it, once answered.
export interface Ask {
  id: string;
  kind: "userSelect" | "formInput";
  description: string;
  options: { key: string; value: string }[];
  fields: Field[];
  expiresAt?: string;
  answered?: boolean;
  said?: string;
}

export interface Cards {
  calls: ToolCall[];
  approvals: Approval[];
  asks: Ask[];
}

export const noCards = (): Cards => ({ calls: [], approvals: [], asks: [] });

// callSummary is what a card shows of a call: the command line, a skill
// tool's skill, script or file and arguments, or the arguments as sent
// (as callSummary in web/ui/ui.go does for a chat's history).
export function callSummary(tool: string, params: string): string {
  let a: Record<string, unknown>;
  try {
    a = JSON.parse(params);
  } catch {
    return params; // broken arguments: show them as sent
  }
  if (!a || typeof a !== "object") return params;
  if (typeof a.command === "string" && a.command) return a.command;
  if (tool === "execute_skill_script" && a.name) return [a.name, a.script || "", ...((a.args as string[]) || [])].join(" ");
  if ((tool === "load_skill" || tool === "read_skill_resource") && a.name) return `${a.name} ${a.path || ""}`.trim();
  return params;
}

// finish ends a call with its response, the JSON the model read. A
// stream the card received live is kept (the response may hold only
// part of it); one it did not is taken from the response: a command's
// stdout, a tool's result, or the error.
export function finish(c: ToolCall, response: string, status?: string, durationMs?: number): ToolCall {
  let r: { stdout?: string; stderr?: string; result?: unknown; error?: string; exitCode?: number; durationMs?: number } = {};
  try {
    r = JSON.parse(response);
  } catch {
    r = { stdout: response };
  }
  if (!r || typeof r !== "object") r = { stdout: response };
  let out = r.error || "";
  if (typeof r.stdout === "string") out = r.stdout;
  else if (typeof r.result === "string") out = r.result;
  return {
    ...c,
    status: status || (r.exitCode === 0 ? "success" : "failed"),
    durationMs: durationMs ?? r.durationMs ?? 0,
    exitCode: typeof r.exitCode === "number" ? r.exitCode : undefined,
    stdout: c.stdout.total > 0 ? c.stdout : append(noOutput, out),
    stderr: c.stderr.total > 0 ? c.stderr : append(noOutput, r.stderr || ""),
  };
}

const update = (cards: Cards, id: string, f: (c: ToolCall) => ToolCall): Cards => ({
  ...cards,
  calls: cards.calls.map((c) => (c.id === id ? f(c) : c)),
});

// applyCard adds one event of a run to its cards.
export function applyCard(cards: Cards, ev: SseEvent): Cards {
  if (ev.data === "[DONE]") return cards;
  let body: Record<string, any>;
  try {
    body = JSON.parse(ev.data);
  } catch {
    return cards;
  }
  const tool = body?.tool;
  switch (ev.event) {
    case "toolCall":
      if (!tool?.id) return cards;
      return {
        ...cards,
        calls: [...cards.calls, { id: tool.id, tool: tool.toolName || "sandbox_shell", params: tool.params ?? "", status: "running", stdout: noOutput, stderr: noOutput }],
      };
    case "toolParams":
      return tool?.id ? update(cards, tool.id, (c) => ({ ...c, params: tool.params ?? c.params })) : cards;
    case "toolOutput":
      if (!tool?.id || !tool.text) return cards;
      return update(cards, tool.id, (c) => (tool.stream === "stderr" ? { ...c, stderr: append(c.stderr, tool.text) } : { ...c, stdout: append(c.stdout, tool.text) }));
    case "toolResponse":
      return tool?.id ? update(cards, tool.id, (c) => finish(c, String(tool.response ?? ""), tool.status, tool.durationMs)) : cards;
    case "interactive": {
      const kind = body.interactive?.type;
      const p = body.interactive?.params ?? {};
      if (kind === "commandApproval") {
        return {
          ...cards,
          approvals: [
            ...cards.approvals,
            { approvalId: p.approvalId, toolCallId: p.toolCallId, command: p.command ?? "", rule: p.rule, justification: p.justification, expiresAt: p.expiresAt },
          ],
        };
      }
      if (kind === "userSelect" || kind === "userInput") {
        // FastGPT's shapes: userSelectOptions [{value, key}], or inputForm
        // [{type, key, label, required, ...}].
        const ask: Ask = {
          id: p.interactiveId,
          kind: kind === "userInput" ? "formInput" : "userSelect",
          description: p.description ?? "",
          options: p.userSelectOptions ?? [],
          fields: p.inputForm ?? [],
          expiresAt: p.expiresAt,
        };
        return { ...cards, asks: [...cards.asks, ask] };
      }
    }
  }
  return cards;
}

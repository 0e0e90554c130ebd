// The chat API's stream as the builder's debug run reads it: FastGPT's
// named server-sent events (detail mode), one JSON document each.

export interface SseEvent {
  event: string;
  data: string;
}

// SseReader cuts a stream's text into events; feed it the text as it
// comes, in pieces of any size.
export class SseReader {
  private buf = "";
  private event = "";

  feed(text: string): SseEvent[] {
    this.buf += text;
    const out: SseEvent[] = [];
    let nl: number;
    while ((nl = this.buf.indexOf("\n")) >= 0) {
      const line = this.buf.slice(0, nl).replace(/\r$/, "");
      this.buf = this.buf.slice(nl + 1);
      if (line.startsWith("event:")) this.event = line.slice(6).trim();
      else if (line.startsWith("data:")) {
        out.push({ event: this.event || "message", data: line.slice(5).trim() });
      } else if (line === "") this.event = "";
    }
    return out;
  }
}

// NodeRun is one node's record in the run details (the engine's
// flowResponses entry).
export interface NodeRun {
  nodeId: string;
  moduleName: string;
  moduleType: string;
  runningTime: number;
  inputs?: Record<string, unknown>;
  outputs?: Record<string, unknown>;
  error?: string;
  tokens?: number;
  branches?: string[];
  detail?: unknown;
}

export type Lit = "running" | "done" | "failed";

// Question is what a paused run asks: a choice (userSelect), a form
// (userInput), or a command's approval.
export interface Question {
  id: string;
  kind: string;
  description: string;
  options: { value: string; key: string }[];
  fields: { key: string; label?: string; type?: string; required?: boolean }[];
  command?: string;
}

// Run is what a debug run has shown so far.
export interface Run {
  answer: string;
  lit: Record<string, Lit>;
  details: NodeRun[];
  errors: string[];
  done: boolean;
  question?: Question;
}

export const emptyRun = (): Run => ({ answer: "", lit: {}, details: [], errors: [], done: false });

// apply adds one event to a run: answer text, a node starting or ending,
// the run's details, an error.
export function apply(run: Run, ev: SseEvent): Run {
  if (ev.data === "[DONE]") return { ...run, done: true };
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(ev.data);
  } catch {
    return run;
  }
  switch (ev.event) {
    case "answer":
    case "fastAnswer":
    case "message": {
      const choices = body.choices as { delta?: { content?: string } }[] | undefined;
      const text = choices?.[0]?.delta?.content ?? "";
      return text ? { ...run, answer: run.answer + text } : run;
    }
    case "flowNodeStatus": {
      const id = body.nodeId as string | undefined;
      return id ? { ...run, lit: { ...run.lit, [id]: "running" } } : run;
    }
    case "flowNodeResponse": {
      const id = body.nodeId as string;
      return { ...run, lit: { ...run.lit, [id]: body.error ? "failed" : "done" } };
    }
    case "flowResponses":
      return { ...run, details: Array.isArray(body) ? (body as unknown as NodeRun[]) : run.details };
    case "error":
      return { ...run, errors: [...run.errors, String(body.message ?? "")] };
    case "interactive": {
      const i = body.interactive as { type?: string; params?: Record<string, unknown> } | undefined;
      const p = i?.params ?? {};
      return {
        ...run,
        question: {
          id: String(p.interactiveId ?? p.approvalId ?? p.id ?? ""),
          kind: String(i?.type ?? ""),
          description: String(p.description ?? ""),
          options: (p.userSelectOptions as Question["options"]) ?? [],
          fields: (p.inputForm as Question["fields"]) ?? [],
          command: p.command as string | undefined,
        },
      };
    }
  }
  return run;
}

import { apply, emptyRun, SseReader } from "./sse";

describe("the debug run's stream", () => {
  it("cuts events wherever the pieces end", () => {
    const r = new SseReader();
    const text = 'event: flowNodeStatus\ndata: {"status":"running","name":"A","nodeId":"a"}\n\nevent: answer\ndata: {"choices":[{"delta":{"content":"hi"}}]}\n\n';
    const events = [...text].flatMap((c) => r.feed(c));
    expect(events.map((e) => e.event)).toEqual(["flowNodeStatus", "answer"]);
  });
  it("lights nodes as they start and end, and keeps the answer and the details", () => {
    let run = emptyRun();
    for (const [event, data] of [
      ["flowNodeStatus", '{"status":"running","nodeId":"a"}'],
      ["answer", '{"choices":[{"delta":{"content":"Hel"}}]}'],
      ["answer", '{"choices":[{"delta":{"content":"lo"}}]}'],
      ["flowNodeResponse", '{"nodeId":"a","error":""}'],
      ["flowNodeStatus", '{"status":"running","nodeId":"b"}'],
      ["error", '{"message":"node B: boom"}'],
      ["flowNodeResponse", '{"nodeId":"b","error":"boom"}'],
      ["flowResponses", '[{"nodeId":"a","moduleName":"A","moduleType":"answerNode","runningTime":0.1}]'],
      ["answer", "[DONE]"],
    ])
      run = apply(run, { event, data });
    expect(run.answer).toBe("Hello");
    expect(run.lit).toEqual({ a: "done", b: "failed" });
    expect(run.errors).toEqual(["node B: boom"]);
    expect(run.details.map((d) => d.nodeId)).toEqual(["a"]);
    expect(run.done).toBe(true);
  });
});

describe("a paused run's question", () => {
  it("is kept with the run, in FastGPT's interactive shape", () => {
    const run = apply(emptyRun(), {
      event: "interactive",
      data: '{"interactive":{"type":"userSelect","params":{"interactiveId":"q1","description":"Which?","userSelectOptions":[{"value":"Tea","key":"t"}]}}}',
    });
    expect(run.question).toEqual({ id: "q1", kind: "userSelect", description: "Which?", options: [{ value: "Tea", key: "t" }], fields: [], command: undefined });
    const approval = apply(emptyRun(), { event: "interactive", data: '{"interactive":{"type":"commandApproval","params":{"approvalId":"a1","command":"rm x"}}}' });
    expect(approval.question?.id).toBe("a1");
    expect(approval.question?.command).toBe("rm x");
  });
});

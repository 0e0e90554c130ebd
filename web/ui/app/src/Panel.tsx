// The side panel: the settings of the node chosen on the canvas, or the
// app's own (name, visibility, variables) when none is.
import { useEffect, useState } from "react";
import { runNode, type Choice, type Problem } from "./api";
import { Details } from "./Debug";
import type { NodeRun } from "./sse";
import type { Action, Meta } from "./canvas";
import type { Graph, GraphEdge, GraphNode, NodeOutput, Variable } from "./graph";
import type { Translate } from "./i18n";
import { branchesFrom, updatesFrom } from "./conditions";
import { IfElseEditor, UpdateListEditor } from "./ConditionEditors";
import { CustomInputs } from "./CustomInputs";
import { takesCustom } from "./custom";
import { ReferencePick, sourceName, Text } from "./inputs";
import { fields, fits, label, reference, upstream, type Field, type Source, type Templates } from "./templates";

export interface PanelProps {
  graph: Graph;
  templates: Templates;
  systemVariables: Record<string, string>;
  variableTypes: string[];
  lang: string;
  t: Translate;
  problems: Problem[];
  dispatch: (a: Action) => void;
}

// NodePanel edits one node: its name, its inputs as its template draws
// them, the outputs it declares, and the loop it is in.
export function NodePanel(
  props: PanelProps & { node: GraphNode; choices: Record<string, Choice[] | string>; appId: string; csrf: string; save: () => Promise<boolean> },
) {
  const { node, graph, templates, lang, t, problems, dispatch } = props;
  const tmpl = templates[node.type];
  const inputs = node.inputs ?? {};
  const sources = upstream(graph, node.nodeId, templates, lang, props.systemVariables);
  const set = (key: string, value: unknown, edges?: GraphEdge[]) => {
    const next = { ...inputs };
    if (value === undefined) delete next[key];
    else next[key] = value;
    dispatch({ type: "update", id: node.nodeId, patch: { inputs: next }, edges });
  };
  const loops = graph.nodes.filter((n) => n.type === "loop" && n.nodeId !== node.nodeId);
  const own = problems.filter((p) => p.nodeId === node.nodeId);
  const placed = new Set<string>();
  const fs = tmpl ? fields(tmpl, lang) : [];
  // A problem inside a list that an editor of its own draws (a branch's
  // condition, an update) is that field's, shown on its row.
  const edited = new Set(fs.filter((f) => editors.includes(f.render ?? "")).map((f) => f.key));
  const fieldOf = (p: Problem) => {
    const head = p.field?.split("/")[0];
    return head && edited.has(head) ? head : p.field;
  };
  return (
    <aside className="panel" aria-label={t("canvasNodeSettings")}>
      <h2>{label(tmpl, lang, node.type)}</h2>
      {tmpl?.description && <p className="hint">{tmpl.description}</p>}
      {own
        .filter((p) => !p.field || !(tmpl?.schema.properties?.[fieldOf(p)!] || (takesCustom(tmpl) && p.field in inputs)))
        .map((p, i) => (
          <p key={i} className="field-problem" role="alert">
            {p.field ? p.field + ": " : ""}
            {p.message}
          </p>
        ))}
      <label htmlFor="node-name">{t("name")}</label>
      <Text id="node-name" value={node.name ?? ""} onCommit={(v) => dispatch({ type: "update", id: node.nodeId, patch: { name: v } })} />
      <p className="hint node-id">
        {t("canvasNodeId")}: <code>{node.nodeId}</code>
      </p>
      {loops.length > 0 && !["workflowStart", "loop", "loopStart", "loopEnd"].includes(node.type) && (
        <>
          <label htmlFor="node-parent">{t("canvasInsideLoop")}</label>
          <select
            id="node-parent"
            value={node.parentNodeId ?? ""}
            onChange={(e) => dispatch({ type: "update", id: node.nodeId, patch: { parentNodeId: e.target.value || undefined } })}
          >
            <option value="">{t("canvasNoLoop")}</option>
            {loops.map((l) => (
              <option key={l.nodeId} value={l.nodeId}>
                {l.name || l.nodeId}
              </option>
            ))}
          </select>
        </>
      )}
      {tmpl &&
        fs.map((f) => {
          placed.add(f.key);
          const fieldProblems = own.filter((p) => p.field === f.key);
          return (
            <div key={f.key} className={"field field-" + f.kind + (fieldProblems.length ? " field-bad" : "")} data-field={f.key}>
              <FieldInput
                f={f}
                value={inputs[f.key]}
                set={(v, edges) => set(f.key, v, edges)}
                sources={sources}
                t={t}
                choices={props.choices[f.key]}
                problems={own.filter((p) => p.field !== f.key && fieldOf(p) === f.key)}
                graph={graph}
                nodeId={node.nodeId}
              />
              {f.hint && <p className="hint">{f.hint}</p>}
              {fieldProblems.map((p, i) => (
                <p key={i} className="field-problem" role="alert">
                  {p.message}
                </p>
              ))}
            </div>
          );
        })}
      {tmpl && takesCustom(tmpl) && (
        <CustomInputs
          tmpl={tmpl}
          inputs={inputs}
          sources={sources}
          t={t}
          problems={own}
          onChange={(next) => dispatch({ type: "update", id: node.nodeId, patch: { inputs: next } })}
        />
      )}
      {tmpl?.dynamicOutputs && (
        <Outputs outputs={node.outputs ?? []} t={t} onChange={(outputs) => dispatch({ type: "update", id: node.nodeId, patch: { outputs } })} />
      )}
      {node.type !== "workflowStart" && node.type !== "loop" && <TryNode node={node} appId={props.appId} csrf={props.csrf} save={props.save} t={t} />}
    </aside>
  );
}

// The x-render values drawn by an editor of their own.
const editors = ["ifElse", "variableUpdate"];

function FieldInput(props: {
  f: Field;
  value: unknown;
  set: (v: unknown, edges?: GraphEdge[]) => void;
  sources: Source[];
  t: Translate;
  choices?: Choice[] | string;
  // problems inside the field's value (an editor's rows)
  problems: Problem[];
  graph: Graph;
  nodeId: string;
}) {
  const { f, value, set, sources, t } = props;
  const id = "field-" + f.key;
  const head = (
    <label htmlFor={id}>
      {f.label}
      {f.required && <span className="required"> *</span>}
    </label>
  );
  const fitting = sources.filter((s) => fits(s.type, f.type));
  const title = f.label + (f.required ? " *" : "");
  if (f.render === "ifElse") {
    const branches = branchesFrom(value);
    if (branches)
      return (
        <IfElseEditor
          field={f.key}
          label={title}
          value={branches}
          set={set}
          sources={sources}
          t={t}
          problems={props.problems}
          nodeId={props.nodeId}
          edges={props.graph.edges}
        />
      );
  }
  if (f.render === "variableUpdate") {
    const updates = updatesFrom(value);
    if (updates)
      return (
        <UpdateListEditor
          field={f.key}
          label={title}
          value={updates}
          set={set}
          sources={sources}
          variables={props.graph.variables ?? []}
          t={t}
          problems={props.problems}
        />
      );
  }
  if (editors.includes(f.render ?? ""))
    // A list its editor cannot read is shown as it is, with what the
    // engine found wrong inside it.
    return (
      <>
        <Json id={id} head={head} value={value} set={set} t={t} sources={sources} />
        {props.problems.map((p, i) => (
          <p key={i} className="field-problem" role="alert">
            {p.field}: {p.message}
          </p>
        ))}
      </>
    );
  switch (f.kind) {
    case "switch":
      return (
        <label className="switch" htmlFor={id}>
          <input id={id} type="checkbox" checked={value === true} onChange={(e) => set(e.target.checked)} /> {f.label}
        </label>
      );
    case "number":
      return (
        <>
          {head}
          <Text
            id={id}
            value={value === undefined ? "" : String(value)}
            placeholder={f.def === undefined ? "" : String(f.def)}
            onCommit={(v) => set(v.trim() === "" ? undefined : /^\{\{/.test(v.trim()) ? v.trim() : Number(v))}
          />
        </>
      );
    case "select":
      return (
        <>
          {head}
          <select id={id} value={value === undefined ? "" : String(value)} onChange={(e) => set(e.target.value || undefined)}>
            <option value="">—</option>
            {(f.options ?? []).map((o) => (
              <option key={String(o)} value={String(o)}>
                {String(o)}
              </option>
            ))}
          </select>
        </>
      );
    case "reference":
      return (
        <>
          {head}
          <ReferencePick id={id} value={typeof value === "string" ? value : ""} sources={fitting} t={t} onPick={(v) => set(v || undefined)} />
        </>
      );
    case "text":
    case "textarea":
      return (
        <>
          {head}
          <Text
            id={id}
            area={f.kind === "textarea"}
            value={typeof value === "string" ? value : ""}
            placeholder={typeof f.def === "string" ? f.def : ""}
            onCommit={(v) => set(v)}
          />
          {f.kind === "textarea" && <InsertReference sources={sources} t={t} onPick={(r) => set((typeof value === "string" ? value : "") + r)} />}
        </>
      );
    case "lines":
      return (
        <>
          {head}
          <Text
            id={id}
            area
            rows={3}
            value={Array.isArray(value) ? (value as unknown[]).join("\n") : ""}
            onCommit={(v) =>
              set(
                v
                  .split("\n")
                  .map((l) => l.trim())
                  .filter((l) => l !== ""),
              )
            }
          />
        </>
      );
    case "choices":
      return <Choices f={f} value={Array.isArray(value) ? (value as string[]) : []} set={set} t={t} choices={props.choices} />;
    case "rows":
      return (
        <Rows
          f={f}
          value={Array.isArray(value) ? (value as Record<string, unknown>[]) : []}
          set={set}
          t={t}
          sources={sources}
        />
      );
  }
  return <Json id={id} head={head} value={value} set={set} t={t} sources={sources} />;
}

function InsertReference(props: { sources: Source[]; t: Translate; onPick: (r: string) => void }) {
  if (props.sources.length === 0) return null;
  return (
    <select className="insert-reference" aria-label={props.t("canvasInsertReference")} value="" onChange={(e) => e.target.value && props.onPick(e.target.value)}>
      <option value="">{props.t("canvasInsertReference")}</option>
      {props.sources.map((s) => (
        <option key={reference(s)} value={reference(s)}>
          {sourceName(s, props.t)}
        </option>
      ))}
    </select>
  );
}

function Json(props: { id: string; head: React.ReactNode; value: unknown; set: (v: unknown) => void; t: Translate; sources: Source[] }) {
  const shown = props.value === undefined ? "" : JSON.stringify(props.value, null, 2);
  const [text, setText] = useState(shown);
  const [bad, setBad] = useState("");
  useEffect(() => {
    setText(shown);
    setBad("");
  }, [shown]);
  const commit = () => {
    if (text === shown) return;
    if (text.trim() === "") {
      setBad("");
      props.set(undefined);
      return;
    }
    try {
      props.set(JSON.parse(text));
      setBad("");
    } catch (err) {
      setBad(props.t("canvasNotJson") + ": " + (err as Error).message);
    }
  };
  return (
    <>
      {props.head}
      <textarea id={props.id} className="json" rows={5} value={text} spellCheck={false} onChange={(e) => setText(e.target.value)} onBlur={commit} />
      <InsertReference sources={props.sources} t={props.t} onPick={(r) => setText(text + JSON.stringify(r))} />
      {bad && (
        <p className="field-problem" role="alert">
          {bad}
        </p>
      )}
    </>
  );
}

// Choices offers the skills or tools the engine has, the chosen ones
// checked; one chosen but no longer offered stays listed, marked.
function Choices(props: { f: Field; value: string[]; set: (v: unknown) => void; t: Translate; choices?: Choice[] | string }) {
  const { f, value, t, choices } = props;
  if (typeof choices === "string")
    return (
      <fieldset className="choices">
        <legend>{f.label}</legend>
        <p className="field-problem">{choices}</p>
      </fieldset>
    );
  const offered = choices ?? [];
  const rows: (Choice & { missing?: boolean })[] = [
    ...offered,
    ...value.filter((v) => !offered.some((c) => c.value === v)).map((v) => ({ value: v, name: v.replace(/^mcp:/, ""), about: "", missing: true })),
  ];
  const toggle = (v: string, on: boolean) => props.set(on ? [...value, v] : value.filter((x) => x !== v));
  return (
    <fieldset className="choices" id={"field-" + f.key}>
      <legend>{f.label}</legend>
      {rows.length === 0 && <p className="hint">{t(f.key === "skills" ? "canvasNoSkills" : "canvasNoTools")}</p>}
      <ul>
        {rows.map((r) => (
          <li key={r.value} data-choice={r.value}>
            <label>
              <input type="checkbox" checked={value.includes(r.value)} onChange={(e) => toggle(r.value, e.target.checked)} />{" "}
              <span className="choice-name" data-role="name">
                {r.name}
              </span>
              {(r.badges ?? []).map((b) => (
                <span key={b} className="badge" data-badge={b}>
                  {t(b)}
                </span>
              ))}
              {r.missing ? (
                <span className="field-problem" data-role="missing">
                  {t("toolNotAvailable")}
                </span>
              ) : (
                <span className="hint" data-role="about">
                  {r.about}
                </span>
              )}
            </label>
          </li>
        ))}
      </ul>
    </fieldset>
  );
}

// Outputs edits the outputs a node declares itself.
function Outputs(props: { outputs: NodeOutput[]; t: Translate; onChange: (o: NodeOutput[]) => void }) {
  const { outputs, t } = props;
  const types = ["string", "number", "boolean", "object", "array", "any"];
  const change = (i: number, patch: Partial<NodeOutput>) => props.onChange(outputs.map((o, j) => (j === i ? { ...o, ...patch } : o)));
  return (
    <fieldset className="outputs">
      <legend>{t("canvasOutputs")}</legend>
      {outputs.map((o, i) => (
        <div key={i} className="row">
          <Text id={"output-" + i} value={o.key} onCommit={(v) => change(i, { key: v.trim() })} />
          <select aria-label={t("canvasType")} value={o.type || "any"} onChange={(e) => change(i, { type: e.target.value })}>
            {types.map((ty) => (
              <option key={ty}>{ty}</option>
            ))}
          </select>
          <button type="button" onClick={() => props.onChange(outputs.filter((_, j) => j !== i))}>
            {t("delete")}
          </button>
        </div>
      ))}
      <button type="button" onClick={() => props.onChange([...outputs, { key: "output" + (outputs.length + 1), type: "string" }])}>
        {t("canvasAddOutput")}
      </button>
    </fieldset>
  );
}

// AppPanel edits the app: its name, whether everyone may use it, and its
// global variables (the chat asks for them before it starts).
export function AppPanel(props: PanelProps & { meta: Meta }) {
  const { graph, t, dispatch, meta } = props;
  const vars = graph.variables ?? [];
  const setVars = (variables: Variable[]) => dispatch({ type: "variables", variables });
  const change = (i: number, patch: Partial<Variable>) => setVars(vars.map((v, j) => (j === i ? { ...v, ...patch } : v)));
  const graphProblems = props.problems.filter((p) => !p.nodeId);
  return (
    <aside className="panel" aria-label={t("canvasAppSettings")}>
      <h2>{t("canvasAppSettings")}</h2>
      <label htmlFor="app-name">{t("name")}</label>
      <Text id="app-name" value={meta.name} onCommit={(v) => dispatch({ type: "meta", meta: { ...meta, name: v } })} />
      <label className="switch" htmlFor="app-public">
        <input id="app-public" type="checkbox" checked={meta.public} onChange={(e) => dispatch({ type: "meta", meta: { ...meta, public: e.target.checked } })} />{" "}
        {t("publicApp")}
      </label>
      <fieldset className="variables">
        <legend>{t("canvasVariables")}</legend>
        <p className="hint">{t("canvasVariablesHint")}</p>
        {vars.map((v, i) => {
          const bad = graphProblems.filter((p) => p.field === "variables[" + i + "]");
          return (
            <div key={i} className="variable" data-variable={v.key}>
              <div className="row">
                <Text id={"var-key-" + i} value={v.key} onCommit={(k) => change(i, { key: k.trim() })} />
                <select aria-label={t("canvasType")} value={v.type} onChange={(e) => change(i, { type: e.target.value })}>
                  {props.variableTypes.map((ty) => (
                    <option key={ty} value={ty}>
                      {t("canvasVarType." + ty)}
                    </option>
                  ))}
                </select>
                <label className="switch">
                  <input type="checkbox" checked={!!v.required} onChange={(e) => change(i, { required: e.target.checked })} /> {t("canvasRequired")}
                </label>
                <button type="button" onClick={() => setVars(vars.filter((_, j) => j !== i))}>
                  {t("delete")}
                </button>
              </div>
              <label htmlFor={"var-label-" + i}>{t("canvasLabel")}</label>
              <Text id={"var-label-" + i} value={v.label ?? ""} onCommit={(l) => change(i, { label: l })} />
              {v.type === "select" && (
                <>
                  <label htmlFor={"var-options-" + i}>{t("canvasOptions")}</label>
                  <Text
                    id={"var-options-" + i}
                    value={(v.options ?? []).join(", ")}
                    onCommit={(o) =>
                      change(i, {
                        options: o
                          .split(",")
                          .map((x) => x.trim())
                          .filter((x) => x),
                      })
                    }
                  />
                </>
              )}
              <label htmlFor={"var-default-" + i}>{t("canvasDefault")}</label>
              <Text
                id={"var-default-" + i}
                value={v.defaultValue === undefined ? "" : typeof v.defaultValue === "string" ? v.defaultValue : JSON.stringify(v.defaultValue)}
                onCommit={(d) => change(i, { defaultValue: defaultOf(v.type, d) })}
              />
              {bad.map((p, j) => (
                <p key={j} className="field-problem" role="alert">
                  {p.message}
                </p>
              ))}
            </div>
          );
        })}
        <button type="button" className="add-variable" onClick={() => setVars([...vars, { key: "var" + (vars.length + 1), type: "string" }])}>
          {t("canvasAddVariable")}
        </button>
      </fieldset>
      {graphProblems
        .filter((p) => !p.field?.startsWith("variables["))
        .map((p, i) => (
          <p key={i} className="field-problem" role="alert">
            {p.message}
          </p>
        ))}
    </aside>
  );
}

// defaultOf reads a default typed in the panel as the variable's type
// wants it; what does not parse stays text, for the engine to refuse.
export function defaultOf(type: string, text: string): unknown {
  const s = text.trim();
  if (s === "") return undefined;
  if (type === "string" || type === "select") return text;
  try {
    return JSON.parse(s);
  } catch {
    return text;
  }
}

// tryKey is where the browser keeps the inputs typed for a node, so that
// they are there the next time the node is tried.
const tryKey = (appId: string, nodeId: string) => "flowbox.try." + appId + "." + nodeId;

// referenced lists the node's inputs given by references: those the
// builder types a value for when the node runs by itself.
export function referenced(n: GraphNode): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(n.inputs ?? {})) if (typeof v === "string" && /\{\{\$[^}]+\$\}\}/.test(v)) out[k] = "";
  return out;
}

// TryNode runs the node by itself (W4) with inputs the builder types,
// kept in the browser between runs.
function TryNode(props: { node: GraphNode; appId: string; csrf: string; save: () => Promise<boolean>; t: Translate }) {
  const { node, t } = props;
  const key = tryKey(props.appId, node.nodeId);
  const [saved] = useState(() => {
    try {
      return JSON.parse(localStorage.getItem(key) ?? "") as { inputs: string; question: string };
    } catch {
      return { inputs: JSON.stringify(referenced(node), null, 2), question: "" };
    }
  });
  const [inputs, setInputs] = useState(saved.inputs);
  const [question, setQuestion] = useState(saved.question);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ response: NodeRun; answer: string } | null>(null);
  const [problem, setProblem] = useState("");
  const run = async () => {
    setProblem("");
    let values: Record<string, unknown>;
    try {
      values = inputs.trim() ? JSON.parse(inputs) : {};
    } catch (err) {
      setProblem(t("canvasNotJson") + ": " + (err as Error).message);
      return;
    }
    localStorage.setItem(key, JSON.stringify({ inputs, question }));
    setBusy(true);
    try {
      if (!(await props.save())) return;
      setResult(await runNode(props.appId, node.nodeId, { inputs: values, question }, props.csrf));
    } catch (err) {
      setProblem((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <details className="try-node">
      <summary>{t("canvasTryNode")}</summary>
      <p className="hint">{t("canvasTryNodeHint")}</p>
      <label htmlFor="try-inputs">{t("canvasInputs")}</label>
      <textarea id="try-inputs" className="json" rows={4} value={inputs} spellCheck={false} onChange={(e) => setInputs(e.target.value)} />
      <label htmlFor="try-question">{t("canvasTryQuestion")}</label>
      <input id="try-question" type="text" value={question} onChange={(e) => setQuestion(e.target.value)} />
      <button type="button" className="primary try-run" onClick={run} disabled={busy}>
        {t("canvasTryRun")}
      </button>
      {problem && (
        <p className="field-problem" role="alert">
          {problem}
        </p>
      )}
      {result && (
        <div className="try-result">
          {result.answer && <p className="debug-answer">{result.answer}</p>}
          <Details runs={[result.response]} t={t} />
        </div>
      )}
    </details>
  );
}

// newKey is a short random key for a new record (FastGPT's classes and
// options carry one, which their branches are named by).
const newKey = () => Math.random().toString(36).slice(2, 8);

// Rows edits a list of records (a classifier's classes, a select's
// options, a form's fields, the keys to extract...): one row per record,
// one input per field of the record; a field that is itself a list or an
// object is edited as JSON.
function Rows(props: { f: Field; value: Record<string, unknown>[]; set: (v: unknown) => void; t: Translate; sources: Source[] }) {
  const { f, value, t } = props;
  const fields = Object.entries(f.items ?? {});
  const change = (i: number, key: string, v: unknown) =>
    props.set(value.map((row, j) => (j === i ? { ...row, [key]: v } : row)));
  const add = () => {
    const row: Record<string, unknown> = {};
    for (const [k, p] of fields) {
      if (p.default !== undefined) row[k] = p.default;
      else if (k === "key") row[k] = newKey();
    }
    props.set([...value, row]);
  };
  return (
    <fieldset className="rows" id={"field-" + f.key}>
      <legend>{f.label}</legend>
      {value.map((row, i) => (
        <div key={i} className="row-record" data-row={i}>
          {fields.map(([k, p]) => {
            const id = "field-" + f.key + "-" + i + "-" + k;
            const type = (Array.isArray(p.type) ? p.type[0] : p.type) ?? p["x-reference"] ?? "any";
            const name = p["x-label"]?.en ? (p["x-label"] as Record<string, string>)[document.documentElement.lang] || p["x-label"].en : k;
            const v = row[k];
            let input;
            if (p["x-reference"]) {
              input = (
                <ReferencePick
                  id={id}
                  value={typeof v === "string" ? v : ""}
                  sources={props.sources.filter((s) => fits(s.type, p["x-reference"]!))}
                  t={t}
                  onPick={(x) => change(i, k, x)}
                />
              );
            } else if (p.enum) {
              input = (
                <select id={id} value={v === undefined ? "" : String(v)} onChange={(e) => change(i, k, e.target.value)}>
                  <option value="">—</option>
                  {p.enum.map((o) => (
                    <option key={String(o)}>{String(o)}</option>
                  ))}
                </select>
              );
            } else if (type === "boolean") {
              input = <input id={id} type="checkbox" checked={v === true} onChange={(e) => change(i, k, e.target.checked)} />;
            } else if (type === "number" || type === "integer") {
              input = <Text id={id} value={v === undefined ? "" : String(v)} onCommit={(x) => change(i, k, x.trim() === "" ? undefined : Number(x))} />;
            } else if (type === "string") {
              input = <Text id={id} value={typeof v === "string" ? v : ""} onCommit={(x) => change(i, k, x)} />;
            } else {
              input = (
                <Text
                  id={id}
                  value={v === undefined ? "" : JSON.stringify(v)}
                  onCommit={(x) => {
                    try {
                      change(i, k, x.trim() === "" ? undefined : JSON.parse(x));
                    } catch {
                      change(i, k, x);
                    }
                  }}
                />
              );
            }
            return (
              <div key={k} className="row-field" data-field={k}>
                <label htmlFor={id}>{name}</label>
                {input}
              </div>
            );
          })}
          <button type="button" onClick={() => props.set(value.filter((_, j) => j !== i))}>
            {t("delete")}
          </button>
        </div>
      ))}
      <button type="button" className="add-row" onClick={add}>
        {t("canvasAddRow")}
      </button>
    </fieldset>
  );
}

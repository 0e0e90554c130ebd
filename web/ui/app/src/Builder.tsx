import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "react";
import {
  Background,
  Controls,
  Handle,
  MiniMap,
  Position as Side,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
  useUpdateNodeInternals,
  type Connection,
  type Edge,
  type EdgeChange,
  type Node,
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import { ApiError, loadApp, loadSkills, loadTemplates, loadTools, saveApp, type App, type Catalog, type Choice, type Problem } from "./api";
import { copy, notePrefix, open, reduce, toSave, unsaved, type Action, type Canvas, type Clip } from "./canvas";
import { branchesOf, catchBranch, edgeId, type GraphEdge, type GraphNode, type Note, type Position } from "./graph";
import type { Translate } from "./i18n";
import { Debug } from "./Debug";
import { Versions } from "./Versions";
import { AppPanel, NodePanel } from "./Panel";
import type { Lit, Run } from "./sse";
import { label, newNode, palette, type Template } from "./templates";

type StepData = { node: GraphNode; tmpl?: Template; t: Translate; lang: string; problems: Problem[]; lit?: Lit };
type NoteData = { note: Note; t: Translate; edit: (text: string) => void };
type FlowNode = Node<StepData, "step"> | Node<NoteData, "note">;

// Step draws one node of the workflow: its kind, its name, a handle per
// branch it may take, its error branch, and what the engine found wrong.
function Step({ data }: NodeProps<Node<StepData, "step">>) {
  const { node, tmpl, t, lang, problems, lit } = data;
  const branches = branchesOf(node);
  const entry = node.type === "workflowStart" || node.type === "loopStart";
  // The canvas keeps each node's handles as it measured them: when the
  // branches change (a class renamed, a condition added), it measures
  // again, or a drag from a renamed handle would connect nothing.
  // Only on a change: it is no business of a render or a drag.
  const updateInternals = useUpdateNodeInternals();
  const handles = branches.join("\n");
  const drawn = useRef(handles);
  useEffect(() => {
    if (drawn.current === handles) return;
    drawn.current = handles;
    updateInternals(node.nodeId);
  }, [handles, node.nodeId, updateInternals]);
  return (
    <div
      className={
        "step step-" + node.type + (problems.length ? " step-bad" : "") + (node.parentNodeId ? " step-in-loop" : "") + (lit ? " step-lit step-" + lit : "")
      }
      data-node-id={node.nodeId}
      title={problems.map((p) => p.message).join("\n")}
    >
      {!entry && <Handle type="target" position={Side.Left} />}
      <div className="step-kind">{label(tmpl, lang, t("nodeType." + node.type))}</div>
      <div className="step-name">{node.name || node.nodeId}</div>
      {node.parentNodeId && <div className="step-loop">↻ {node.parentNodeId}</div>}
      {problems.length > 0 && (
        <div className="step-problem" role="alert">
          {problems[0].message}
          {problems.length > 1 ? " (+" + (problems.length - 1) + ")" : ""}
        </div>
      )}
      {branches.length > 0 ? (
        <div className="step-branches">
          {branches.map((b) => (
            <div key={b} className="step-branch">
              {b}
              <Handle type="source" id={b} position={Side.Right} />
            </div>
          ))}
        </div>
      ) : (
        <Handle type="source" position={Side.Right} />
      )}
      {tmpl?.catch && (
        <div className="step-catch" title={t("canvasErrorBranch")}>
          {t("canvasErrorBranch")}
          <Handle type="source" id={catchBranch} position={Side.Bottom} />
        </div>
      )}
    </div>
  );
}

// NoteCard is a comment on the canvas; the engine never reads it.
function NoteCard({ data }: NodeProps<Node<NoteData, "note">>) {
  const [text, setText] = useState(data.note.text);
  useEffect(() => setText(data.note.text), [data.note.text]);
  return (
    <div className="note-card">
      <textarea
        className="nodrag"
        aria-label={data.t("canvasNote")}
        value={text}
        onChange={(e) => setText(e.target.value)}
        onBlur={() => text !== data.note.text && data.edit(text)}
      />
    </div>
  );
}

const nodeTypes = { step: Step, note: NoteCard };

type Loaded = { app: App; canvas: Canvas };
type State = Loaded | null;

function step(state: State, a: Action | { type: "load"; app: App }): State {
  if (a.type === "load") return { app: a.app, canvas: open(a.app.graph, { name: a.app.name, public: a.app.public }) };
  return state && { ...state, canvas: reduce(state.canvas, a) };
}

const clipKey = "flowbox.canvas.clip";
const dragType = "application/x-flowbox-node-type";

// Builder is the workflow canvas of one app.
export function Builder(props: { appId: string; csrf: string; t: Translate; lang: string }) {
  return (
    <ReactFlowProvider>
      <Editor {...props} />
    </ReactFlowProvider>
  );
}

// Editor is the canvas with its palette and side panel: nodes added from
// the palette (by click or drag), moved, connected by their handles (one
// per branch, one for errors), deleted, copied and pasted, every edit
// undone and redone, and saved to the engine, which checks the graph and
// names the nodes it refuses.
function Editor({ appId, csrf, t, lang }: { appId: string; csrf: string; t: Translate; lang: string }) {
  const flow = useReactFlow();
  const [state, dispatch] = useReducer(step, null);
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [choices, setChoices] = useState<Record<string, Choice[] | string>>({});
  // Positions of nodes being dragged, until the drag ends.
  const [dragging, setDragging] = useState<Record<string, Position>>({});
  const [selected, setSelected] = useState<Record<string, boolean>>({});
  // Node sizes as React Flow measured them: it needs them back on the
  // nodes it is given (for fitting the view and the minimap).
  const [measured, setMeasured] = useState<Record<string, { width: number; height: number }>>({});
  const [saving, setSaving] = useState(false);
  const [problem, setProblem] = useState("");
  const [problems, setProblems] = useState<Problem[]>([]);
  const [search, setSearch] = useState("");
  const [paletteOpen, setPaletteOpen] = useState(false);
  // fitPending: the auto-layout moved the nodes; the view fits them once
  // the canvas has them where they now are.
  const [fitPending, setFitPending] = useState(false);
  const [debugging, setDebugging] = useState(false);
  const [versions, setVersions] = useState(false);
  const [lit, setLit] = useState<Record<string, Lit>>({});
  const stateRef = useRef(state);
  stateRef.current = state;
  const selectedRef = useRef(selected);
  selectedRef.current = selected;

  useEffect(() => {
    loadApp(appId).then(
      (app) => dispatch({ type: "load", app }),
      (err: Error) => setProblem(t("canvasLoadFailed") + ": " + err.message),
    );
    loadTemplates().then(setCatalog, (err: Error) => setProblem(t("canvasLoadFailed") + ": " + err.message));
    loadSkills().then(
      (skills) => setChoices((c) => ({ ...c, skills })),
      (err: Error) => setChoices((c) => ({ ...c, skills: t("canvasChoicesFailed") + ": " + err.message })),
    );
    loadTools().then(
      (tools) => setChoices((c) => ({ ...c, tools })),
      (err: Error) => setChoices((c) => ({ ...c, tools: t("canvasChoicesFailed") + ": " + err.message })),
    );
  }, [appId, t]);

  const canvas = state?.canvas;
  const templates = catalog?.templates ?? {};
  const graph = canvas?.present.graph;
  const nodes: FlowNode[] = useMemo(() => {
    if (!canvas) return [];
    const g = canvas.present.graph;
    const steps: FlowNode[] = g.nodes.map((n) => ({
      id: n.nodeId,
      type: "step" as const,
      position: dragging[n.nodeId] ?? canvas.present.at[n.nodeId],
      selected: !!selected[n.nodeId],
      measured: measured[n.nodeId],
      deletable: n.type !== "workflowStart",
      data: { node: n, tmpl: templates[n.type], t, lang, problems: problems.filter((p) => p.nodeId === n.nodeId), lit: lit[n.nodeId] },
    }));
    const notes: FlowNode[] = (g.notes ?? []).map((note) => ({
      id: notePrefix + note.id,
      type: "note" as const,
      position: dragging[notePrefix + note.id] ?? note.position,
      selected: !!selected[notePrefix + note.id],
      measured: measured[notePrefix + note.id],
      data: { note, t, edit: (text: string) => dispatch({ type: "note", note: { ...note, text } }) },
    }));
    return [...notes, ...steps];
  }, [canvas, dragging, selected, measured, t, lang, templates, problems, lit]);
  const edges: Edge[] = useMemo(
    () =>
      canvas
        ? canvas.present.graph.edges.map((e) => ({
            id: edgeId(e),
            source: e.source,
            target: e.target,
            sourceHandle: e.sourceHandle || null,
            className: e.sourceHandle === catchBranch ? "edge-catch" : undefined,
            selected: !!selected[edgeId(e)],
          }))
        : [],
    [canvas, selected],
  );

  useEffect(() => {
    if (!fitPending) return;
    setFitPending(false);
    void flow.fitView({ maxZoom: 1 });
  }, [fitPending, nodes, flow]);

  const onNodesChange = useCallback((changes: NodeChange<FlowNode>[]) => {
    for (const c of changes) {
      if (c.type === "position" && c.position) {
        if (c.dragging) setDragging((d) => ({ ...d, [c.id]: c.position! }));
        else {
          dispatch({ type: "move", id: c.id, to: c.position });
          setDragging((d) => {
            const { [c.id]: _, ...rest } = d;
            return rest;
          });
        }
      } else if (c.type === "position" && !c.dragging) {
        // The drag ended without a last position: keep the last one seen.
        setDragging((d) => {
          const { [c.id]: last, ...rest } = d;
          if (last) dispatch({ type: "move", id: c.id, to: last });
          return rest;
        });
      } else if (c.type === "select") {
        setSelected((s) => ({ ...s, [c.id]: c.selected }));
      } else if (c.type === "dimensions" && c.dimensions) {
        const size = c.dimensions;
        setMeasured((m) => ({ ...m, [c.id]: size }));
      }
    }
    const removed = changes.filter((c) => c.type === "remove").map((c) => c.id);
    if (removed.length) dispatch({ type: "remove", ids: removed });
  }, []);

  const onEdgesChange = useCallback((changes: EdgeChange[]) => {
    for (const c of changes) {
      if (c.type === "select") setSelected((s) => ({ ...s, [c.id]: c.selected }));
      if (c.type === "remove") {
        const e = stateRef.current?.canvas.present.graph.edges.find((x) => edgeId(x) === c.id);
        if (e) dispatch({ type: "disconnect", source: e.source, target: e.target, sourceHandle: e.sourceHandle });
      }
    }
  }, []);

  const onConnect = useCallback(
    (c: Connection) => dispatch({ type: "connect", source: c.source, target: c.target, sourceHandle: c.sourceHandle || undefined }),
    [],
  );

  // add puts a node of a type on the canvas at a point (a loop comes with
  // its start and end inside it), and selects it.
  const add = useCallback(
    (tmpl: Template, at: Position) => {
      const g = stateRef.current?.canvas.present.graph;
      if (!g) return;
      const n = newNode(tmpl, g, lang);
      const added: GraphNode[] = [n];
      const addedEdges: GraphEdge[] = [];
      const places: Record<string, Position> = { [n.nodeId]: at };
      if (tmpl.type === "loop") {
        const inside = { ...g, nodes: [...g.nodes, n] };
        const start = { ...newNode(templates.loopStart, inside, lang), parentNodeId: n.nodeId };
        const end = { ...newNode(templates.loopEnd, { ...inside, nodes: [...inside.nodes, start] }, lang), parentNodeId: n.nodeId };
        added.push(start, end);
        addedEdges.push({ source: start.nodeId, target: end.nodeId });
        places[start.nodeId] = { x: at.x, y: at.y + 140 };
        places[end.nodeId] = { x: at.x + 320, y: at.y + 140 };
      }
      dispatch({ type: "add", nodes: added, edges: addedEdges, at: places });
      setSelected({ [n.nodeId]: true });
      setPaletteOpen(false);
    },
    [lang, templates],
  );

  // viewCenter is a free spot near the middle of what the canvas shows:
  // below the nodes already there, so that a new node covers none.
  const viewCenter = () => {
    const box = document.querySelector(".canvas")?.getBoundingClientRect();
    const p = flow.screenToFlowPosition({ x: (box?.left ?? 0) + (box?.width ?? 600) / 2, y: (box?.top ?? 0) + (box?.height ?? 400) / 2 });
    const spot = { x: Math.round(p.x), y: Math.round(p.y) };
    const taken = Object.values(stateRef.current?.canvas.present.at ?? {});
    for (let i = 0; i < 50 && taken.some((q) => Math.abs(q.x - spot.x) < 240 && Math.abs(q.y - spot.y) < 110); i++) spot.y += 120;
    return spot;
  };

  const addNote = () => {
    const notes = stateRef.current?.canvas.present.graph.notes ?? [];
    let i = notes.length + 1;
    while (notes.some((n) => n.id === "n" + i)) i++;
    dispatch({ type: "note", note: { id: "n" + i, text: "", position: viewCenter() } });
  };

  useEffect(() => {
    const keys = (e: KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey) || (e.target as HTMLElement).closest("input, textarea, select")) return;
      const k = e.key.toLowerCase();
      const s = stateRef.current;
      if (k === "z" && !e.shiftKey) dispatch({ type: "undo" });
      else if (k === "y" || (k === "z" && e.shiftKey)) dispatch({ type: "redo" });
      else if (k === "c" && s) {
        const ids = Object.keys(selectedRef.current).filter((id) => selectedRef.current[id]);
        const clip = copy(s.canvas.present, ids);
        if (clip.nodes.length === 0) return;
        localStorage.setItem(clipKey, JSON.stringify(clip));
      } else if (k === "v") {
        const raw = localStorage.getItem(clipKey);
        if (!raw) return;
        let clip: Clip;
        try {
          clip = JSON.parse(raw);
        } catch {
          return;
        }
        dispatch({ type: "paste", clip, offset: { x: 40, y: 40 } });
      } else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", keys);
    return () => window.removeEventListener("keydown", keys);
  }, []);

  // save sends the canvas's graph to the engine; it resolves to whether
  // the engine holds it (nothing to send counts).
  const save = (): Promise<boolean> => {
    const current = stateRef.current;
    if (!current) return Promise.resolve(false);
    if (!unsaved(current.canvas)) return Promise.resolve(true);
    const sent = current.canvas.present;
    setSaving(true);
    return saveApp({ ...current.app, name: sent.meta.name, public: sent.meta.public, graph: toSave(current.canvas) }, csrf).then(
      () => {
        dispatch({ type: "saved", sent });
        setSaving(false);
        setProblem("");
        setProblems([]);
        return true;
      },
      (err: Error) => {
        setSaving(false);
        const list = err instanceof ApiError ? err.problems : [];
        setProblems(list);
        setProblem(
          list.length
            ? t("canvasRefused").replace("{count}", String(list.length))
            : t("canvasSaveFailed") + ": " + (err instanceof ApiError ? err.message : String(err)),
        );
        return false;
      },
    );
  };

  const dirty = canvas ? unsaved(canvas) : false;
  const stateKey = saving ? "saving" : problem && dirty ? "failed" : dirty ? "unsaved" : "saved";
  const stateText = {
    saved: t("canvasSaved"),
    unsaved: t("canvasUnsaved"),
    saving: t("canvasSaving"),
    failed: t("canvasSaveFailed"),
  }[stateKey];

  const chosen = Object.keys(selected).filter((id) => selected[id] && !id.startsWith(notePrefix));
  const chosenNode = chosen.length === 1 ? graph?.nodes.find((n) => n.nodeId === chosen[0]) : undefined;
  const panelProps = catalog &&
    graph && {
      graph,
      templates,
      systemVariables: catalog.systemVariables,
      variableTypes: catalog.variableTypes,
      lang,
      t,
      problems,
      dispatch,
    };

  return (
    <div className="builder">
      <header className="builder-bar">
        <a href="/">{t("apps")}</a>
        <h1>{canvas ? canvas.present.meta.name : t("canvas")}</h1>
        <span className={"save-state save-" + stateKey} role="status">
          {stateText}
        </span>
        <button type="button" className="palette-toggle" onClick={() => setPaletteOpen(!paletteOpen)} aria-expanded={paletteOpen}>
          {t("canvasAddNode")}
        </button>
        <button type="button" className="add-note" onClick={addNote} disabled={!canvas}>
          {t("canvasAddNote")}
        </button>
        <button type="button" className="undo" onClick={() => dispatch({ type: "undo" })} disabled={!canvas || canvas.past.length === 0}>
          {t("canvasUndo")}
        </button>
        <button type="button" className="redo" onClick={() => dispatch({ type: "redo" })} disabled={!canvas || canvas.future.length === 0}>
          {t("canvasRedo")}
        </button>
        <button
          type="button"
          className="layout"
          onClick={() => {
            dispatch({ type: "layout" });
            setFitPending(true);
          }}
          disabled={!canvas}
        >
          {t("canvasAutoLayout")}
        </button>
        <button type="button" className="primary" onClick={() => save()} disabled={!canvas || saving || !dirty}>
          {t("save")}
        </button>
        <button
          type="button"
          className="debug-toggle"
          onClick={() => {
            setDebugging(!debugging);
            setVersions(false);
          }}
          aria-pressed={debugging}
          disabled={!canvas}
        >
          {t("canvasDebug")}
        </button>
        <button
          type="button"
          className="versions-toggle"
          onClick={() => {
            setVersions(!versions);
            setDebugging(false);
          }}
          aria-pressed={versions}
          disabled={!canvas}
        >
          {t("canvasVersions")}
        </button>
        <a href={"/api/apps/" + encodeURIComponent(appId) + "/export"} download>
          {t("canvasExport")}
        </a>
        <a href={"/apps/" + encodeURIComponent(appId) + "/edit#publish"}>{t("publishTab")}</a>
      </header>
      {problem && (
        <p className="problem" role="alert">
          {problem}
        </p>
      )}
      <div className="workspace">
        <nav className={"palette" + (paletteOpen ? " palette-open" : "")} aria-label={t("canvasPalette")}>
          <input type="search" className="palette-search" placeholder={t("canvasSearchNodes")} aria-label={t("canvasSearchNodes")} value={search} onChange={(e) => setSearch(e.target.value)} />
          {palette(templates, search).map((g) => (
            <section key={g.group} className="palette-group">
              <h3>{t("canvasGroup." + g.group)}</h3>
              {g.types.map((tmpl) => (
                <button
                  key={tmpl.type}
                  type="button"
                  className="palette-item"
                  data-type={tmpl.type}
                  draggable
                  title={tmpl.description}
                  onDragStart={(e) => e.dataTransfer.setData(dragType, tmpl.type)}
                  onClick={() => add(tmpl, viewCenter())}
                >
                  {label(tmpl, lang, tmpl.type)}
                </button>
              ))}
            </section>
          ))}
          {catalog && palette(templates, search).length === 0 && <p className="hint">{t("canvasNoMatch")}</p>}
        </nav>
        <div
          className="canvas"
          onDragOver={(e) => {
            if (e.dataTransfer.types.includes(dragType)) e.preventDefault();
          }}
          onDrop={(e) => {
            const type = e.dataTransfer.getData(dragType);
            if (!templates[type]) return;
            e.preventDefault();
            const p = flow.screenToFlowPosition({ x: e.clientX, y: e.clientY });
            add(templates[type], { x: Math.round(p.x), y: Math.round(p.y) });
          }}
        >
          {canvas && catalog && (
          <ReactFlow
            nodes={nodes}
            edges={edges}
            nodeTypes={nodeTypes}
            onNodesChange={onNodesChange}
            onEdgesChange={onEdgesChange}
            onConnect={onConnect}
            fitView
            fitViewOptions={{ maxZoom: 1 }}
            deleteKeyCode={["Backspace", "Delete"]}
          >
            <Background />
            <Controls />
            <MiniMap pannable zoomable />
          </ReactFlow>
          )}
        </div>
        {versions && canvas ? (
          <Versions
            appId={appId}
            csrf={csrf}
            t={t}
            save={save}
            onClose={() => setVersions(false)}
            onRolledBack={() =>
              loadApp(appId).then(
                (app) => dispatch({ type: "load", app }),
                (err: Error) => setProblem(t("canvasLoadFailed") + ": " + err.message),
              )
            }
          />
        ) : debugging && canvas ? (
          <Debug
            appId={appId}
            csrf={csrf}
            t={t}
            variables={canvas.present.graph.variables ?? []}
            save={save}
            onRun={(r: Run) => setLit(r.lit)}
            onClose={() => {
              setDebugging(false);
              setLit({});
            }}
            onPick={(id) => setSelected({ [id]: true })}
          />
        ) : panelProps && canvas ? (
          chosenNode ? (
            <NodePanel key={chosenNode.nodeId} {...panelProps} node={chosenNode} choices={choices} appId={appId} csrf={csrf} save={save} />
          ) : (
            <AppPanel {...panelProps} meta={canvas.present.meta} />
          )
        ) : (
          <aside className="panel" aria-busy="true" />
        )}
      </div>
    </div>
  );
}


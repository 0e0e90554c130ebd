import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "react";
import {
  Background,
  Controls,
  Handle,
  MiniMap,
  NodeResizeControl,
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
import {
  branchesOf,
  catchBranch,
  edgeId,
  fromCanvas,
  holders,
  loopAt,
  loopHead,
  loopMin,
  loopPad,
  loopSizes,
  nestable,
  nodeSize,
  onCanvas,
  parentsFirst,
  type Graph,
  type GraphEdge,
  type GraphNode,
  type Note,
  type Position,
  type Size,
} from "./graph";
import type { Translate } from "./i18n";
import { Debug } from "./Debug";
import { Versions } from "./Versions";
import { AppPanel, NodePanel } from "./Panel";
import type { Lit, Run } from "./sse";
import { label, newNode, palette, type Template } from "./templates";

// min is, for a loop, the least size it may be resized to: its body's.
type StepData = { node: GraphNode; tmpl?: Template; t: Translate; lang: string; problems: Problem[]; lit?: Lit; min?: Size };
type NoteData = { note: Note; t: Translate; edit: (text: string) => void };
type FlowNode = Node<StepData, "step"> | Node<StepData, "loop"> | Node<NoteData, "note">;

// Step draws one node of the workflow: its kind, its name, a handle per
// branch it may take, its error branch, and what the engine found wrong.
// A loop is a box, its body drawn inside it.
function Step({ data }: NodeProps<Node<StepData, "step" | "loop">>) {
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
        "step step-" +
        node.type +
        (node.type === "loop" ? " step-box" : "") +
        (problems.length ? " step-bad" : "") +
        (node.parentNodeId ? " step-in-loop" : "") +
        (lit ? " step-lit step-" + lit : "")
      }
      data-node-id={node.nodeId}
      title={problems.map((p) => p.message).join("\n")}
    >
      {!entry && <Handle type="target" position={Side.Left} />}
      <div className="step-kind">{label(tmpl, lang, t("nodeType." + node.type))}</div>
      <div className="step-name">{node.name || node.nodeId}</div>
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

// LoopBox is a loop: a box the builder resizes from its corner, never
// smaller than its body.
function LoopBox(props: NodeProps<Node<StepData, "loop">>) {
  const min = props.data.min ?? loopMin;
  return (
    <>
      <NodeResizeControl position="bottom-right" minWidth={min.width} minHeight={min.height} className="loop-resize" />
      <Step {...props} />
    </>
  );
}

const nodeTypes = { step: Step, loop: LoopBox, note: NoteCard };

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
  // Positions of nodes being dragged, as React Flow draws them (inside a
  // loop relative to it), until the drag ends.
  const [dragging, setDragging] = useState<Record<string, Position>>({});
  const draggingRef = useRef(dragging);
  draggingRef.current = dragging;
  // Sizes of loops being resized, until the resize ends.
  const [resizing, setResizing] = useState<Record<string, Size>>({});
  const [selected, setSelected] = useState<Record<string, boolean>>({});
  // Node sizes as React Flow measured them: it needs them back on the
  // nodes it is given (for fitting the view and the minimap).
  const [measured, setMeasured] = useState<Record<string, Size>>({});
  const measuredRef = useRef(measured);
  measuredRef.current = measured;
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
    const at = canvas.present.at;
    const up = holders(g);
    const sizeOf = (id: string) => measured[id] ?? nodeSize;
    const sizes = loopSizes(g, at, sizeOf);
    // The least size of each loop: its body's, whatever size it was given.
    const fit = (id: string) => loopSizes({ ...g, nodes: g.nodes.map((n) => (n.nodeId === id ? { ...n, size: loopMin } : n)) }, at, sizeOf)[id];
    const drawn = onCanvas(g, at);
    // React Flow draws a loop's body inside it: the loop comes first.
    const steps: FlowNode[] = parentsFirst(g).map((n) => {
      const holder = up.get(n.nodeId);
      const size = resizing[n.nodeId] ?? sizes[n.nodeId];
      const around = holder !== undefined ? (resizing[holder] ?? sizes[holder]) : undefined;
      return {
        id: n.nodeId,
        type: n.type === "loop" ? ("loop" as const) : ("step" as const),
        position: dragging[n.nodeId] ?? drawn[n.nodeId],
        parentId: holder,
        // A loop's start and end stay within its body; other nodes leave
        // it when dropped outside.
        extent:
          around && (n.type === "loopStart" || n.type === "loopEnd")
            ? [
                [loopPad, loopHead],
                [around.width - loopPad, around.height - loopPad],
              ]
            : undefined,
        style: size && { width: size.width, height: size.height },
        selected: !!selected[n.nodeId],
        measured: measured[n.nodeId],
        deletable: n.type !== "workflowStart" && !(holder !== undefined && (n.type === "loopStart" || n.type === "loopEnd")),
        data: {
          node: n,
          tmpl: templates[n.type],
          t,
          lang,
          problems: problems.filter((p) => p.nodeId === n.nodeId),
          lit: lit[n.nodeId],
          min: n.type === "loop" ? fit(n.nodeId) : undefined,
        },
      };
    });
    const notes: FlowNode[] = (g.notes ?? []).map((note) => ({
      id: notePrefix + note.id,
      type: "note" as const,
      position: dragging[notePrefix + note.id] ?? note.position,
      selected: !!selected[notePrefix + note.id],
      measured: measured[notePrefix + note.id],
      data: { note, t, edit: (text: string) => dispatch({ type: "note", note: { ...note, text } }) },
    }));
    return [...notes, ...steps];
  }, [canvas, dragging, resizing, selected, measured, t, lang, templates, problems, lit]);
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

  // drop ends a node's drag where React Flow draws it: dropped inside a
  // loop's box (its middle is), a node joins the loop's body; outside, it
  // leaves it.
  const drop = useCallback((id: string, drawn: Position) => {
    const present = stateRef.current?.canvas.present;
    if (!present) return;
    const { graph, at } = present;
    const to = fromCanvas(graph, at, id, drawn);
    const n = graph.nodes.find((x) => x.nodeId === id);
    if (!n || !nestable(n)) {
      dispatch({ type: "move", id, to });
      return;
    }
    const size = measuredRef.current[id] ?? nodeSize;
    const sizes = loopSizes(graph, at, (k) => measuredRef.current[k] ?? nodeSize);
    const into = loopAt(graph, at, sizes, { x: to.x + size.width / 2, y: to.y + size.height / 2 }, new Set([id]));
    dispatch({ type: "move", id, to, into });
  }, []);

  const onNodesChange = useCallback(
    (changes: NodeChange<FlowNode>[]) => {
      const ended: string[] = [];
      for (const c of changes) {
        if (c.type === "position" && c.dragging && c.position) {
          const p = c.position;
          setDragging((d) => ({ ...d, [c.id]: p }));
        } else if (c.type === "position" && !c.dragging) {
          // A drag that ended without a last position ends at the last one seen.
          const last = c.position ?? draggingRef.current[c.id];
          if (last) drop(c.id, last);
          ended.push(c.id);
        } else if (c.type === "select") {
          setSelected((s) => ({ ...s, [c.id]: c.selected }));
        } else if (c.type === "dimensions" && c.resizing !== undefined) {
          const size = c.dimensions;
          if (c.resizing && size) setResizing((r) => ({ ...r, [c.id]: size }));
          else {
            if (size) dispatch({ type: "resize", id: c.id, size });
            setResizing(({ [c.id]: _, ...rest }) => rest);
          }
        } else if (c.type === "dimensions" && c.dimensions) {
          const size = c.dimensions;
          setMeasured((m) => ({ ...m, [c.id]: size }));
        }
      }
      if (ended.length)
        setDragging((d) => Object.fromEntries(Object.entries(d).filter(([id]) => !ended.includes(id))));
      // Deletions come whole through onDelete.
    },
    [drop],
  );

  const onEdgesChange = useCallback((changes: EdgeChange[]) => {
    for (const c of changes) if (c.type === "select") setSelected((s) => ({ ...s, [c.id]: c.selected }));
  }, []);

  // onDelete takes the nodes and edges deleted together (a loop with its
  // body, a node with its edges) as one edit, which one Undo takes back.
  const onDelete = useCallback(({ nodes, edges }: { nodes: FlowNode[]; edges: Edge[] }) => {
    const all = stateRef.current?.canvas.present.graph.edges ?? [];
    const ids = new Set(edges.map((e) => e.id));
    dispatch({ type: "remove", ids: nodes.map((n) => n.id), edges: all.filter((e) => ids.has(edgeId(e))) });
  }, []);

  const onConnect = useCallback(
    (c: Connection) => dispatch({ type: "connect", source: c.source, target: c.target, sourceHandle: c.sourceHandle || undefined }),
    [],
  );

  // add puts a node of a type on the canvas at a point, inside the loop
  // into if one is named (a loop comes with its start and end inside it),
  // and selects it.
  const add = useCallback(
    (tmpl: Template, at: Position, into = "") => {
      const present = stateRef.current?.canvas.present;
      if (!present) return;
      const g = present.graph;
      const n = newNode(tmpl, g, lang);
      if (into && nestable(n)) {
        const q = present.at[into];
        n.parentNodeId = into;
        at = { x: Math.max(at.x, q.x + loopPad), y: Math.max(at.y, q.y + loopHead) };
      }
      const added: GraphNode[] = [n];
      const addedEdges: GraphEdge[] = [];
      const places: Record<string, Position> = { [n.nodeId]: at };
      if (tmpl.type === "loop") {
        const inside = { ...g, nodes: [...g.nodes, n] };
        const start = { ...newNode(templates.loopStart, inside, lang), parentNodeId: n.nodeId };
        const end = { ...newNode(templates.loopEnd, { ...inside, nodes: [...inside.nodes, start] }, lang), parentNodeId: n.nodeId };
        added.push(start, end);
        addedEdges.push({ source: start.nodeId, target: end.nodeId });
        places[start.nodeId] = { x: at.x + loopPad, y: at.y + loopHead };
        places[end.nodeId] = { x: at.x + loopMin.width - loopPad - nodeSize.width, y: at.y + loopHead };
      }
      dispatch({ type: "add", nodes: added, edges: addedEdges, at: places });
      setSelected({ [n.nodeId]: true });
      setPaletteOpen(false);
    },
    [lang, templates],
  );

  // boxes are the loops' rectangles on the canvas, as drawn.
  const boxes = (g: Graph, at: Record<string, Position>) => loopSizes(g, at, (k) => measuredRef.current[k] ?? nodeSize);

  // viewCenter is a free spot near the middle of what the canvas shows:
  // below the nodes already there, so that a new node covers none.
  const viewCenter = () => {
    const box = document.querySelector(".canvas")?.getBoundingClientRect();
    const p = flow.screenToFlowPosition({ x: (box?.left ?? 0) + (box?.width ?? 600) / 2, y: (box?.top ?? 0) + (box?.height ?? 400) / 2 });
    const spot = { x: Math.round(p.x), y: Math.round(p.y) };
    const present = stateRef.current?.canvas.present;
    if (!present) return spot;
    const taken = Object.values(present.at);
    const sizes = boxes(present.graph, present.at);
    const loops = Object.keys(sizes).map((id) => ({ p: present.at[id], s: sizes[id] }));
    // A spot is free when no node is near and it is off every loop's box.
    const busy = () =>
      taken.some((q) => Math.abs(q.x - spot.x) < 240 && Math.abs(q.y - spot.y) < 110) ||
      loops.some(
        ({ p, s }) =>
          spot.x < p.x + s.width && spot.x + nodeSize.width > p.x && spot.y < p.y + s.height && spot.y + nodeSize.height > p.y,
      );
    for (let i = 0; i < 50 && busy(); i++) spot.y += 120;
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
      // What the engine refused of a node is its past once the builder
      // edits the node: the next save checks it again.
      dispatch: (a: Action) => {
        if (a.type === "update") setProblems((ps) => ps.filter((p) => p.nodeId !== a.id));
        if (a.type === "variables") setProblems((ps) => ps.filter((p) => p.nodeId || !p.field?.startsWith("variables[")));
        dispatch(a);
      },
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
            const present = stateRef.current?.canvas.present;
            const into = present ? loopAt(present.graph, present.at, boxes(present.graph, present.at), p) : "";
            add(templates[type], { x: Math.round(p.x), y: Math.round(p.y) }, into);
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
            onDelete={onDelete}
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


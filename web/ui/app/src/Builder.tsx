import { useCallback, useEffect, useMemo, useReducer, useState } from "react";
import {
  Background,
  Controls,
  Handle,
  MiniMap,
  Position as Side,
  ReactFlow,
  type Connection,
  type Edge,
  type EdgeChange,
  type Node,
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import { ApiError, loadApp, saveApp, type App } from "./api";
import { open, reduce, toSave, unsaved, type Action, type Canvas } from "./canvas";
import type { GraphNode } from "./graph";
import type { Translate } from "./i18n";

type Data = { node: GraphNode; t: Translate };
type FlowNode = Node<Data, "step">;

// Step draws one node of the workflow: its kind and its name.
function Step({ data }: NodeProps<FlowNode>) {
  const { node, t } = data;
  return (
    <div className={"step step-" + node.type} data-node-id={node.nodeId}>
      {node.type !== "workflowStart" && <Handle type="target" position={Side.Left} />}
      <div className="step-kind">{t("nodeType." + node.type)}</div>
      <div className="step-name">{node.name || node.nodeId}</div>
      <Handle type="source" position={Side.Right} />
    </div>
  );
}

const nodeTypes = { step: Step };

type Loaded = { app: App; canvas: Canvas };
type State = Loaded | null;

function step(state: State, a: Action | { type: "load"; app: App }): State {
  if (a.type === "load") return { app: a.app, canvas: open(a.app.graph) };
  return state && { ...state, canvas: reduce(state.canvas, a) };
}

// Builder is the workflow canvas of one app: its nodes where the builder
// placed them (laid out automatically until then), moved by dragging,
// connected by their handles, deleted with the Delete key, every edit
// undone and redone, and saved to the engine.
export function Builder({ appId, csrf, t }: { appId: string; csrf: string; t: Translate }) {
  const [state, dispatch] = useReducer(step, null);
  // Positions of nodes being dragged, until the drag ends.
  const [dragging, setDragging] = useState<Record<string, { x: number; y: number }>>({});
  const [selected, setSelected] = useState<Record<string, boolean>>({});
  // Node sizes as React Flow measured them: it needs them back on the
  // nodes it is given (for fitting the view and the minimap).
  const [measured, setMeasured] = useState<Record<string, { width: number; height: number }>>({});
  const [saving, setSaving] = useState(false);
  const [problem, setProblem] = useState("");

  useEffect(() => {
    loadApp(appId).then(
      (app) => dispatch({ type: "load", app }),
      (err: Error) => setProblem(t("canvasLoadFailed") + ": " + err.message),
    );
  }, [appId, t]);

  const canvas = state?.canvas;
  const nodes: FlowNode[] = useMemo(
    () =>
      canvas
        ? canvas.present.graph.nodes.map((n) => ({
            id: n.nodeId,
            type: "step",
            position: dragging[n.nodeId] ?? canvas.present.at[n.nodeId],
            selected: !!selected[n.nodeId],
            measured: measured[n.nodeId],
            deletable: n.type !== "workflowStart",
            data: { node: n, t },
          }))
        : [],
    [canvas, dragging, selected, measured, t],
  );
  const edges: Edge[] = useMemo(
    () =>
      canvas
        ? canvas.present.graph.edges.map((e) => ({
            id: e.source + "->" + e.target,
            source: e.source,
            target: e.target,
            selected: !!selected[e.source + "->" + e.target],
          }))
        : [],
    [canvas, selected],
  );

  const onNodesChange = useCallback(
    (changes: NodeChange<FlowNode>[]) => {
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
    },
    [],
  );

  const onEdgesChange = useCallback((changes: EdgeChange[]) => {
    for (const c of changes) {
      if (c.type === "select") setSelected((s) => ({ ...s, [c.id]: c.selected }));
      if (c.type === "remove") {
        const [source, target] = c.id.split("->");
        dispatch({ type: "disconnect", source, target });
      }
    }
  }, []);

  const onConnect = useCallback((c: Connection) => dispatch({ type: "connect", source: c.source, target: c.target }), []);

  useEffect(() => {
    const keys = (e: KeyboardEvent) => {
      if (!(e.ctrlKey || e.metaKey) || (e.target as HTMLElement).closest("input, textarea")) return;
      const k = e.key.toLowerCase();
      if (k === "z" && !e.shiftKey) dispatch({ type: "undo" });
      else if (k === "y" || (k === "z" && e.shiftKey)) dispatch({ type: "redo" });
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", keys);
    return () => window.removeEventListener("keydown", keys);
  }, []);

  const save = () => {
    if (!state) return;
    const sent = state.canvas.present;
    setSaving(true);
    saveApp({ ...state.app, graph: toSave(state.canvas) }, csrf).then(
      () => {
        dispatch({ type: "saved", sent });
        setSaving(false);
        setProblem("");
      },
      (err: Error) => {
        setSaving(false);
        setProblem(t("canvasSaveFailed") + ": " + (err instanceof ApiError ? err.message : String(err)));
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

  return (
    <div className="builder">
      <header className="builder-bar">
        <a href="/">{t("apps")}</a>
        <h1>{state ? state.app.name : t("canvas")}</h1>
        <span className={"save-state save-" + stateKey} role="status">
          {stateText}
        </span>
        <button type="button" className="undo" onClick={() => dispatch({ type: "undo" })} disabled={!canvas || canvas.past.length === 0}>
          {t("canvasUndo")}
        </button>
        <button type="button" className="redo" onClick={() => dispatch({ type: "redo" })} disabled={!canvas || canvas.future.length === 0}>
          {t("canvasRedo")}
        </button>
        <button type="button" className="layout" onClick={() => dispatch({ type: "layout" })} disabled={!canvas}>
          {t("canvasAutoLayout")}
        </button>
        <button type="button" className="primary" onClick={save} disabled={!canvas || saving || !dirty}>
          {t("save")}
        </button>
        <a href={"/apps/" + encodeURIComponent(appId) + "/edit"}>{t("canvasForm")}</a>
      </header>
      {problem && (
        <p className="problem" role="alert">
          {problem}
        </p>
      )}
      <div className="canvas">
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
      </div>
    </div>
  );
}

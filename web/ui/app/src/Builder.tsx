import { useCallback, useEffect, useMemo, useState } from "react";
import {
  Background,
  Controls,
  Handle,
  MiniMap,
  Position as Side,
  ReactFlow,
  applyNodeChanges,
  type Edge,
  type Node,
  type NodeChange,
  type NodeProps,
} from "@xyflow/react";
import { ApiError, loadApp, saveApp, type App } from "./api";
import { layout, positioned, withPositions, type GraphNode, type Position } from "./graph";
import type { Translate } from "./i18n";

type Data = { node: GraphNode; t: Translate };
type FlowNode = Node<Data, "step">;

// Step draws one node of the workflow: its kind and its name.
function Step({ data }: NodeProps<FlowNode>) {
  const { node, t } = data;
  return (
    <div className={"step step-" + node.type} data-node-id={node.nodeId}>
      <Handle type="target" position={Side.Left} />
      <div className="step-kind">{t("nodeType." + node.type)}</div>
      <div className="step-name">{node.name || node.nodeId}</div>
      <Handle type="source" position={Side.Right} />
    </div>
  );
}

const nodeTypes = { step: Step };

function toFlow(app: App, at: Record<string, Position>, t: Translate): FlowNode[] {
  return app.graph.nodes.map((n) => ({ id: n.nodeId, type: "step", position: at[n.nodeId], data: { node: n, t } }));
}

type SaveState = "saved" | "unsaved" | "saving" | "failed";

// Builder is the workflow canvas of one app: its nodes where the builder
// placed them (laid out automatically until then), moved by dragging and
// saved to the engine.
export function Builder({ appId, csrf, t }: { appId: string; csrf: string; t: Translate }) {
  const [app, setApp] = useState<App | null>(null);
  const [nodes, setNodes] = useState<FlowNode[]>([]);
  const [state, setState] = useState<SaveState>("saved");
  const [problem, setProblem] = useState("");

  useEffect(() => {
    loadApp(appId).then(
      (a) => {
        setApp(a);
        setNodes(toFlow(a, positioned(a.graph), t));
      },
      (err: Error) => setProblem(t("canvasLoadFailed") + ": " + err.message),
    );
  }, [appId, t]);

  const edges: Edge[] = useMemo(
    () => (app ? app.graph.edges.map((e) => ({ id: e.source + "->" + e.target, source: e.source, target: e.target })) : []),
    [app],
  );

  const onNodesChange = useCallback((changes: NodeChange<FlowNode>[]) => {
    setNodes((ns) => applyNodeChanges(changes, ns));
    if (changes.some((c) => c.type === "position" && !c.dragging)) setState("unsaved");
  }, []);

  const autoLayout = () => {
    if (!app) return;
    const at = layout(app.graph);
    setNodes((ns) => ns.map((n) => ({ ...n, position: at[n.id] })));
    setState("unsaved");
  };

  const save = () => {
    if (!app) return;
    const at = Object.fromEntries(nodes.map((n) => [n.id, n.position]));
    setState("saving");
    saveApp({ ...app, graph: withPositions(app.graph, at) }, csrf).then(
      (saved) => {
        setApp(saved);
        setState("saved");
        setProblem("");
      },
      (err: Error) => {
        setState("failed");
        setProblem(err instanceof ApiError ? err.message : String(err));
      },
    );
  };

  const stateText = {
    saved: t("canvasSaved"),
    unsaved: t("canvasUnsaved"),
    saving: t("canvasSaving"),
    failed: t("canvasSaveFailed"),
  }[state];

  return (
    <div className="builder">
      <header className="builder-bar">
        <a href="/">{t("apps")}</a>
        <h1>{app ? app.name : t("canvas")}</h1>
        <span className={"save-state save-" + state} role="status">
          {stateText}
        </span>
        <button type="button" onClick={autoLayout} disabled={!app}>
          {t("canvasAutoLayout")}
        </button>
        <button type="button" className="primary" onClick={save} disabled={!app || state === "saving" || state === "saved"}>
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
        <ReactFlow nodes={nodes} edges={edges} nodeTypes={nodeTypes} onNodesChange={onNodesChange} fitView fitViewOptions={{ maxZoom: 1 }} nodesConnectable={false}>
          <Background />
          <Controls />
          <MiniMap pannable zoomable />
        </ReactFlow>
      </div>
    </div>
  );
}

// Inputs the side panel's editors share: a text that commits when it is
// done, and the pick of a value from before the node.
import { useEffect, useState } from "react";
import type { Translate } from "./i18n";
import { reference, variablesNode, type Source } from "./templates";

export const sourceName = (s: Source, t: Translate) =>
  (s.nodeId === variablesNode ? t("canvasVariable") : s.nodeName) + " · " + s.label;

// Text is an input that commits its value when it loses the focus or on
// Enter, so that typing is one edit, not one per key.
export function Text(props: {
  id: string;
  value: string;
  onCommit: (v: string) => void;
  area?: boolean;
  rows?: number;
  placeholder?: string;
  // label names the input for a screen reader where no <label> does
  label?: string;
}) {
  const [v, setV] = useState(props.value);
  useEffect(() => setV(props.value), [props.value]);
  const commit = () => v !== props.value && props.onCommit(v);
  return props.area ? (
    <textarea
      id={props.id}
      rows={props.rows ?? 4}
      value={v}
      placeholder={props.placeholder}
      aria-label={props.label}
      onChange={(e) => setV(e.target.value)}
      onBlur={commit}
      spellCheck={false}
    />
  ) : (
    <input
      id={props.id}
      type="text"
      value={v}
      placeholder={props.placeholder}
      aria-label={props.label}
      onChange={(e) => setV(e.target.value)}
      onBlur={commit}
      onKeyDown={(e) => e.key === "Enter" && commit()}
    />
  );
}

// ReferencePick chooses one value that runs before the node and fits the
// input's type (FastGPT's reference picker).
export function ReferencePick(props: { id: string; value: string; sources: Source[]; t: Translate; onPick: (v: string) => void; label?: string }) {
  const { sources, t } = props;
  const known = sources.some((s) => reference(s) === props.value);
  return (
    <select id={props.id} className="reference" aria-label={props.label} value={props.value} onChange={(e) => props.onPick(e.target.value)}>
      <option value="">{t("canvasPickReference")}</option>
      {!known && props.value && <option value={props.value}>{props.value}</option>}
      {sources.map((s) => (
        <option key={reference(s)} value={reference(s)}>
          {sourceName(s, t)}
        </option>
      ))}
    </select>
  );
}

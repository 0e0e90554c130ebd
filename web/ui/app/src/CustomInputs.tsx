// The custom inputs of a code or HTTP node: named by the builder, each a
// typed value or a value picked from before the node.
import { useState } from "react";
import type { Problem } from "./api";
import { customInputs, freeKey, keyProblem, renamed } from "./custom";
import { isReference } from "./conditions";
import type { Translate } from "./i18n";
import { ReferencePick, Text } from "./inputs";
import type { Source, Template } from "./templates";

const keyWords = { empty: "canvasKeyEmpty", pattern: "canvasKeyPattern", taken: "canvasKeyTaken" } as const;

export function CustomInputs(props: {
  tmpl: Template;
  inputs: Record<string, unknown>;
  sources: Source[];
  t: Translate;
  problems: Problem[];
  onChange: (inputs: Record<string, unknown>) => void;
}) {
  const { tmpl, inputs, sources, t } = props;
  // A key the builder typed that cannot be used: said, not saved.
  const [bad, setBad] = useState<Record<string, string>>({});
  // How each row's value is given, once the builder switched it: an empty
  // value is no reference yet, so the value alone cannot tell.
  const [modes, setModes] = useState<Record<string, string>>({});
  const rows = customInputs(tmpl, inputs);
  const set = (key: string, value: unknown) => props.onChange({ ...inputs, [key]: value });
  const rename = (from: string, to: string) => {
    const problem = keyProblem(tmpl, inputs, to, from);
    setBad((b) => ({ ...b, [from]: problem ? t(keyWords[problem]) : "" }));
    if (!problem && to !== from) {
      setModes((m) => ({ ...m, [to]: m[from] }));
      props.onChange(renamed(inputs, from, to));
    }
  };
  const remove = (key: string) => {
    const { [key]: _, ...rest } = inputs;
    props.onChange(rest);
  };
  return (
    <fieldset className="custom-inputs">
      <legend>{t("canvasCustomInputs")}</legend>
      <p className="hint">{t("canvasCustomInputsHint")}</p>
      {rows.map(([key, value], i) => {
        const byReference = (modes[key] ?? (isReference(value) ? "reference" : "input")) === "reference";
        return (
          <div key={i} className="custom-input" data-custom={key}>
            <div className="row">
              <Text id={"custom-key-" + i} value={key} label={t("canvasInputName")} onCommit={(k) => rename(key, k.trim())} />
              <button type="button" className="remove-custom" onClick={() => remove(key)}>
                {t("delete")}
              </button>
            </div>
            {bad[key] && (
              <p className="field-problem" role="alert">
                {bad[key]}
              </p>
            )}
            <div className="row">
              <select
                aria-label={t("canvasValueGivenAs")}
                className="custom-mode"
                value={byReference ? "reference" : "input"}
                onChange={(e) => {
                  setModes((m) => ({ ...m, [key]: e.target.value }));
                  set(key, "");
                }}
              >
                <option value="input">{t("canvasValueInput")}</option>
                <option value="reference">{t("canvasValueReference")}</option>
              </select>
              <ModeValue i={i} value={value} byReference={byReference} sources={sources} t={t} set={(v) => set(key, v)} />
            </div>
            {props.problems
              .filter((p) => p.field === key)
              .map((p, j) => (
                <p key={j} className="field-problem" role="alert">
                  {p.message}
                </p>
              ))}
          </div>
        );
      })}
      <button type="button" className="add-custom" onClick={() => set(freeKey(tmpl, inputs), "")}>
        {t("canvasAddCustomInput")}
      </button>
    </fieldset>
  );
}

// ModeValue is the value of one custom input: typed, or picked.
function ModeValue(props: { i: number; value: unknown; byReference: boolean; sources: Source[]; t: Translate; set: (v: unknown) => void }) {
  const { i, value, t } = props;
  const text = typeof value === "string" ? value : value === undefined ? "" : JSON.stringify(value);
  return props.byReference ? (
    <ReferencePick id={"custom-value-" + i} value={text} sources={props.sources} t={t} label={t("canvasValueReference")} onPick={(v) => props.set(v)} />
  ) : (
    <Text id={"custom-value-" + i} value={text} label={t("canvasValueInput")} placeholder={t("canvasValueInput")} onCommit={(v) => props.set(v)} />
  );
}

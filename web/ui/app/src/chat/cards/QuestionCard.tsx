import { useEffect, useId, useRef, useState, type FormEvent } from "react";
import type { Translate } from "../../i18n";
import { expiredAt, type SendAnswer } from "./answer";
import type { Ask, Field } from "./model";

// FieldRow is one field of a question's form: its label (marked when
// required), its description, and the input its type asks for, holding
// the default.
function FieldRow({ f }: { f: Field }) {
  const id = useId();
  const def = f.defaultValue;
  const common = { id, name: f.key, "data-field": f.key, required: !!f.required };
  let input;
  switch (f.type) {
    case "textarea":
      input = <textarea {...common} defaultValue={def == null ? undefined : String(def)} />;
      break;
    case "numberInput":
      input = <input type="number" step="any" {...common} min={f.min ?? undefined} max={f.max ?? undefined} defaultValue={typeof def === "number" ? String(def) : undefined} />;
      break;
    case "switch":
      // unchecked is an answer too
      input = <input type="checkbox" {...common} required={false} defaultChecked={def === true} />;
      break;
    case "select":
    case "multipleSelect": {
      const multiple = f.type === "multipleSelect";
      input = (
        <select {...common} multiple={multiple} defaultValue={multiple ? (Array.isArray(def) ? def.map(String) : []) : typeof def === "string" ? def : ""}>
          {!multiple && <option value="" />}
          {(f.list ?? []).map((o) => (
            <option key={o.value} value={o.value}>
              {o.label || o.value}
            </option>
          ))}
        </select>
      );
      break;
    }
    default:
      input = <input type="text" {...common} maxLength={f.maxLength || undefined} defaultValue={def == null ? undefined : String(def)} />;
  }
  return (
    <div className="question-field" data-type={f.type}>
      <label htmlFor={id}>{(f.label || f.key) + (f.required ? " *" : "")}</label>
      {f.description && <div className="hint">{f.description}</div>}
      {input}
    </div>
  );
}

// formAnswer reads a question's form: the value to send (empty fields
// left out) and the answer as the person's message says it, one
// "label: value" line per field, as the engine keeps it.
export function formAnswer(form: HTMLFormElement, fields: Field[]): { value: Record<string, unknown>; said: string } {
  const value: Record<string, unknown> = {};
  const lines: string[] = [];
  for (const f of fields) {
    const input = form.elements.namedItem(f.key) as (HTMLInputElement & HTMLSelectElement) | null;
    if (!input || !("value" in input)) continue;
    const labelOf = (x: string) => f.list?.find((o) => o.value === x)?.label || x;
    let v: unknown;
    let shown: string;
    if (f.type === "switch") {
      v = input.checked;
      shown = String(v);
    } else if (f.type === "numberInput") {
      if (input.value === "") continue;
      v = Number(input.value);
      shown = String(v);
    } else if (f.type === "multipleSelect") {
      const picked = [...input.selectedOptions].map((o) => o.value);
      if (!picked.length) continue;
      v = picked;
      shown = picked.map(labelOf).join(", ");
    } else {
      if (!input.value.trim()) continue;
      v = input.value;
      shown = f.type === "select" ? labelOf(input.value) : input.value;
    }
    value[f.key] = v;
    lines.push(`${f.label || f.key}: ${shown}`);
  }
  return { value, said: lines.join("\n") };
}

// QuestionCard asks the chat's owner the question of an interactive node
// of the workflow: a userSelect's options as buttons, a formInput's
// fields as a form. The answer is the next chat request, {interactive:
// {interactiveId, value}}; the run goes on in a new turn. Without send
// (another user's chat) it cannot be answered; once answered it shows
// the answer, and it lapses when it expires or the chat went on.
export function QuestionCard({ ask, t, send, lapsed, busy }: { ask: Ask; t: Translate; send?: SendAnswer; lapsed?: boolean; busy?: boolean }) {
  const [said, setSaid] = useState<string | null>(ask.answered ? (ask.said ?? "") : null);
  const [expired, setExpired] = useState(() => expiredAt(ask.expiresAt));
  const form = useRef<HTMLFormElement>(null);

  useEffect(() => {
    if (!ask.expiresAt || expired || said !== null) return;
    const left = new Date(ask.expiresAt).getTime() - Date.now();
    const timer = setTimeout(() => setExpired(true), Math.max(0, Math.min(left, 2 ** 31 - 1)));
    return () => clearTimeout(timer);
  }, [ask.expiresAt, expired, said]);

  const answer = async (value: unknown, text: string) => {
    if (!send) return;
    setSaid(text);
    if (!(await send(text, { interactive: { interactiveId: ask.id, value } }))) setSaid(null);
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const { value, said } = formAnswer(form.current!, ask.fields);
    void answer(value, said);
  };
  const outcome = said !== null ? `${t("answered")}: ${said}` : expired ? t("expired") : lapsed ? t("lapsed") : "";
  const off = !send || busy;

  return (
    <div className={outcome ? "question answered" : "question"} data-question-id={ask.id} data-kind={ask.kind}>
      <div className="question-title" data-role="question-description">
        {ask.description || t(ask.kind === "formInput" ? "fillForm" : "chooseOne")}
      </div>
      {!outcome &&
        (ask.kind === "userSelect" ? (
          <div className="question-actions">
            {ask.options.map((o) => (
              <button key={o.key} type="button" className="secondary" data-option={o.key} disabled={off} onClick={() => answer(o.key, o.value)}>
                {o.value}
              </button>
            ))}
          </div>
        ) : (
          <form className="question-form question-actions" ref={form} onSubmit={submit}>
            <fieldset disabled={off} className="plain">
              {ask.fields.map((f) => (
                <FieldRow key={f.key} f={f} />
              ))}
            </fieldset>
            <button type="submit" data-role="question-submit" disabled={off}>
              {t("submit")}
            </button>
          </form>
        ))}
      <div className="question-outcome" data-role="question-outcome">
        {outcome}
      </div>
    </div>
  );
}

import { useState } from "react";
import type { Translate } from "../i18n";

// Variable is one of the graph's global variables (W3) as the engine
// hands them in the page data.
export interface Variable {
  key: string;
  label?: string;
  type?: string;
  required?: boolean;
  options?: string[];
  defaultValue?: unknown;
  description?: string;
}

/** What the form holds: a checkbox's state, or the text typed. */
export type Typed = Record<string, string | boolean>;

const storeKey = (chatId: string) => "flowbox.vars." + chatId;

// keptTyped is the form's first state: the values this browser kept for
// the chat (the old page's key, so they carry over), else the defaults.
export function keptTyped(vars: Variable[], chatId: string): Typed {
  let kept: Record<string, unknown> = {};
  try {
    kept = JSON.parse(localStorage.getItem(storeKey(chatId)) || "{}");
  } catch {
    kept = {};
  }
  const out: Typed = {};
  for (const v of vars) {
    const value = kept[v.key] !== undefined ? kept[v.key] : v.defaultValue;
    if (v.type === "boolean") out[v.key] = value === true;
    else out[v.key] = value === undefined || value === null ? "" : typeof value === "string" ? value : JSON.stringify(value);
  }
  return out;
}

// variableValues is what a chat request sends as variables, typed as the
// old page typed them: a number, JSON (its text when it does not parse),
// a checkbox's boolean; an empty field is left out. They are kept in
// this browser for the chat.
export function variableValues(vars: Variable[], typed: Typed, chatId: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const v of vars) {
    const raw = typed[v.key];
    if (v.type === "boolean") {
      out[v.key] = raw === true;
      continue;
    }
    const text = typeof raw === "string" ? raw : "";
    if (text.trim() === "") continue;
    if (v.type === "number") out[v.key] = Number(text.trim());
    else if (v.type === "json") {
      try {
        out[v.key] = JSON.parse(text);
      } catch {
        out[v.key] = text.trim();
      }
    } else out[v.key] = text;
  }
  try {
    localStorage.setItem(storeKey(chatId), JSON.stringify(out));
  } catch {
    // a browser that keeps nothing still sends the values
  }
  return out;
}

// useVariables holds the form's values and gives the request's.
export function useVariables(vars: Variable[], chatId: string) {
  const [typed, setTyped] = useState(() => keptTyped(vars, chatId));
  return { typed, set: (key: string, value: string | boolean) => setTyped((t) => ({ ...t, [key]: value })), values: () => variableValues(vars, typed, chatId) };
}

// ChatVariables is the form above the chat (#chat-variables, the old
// page's id): a field per variable, by its type.
export function ChatVariables({ vars, typed, set, t }: { vars: Variable[]; typed: Typed; set: (key: string, value: string | boolean) => void; t: Translate }) {
  return (
    <form id="chat-variables" className="chat-variables" onSubmit={(e) => e.preventDefault()}>
      <p className="hint">{t("chatVariablesHint")}</p>
      {vars.map((v) => {
        const id = "var-" + v.key;
        const label = (
          <label htmlFor={id}>
            {v.label || v.key}
            {v.required && <span className="required"> *</span>}
          </label>
        );
        const text = typeof typed[v.key] === "string" ? (typed[v.key] as string) : "";
        if (v.type === "boolean")
          return (
            <div key={v.key} className="chat-variable" data-variable={v.key}>
              <input type="checkbox" id={id} name={id} checked={typed[v.key] === true} title={v.description} onChange={(e) => set(v.key, e.target.checked)} /> {label}
            </div>
          );
        let input;
        if (v.type === "select")
          input = (
            <select id={id} name={id} value={text} title={v.description} onChange={(e) => set(v.key, e.target.value)}>
              <option value="">—</option>
              {(v.options ?? []).map((o) => (
                <option key={o} value={o}>
                  {o}
                </option>
              ))}
            </select>
          );
        else if (v.type === "json")
          input = <textarea id={id} name={id} rows={2} spellCheck={false} value={text} title={v.description} onChange={(e) => set(v.key, e.target.value)} />;
        else
          input = <input type={v.type === "number" ? "number" : "text"} id={id} name={id} value={text} title={v.description} onChange={(e) => set(v.key, e.target.value)} />;
        return (
          <div key={v.key} className="chat-variable" data-variable={v.key}>
            {label}
            {input}
          </div>
        );
      })}
    </form>
  );
}

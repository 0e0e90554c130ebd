// The side panel's editors of the condition node's branches and the
// variable update node's updates (FastGPT's 判断器 and 变量更新), in place
// of their lists as JSON.
import type { Problem } from "./api";
import {
  branchName,
  edgesWithout,
  fitsVariable,
  isReference,
  kindOf,
  newBranch,
  newCondition,
  newUpdate,
  numericValue,
  operatorsFor,
  problemsAt,
  shownValue,
  takesValue,
  typedValue,
  valueTypeFor,
  withGivenAs,
  withOperator,
  withVariable,
  type Branch,
  type Condition,
  type GivenAs,
  type Update,
} from "./conditions";
import type { GraphEdge, Variable } from "./graph";
import type { Translate } from "./i18n";
import { ReferencePick, Text } from "./inputs";
import { fits, reference, variablesNode, type Source } from "./templates";

function Problems(props: { list: Problem[] }) {
  return (
    <>
      {props.list.map((p, i) => (
        <p key={i} className="field-problem" role="alert">
          {p.message}
        </p>
      ))}
    </>
  );
}

// The rest of the problems of a list: those of no row it shows.
const unplaced = (problems: Problem[], field: string, rows: number) =>
  problems.filter((p) => {
    const m = new RegExp("^" + field + "/(\\d+)(/|$)").exec(p.field ?? "");
    return !m || Number(m[1]) >= rows;
  });

// GivenAs chooses how a value is given: typed, or one reference.
function GivenAsPick(props: { id: string; value: GivenAs; t: Translate; onPick: (v: GivenAs) => void }) {
  const { t } = props;
  return (
    <select id={props.id} className="given-as" aria-label={t("canvasValueGivenAs")} value={props.value} onChange={(e) => props.onPick(e.target.value as GivenAs)}>
      <option value="input">{t("canvasValueInput")}</option>
      <option value="reference">{t("canvasValueReference")}</option>
    </select>
  );
}

// IfElseEditor edits a condition node's ifElseList: a block per branch
// (IF, ELSE IF 1, ...), named as the node's handles are, each with its
// conditions and how they combine; ELSE is what is left.
export function IfElseEditor(props: {
  field: string;
  label: string;
  value: Branch[];
  // edges, when given, are the graph's edges to save with the list
  set: (v: Branch[], edges?: GraphEdge[]) => void;
  sources: Source[];
  t: Translate;
  problems: Problem[];
  nodeId: string;
  edges: GraphEdge[];
}) {
  const { field, value, t, problems } = props;
  const setBranch = (i: number, b: Branch) => props.set(value.map((x, j) => (j === i ? b : x)));
  const remove = (i: number) => props.set(value.filter((_, j) => j !== i), edgesWithout(props.edges, props.nodeId, i));
  return (
    <fieldset className="if-else" id={"field-" + field}>
      <legend>{props.label}</legend>
      {value.map((b, i) => (
        <BranchBlock
          key={i}
          at={field + "/" + i}
          index={i}
          branch={b}
          set={(x) => setBranch(i, x)}
          remove={value.length > 1 ? () => remove(i) : undefined}
          sources={props.sources}
          t={t}
          problems={problemsAt(problems, field + "/" + i)}
        />
      ))}
      <button type="button" className="add-branch" onClick={() => props.set([...value, newBranch()])}>
        + {t("canvasAddElseIf")}
      </button>
      <div className="branch branch-else" data-branch="ELSE">
        <div className="branch-head">
          <span className="branch-name">ELSE</span>
        </div>
        <p className="hint">{t("canvasElseHint")}</p>
      </div>
      <Problems list={unplaced(problems, field, value.length)} />
    </fieldset>
  );
}

function BranchBlock(props: {
  at: string;
  index: number;
  branch: Branch;
  set: (b: Branch) => void;
  remove?: () => void;
  sources: Source[];
  t: Translate;
  problems: Problem[];
}) {
  const { branch, t, at } = props;
  const name = branchName(props.index);
  const list = branch.list;
  const setCondition = (j: number, c: Condition) => props.set({ ...branch, list: list.map((x, k) => (k === j ? c : x)) });
  const rows = at + "/list";
  return (
    <div className="branch" data-branch={name}>
      <div className="branch-head">
        <span className="branch-name">{name}</span>
        {props.remove && (
          <button type="button" className="remove-branch link" onClick={props.remove}>
            {t("canvasRemoveBranch")}
          </button>
        )}
      </div>
      {list.length >= 2 && (
        <select
          id={"cond-" + props.index + "-join"}
          className="join"
          aria-label={t("canvasJoin")}
          value={branch.condition}
          onChange={(e) => props.set({ ...branch, condition: e.target.value === "OR" ? "OR" : "AND" })}
        >
          <option value="AND">{t("canvasJoin.AND")}</option>
          <option value="OR">{t("canvasJoin.OR")}</option>
        </select>
      )}
      {list.map((c, j) => (
        <div key={j}>
          {j > 0 && <div className="join-word">{t(branch.condition === "OR" ? "canvasJoinWord.OR" : "canvasJoinWord.AND")}</div>}
          <ConditionRow
            id={"cond-" + props.index + "-" + j}
            index={j}
            condition={c}
            set={(x) => setCondition(j, x)}
            remove={list.length > 1 ? () => props.set({ ...branch, list: list.filter((_, k) => k !== j) }) : undefined}
            sources={props.sources}
            t={t}
            problems={problemsAt(props.problems, rows + "/" + j)}
          />
        </div>
      ))}
      <button type="button" className="add-condition" onClick={() => props.set({ ...branch, list: [...list, newCondition()] })}>
        + {t("canvasAddCondition")}
      </button>
      <Problems list={unplaced(props.problems, rows, list.length)} />
    </div>
  );
}

// ConditionRow is one condition: what is compared, how, and with what.
function ConditionRow(props: {
  id: string;
  index: number;
  condition: Condition;
  set: (c: Condition) => void;
  remove?: () => void;
  sources: Source[];
  t: Translate;
  problems: Problem[];
}) {
  const { condition: c, t, id, sources } = props;
  const typeOf = (ref: string) => sources.find((s) => reference(s) === ref.trim())?.type ?? "";
  const type = typeOf(c.variable ?? "");
  const offered = operatorsFor(type);
  const ops = offered.includes(c.condition) || !c.condition ? offered : [c.condition, ...offered];
  const givenAs: GivenAs = c.valueType === "reference" ? "reference" : "input";
  let value = null;
  if (takesValue(c.condition)) {
    const want = valueTypeFor(c.condition, type);
    if (givenAs === "reference")
      value = (
        <ReferencePick
          id={id + "-value"}
          label={t("canvasConditionValue")}
          value={typeof c.value === "string" ? c.value : ""}
          sources={sources.filter((s) => fits(s.type, want))}
          t={t}
          onPick={(v) => props.set({ ...c, value: v })}
        />
      );
    else if (kindOf(type) === "boolean" && (c.condition === "equalTo" || c.condition === "notEqual"))
      value = (
        <select id={id + "-value"} aria-label={t("canvasConditionValue")} value={shownValue(c.value)} onChange={(e) => props.set({ ...c, value: e.target.value })}>
          <option value="">—</option>
          <option value="true">{t("canvasTrue")}</option>
          <option value="false">{t("canvasFalse")}</option>
        </select>
      );
    else
      value = (
        <Text
          id={id + "-value"}
          label={t("canvasConditionValue")}
          value={shownValue(c.value)}
          placeholder={t(numericValue(c.condition) ? "canvasValueNumber" : c.condition === "reg" ? "canvasValueRegex" : "canvasConditionValue")}
          onCommit={(v) => props.set({ ...c, value: v })}
        />
      );
  }
  return (
    <div className={"condition" + (props.problems.length ? " condition-bad" : "")} data-condition={props.index}>
      <div className="condition-line">
        <ReferencePick
          id={id + "-variable"}
          label={t("canvasConditionVariable")}
          value={c.variable ?? ""}
          sources={sources}
          t={t}
          onPick={(v) => props.set(withVariable(c, v, typeOf(v)))}
        />
        {props.remove && (
          <button type="button" className="remove-condition" aria-label={t("canvasRemoveCondition")} title={t("canvasRemoveCondition")} onClick={props.remove}>
            ✕
          </button>
        )}
      </div>
      <div className="condition-line">
        <select id={id + "-operator"} className="operator" aria-label={t("canvasOperator")} value={c.condition ?? ""} onChange={(e) => props.set(withOperator(c, e.target.value))}>
          {!c.condition && <option value="">—</option>}
          {ops.map((o) => (
            <option key={o} value={o}>
              {t("canvasOp." + o)}
            </option>
          ))}
        </select>
        {takesValue(c.condition) && <GivenAsPick id={id + "-given-as"} value={givenAs} t={t} onPick={(v) => props.set(withGivenAs(c, v))} />}
      </div>
      {value}
      <Problems list={props.problems} />
    </div>
  );
}

// UpdateListEditor edits a variable update node's updateList: per row a
// global variable of the app and its new value, typed as the variable's
// type wants it or given by a reference of a fitting type.
export function UpdateListEditor(props: {
  field: string;
  label: string;
  value: Update[];
  set: (v: Update[]) => void;
  sources: Source[];
  variables: Variable[];
  t: Translate;
  problems: Problem[];
}) {
  const { field, value, t, sources, problems } = props;
  // The app's own variables; the system's cannot be changed.
  const declared = new Map(props.variables.map((v) => [v.key, v]));
  const globals = sources.filter((s) => s.nodeId === variablesNode && declared.has(s.key));
  const globalOf = (ref: string) => globals.find((s) => reference(s) === ref.trim());
  const change = (i: number, u: Update) => {
    const g = globalOf(u.variable);
    const next = g ? { ...u, valueType: g.type } : u;
    props.set(value.map((x, j) => (j === i ? next : x)));
  };
  return (
    <fieldset className="updates" id={"field-" + field}>
      <legend>{props.label}</legend>
      {globals.length === 0 && <p className="hint">{t("canvasNoGlobals")}</p>}
      {value.map((u, i) => {
        const id = "update-" + i;
        const g = globalOf(u.variable ?? "");
        const decl = g && declared.get(g.key);
        const givenAs: GivenAs = u.renderType === "reference" ? "reference" : "input";
        const pickVariable = (ref: string) => {
          const ng = globalOf(ref);
          const nd = ng && declared.get(ng.key);
          let v = u.value;
          if (givenAs === "reference") {
            const src = sources.find((s) => reference(s) === shownValue(v).trim());
            if (!src || !ng || !fits(src.type, ng.type)) v = "";
          } else if (nd && !fitsVariable(nd, v)) {
            v = typedValue(nd.type, shownValue(v));
            if (!fitsVariable(nd, v)) v = "";
          }
          change(i, { ...u, variable: ref, value: v });
        };
        const switchGivenAs = (r: GivenAs) =>
          change(i, { ...u, renderType: r, value: r === "reference" ? (isReference(u.value) ? u.value : "") : !decl || fitsVariable(decl, u.value) ? u.value : "" });
        let input;
        if (givenAs === "reference")
          input = (
            <ReferencePick
              id={id + "-value"}
              value={typeof u.value === "string" ? u.value : ""}
              sources={sources.filter((s) => !g || fits(s.type, g.type))}
              t={t}
              onPick={(v) => change(i, { ...u, value: v })}
            />
          );
        else if (decl?.type === "boolean" || decl?.type === "select") {
          const options = decl.type === "boolean" ? ["true", "false"] : (decl.options ?? []);
          const shown = shownValue(u.value);
          input = (
            <select
              id={id + "-value"}
              value={shown}
              onChange={(e) => change(i, { ...u, value: decl.type === "boolean" ? typedValue("boolean", e.target.value) : e.target.value })}
            >
              <option value="">—</option>
              {shown !== "" && !options.includes(shown) && <option value={shown}>{shown}</option>}
              {options.map((o) => (
                <option key={o} value={o}>
                  {decl.type === "boolean" ? t(o === "true" ? "canvasTrue" : "canvasFalse") : o}
                </option>
              ))}
            </select>
          );
        } else
          input = (
            <Text
              id={id + "-value"}
              value={shownValue(u.value)}
              placeholder={decl?.type === "number" ? t("canvasValueNumber") : decl?.type === "json" ? "JSON" : ""}
              onCommit={(v) => change(i, { ...u, value: typedValue(decl?.type ?? "string", v) })}
            />
          );
        const own = problemsAt(problems, field + "/" + i);
        return (
          <div key={i} className={"update" + (own.length ? " condition-bad" : "")} data-update={i}>
            <label htmlFor={id + "-variable"}>{t("canvasUpdateVariable")}</label>
            <div className="condition-line">
              <select id={id + "-variable"} className="update-variable" value={u.variable ?? ""} onChange={(e) => pickVariable(e.target.value)}>
                <option value="">{t("canvasPickVariable")}</option>
                {u.variable && !g && <option value={u.variable}>{u.variable}</option>}
                {globals.map((s) => (
                  <option key={s.key} value={reference(s)}>
                    {(s.label === s.key ? s.key : s.label + " (" + s.key + ")") + " · " + t("canvasVarType." + declared.get(s.key)!.type)}
                  </option>
                ))}
              </select>
              {value.length > 1 && (
                <button
                  type="button"
                  className="remove-update"
                  aria-label={t("canvasRemoveUpdate")}
                  title={t("canvasRemoveUpdate")}
                  onClick={() => props.set(value.filter((_, j) => j !== i))}
                >
                  ✕
                </button>
              )}
            </div>
            <div className="update-value-head">
              <label htmlFor={id + "-value"}>{t("canvasNewValue")}</label>
              <GivenAsPick id={id + "-given-as"} value={givenAs} t={t} onPick={switchGivenAs} />
            </div>
            {input}
            <Problems list={own} />
          </div>
        );
      })}
      <button type="button" className="add-update" onClick={() => props.set([...value, newUpdate()])}>
        + {t("canvasAddUpdate")}
      </button>
      <Problems list={unplaced(problems, field, value.length)} />
    </fieldset>
  );
}

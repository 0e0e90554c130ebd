// Flowbox UI: the chat (streamed answers, command cards, live output), the
// files panel, the app builder, the admin pages and the account page. No
// framework; every text that comes from a model, a command, a file or the
// API is inserted as text, never as HTML.
"use strict";

const csrf = () => document.querySelector('meta[name="csrf-token"]').content;
const T = (key) => (window.FLOWBOX_I18N && window.FLOWBOX_I18N[key]) || key;

// api calls the JSON API; a FormData body is sent as multipart/form-data.
async function api(method, path, body) {
  const form = body instanceof FormData;
  const headers = { "X-CSRF-Token": csrf() };
  if (!form) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, credentials: "same-origin", headers,
    body: body === undefined || form ? body : JSON.stringify(body),
  });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw Object.assign(new Error(data.message || resp.statusText), { status: resp.status });
  return data;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// Markdown, safely: the text is split into fenced code blocks and prose;
// prose keeps line breaks, `code` and **bold**. Nothing is parsed as HTML.
function renderMarkdown(target, text) {
  target.textContent = "";
  const parts = text.split(/```[a-zA-Z0-9_+-]*\n?/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) { target.append(el("pre", {}, el("code", {}, part.replace(/\n$/, "")))); return; }
    part.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/).forEach((piece) => {
      if (/^`[^`]+`$/.test(piece)) target.append(el("code", {}, piece.slice(1, -1)));
      else if (/^\*\*[^*]+\*\*$/.test(piece)) target.append(el("strong", {}, piece.slice(2, -2)));
      else piece.split("\n").forEach((line, j) => { if (j > 0) target.append(el("br")); target.append(line); });
    });
  });
}

// callSummary is what a card shows of a call: the command line, a skill
// tool's skill, script or file and arguments, or the arguments as sent
// (as callSummary in ui.go does for a chat's history).
function callSummary(tool, params) {
  let a;
  try { a = JSON.parse(params); } catch (_) { return params; /* broken arguments: show them as sent */ }
  if (!a || typeof a !== "object") return params;
  if (a.command) return a.command;
  if (tool === "execute_skill_script" && a.name) return [a.name, a.script || ""].concat(a.args || []).join(" ");
  if ((tool === "load_skill" || tool === "read_skill_resource") && a.name) return (a.name + " " + (a.path || "")).trim();
  return params;
}

// A tool card: collapsed, with the tool, what it was asked, a status
// badge, the duration, a stdout block filled while a command runs, and a
// stderr block drawn once there is stderr.
function toolCard(id, params, tool) {
  tool = tool || "sandbox_shell";
  const status = el("span", { class: "badge running", "data-role": "status" }, T("running"));
  const duration = el("span", { class: "duration", "data-role": "duration" });
  const card = el("details", { class: "tool-card", "data-tool-id": id },
    el("summary", {}, el("span", { class: "label" }, tool), status, duration,
      el("code", { class: "command", "data-role": "command" }, callSummary(tool, params))),
    el("div", { class: "out" }));
  streamBlock(card, "stdout");
  return card;
}

// streamBlock returns the card's block of one stream ("stdout" or
// "stderr"), labelled, drawing it if the card has none yet.
function streamBlock(card, stream) {
  const pre = card.querySelector('[data-role="' + stream + '"]');
  if (pre) return pre;
  const block = el("pre", { class: stream, "data-role": stream });
  card.querySelector(".out").append(el("div", { class: "stream", "data-stream": stream }, el("div", { class: "stream-label" }, stream), block));
  return block;
}

// finishCard shows the call's result: a command's stdout and stderr, an
// exec or MCP tool's result, or the error. It ends live cards and draws
// the cards of a chat's history.
function finishCard(card, response, status, durationMs) {
  let r = {};
  try { r = JSON.parse(response); } catch (_) { r = { stdout: response }; }
  let out = r.error || "";
  if (r.stdout !== undefined) out = r.stdout;
  else if (typeof r.result === "string") out = r.result;
  streamBlock(card, "stdout").textContent = out;
  if (r.stderr) streamBlock(card, "stderr").textContent = r.stderr;
  else { const b = card.querySelector('[data-stream="stderr"]'); if (b) b.remove(); }
  const badge = card.querySelector('[data-role="status"]');
  const st = status || (r.exitCode === 0 ? "success" : "failed");
  badge.className = "badge " + st.replace(" ", "-");
  badge.textContent = T(st);
  card.querySelector('[data-role="duration"]').textContent = (durationMs !== undefined ? durationMs : r.durationMs || 0) + " ms";
}

// sendChat sends the question with the files attached to it: uploaded
// already, they go as file_url parts naming them. A request the server
// refuses gives the files back to the form.
async function sendChat(form) {
  const input = form.querySelector("textarea");
  const question = input.value.trim();
  const list = document.getElementById("attachments");
  const chips = list ? [...list.querySelectorAll(".attachment")] : [];
  if (chips.some((c) => c.dataset.state === "uploading")) {
    say(form.querySelector('[data-role="upload-status"]'), T("waitUploads"), false);
    return;
  }
  const files = chips.filter((c) => c.dataset.state === "done")
    .map((c) => ({ path: c.dataset.path, sandboxPath: c.dataset.sandboxPath, size: humanSize(Number(c.dataset.size)) }));
  if (!question && !files.length) return;
  input.value = "";
  chips.forEach((c) => c.remove());
  const status = form.querySelector('[data-role="upload-status"]');
  if (status) status.textContent = "";
  let content = question;
  if (files.length) {
    content = (question ? [{ type: "text", text: question }] : []).concat(files.map((f) => ({ type: "file_url", name: f.path })));
  }
  const ok = await runChat(form, userMessage(question, files), { messages: [{ role: "user", content }] });
  if (!ok && list) chips.filter((c) => c.dataset.state === "done").forEach((c) => list.append(c));
}

// userMessage is the person's side of a turn: the text, and the files it
// attached as chips.
function userMessage(text, files) {
  const nodes = [text];
  if (files.length) {
    nodes.push(el("ul", { class: "msg-attachments", "aria-label": T("attachedFiles") },
      ...files.map((f) => el("li", { class: "attachment", "data-path": f.sandboxPath, title: f.sandboxPath },
        el("span", { class: "attachment-name", "data-role": "name" }, f.sandboxPath.split("/").pop()),
        el("span", { class: "attachment-size", "data-role": "size" }, f.size)))));
  }
  return nodes;
}

// The server stores a message's attachments as its last paragraph,
// "Attached files: /workspace/uploads/a.csv (12 B), ..."; splitAttached
// finds them in a stored message (null when it has none).
function splitAttached(text) {
  const lead = "Attached files: ";
  const at = text.lastIndexOf(lead);
  if (at < 0 || (at > 0 && text.slice(at - 2, at) !== "\n\n")) return null;
  const line = text.slice(at + lead.length);
  const item = /(\/workspace\/uploads\/[^\n]+?) \((\d+(?:\.\d+)? (?:B|[KMGTPE]iB))\)(?:, |$)/g;
  const files = [];
  let m, end = 0;
  while ((m = item.exec(line)) !== null && m.index === end) {
    files.push({ sandboxPath: m[1], size: m[2] });
    end = item.lastIndex;
  }
  if (!files.length || end !== line.length) return null;
  return { text: text.slice(0, at).trimEnd(), files };
}

// humanSize writes a size as the server does (workspace.HumanSize).
function humanSize(n) {
  if (n < 1024) return n + " B";
  let exp = 0, div = 1024;
  for (let m = Math.floor(n / 1024); m >= 1024 && exp < 5; m = Math.floor(m / 1024)) { div *= 1024; exp++; }
  return (n / div).toFixed(1).replace(/\.0$/, "") + " " + "KMGTPE"[exp] + "iB";
}

// runChat posts one chat request (a message, or the answer to an
// approval or a question), draws the person's side (text, or nodes) and
// streams the answer into a new assistant message: text, command cards,
// live output, approval cards, the cards of the workflow's questions.
async function runChat(form, said, request) {
  const box = document.getElementById("messages");
  box.append(el("div", { class: "msg user" }, ...[].concat(said)));
  const answer = el("div", { class: "msg assistant" });
  const text = el("div", { class: "text" });
  answer.append(text);
  box.append(answer);
  let answerText = "";
  const cards = {};
  const resp = await fetch((form.dataset.api || "") + "/api/v1/chat/completions", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    // detail always: where a share link hides the tool cards, the server
    // leaves them out and still sends the workflow's questions.
    body: JSON.stringify(Object.assign({ appId: form.dataset.app, chatId: form.dataset.chat, stream: true, detail: true, variables: chatVariables() }, request)),
  });
  if (!resp.ok) { const e = await resp.json().catch(() => ({})); text.textContent = e.message || resp.statusText; return false; }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "", event = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl); buf = buf.slice(nl + 1);
      if (line.startsWith("event: ")) { event = line.slice(7); continue; }
      if (!line.startsWith("data: ")) continue;
      const raw = line.slice(6);
      const name = event;
      event = ""; // an event's name holds for its data line only
      if (raw === "[DONE]") continue;
      const data = JSON.parse(raw);
      const kind = name === "interactive" && data.interactive ? data.interactive.type : "";
      if (name === "answer" || name === "") {
        const delta = data.choices && data.choices[0].delta.content;
        if (delta) { answerText += delta; renderMarkdown(text, answerText); }
      } else if (name === "toolCall") {
        const card = toolCard(data.tool.id, data.tool.params, data.tool.toolName);
        cards[data.tool.id] = card;
        answer.insertBefore(card, text);
      } else if (name === "toolOutput") {
        const card = cards[data.tool.id];
        if (card && data.tool.text) streamBlock(card, data.tool.stream).append(data.tool.text);
      } else if (name === "toolResponse") {
        const card = cards[data.tool.id];
        if (card) finishCard(card, data.tool.response, data.tool.status, data.tool.durationMs);
      } else if (kind === "commandApproval") {
        const p = data.interactive.params;
        const card = cards[p.toolCallId];
        const ask = approvalCard(form, p);
        answer.insertBefore(ask, card ? card.nextSibling : text);
      } else if (kind === "userSelect" || kind === "userInput") {
        // FastGPT's shapes: userSelectOptions [{value, key}], or inputForm
        // [{type, key, label, required, ...}].
        const p = data.interactive.params;
        answer.append(questionCard(form, { id: p.interactiveId, kind: kind === "userInput" ? "formInput" : "userSelect",
          description: p.description, options: p.userSelectOptions, fields: p.inputForm }));
      } else if (name === "error") {
        answer.append(el("div", { class: "error" }, data.message));
      } else if (name === "flowResponses" && form.dataset.details === "true" && Array.isArray(data)) {
        answer.append(runDetails(data));
      }
      box.scrollTop = box.scrollHeight;
    }
  }
  refreshFiles();
  return true;
}

// approvalCard asks the chat's owner about a command a rule wants a
// person to approve (P10): approve, approve for this chat, edit (the
// edited command is judged again) or reject with a reason. The answer is
// the next chat request; the run goes on in a new message.
function approvalCard(form, p) {
  const card = el("div", { class: "approval", "data-approval-id": p.approvalId });
  card.append(el("div", { class: "approval-title" }, T("approvalNeeded")),
    el("pre", { class: "approval-command", "data-role": "approval-command" }, p.command),
    el("div", { class: "hint", "data-role": "approval-why" }, (p.rule ? p.rule + ": " : "") + (p.justification || "")));
  const buttons = el("div", { class: "approval-actions" });
  const edit = el("textarea", { class: "approval-edit", "data-role": "approval-edit", hidden: "" });
  edit.value = p.command;
  const reason = el("input", { type: "text", class: "approval-reason", "data-role": "approval-reason", placeholder: T("rejectReason"), hidden: "" });
  const outcome = el("div", { class: "approval-outcome", "data-role": "approval-outcome" });
  const answer = async (decision, extra) => {
    card.querySelectorAll("button, textarea, input").forEach((b) => { b.disabled = true; });
    const said = { approve: T("approved"), approveChat: T("approvedChat"), edit: T("edited"), reject: T("rejectedAnswer") }[decision];
    showOutcome(card, decision, extra.reason || extra.command || "");
    const ok = await runChat(form, said + ": " + (extra.command || p.command) + (extra.reason ? " (" + extra.reason + ")" : ""),
      { interactive: Object.assign({ approvalId: p.approvalId, decision }, extra) });
    if (!ok) { card.querySelectorAll("button, textarea, input").forEach((b) => { b.disabled = false; }); outcome.textContent = ""; card.classList.remove("answered"); }
  };
  buttons.append(
    el("button", { type: "button", "data-answer": "approve", onclick: () => answer("approve", {}) }, T("approve")),
    el("button", { type: "button", class: "secondary", "data-answer": "approveChat", onclick: () => answer("approveChat", {}) }, T("approveChat")),
    el("button", { type: "button", class: "secondary", "data-answer": "edit", onclick: () => {
      if (edit.hidden) { edit.hidden = false; edit.focus(); return; }
      if (edit.value.trim()) answer("edit", { command: edit.value.trim() });
    } }, T("edit")),
    el("button", { type: "button", class: "danger", "data-answer": "reject", onclick: () => {
      if (reason.hidden) { reason.hidden = false; reason.focus(); return; }
      answer("reject", reason.value.trim() ? { reason: reason.value.trim() } : {});
    } }, T("reject")));
  card.append(edit, reason, buttons, outcome);
  return card;
}

// showOutcome marks an approval card answered (or lapsed).
function showOutcome(card, decision, detail) {
  card.classList.add("answered");
  const label = { approve: T("approved"), approveChat: T("approvedChat"), edit: T("edited"), reject: T("rejectedAnswer"), expired: T("expired"), lapsed: T("lapsed") }[decision] || decision;
  card.querySelector('[data-role="approval-outcome"]').textContent = label + (detail ? ": " + detail : "");
  card.querySelectorAll(".approval-actions, textarea, input").forEach((n) => { n.hidden = true; });
}

// drawStoredApprovals draws the approval cards of a reloaded chat: the
// one the chat waits for can still be answered; the others show what
// became of them (the turn that answered carries the decision).
function drawStoredApprovals(form) {
  const answers = {};
  document.querySelectorAll(".tool-card[data-approval-decision]").forEach((c) => {
    if (c.dataset.approvalDecision) answers[c.dataset.approvalId] = c.dataset;
  });
  const assistants = document.querySelectorAll("#messages .msg.assistant");
  const last = assistants[assistants.length - 1];
  document.querySelectorAll('.tool-card[data-status="awaiting approval"][data-approval-id]').forEach((c) => {
    const d = c.dataset;
    const card = approvalCard(form, { approvalId: d.approvalId, command: d.approvalCommand, rule: d.approvalRule, justification: d.approvalJustification, toolCallId: d.toolId });
    c.after(card);
    const a = answers[d.approvalId];
    if (a) showOutcome(card, a.approvalDecision, a.approvalEdited || a.approvalReason || "");
    else if (d.approvalExpires && new Date(d.approvalExpires) < new Date()) showOutcome(card, "expired", "");
    else if (c.closest(".msg.assistant") !== last) showOutcome(card, "lapsed", "");
  });
}

// questionCard asks the chat's owner the question of an interactive node
// of the workflow: a userSelect's options as buttons, a formInput's
// fields as a form. q is {id, kind, description, options, fields}. The
// answer is the next chat request, {interactive: {interactiveId, value}};
// the run goes on in a new message. Without a chat form (another user's
// chat) the card cannot be answered.
function questionCard(chatForm, q) {
  const card = el("div", { class: "question", "data-question-id": q.id, "data-kind": q.kind });
  const title = q.description || T(q.kind === "formInput" ? "fillForm" : "chooseOne");
  card.append(el("div", { class: "question-title", "data-role": "question-description" }, title));
  const outcome = el("div", { class: "question-outcome", "data-role": "question-outcome" });
  const inputs = () => card.querySelectorAll("button, input, select, textarea");
  const answer = async (value, said) => {
    inputs().forEach((n) => { n.disabled = true; });
    showAnswered(card, said);
    const ok = await runChat(chatForm, said, { interactive: { interactiveId: q.id, value } });
    if (!ok) {
      inputs().forEach((n) => { n.disabled = false; });
      card.classList.remove("answered");
      outcome.textContent = "";
      card.querySelectorAll(".question-actions").forEach((n) => { n.hidden = false; });
    }
  };
  if (q.kind === "userSelect") {
    const buttons = el("div", { class: "question-actions" });
    for (const o of q.options || []) {
      buttons.append(el("button", { type: "button", class: "secondary", "data-option": o.key, onclick: () => answer(o.key, o.value) }, o.value));
    }
    card.append(buttons);
  } else {
    const f = el("form", { class: "question-form question-actions" });
    for (const field of q.fields || []) f.append(fieldRow(field));
    f.append(el("button", { type: "submit", "data-role": "question-submit" }, T("submit")));
    f.addEventListener("submit", (e) => {
      e.preventDefault();
      const { value, said } = formAnswer(f, q.fields || []);
      answer(value, said);
    });
    card.append(f);
  }
  card.append(outcome);
  if (!chatForm) inputs().forEach((n) => { n.disabled = true; });
  return card;
}

// fieldRow is one field of a question's form: its label (marked when
// required), its description, and the input its type asks for, holding
// the default.
function fieldRow(f) {
  const id = "field-" + Math.random().toString(36).slice(2);
  const attrs = { id, name: f.key, "data-field": f.key };
  if (f.required) attrs.required = "";
  let input;
  const def = f.defaultValue;
  switch (f.type) {
    case "textarea":
      input = el("textarea", attrs);
      if (def !== undefined && def !== null) input.value = String(def);
      break;
    case "numberInput":
      input = el("input", Object.assign({ type: "number", step: "any" }, attrs,
        f.min !== undefined && f.min !== null ? { min: String(f.min) } : {}, f.max !== undefined && f.max !== null ? { max: String(f.max) } : {}));
      if (typeof def === "number") input.value = String(def);
      break;
    case "switch":
      delete attrs.required; // unchecked is an answer too
      input = el("input", Object.assign({ type: "checkbox" }, attrs));
      input.checked = def === true;
      break;
    case "select":
    case "multipleSelect":
      input = el("select", Object.assign(f.type === "multipleSelect" ? { multiple: "" } : {}, attrs));
      if (f.type === "select") input.append(el("option", { value: "" }, ""));
      for (const o of f.list || []) {
        const opt = el("option", { value: o.value }, o.label || o.value);
        opt.selected = f.type === "select" ? def === o.value : Array.isArray(def) && def.includes(o.value);
        input.append(opt);
      }
      break;
    default:
      input = el("input", Object.assign({ type: "text" }, attrs, f.maxLength ? { maxlength: String(f.maxLength) } : {}));
      if (def !== undefined && def !== null) input.value = String(def);
  }
  const label = el("label", { for: id }, (f.label || f.key) + (f.required ? " *" : ""));
  return el("div", { class: "question-field", "data-type": f.type },
    label, f.description ? el("div", { class: "hint" }, f.description) : null, input);
}

// formAnswer reads a question's form: the value to send (empty fields
// left out) and the answer as the person's message says it, one
// "label: value" line per field, as the server keeps it.
function formAnswer(form, fields) {
  const value = {};
  const lines = [];
  for (const f of fields) {
    const input = form.querySelector('[data-field="' + CSS.escape(f.key) + '"]');
    if (!input) continue;
    let v, shown;
    const labelOf = (x) => { const o = (f.list || []).find((c) => c.value === x); return o && o.label ? o.label : x; };
    if (f.type === "switch") { v = input.checked; shown = String(v); }
    else if (f.type === "numberInput") { if (input.value === "") continue; v = Number(input.value); shown = String(v); }
    else if (f.type === "multipleSelect") {
      v = [...input.selectedOptions].map((o) => o.value);
      if (!v.length) continue;
      shown = v.map(labelOf).join(", ");
    } else {
      v = input.value;
      if (!v.trim()) continue;
      shown = f.type === "select" ? labelOf(v) : v;
    }
    value[f.key] = v;
    lines.push((f.label || f.key) + ": " + shown);
  }
  return { value, said: lines.join("\n") };
}

// showAnswered marks a question's card answered, with the answer.
function showAnswered(card, said) {
  card.classList.add("answered");
  card.querySelector('[data-role="question-outcome"]').textContent = T("answered") + ": " + said;
  card.querySelectorAll(".question-actions").forEach((n) => { n.hidden = true; });
}

// showLapsed marks a question's card that will not be answered: it
// expired, or the chat went on.
function showLapsed(card, label) {
  card.classList.add("answered");
  card.querySelector('[data-role="question-outcome"]').textContent = label;
  card.querySelectorAll(".question-actions").forEach((n) => { n.hidden = true; });
}

// drawStoredQuestions draws the questions of a reloaded chat, which the
// server wrote with their answers: the one the chat waits for can still
// be answered; the others show their answer, or that they lapsed.
function drawStoredQuestions(chatForm) {
  const assistants = document.querySelectorAll("#messages .msg.assistant");
  const last = assistants[assistants.length - 1];
  document.querySelectorAll(".question-stored").forEach((n) => {
    let d;
    try { d = JSON.parse(n.dataset.question); } catch (_) { return; }
    const r = d.request || {};
    const card = questionCard(chatForm, { id: r.id, kind: r.kind, description: r.description, options: r.options, fields: r.fields });
    const mine = n.closest(".msg.assistant") === last;
    n.replaceWith(card);
    if (d.answer) showAnswered(card, d.said || "");
    else if (d.expiresAt && new Date(d.expiresAt) < new Date()) showLapsed(card, T("expired"));
    else if (!mine) showLapsed(card, T("lapsed"));
  });
}

// Files panel: the workspace tree, a text editor, downloads.
let currentDir = "/workspace";
// filesShown counts the panel's listings, so that an answer overtaken by
// a later listing (a click while the chat refreshes) is dropped.
let filesShown = 0;
// filesAPI is the prefix of the file API: empty for signed-in users, the
// share link's path for its visitors.
const filesAPI = () => { const p = document.getElementById("files"); return (p && p.dataset.api) || ""; };
async function refreshFiles(dir) {
  const panel = document.getElementById("files");
  if (!panel) return;
  if (dir) currentDir = dir;
  const { app, chat } = panel.dataset;
  const list = panel.querySelector('[data-role="file-list"]');
  panel.querySelector('[data-role="cwd"]').textContent = currentDir;
  const target = panel.querySelector('[data-role="upload-target"]');
  if (target) target.textContent = T("uploadTo").replace("{dir}", uploadDir());
  const seq = ++filesShown;
  try {
    const data = await api("POST", filesAPI() + "/api/core/ai/sandbox/file", { action: "list", appId: app, chatId: chat, userId: panel.dataset.user || undefined, path: currentDir });
    if (seq !== filesShown) return;
    list.textContent = "";
    if (currentDir !== "/workspace") {
      list.append(el("li", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); refreshFiles(currentDir.replace(/\/[^/]+$/, "")); } }, "..")));
    }
    for (const f of data.files) {
      const open = (e) => { e.preventDefault(); f.type === "directory" ? refreshFiles(f.path) : openFile(f.path); };
      list.append(el("li", { class: f.type, "data-path": f.path },
        el("a", { href: "#", onclick: open }, f.name + (f.type === "directory" ? "/" : "")),
        el("button", { class: "download", title: T("download"), onclick: () => download(f.path, f.name, f.type) }, "⤓")));
    }
  } catch (err) { if (seq === filesShown) list.textContent = err.message; }
}

async function openFile(path) {
  const panel = document.getElementById("files");
  const editor = panel.querySelector("textarea");
  const status = panel.querySelector('[data-role="file-status"]');
  try {
    const data = await api("POST", filesAPI() + "/api/core/ai/sandbox/file", { action: "read", appId: panel.dataset.app, chatId: panel.dataset.chat, userId: panel.dataset.user || undefined, path });
    editor.value = data.content; editor.dataset.path = path;
    status.className = "status"; status.textContent = path;
  } catch (err) { fail(status, err); }
}

// saveFile writes the open file; what the server refuses (a read-only
// share link, the read-only skills) is shown with its reason.
async function saveFile() {
  const panel = document.getElementById("files");
  const editor = panel.querySelector("textarea");
  const status = panel.querySelector('[data-role="file-status"]');
  if (!editor.dataset.path) return;
  try {
    await api("POST", filesAPI() + "/api/core/ai/sandbox/file", { action: "write", appId: panel.dataset.app, chatId: panel.dataset.chat, userId: panel.dataset.user || undefined, path: editor.dataset.path, content: editor.value });
    say(status, editor.dataset.path + " — " + T("saved"), true);
  } catch (err) { fail(status, err); }
}

// Uploads (K2): files a person gives the agent go to the chat's
// /workspace/uploads, stored on the host, one request per file so each
// has its progress bar. The first upload of a new chat creates it, with
// the id the page already has, which its first message then uses.
const uploadsRoot = "/workspace/uploads";

// uploadDir is where the files panel uploads: the directory shown when
// it is inside the uploads, else the uploads themselves.
function uploadDir() {
  return currentDir === uploadsRoot || currentDir.startsWith(uploadsRoot + "/") ? currentDir : uploadsRoot;
}

// uploadFile sends one file of the chat that where (an element with
// data-app, data-chat, data-api) names, drawn as a chip in list: a
// progress bar while it goes, then its name and size, or the server's
// reason. It resolves to the chip, whose data-state says how it ended.
// XMLHttpRequest, because fetch reports no upload progress.
function uploadFile(where, list, file, dir) {
  const q = new URLSearchParams({ appId: where.dataset.app });
  if (dir) q.set("dir", dir);
  if (where.dataset.user) q.set("userId", where.dataset.user);
  const url = (where.dataset.api || "") + "/api/uploads/" + encodeURIComponent(where.dataset.chat) + "?" + q;
  const progress = el("progress", { max: "100", value: "0", "aria-label": T("uploading").replace("{name}", file.name) });
  const remove = el("button", { type: "button", class: "chip-remove", "data-role": "remove", "aria-label": named("removeFile", file.name), title: named("removeFile", file.name) }, "×");
  const chip = el("li", { class: "attachment", "data-state": "uploading", "data-name": file.name },
    el("span", { class: "attachment-name", "data-role": "name" }, file.name), progress, remove);
  list.append(chip);
  const xhr = new XMLHttpRequest();
  remove.addEventListener("click", () => removeUpload(where, chip, xhr));
  return new Promise((resolve) => {
    const failed = (reason) => {
      chip.dataset.state = "error";
      progress.replaceWith(el("span", { class: "attachment-error", "data-role": "error" }, T("uploadFailed").replace("{name}", file.name).replace("{reason}", reason)));
      remove.setAttribute("aria-label", T("dismiss"));
      remove.title = T("dismiss");
      resolve(chip);
    };
    xhr.upload.addEventListener("progress", (e) => { if (e.lengthComputable) progress.value = Math.round((e.loaded / e.total) * 100); });
    xhr.addEventListener("load", () => {
      let data = {};
      try { data = JSON.parse(xhr.responseText); } catch (_) { /* not JSON: a proxy's page */ }
      if (xhr.status !== 201 || !data.files || !data.files.length) {
        failed(data.message || xhr.status + " " + xhr.statusText);
        return;
      }
      const f = data.files[0];
      Object.assign(chip.dataset, { state: "done", path: f.path, sandboxPath: f.sandboxPath, size: String(f.size) });
      chip.title = f.sandboxPath;
      chip.querySelector('[data-role="name"]').textContent = f.name;
      progress.replaceWith(el("span", { class: "attachment-size", "data-role": "size" }, humanSize(f.size)));
      remove.setAttribute("aria-label", named("removeFile", f.name));
      remove.title = named("removeFile", f.name);
      resolve(chip);
    });
    xhr.addEventListener("error", () => failed(T("uploadNetwork")));
    xhr.addEventListener("abort", () => { chip.dataset.state = "aborted"; resolve(chip); });
    xhr.open("POST", url);
    xhr.setRequestHeader("X-CSRF-Token", csrf());
    const body = new FormData();
    body.append("file", file);
    xhr.send(body);
  });
}

// removeUpload takes a chip back: an upload under way is cancelled, a
// stored one deleted from the chat, a failed one just dismissed.
async function removeUpload(where, chip, xhr) {
  const state = chip.dataset.state;
  if (state === "uploading") { xhr.abort(); chip.remove(); return; }
  if (state !== "done") { chip.remove(); return; }
  const q = new URLSearchParams({ appId: where.dataset.app, area: "uploads", path: chip.dataset.path });
  if (where.dataset.user) q.set("userId", where.dataset.user);
  const status = chip.closest("form, aside").querySelector('[data-role="upload-status"], [data-role="file-status"]');
  try {
    await api("DELETE", (where.dataset.api || "") + "/api/uploads/" + encodeURIComponent(where.dataset.chat) + "/files?" + q);
    chip.remove();
    if (status) status.textContent = "";
    refreshFiles();
  } catch (err) { if (status) fail(status, err); }
}

// attachFiles uploads files for the next message; their chips wait above
// the input until it is sent.
async function attachFiles(form, files) {
  const list = document.getElementById("attachments");
  form.querySelector('[data-role="upload-status"]').textContent = "";
  const done = await Promise.all(files.map((f) => uploadFile(form, list, f, "")));
  if (done.some((c) => c.dataset.state === "done")) refreshFiles();
}

// The chat page's attach button, and files dropped anywhere on the chat.
function setupAttachments() {
  const form = document.getElementById("chat-form");
  if (!form || form.dataset.uploads !== "true") return;
  const input = document.getElementById("attach-input");
  document.getElementById("attach").addEventListener("click", () => input.click());
  input.addEventListener("change", () => { attachFiles(form, [...input.files]); input.value = ""; });
  const zone = form.closest(".chat-main");
  const hint = zone.querySelector('[data-role="drop-hint"]');
  const carriesFiles = (e) => e.dataTransfer && [...e.dataTransfer.types].includes("Files");
  let depth = 0; // dragenter and dragleave come for every child crossed
  const show = (on) => { zone.classList.toggle("dropping", on); hint.hidden = !on; };
  zone.addEventListener("dragenter", (e) => { if (carriesFiles(e)) { e.preventDefault(); depth++; show(true); } });
  zone.addEventListener("dragover", (e) => { if (carriesFiles(e)) { e.preventDefault(); e.dataTransfer.dropEffect = "copy"; } });
  zone.addEventListener("dragleave", () => { if (depth > 0 && --depth === 0) show(false); });
  zone.addEventListener("drop", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    depth = 0; show(false);
    attachFiles(form, [...e.dataTransfer.files]);
  });
}

// The files panel's "Upload here": into the directory shown when it is in
// the uploads, else into the uploads; the panel then shows that
// directory. Chips stay only for the files that failed.
function setupPanelUploads() {
  const panel = document.getElementById("files");
  const input = document.getElementById("files-upload-input");
  if (!panel || !input) return;
  document.getElementById("files-upload").addEventListener("click", () => input.click());
  input.addEventListener("change", async () => {
    const files = [...input.files];
    input.value = "";
    const dir = uploadDir();
    const list = document.getElementById("files-uploads");
    const done = await Promise.all(files.map((f) => uploadFile(panel, list, f, dir)));
    done.filter((c) => c.dataset.state === "done").forEach((c) => c.remove());
    await refreshFiles(dir);
  });
}

// A stored message's attachments are drawn as chips under its text.
function drawStoredAttachments() {
  document.querySelectorAll("#messages .msg.user").forEach((m) => {
    const found = splitAttached(m.textContent);
    if (!found) return;
    m.textContent = "";
    m.append(...userMessage(found.text, found.files));
  });
}

async function download(path, name, type) {
  const panel = document.getElementById("files");
  const resp = await fetch(filesAPI() + "/api/core/ai/sandbox/download", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    body: JSON.stringify({ appId: panel.dataset.app, chatId: panel.dataset.chat, userId: panel.dataset.user || undefined, path }),
  });
  if (!resp.ok) return;
  const blob = await resp.blob();
  const a = el("a", { href: URL.createObjectURL(blob), download: type === "directory" ? name + ".zip" : name });
  document.body.append(a); a.click(); a.remove();
}

// The app's Publish page: its keys and share links, read from the API
// when the page opens.
function setupPublish() {
  const panel = document.getElementById("publish");
  if (!panel) return;
  // A date picked today would make a key or link that is already expired.
  const d = new Date();
  d.setDate(d.getDate() + 1);
  const tomorrow = d.getFullYear() + "-" + String(d.getMonth() + 1).padStart(2, "0") + "-" + String(d.getDate()).padStart(2, "0");
  panel.querySelectorAll('input[type="date"]').forEach((input) => { input.min = tomorrow; });
  const on = (sel, ev, fn) => panel.querySelector(sel).addEventListener(ev, (e) => { e.preventDefault(); fn(e.currentTarget); });
  on("#new-app-key", "submit", createAppKey);
  on('#app-key-secret [data-role="copy"]', "click", copySecret);
  on('#app-key-secret [data-role="hide"]', "click", hideSecret);
  on("#new-link", "submit", createLink);
  loadAppKeys();
  loadLinks();
}
document.addEventListener("DOMContentLoaded", setupPublish);

const publishPath = (tail) => "/api/apps/" + encodeURIComponent(document.getElementById("publish").dataset.app) + tail;

// expiryOf turns a picked date into the instant the key or link stops
// working: the start of that day in the owner's time zone.
function expiryOf(date) {
  if (!date) return undefined;
  const [y, m, d] = date.split("-").map(Number);
  return new Date(y, m - 1, d).toISOString();
}

function expiryCell(iso, expired) {
  if (!iso) return T("publishNoExpiry");
  if (expired) return el("span", { class: "error", title: iso }, T("publishExpired"));
  return when(iso);
}

const perMinute = (n) => (n > 0 ? T("publishPerMinute").replace("{n}", n) : T("publishNoLimit"));

// positive reads an optional whole number from a form field.
function positive(input) {
  const n = parseInt(input.value, 10);
  return n > 0 ? n : undefined;
}

async function loadAppKeys() {
  const section = document.getElementById("app-keys");
  const line = section.querySelector('[data-role="status"]');
  let keys;
  try { ({ keys } = await api("GET", publishPath("/keys"))); } catch (err) { fail(line, err); return; }
  keys = keys || [];
  const body = document.getElementById("app-key-list").tBodies[0];
  body.textContent = "";
  for (const k of keys) {
    const expired = !!k.expiresAt && new Date(k.expiresAt) <= new Date();
    body.append(el("tr", { "data-key": k.id, "data-name": k.name },
      el("td", { "data-role": "name" }, k.name),
      el("td", { "data-role": "prefix" }, el("code", {}, k.prefix + "…")),
      el("td", { "data-role": "created" }, when(k.createdAt)),
      el("td", { "data-role": "last-used" }, when(k.lastUsedAt)),
      el("td", { "data-role": "expires" }, expiryCell(k.expiresAt, expired)),
      el("td", { "data-role": "rate" }, perMinute(k.ratePerMinute)),
      el("td", {}, el("button", { type: "button", class: "secondary", "data-key-action": "revoke", "aria-label": T("revoke") + " " + k.name,
        onclick: () => revokeAppKey(k) }, T("revoke")))));
  }
  section.querySelector('[data-role="empty"]').hidden = keys.length > 0;
}

// As on the account page, a new key's secret is shown once, from the
// answer that made it.
async function createAppKey(form) {
  const line = document.querySelector('#app-keys [data-role="status"]');
  const box = document.getElementById("app-key-secret");
  const f = form.elements;
  const body = { name: f.name.value.trim(), expiresAt: expiryOf(f.expires.value), ratePerMinute: positive(f.ratePerMinute) };
  try {
    const k = await api("POST", publishPath("/keys"), body);
    box.querySelector('[data-role="key-name"]').textContent = k.name;
    box.querySelector("input").value = k.key;
    box.hidden = false;
    form.reset();
    line.className = "status";
    line.textContent = "";
  } catch (err) { fail(line, err); return; }
  await loadAppKeys();
}

async function revokeAppKey(k) {
  const line = document.querySelector('#app-keys [data-role="status"]');
  if (!confirm(named("publishRevokeKeyConfirm", k.name))) return;
  try {
    await api("DELETE", publishPath("/keys/" + encodeURIComponent(k.id)));
    say(line, named("publishKeyRevoked", k.name), true);
  } catch (err) { fail(line, err); }
  await loadAppKeys();
}

async function loadLinks() {
  const section = document.getElementById("links");
  const line = section.querySelector('[data-role="status"]');
  let links;
  try { ({ links } = await api("GET", publishPath("/links"))); } catch (err) { fail(line, err); return; }
  links = links || [];
  const body = document.getElementById("link-list").tBodies[0];
  body.textContent = "";
  for (const l of links) {
    const url = location.origin + l.url;
    const files = T("publishFiles" + l.files);
    body.append(el("tr", { "data-link": l.id, "data-name": l.name, class: l.expired ? "expired" : "" },
      el("td", { "data-role": "name" }, l.name),
      el("td", { "data-role": "url" }, el("div", { class: "link-url" },
        el("input", { type: "text", readonly: "", spellcheck: "false", value: url, "aria-label": T("publishCopyLink") + " " + l.name }),
        el("button", { type: "button", class: "secondary", "data-role": "copy", onclick: (e) => copySecret(e.currentTarget) }, T("copy")))),
      el("td", { "data-role": "expires" }, expiryCell(l.expiresAt, l.expired)),
      el("td", { "data-role": "runs" }, l.runs + " / " + (l.maxRuns > 0 ? l.maxRuns : T("publishNoLimit"))),
      el("td", { "data-role": "rate" }, perMinute(l.ratePerMinute)),
      el("td", { "data-role": "tools" }, T(l.showTools ? "publishToolsShown" : "publishToolsHidden")),
      el("td", { "data-role": "files" }, files.startsWith("publishFiles") ? l.files : files),
      el("td", { "data-role": "hook" }, l.hookUrl || T("publishNoHook")),
      el("td", {}, el("button", { type: "button", class: "secondary", "data-link-action": "revoke", "aria-label": T("revoke") + " " + l.name,
        onclick: () => revokeLink(l) }, T("revoke")))));
  }
  section.querySelector('[data-role="empty"]').hidden = links.length > 0;
}

async function createLink(form) {
  const line = document.querySelector('#links [data-role="status"]');
  const f = form.elements;
  const body = {
    name: f.name.value.trim(), expiresAt: expiryOf(f.expires.value), ratePerMinute: positive(f.ratePerMinute),
    maxRuns: positive(f.maxRuns), showTools: f.showTools.checked, files: f.files.value, hookUrl: f.hookUrl.value.trim() || undefined,
  };
  try {
    const l = await api("POST", publishPath("/links"), body);
    form.reset();
    say(line, named("publishLinkCreated", l.name), true);
  } catch (err) { fail(line, err); return; }
  await loadLinks();
}

async function revokeLink(l) {
  const line = document.querySelector('#links [data-role="status"]');
  if (!confirm(named("publishRevokeLinkConfirm", l.name))) return;
  try {
    await api("DELETE", publishPath("/links/" + encodeURIComponent(l.id)));
    say(line, named("publishLinkRevoked", l.name), true);
  } catch (err) { fail(line, err); }
  await loadLinks();
}

// A new app starts from the starter graph; the canvas edits it.
async function createApp(form) {
  const status = form.querySelector('[data-role="status"]');
  try {
    const app = await api("POST", "/api/apps", { name: form.elements.name.value, public: false, graph: JSON.parse(form.dataset.graph) });
    location.href = "/apps/" + encodeURIComponent(app.appId) + "/flow";
  } catch (err) { status.textContent = err.message; }
}

// Deleting a chat returns once the deletion is recorded; the workers
// delete its sandbox afterwards.
async function deleteChat(button) {
  if (!confirm(T("deleteChatConfirm"))) return;
  const app = encodeURIComponent(button.dataset.app);
  try {
    await api("DELETE", "/api/apps/" + app + "/chats", { chatIds: [button.dataset.chat], userId: button.dataset.user || undefined });
    location.href = "/apps/" + app + "/chats";
  } catch (err) { alert(err.message); }
}

// A status line: what an action did, or why it failed. A refused
// session (401) also gets a link to sign in again.
function say(line, text, ok, status) {
  line.className = "status " + (ok ? "ok" : "error");
  line.textContent = text;
  if (status === 401) line.append(" ", el("a", { href: "/login" }, T("signIn")));
}
const fail = (line, err) => say(line, err.message, false, err.status);
const named = (key, name) => T(key).replace("{name}", name);

// A time from the API in the reader's time zone, to the minute; the
// element keeps the exact instant.
function when(iso) {
  if (!iso) return T("never");
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, "0");
  return el("time", { datetime: iso, title: iso },
    d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes()));
}

// The admins' user list, drawn from the API after every change.
async function loadUsers() {
  const table = document.getElementById("users");
  const line = document.getElementById("users-status");
  let users;
  try { ({ users } = await api("GET", "/admin/api/users")); } catch (err) { fail(line, err); return; }
  const body = table.tBodies[0];
  body.textContent = "";
  for (const u of users) {
    const state = u.disabled ? "disabled" : "active";
    const actions = el("td", {});
    if (u.id !== table.dataset.self) {
      const action = u.disabled ? "enable" : "disable";
      actions.append(el("button", { class: "secondary", "data-user-action": action, onclick: () => setUserDisabled(u, !u.disabled) }, T(action)), " ");
    }
    actions.append(el("button", { class: "secondary", "data-user-action": "password", onclick: () => resetPassword(u) }, T("resetPassword")), " ",
      el("button", { class: "secondary", "data-user-action": "link", onclick: () => resetByLink(u) }, T("resetByLink")));
    if (u.id !== table.dataset.self) {
      actions.append(" ", el("button", { class: "secondary", "data-user-action": "delete", onclick: () => openDeleteUser(u, users) }, T("delete")));
    }
    body.append(el("tr", { "data-user": u.name, "data-id": u.id, "data-state": state },
      el("td", { "data-role": "name" }, u.name),
      el("td", { "data-role": "role" }, T(u.role === "admin" ? "roleAdmin" : "roleUser")),
      el("td", { "data-role": "state" }, el("span", { class: "state " + state }, T(state))),
      el("td", { "data-role": "created" }, when(u.createdAt)),
      actions));
  }
}

async function createUser(form) {
  const line = form.querySelector('[data-role="status"]');
  const f = form.elements;
  const invite = f.invite.checked;
  const body = { name: f.name.value.trim(), role: f.role.value };
  if (invite) body.invite = true; else body.password = f.password.value;
  try {
    const made = await api("POST", "/admin/api/users", body);
    const u = invite ? made.user : made;
    form.reset();
    invitePassword(form);
    say(line, named("userCreated", u.name), true);
    if (invite) showUserLink("inviteLink", u.name, made);
  } catch (err) { fail(line, err); return; }
  await loadUsers();
}

// With "invite link instead of a password" the password field is off.
function invitePassword(form) {
  const pw = form.elements.password;
  pw.disabled = form.elements.invite.checked;
  pw.required = !pw.disabled;
  if (pw.disabled) pw.value = "";
}

// A set-password link is shown once, from the answer that made it, as an
// absolute address to send; the API gives it relative.
function showUserLink(key, name, made) {
  const box = document.getElementById("user-link");
  const expires = new Date(made.expiresAt).toLocaleString();
  box.querySelector('[data-role="note"]').textContent = T(key).replace("{name}", name).replace("{expires}", expires);
  box.querySelector("input").value = location.origin + made.setPasswordUrl;
  box.hidden = false;
}

async function resetByLink(u) {
  const line = document.getElementById("users-status");
  try {
    const made = await api("POST", "/admin/api/users/" + encodeURIComponent(u.id) + "/password", { invite: true });
    line.textContent = "";
    showUserLink("resetLink", u.name, made);
  } catch (err) { fail(line, err); }
}

// Deleting a user asks what becomes of their apps: transferred to another
// user, or deleted with their chats and sandboxes.
function openDeleteUser(u, users) {
  const dialog = document.getElementById("delete-user");
  const form = dialog.querySelector("form");
  const self = document.getElementById("users").dataset.self;
  form.reset();
  form.dataset.id = u.id; form.dataset.name = u.name;
  dialog.querySelector('[data-role="title"]').textContent = named("deleteUserTitle", u.name);
  dialog.querySelector('[data-role="status"]').textContent = "";
  const to = form.elements.to;
  to.textContent = "";
  for (const other of users) {
    if (other.id !== u.id) to.append(el("option", { value: other.id }, other.name));
  }
  to.value = self;
  dialog.showModal();
}

async function deleteUser(form) {
  const line = form.querySelector('[data-role="status"]');
  const mode = form.elements.apps.value;
  const to = form.elements.to;
  let query = "?apps=" + mode;
  if (mode === "transfer") query += "&to=" + encodeURIComponent(to.value);
  try {
    const done = await api("DELETE", "/admin/api/users/" + encodeURIComponent(form.dataset.id) + query);
    form.closest("dialog").close();
    const n = String(done.apps.length);
    const key = done.apps.length === 0 ? "userDeleted" : mode === "transfer" ? "userDeletedTransfer" : "userDeletedApps";
    const toName = to.selectedOptions.length ? to.selectedOptions[0].textContent : "";
    say(document.getElementById("users-status"), named(key, form.dataset.name).replace("{n}", n).replace("{to}", toName), true);
  } catch (err) { fail(line, err); return; }
  await loadUsers();
}

// The set-password page: the link's token sets the password once; then
// the person signs in with it.
async function setPasswordWithLink(form) {
  const line = form.querySelector('[data-role="status"]');
  const f = form.elements;
  if (f.password.value !== f.repeat.value) { say(line, T("passwordsDiffer"), false); return; }
  try {
    const resp = await fetch("/api/set-password", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: form.dataset.token, password: f.password.value }) });
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error(data.message || resp.statusText);
    form.querySelector('[data-role="fields"]').hidden = true;
    say(line, T("passwordSet") + " ", true);
    line.append(el("a", { href: data.signIn || "/login", "data-role": "sign-in" }, T("signIn")));
  } catch (err) { say(line, err.message, false); }
}

async function setUserDisabled(u, disabled) {
  const line = document.getElementById("users-status");
  try {
    await api("POST", "/admin/api/users/" + encodeURIComponent(u.id) + (disabled ? "/disable" : "/enable"));
    say(line, named(disabled ? "userDisabled" : "userEnabled", u.name), true);
  } catch (err) { fail(line, err); }
  await loadUsers();
}

async function resetPassword(u) {
  const line = document.getElementById("users-status");
  const password = prompt(named("resetPasswordPrompt", u.name));
  if (!password) return;
  try {
    await api("POST", "/admin/api/users/" + encodeURIComponent(u.id) + "/password", { password });
    say(line, named("passwordReset", u.name), true);
  } catch (err) { fail(line, err); }
}

// The caller's own password and API keys.
async function changePassword(form) {
  const line = form.querySelector('[data-role="status"]');
  const f = form.elements;
  if (f.newPassword.value !== f.repeatPassword.value) { say(line, T("passwordsDiffer"), false); return; }
  try {
    await api("POST", "/api/me/password", { oldPassword: f.oldPassword.value, newPassword: f.newPassword.value });
    form.reset();
    say(line, T("passwordChanged"), true);
  } catch (err) { fail(line, err); }
}

async function loadKeys() {
  const section = document.getElementById("keys");
  const line = section.querySelector('[data-role="status"]');
  let keys;
  try { ({ keys } = await api("GET", "/api/keys")); } catch (err) { fail(line, err); return; }
  const body = document.getElementById("key-list").tBodies[0];
  body.textContent = "";
  for (const k of keys) {
    body.append(el("tr", { "data-key": k.id, "data-name": k.name },
      el("td", { "data-role": "name" }, k.name),
      el("td", { "data-role": "prefix" }, el("code", {}, k.prefix + "…")),
      el("td", { "data-role": "created" }, when(k.createdAt)),
      el("td", { "data-role": "last-used" }, when(k.lastUsedAt)),
      el("td", { "data-role": "expires" }, keyExpiry(k.expiresAt)),
      el("td", { "data-role": "rate" }, k.ratePerMinute ? T("perMinute").replace("{n}", k.ratePerMinute) : T("noLimit")),
      el("td", {}, el("button", { class: "secondary", "data-key-action": "revoke", onclick: () => revokeKey(k) }, T("revoke")))));
  }
  section.querySelector('[data-role="empty"]').hidden = keys.length > 0;
}

// A new key's secret is shown once, from the answer that made it; the
// list shows keys by their prefix only.
async function createKey(form) {
  const line = document.querySelector('#keys [data-role="status"]');
  const box = document.getElementById("new-key-secret");
  const f = form.elements;
  const body = { name: f.name.value.trim() };
  // A key is valid through the chosen day, to its last second here.
  if (f.expiry.value) {
    const [y, m, d] = f.expiry.value.split("-").map(Number);
    body.expiresAt = new Date(y, m - 1, d, 23, 59, 59).toISOString();
  }
  if (f.rate.value) body.ratePerMinute = parseInt(f.rate.value, 10);
  try {
    const k = await api("POST", "/api/keys", body);
    box.querySelector('[data-role="key-name"]').textContent = k.name;
    box.querySelector("input").value = k.key;
    box.hidden = false;
    form.reset();
    line.textContent = "";
  } catch (err) { fail(line, err); return; }
  await loadKeys();
}

// A key's expiry: never, the time, or the time marked expired.
function keyExpiry(iso) {
  if (!iso) return T("never");
  if (new Date(iso) > new Date()) return when(iso);
  return el("span", { class: "expired-key" }, when(iso), " · ", el("strong", { "data-role": "expired" }, T("expired")));
}

// hideSecret and copySecret serve every secret box (the account's keys,
// the app's keys) and the share links' rows: button is the one clicked.
function hideSecret(button) {
  const box = button.closest(".secret");
  box.querySelector("input").value = "";
  box.hidden = true;
}

async function copySecret(button) {
  const input = button.parentElement.querySelector("input");
  input.select();
  // The clipboard API needs a secure context; elsewhere the key stays
  // selected for the user to copy.
  if (navigator.clipboard) await navigator.clipboard.writeText(input.value).catch(() => {});
}

async function revokeKey(k) {
  const line = document.querySelector('#keys [data-role="status"]');
  if (!confirm(named("revokeKeyConfirm", k.name))) return;
  try {
    await api("DELETE", "/api/keys/" + encodeURIComponent(k.id));
    say(line, named("keyRevoked", k.name), true);
  } catch (err) { fail(line, err); }
  await loadKeys();
}

async function signIn(form) {
  const status = form.querySelector('[data-role="status"]');
  try {
    await fetch("/api/login", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: form.elements.name.value, password: form.elements.password.value }) })
      .then(async (r) => { if (!r.ok) throw new Error((await r.json()).message); });
    location.href = "/";
  } catch (err) { status.textContent = err.message; }
}

document.addEventListener("DOMContentLoaded", () => {
  const on = (sel, ev, fn) => { const n = document.querySelector(sel); if (n) n.addEventListener(ev, (e) => { e.preventDefault(); fn(n); }); };
  on("#chat-form", "submit", sendChat);
  on("#login", "submit", signIn);
  on("#new-app", "submit", createApp);
  on("#import-app", "submit", importApp);
  on("#delete-chat", "click", deleteChat);
  on("#save-file", "click", saveFile);
  on("#new-user", "submit", createUser);
  on("#change-password", "submit", changePassword);
  on("#new-key", "submit", createKey);
  on('#new-key-secret [data-role="copy"]', "click", copySecret);
  on('#new-key-secret [data-role="hide"]', "click", hideSecret);
  on("#new-user-invite", "change", () => invitePassword(document.getElementById("new-user")));
  on('#user-link [data-role="copy"]', "click", copySecret);
  on('#user-link [data-role="hide"]', "click", hideSecret);
  on("#delete-user form", "submit", deleteUser);
  on('#delete-user [data-role="cancel"]', "click", (b) => b.closest("dialog").close());
  on("#set-password", "submit", setPasswordWithLink);
  const expiry = document.getElementById("new-key-expiry");
  if (expiry) expiry.min = new Date(Date.now() - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 10);
  if (document.getElementById("users")) loadUsers();
  if (document.getElementById("keys")) loadKeys();
  on("#logout", "click", async () => { await api("POST", "/api/logout"); location.href = "/login"; });
  document.querySelectorAll(".history-answer").forEach((n) => renderMarkdown(n, n.dataset.text));
  document.querySelectorAll(".tool-card[data-response]").forEach((c) => finishCard(c, c.dataset.response, c.dataset.status, parseInt(c.dataset.duration, 10)));
  const chatForm = document.getElementById("chat-form");
  if (chatForm) drawStoredApprovals(chatForm);
  drawStoredQuestions(chatForm);
  drawStoredAttachments();
  setupAttachments();
  setupPanelUploads();
  document.querySelectorAll("[data-admin-action]").forEach((b) => b.addEventListener("click", async () => {
    try {
      await api("POST", "/admin/api/sandboxes/" + b.dataset.id + "/" + b.dataset.adminAction);
      if (b.dataset.adminAction !== "delete") { location.reload(); return; }
      // The deletion is recorded; the workers remove the sandbox and then
      // its record, so the row stays, marked, until the next reload.
      const row = b.closest("tr");
      row.dataset.status = "deleting";
      row.querySelector('[data-role="status"]').textContent = document.getElementById("sandboxes").dataset.deletingLabel;
      row.querySelectorAll("[data-admin-action]").forEach((x) => { x.disabled = true; });
    } catch (err) { alert(err.message); }
  }));
  refreshFiles();
});

// The admins' audit page: the filters become the query of
// /admin/api/audit and of the export link; "Next page" follows the
// answer's cursor, "Newest" starts again.
function auditQuery(form) {
  const q = new URLSearchParams();
  for (const name of ["user", "app", "chat", "kind", "decision", "status"]) {
    const v = form.elements[name].value.trim();
    if (v) q.set(name, v);
  }
  for (const name of ["since", "until"]) {
    const v = form.elements[name].value;
    if (v) q.set(name, new Date(v).toISOString().replace(/\.\d+Z$/, "Z"));
  }
  return q;
}

async function loadAudit(cursor) {
  const form = document.getElementById("audit-filters");
  const table = document.getElementById("audit");
  const line = document.getElementById("audit-status-line");
  const next = document.getElementById("audit-next");
  const q = auditQuery(form);
  document.getElementById("audit-export").href = "/admin/api/audit/export?" + q;
  if (cursor) q.set("cursor", cursor);
  let page;
  try { page = await api("GET", "/admin/api/audit?" + q); } catch (err) { fail(line, err); return; }
  line.textContent = page.records.length ? "" : T("auditNone");
  line.className = "status";
  const body = table.tBodies[0];
  body.textContent = "";
  const p = (n) => String(n).padStart(2, "0");
  for (const r of page.records) {
    const d = new Date(r.time);
    const at = el("time", { datetime: r.time, title: r.time },
      d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds()));
    const who = [r.actorId || "-", r.actorKind, r.via].filter(Boolean).join(" · ");
    const what = r.kind === "file" ? r.op + " " + r.path : r.command;
    const decision = r.rule ? r.decision + " (" + r.rule + ")" : r.decision;
    const output = r.kind === "file" ? String(r.bytes || 0) : r.stdoutBytes + " / " + r.stderrBytes + (r.truncated ? " " + T("auditTruncated") : "");
    body.append(el("tr", { "data-id": r.id, "data-status": r.status, "data-kind": r.kind },
      el("td", {}, at),
      el("td", { "data-role": "who" }, who),
      el("td", { "data-role": "where" }, r.appId + " / " + r.chatId),
      el("td", { "data-role": "what" }, el("code", {}, what || ""), r.error ? el("div", { class: "hint" }, r.error) : null),
      el("td", { "data-role": "decision", title: r.reason || "" }, decision),
      el("td", { "data-role": "status" }, el("span", { class: "state " + r.status }, r.status)),
      el("td", { "data-role": "exit" }, r.kind === "file" ? "" : String(r.exitCode)),
      el("td", { "data-role": "duration" }, r.durationMs + " ms"),
      el("td", { "data-role": "output" }, output)));
  }
  next.hidden = !page.nextCursor;
  next.dataset.cursor = page.nextCursor || "";
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("audit-filters");
  if (!form) return;
  form.addEventListener("submit", (e) => { e.preventDefault(); loadAudit(""); });
  document.getElementById("audit-first").addEventListener("click", () => loadAudit(""));
  const next = document.getElementById("audit-next");
  next.addEventListener("click", () => loadAudit(next.dataset.cursor));
  loadAudit("");
});

// The admins' skills page: the installed skills, the folders that are
// not valid skills and why, installing a ZIP, viewing and deleting.
async function loadSkills() {
  const line = document.getElementById("skills-status");
  let data;
  try { data = await api("GET", "/admin/api/skills"); } catch (err) { fail(line, err); return; }
  const body = document.getElementById("skills").tBodies[0];
  body.textContent = "";
  for (const s of data.skills) {
    body.append(el("tr", { "data-skill": s.name },
      el("td", { "data-role": "name" }, el("code", {}, s.name)),
      el("td", { "data-role": "description" }, s.description),
      el("td", { "data-role": "version" }, String(s.version)),
      el("td", { "data-role": "files" }, String(s.files.length)),
      el("td", { "data-role": "size" }, humanSize(s.size)),
      el("td", { "data-role": "installed-at" }, when(s.installedAt)),
      el("td", { "data-role": "installed-by" }, s.installedBy || "-"),
      el("td", { class: "actions" },
        el("button", { type: "button", class: "secondary", "data-skill-action": "view", "aria-label": T("skillView") + " " + s.name, onclick: () => viewSkill(s.name) }, T("skillView")), " ",
        el("button", { type: "button", class: "secondary", "data-skill-action": "delete", "aria-label": T("delete") + " " + s.name, onclick: () => deleteSkill(s.name) }, T("delete")))));
  }
  document.getElementById("skills-empty").hidden = data.skills.length > 0;
  const invalid = document.getElementById("invalid-skills");
  const bad = invalid.querySelector("tbody");
  bad.textContent = "";
  for (const v of data.invalid || []) {
    bad.append(el("tr", { "data-dir": v.dir }, el("td", { "data-role": "dir" }, el("code", {}, v.dir)), el("td", { "data-role": "reason" }, v.reason)));
  }
  invalid.querySelector('[data-role="empty"]').hidden = bad.rows.length > 0;
  const examples = document.querySelector('#example-skills [data-role="list"]');
  examples.textContent = "";
  for (const x of data.examples || []) {
    examples.append(el("li", { "data-example": x.name },
      el("div", {}, el("code", {}, x.name), x.installed ? el("span", { class: "badge", "data-role": "installed" }, T("skillExampleInstalled")) : null),
      el("p", { class: "hint" }, x.description),
      el("button", { type: "button", class: x.installed ? "secondary" : "", "data-role": "install", onclick: () => installExample(x.name) },
        x.installed ? T("skillExampleReinstall") : T("skillExampleInstall"))));
  }
  document.getElementById("example-skills").hidden = !(data.examples || []).length;
}

async function installExample(name) {
  const line = document.getElementById("skills-status");
  line.className = "status";
  line.textContent = T("skillInstalling").replace("{name}", name);
  try {
    const { skill } = await api("POST", "/admin/api/skills/examples/" + encodeURIComponent(name));
    say(line, named("skillInstalled", skill.name).replace("{version}", skill.version), true);
  } catch (err) { fail(line, err); return; }
  await loadSkills();
}

async function installSkill(form) {
  const line = form.querySelector('[data-role="status"]');
  const file = form.elements.file.files[0];
  if (!file) { say(line, T("skillChooseZip"), false); return; }
  const body = new FormData();
  body.append("file", file);
  line.className = "status";
  line.textContent = T("skillInstalling").replace("{name}", file.name);
  try {
    const { skill } = await api("POST", "/admin/api/skills", body);
    form.reset();
    say(line, named("skillInstalled", skill.name).replace("{version}", skill.version), true);
  } catch (err) { fail(line, err); return; }
  await loadSkills();
}

async function viewSkill(name) {
  const box = document.getElementById("skill-detail");
  const line = document.getElementById("skills-status");
  let d;
  try { d = await api("GET", "/admin/api/skills/" + encodeURIComponent(name)); } catch (err) { fail(line, err); return; }
  box.dataset.skill = d.skill.name;
  box.querySelector('[data-role="title"]').textContent = d.skill.name;
  box.querySelector('[data-role="summary"]').textContent = d.skill.description + " · " + T("skillLocation") + ": " + d.skill.location;
  box.querySelector('[data-role="instructions"]').textContent = d.instructions;
  const body = box.querySelector('[data-role="versions"] tbody');
  body.textContent = "";
  for (const v of d.versions || []) {
    body.append(el("tr", { "data-version": String(v.number), class: v.current ? "current" : "" },
      el("td", {}, String(v.number), v.current ? el("strong", {}, " · " + T("skillCurrent")) : null),
      el("td", {}, when(v.installedAt)), el("td", {}, v.installedBy || "-"), el("td", {}, humanSize(v.size))));
  }
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
  box.querySelector('[data-role="close"]').focus();
}

async function deleteSkill(name) {
  const line = document.getElementById("skills-status");
  if (!confirm(named("skillDeleteConfirm", name))) return;
  try {
    await api("DELETE", "/admin/api/skills/" + encodeURIComponent(name));
    say(line, named("skillDeleted", name), true);
    const box = document.getElementById("skill-detail");
    if (box.dataset.skill === name) box.hidden = true;
  } catch (err) { fail(line, err); }
  await loadSkills();
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("install-skill");
  if (!form) return;
  form.addEventListener("submit", (e) => { e.preventDefault(); installSkill(form); });
  document.querySelector('#skill-detail [data-role="close"]').addEventListener("click", () => { document.getElementById("skill-detail").hidden = true; });
  loadSkills();
});

// The admins' MCP servers page: the registered servers; a form that adds
// one, or edits one filled from its public view (a masked header value or
// token sent back keeps the stored secret); deleting; listing a server's
// tools as the model would see them.
const masked = "•••";

// argv shows a command's arguments on one line, quoting those a reader
// could not tell apart otherwise.
const argv = (args) => (args || []).map((a) => (a === "" || /[\s"'\\]/.test(a) ? JSON.stringify(a) : a)).join(" ");

async function loadMCPServers() {
  const line = document.getElementById("mcp-status");
  let servers;
  try { ({ servers } = await api("GET", "/admin/api/mcp-servers")); } catch (err) { fail(line, err); return; }
  const body = document.getElementById("mcp-servers").tBodies[0];
  body.textContent = "";
  for (const s of servers) {
    const headers = Object.keys(s.headers || {});
    const state = s.enabled ? "active" : "disabled";
    const action = (name, label, fn) => el("button", { type: "button", class: "secondary", "data-mcp-action": name, "aria-label": label + " " + s.name, onclick: fn }, label);
    body.append(el("tr", { "data-server": s.id },
      el("td", { "data-role": "id" }, el("code", {}, s.id)),
      el("td", { "data-role": "name" }, s.name),
      el("td", { "data-role": "transport" }, T("transport" + s.transport)),
      el("td", { "data-role": "where" }, el("code", {}, s.transport === "stdio" ? argv(s.command) : s.url || ""),
        headers.length ? el("div", { class: "hint", "data-role": "headers" }, T("mcpHeaderNames").replace("{names}", headers.join(", "))) : null),
      el("td", { "data-role": "token" }, T(s.hasToken ? "mcpYes" : "mcpNo")),
      el("td", { "data-role": "enabled" }, el("span", { class: "state " + state }, T(s.enabled ? "mcpOn" : "mcpOff"))),
      el("td", { class: "actions" }, action("edit", T("edit"), () => editMCPServer(s)), " ",
        action("tools", T("mcpListTools"), () => listMCPTools(s)), " ",
        action("delete", T("delete"), () => deleteMCPServer(s)))));
  }
  document.getElementById("mcp-empty").hidden = servers.length > 0;
}

// showTransport shows the fields of the chosen transport; the others are
// disabled, so they are neither checked nor sent.
function showTransport(form) {
  const chosen = form.elements.transport.value;
  for (const group of form.querySelectorAll("[data-transport]")) {
    const on = group.dataset.transport === chosen;
    group.hidden = !on;
    group.disabled = !on;
  }
}

function resetMCPForm(form) {
  form.reset();
  delete form.dataset.editing;
  form.elements.id.readOnly = false;
  form.querySelector('[data-role="title"]').textContent = T("mcpAdd");
  form.querySelector('[data-role="submit"]').textContent = T("mcpAddButton");
  form.querySelector('[data-role="cancel"]').hidden = true;
  showTransport(form);
}

function editMCPServer(s) {
  const form = document.getElementById("mcp-form");
  const f = form.elements;
  resetMCPForm(form);
  form.dataset.editing = s.id;
  f.id.value = s.id;
  f.id.readOnly = true;
  f.name.value = s.name;
  f.transport.value = s.transport;
  f.url.value = s.url || "";
  f.headers.value = Object.entries(s.headers || {}).map(([name, value]) => name + ": " + value).join("\n");
  f.token.value = s.hasToken ? masked : "";
  f.command.value = (s.command || []).join("\n");
  f.enabled.checked = s.enabled;
  showTransport(form);
  form.querySelector('[data-role="title"]').textContent = T("mcpEditTitle").replace("{id}", s.id);
  form.querySelector('[data-role="submit"]').textContent = T("save");
  form.querySelector('[data-role="cancel"]').hidden = false;
  form.querySelector('[data-role="status"]').textContent = "";
  form.scrollIntoView({ block: "nearest" });
  f.name.focus();
}

// mcpBody is the server as the form says: headers from "Name: value"
// lines, the command from one argument per line (blank lines dropped).
function mcpBody(form) {
  const f = form.elements;
  const body = { id: f.id.value.trim(), name: f.name.value.trim(), transport: f.transport.value, enabled: f.enabled.checked };
  if (body.transport !== "http") {
    body.command = f.command.value.split("\n").map((l) => l.replace(/\r$/, "")).filter((l) => l.trim() !== "");
    return body;
  }
  body.url = f.url.value.trim();
  body.token = f.token.value.trim();
  body.headers = {};
  f.headers.value.split("\n").forEach((l, i) => {
    if (l.trim() === "") return;
    const colon = l.indexOf(":");
    if (colon <= 0) throw new Error(T("mcpHeaderLine").replace("{n}", i + 1));
    body.headers[l.slice(0, colon).trim()] = l.slice(colon + 1).trim();
  });
  return body;
}

async function saveMCPServer(form) {
  const line = form.querySelector('[data-role="status"]');
  const editing = form.dataset.editing;
  try {
    const body = mcpBody(form);
    const { server } = editing
      ? await api("PUT", "/admin/api/mcp-servers/" + encodeURIComponent(editing), body)
      : await api("POST", "/admin/api/mcp-servers", body);
    resetMCPForm(form);
    say(line, named(editing ? "mcpSaved" : "mcpAdded", server.name), true);
  } catch (err) { fail(line, err); return; }
  await loadMCPServers();
}

async function deleteMCPServer(s) {
  const line = document.getElementById("mcp-status");
  if (!confirm(named("mcpDeleteConfirm", s.name))) return;
  try {
    await api("DELETE", "/admin/api/mcp-servers/" + encodeURIComponent(s.id));
    say(line, named("mcpDeleted", s.name), true);
    const form = document.getElementById("mcp-form");
    if (form.dataset.editing === s.id) resetMCPForm(form);
    const box = document.getElementById("mcp-tools");
    if (box.dataset.server === s.id) box.hidden = true;
  } catch (err) { fail(line, err); }
  await loadMCPServers();
}

// listMCPTools asks the server for its tools now and shows them, or why
// they could not be listed. An answer for a server no longer shown (the
// admin asked another one meanwhile) is dropped.
async function listMCPTools(s) {
  const box = document.getElementById("mcp-tools");
  const line = box.querySelector('[data-role="status"]');
  const table = box.querySelector('[data-role="tools"]');
  box.dataset.server = s.id;
  box.querySelector('[data-role="title"]').textContent = named("mcpToolsOf", s.name);
  table.hidden = true;
  line.className = "status";
  line.textContent = named("mcpToolsListing", s.name);
  box.hidden = false;
  box.scrollIntoView({ block: "nearest" });
  let tools;
  try {
    ({ tools } = await api("POST", "/admin/api/mcp-servers/" + encodeURIComponent(s.id) + "/refresh"));
  } catch (err) {
    if (box.dataset.server === s.id) say(line, named("mcpToolsFailed", s.name).replace("{reason}", err.message), false, err.status);
    return;
  }
  if (box.dataset.server !== s.id) return;
  const body = table.tBodies[0];
  body.textContent = "";
  for (const tool of tools) {
    body.append(el("tr", { "data-tool": tool.name },
      el("td", { "data-role": "name" }, el("code", {}, tool.name)),
      el("td", { "data-role": "tool" }, tool.tool),
      el("td", { "data-role": "description" }, tool.description || ""),
      el("td", { "data-role": "read-only" }, T(tool.readOnly ? "mcpYes" : "mcpNo"))));
  }
  table.hidden = tools.length === 0;
  say(line, tools.length ? T("mcpToolsCount").replace("{n}", tools.length) : T("mcpNoTools"), true);
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("mcp-form");
  if (!form) return;
  form.addEventListener("submit", (e) => { e.preventDefault(); saveMCPServer(form); });
  form.elements.transport.addEventListener("change", () => showTransport(form));
  form.querySelector('[data-role="cancel"]').addEventListener("click", () => {
    resetMCPForm(form);
    form.querySelector('[data-role="status"]').textContent = "";
  });
  document.querySelector('#mcp-tools [data-role="close"]').addEventListener("click", () => { document.getElementById("mcp-tools").hidden = true; });
  resetMCPForm(form);
  loadMCPServers();
});

// The app's global variables (W3): a form above a chat whose app has
// them, asked before the first message and sent with every one. The
// values are kept in this browser per chat.
function chatVariables() {
  const form = document.getElementById("chat-variables");
  if (!form) return undefined;
  const out = {};
  for (const v of JSON.parse(form.dataset.variables)) {
    const input = form.elements["var-" + v.key];
    if (!input) continue;
    if (v.type === "boolean") { out[v.key] = input.checked; continue; }
    const text = input.value.trim();
    if (text === "") continue;
    if (v.type === "number") out[v.key] = Number(text);
    else if (v.type === "json") { try { out[v.key] = JSON.parse(text); } catch (err) { out[v.key] = text; } }
    else out[v.key] = input.value;
  }
  localStorage.setItem("flowbox.vars." + form.dataset.chat, JSON.stringify(out));
  return out;
}

function drawChatVariables() {
  const form = document.getElementById("chat-variables");
  if (!form) return;
  let kept = {};
  try { kept = JSON.parse(localStorage.getItem("flowbox.vars." + form.dataset.chat) || "{}"); } catch (err) { kept = {}; }
  for (const v of JSON.parse(form.dataset.variables)) {
    const id = "var-" + v.key;
    const value = kept[v.key] !== undefined ? kept[v.key] : v.defaultValue;
    const label = el("label", { for: id }, v.label || v.key, v.required ? el("span", { class: "required" }, " *") : "");
    let input;
    if (v.type === "boolean") {
      input = el("input", { type: "checkbox", id, name: id });
      input.checked = value === true;
      form.append(el("div", { class: "chat-variable", "data-variable": v.key }, input, " ", label));
      continue;
    }
    if (v.type === "select") {
      input = el("select", { id, name: id }, el("option", { value: "" }, "—"), ...(v.options || []).map((o) => el("option", { value: o }, o)));
    } else if (v.type === "json") {
      input = el("textarea", { id, name: id, rows: "2", spellcheck: "false" });
    } else {
      input = el("input", { type: v.type === "number" ? "number" : "text", id, name: id });
    }
    if (value !== undefined && value !== null) input.value = typeof value === "string" ? value : JSON.stringify(value);
    if (v.description) input.title = v.description;
    form.append(el("div", { class: "chat-variable", "data-variable": v.key }, label, input));
  }
  form.addEventListener("submit", (e) => e.preventDefault());
}
document.addEventListener("DOMContentLoaded", drawChatVariables);

// runDetails draws a turn's run details (W4) for the app's owner and
// admins: every node that ran, its time, tokens, the branch it took and
// its error, with its inputs and outputs when opened.
function runDetails(responses) {
  const list = el("ol");
  for (const r of responses) {
    const facts = [r.moduleType, Math.round((r.runningTime || 0) * 1000) + " ms"];
    if (r.tokens) facts.push(r.tokens + " tokens");
    if (r.branches && r.branches.length) facts.push("→ " + r.branches.join(", "));
    list.append(el("li", { class: "run-node" + (r.error ? " run-failed" : ""), "data-node": r.nodeId },
      el("details", {},
        el("summary", {}, el("strong", {}, r.moduleName), " ", el("span", { class: "hint" }, facts.join(" · ")),
          r.error ? el("span", { class: "error" }, " " + r.error) : ""),
        el("div", { class: "hint" }, T("runInputs")), el("pre", {}, JSON.stringify(r.inputs || {}, null, 2)),
        el("div", { class: "hint" }, T("runOutputs")), el("pre", {}, JSON.stringify(r.outputs || {}, null, 2)))));
  }
  return el("details", { class: "run-details" }, el("summary", {}, T("runDetails")), list);
}

function drawStoredRunDetails() {
  document.querySelectorAll("#messages [data-responses]").forEach((box) => {
    let responses;
    try { responses = JSON.parse(box.dataset.responses); } catch (err) { return; }
    if (Array.isArray(responses) && responses.length) box.replaceWith(runDetails(responses));
  });
}
document.addEventListener("DOMContentLoaded", drawStoredRunDetails);

// importApp makes a new app of a workflow file (Flowbox's export or
// FastGPT's JSON, W6) and shows the engine's report: what was imported,
// what was left out and why.
async function importApp(form) {
  const out = form.querySelector('[data-role="report"]');
  out.textContent = "";
  const file = form.elements.file.files[0];
  if (!file) return;
  let workflow;
  try { workflow = JSON.parse(await file.text()); } catch (err) {
    out.append(el("p", { class: "error" }, T("importNotJson") + " " + err.message));
    return;
  }
  let body;
  try { body = await api("POST", "/api/apps/import", { workflow }); } catch (err) {
    out.append(el("p", { class: "error" }, err.message));
    return;
  }
  const r = body.report || {};
  const imported = (r.imported || []).length, skipped = (r.skipped || []).length;
  out.append(el("p", { class: "ok", "data-role": "summary" }, T("importDone").replace("{name}", body.app.name)
    .replace("{imported}", imported).replace("{skipped}", skipped)));
  const lines = [].concat(
    (r.skipped || []).map((s) => (s.name || s.nodeId) + " (" + s.type + "): " + s.reason),
    (r.fields || []).map((f) => f.nodeId + " · " + f.field + ": " + f.reason),
    (r.problems || []).map((p) => (p.nodeId ? p.nodeId + ": " : "") + p.message));
  if (lines.length) out.append(el("ul", { class: "import-report" }, ...lines.map((l) => el("li", {}, l))));
  out.append(el("p", {}, el("a", { class: "button", href: "/apps/" + encodeURIComponent(body.app.appId) + "/flow" }, T("importOpen"))));
}

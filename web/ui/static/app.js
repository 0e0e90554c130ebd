// Flowbox UI: the chat (streamed answers, command cards, live output), the
// files panel, the app builder, the admin pages and the account page. No
// framework; every text that comes from a model, a command, a file or the
// API is inserted as text, never as HTML.
"use strict";

const csrf = () => document.querySelector('meta[name="csrf-token"]').content;
const T = (key) => (window.FLOWBOX_I18N && window.FLOWBOX_I18N[key]) || key;

async function api(method, path, body) {
  const resp = await fetch(path, {
    method, credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    body: body === undefined ? undefined : JSON.stringify(body),
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

// A command card: collapsed, with the command, a status badge, the
// duration, a stdout block filled while the command runs, and a stderr
// block drawn once there is stderr.
function toolCard(id, params) {
  let command = params;
  try { command = JSON.parse(params).command || params; } catch (_) { /* broken arguments: show them as sent */ }
  const status = el("span", { class: "badge running", "data-role": "status" }, T("running"));
  const duration = el("span", { class: "duration", "data-role": "duration" });
  const card = el("details", { class: "tool-card", "data-tool-id": id },
    el("summary", {}, el("span", { class: "label" }, "sandbox_shell"), status, duration,
      el("code", { class: "command", "data-role": "command" }, command)),
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

// finishCard shows the command's result; it ends live cards and draws the
// cards of a chat's history.
function finishCard(card, response, status, durationMs) {
  let r = {};
  try { r = JSON.parse(response); } catch (_) { r = { stdout: response }; }
  streamBlock(card, "stdout").textContent = r.stdout !== undefined ? r.stdout : (r.error || "");
  if (r.stderr) streamBlock(card, "stderr").textContent = r.stderr;
  else { const b = card.querySelector('[data-stream="stderr"]'); if (b) b.remove(); }
  const badge = card.querySelector('[data-role="status"]');
  const st = status || (r.exitCode === 0 ? "success" : "failed");
  badge.className = "badge " + st.replace(" ", "-");
  badge.textContent = T(st);
  card.querySelector('[data-role="duration"]').textContent = (durationMs !== undefined ? durationMs : r.durationMs || 0) + " ms";
}

async function sendChat(form) {
  const box = document.getElementById("messages");
  const input = form.querySelector("textarea");
  const question = input.value.trim();
  if (!question) return;
  input.value = "";
  box.append(el("div", { class: "msg user" }, question));
  const answer = el("div", { class: "msg assistant" });
  const text = el("div", { class: "text" });
  answer.append(text);
  box.append(answer);
  let answerText = "";
  const cards = {};
  const resp = await fetch("/api/v1/chat/completions", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    body: JSON.stringify({ appId: form.dataset.app, chatId: form.dataset.chat, stream: true, detail: true, messages: [{ role: "user", content: question }] }),
  });
  if (!resp.ok) { const e = await resp.json().catch(() => ({})); text.textContent = e.message || resp.statusText; return; }
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
      if (raw === "[DONE]") continue;
      const data = JSON.parse(raw);
      if (event === "answer") {
        const delta = data.choices && data.choices[0].delta.content;
        if (delta) { answerText += delta; renderMarkdown(text, answerText); }
      } else if (event === "toolCall") {
        const card = toolCard(data.tool.id, data.tool.params);
        cards[data.tool.id] = card;
        answer.insertBefore(card, text);
      } else if (event === "toolOutput") {
        const card = cards[data.tool.id];
        if (card && data.tool.text) streamBlock(card, data.tool.stream).append(data.tool.text);
      } else if (event === "toolResponse") {
        const card = cards[data.tool.id];
        if (card) finishCard(card, data.tool.response, data.tool.status, data.tool.durationMs);
      } else if (event === "error") {
        answer.append(el("div", { class: "error" }, data.message));
      }
      box.scrollTop = box.scrollHeight;
    }
  }
  refreshFiles();
}

// Files panel: the workspace tree, a text editor, downloads.
let currentDir = "/workspace";
async function refreshFiles(dir) {
  const panel = document.getElementById("files");
  if (!panel) return;
  if (dir) currentDir = dir;
  const { app, chat } = panel.dataset;
  const list = panel.querySelector("ul");
  panel.querySelector('[data-role="cwd"]').textContent = currentDir;
  try {
    const data = await api("POST", "/api/core/ai/sandbox/file", { action: "list", appId: app, chatId: chat, path: currentDir });
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
  } catch (err) { list.textContent = err.message; }
}

async function openFile(path) {
  const panel = document.getElementById("files");
  const editor = panel.querySelector("textarea");
  const status = panel.querySelector('[data-role="file-status"]');
  try {
    const data = await api("POST", "/api/core/ai/sandbox/file", { action: "read", appId: panel.dataset.app, chatId: panel.dataset.chat, path });
    editor.value = data.content; editor.dataset.path = path; status.textContent = path;
  } catch (err) { status.textContent = err.message; }
}

async function saveFile() {
  const panel = document.getElementById("files");
  const editor = panel.querySelector("textarea");
  const status = panel.querySelector('[data-role="file-status"]');
  if (!editor.dataset.path) return;
  try {
    await api("POST", "/api/core/ai/sandbox/file", { action: "write", appId: panel.dataset.app, chatId: panel.dataset.chat, path: editor.dataset.path, content: editor.value });
    status.textContent = editor.dataset.path + " — " + T("saved");
  } catch (err) { status.textContent = err.message; }
}

async function download(path, name, type) {
  const panel = document.getElementById("files");
  const resp = await fetch("/api/core/ai/sandbox/download", {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    body: JSON.stringify({ appId: panel.dataset.app, chatId: panel.dataset.chat, path }),
  });
  if (!resp.ok) return;
  const blob = await resp.blob();
  const a = el("a", { href: URL.createObjectURL(blob), download: type === "directory" ? name + ".zip" : name });
  document.body.append(a); a.click(); a.remove();
}

// The builder: the tool-call node's inputs, saved through the API.
async function saveApp(form) {
  const status = form.querySelector('[data-role="save-status"]');
  const graph = JSON.parse(form.dataset.graph);
  const node = graph.nodes.find((n) => n.type === "tools");
  node.inputs = node.inputs || {};
  node.inputs.model = form.elements.model.value;
  node.inputs.systemPrompt = form.elements.systemPrompt.value;
  node.inputs.useAgentSandbox = form.elements.useAgentSandbox.checked;
  node.inputs.maxToolRounds = parseInt(form.elements.maxToolRounds.value, 10);
  try {
    await api("PUT", "/api/apps/" + form.dataset.app, { name: form.elements.name.value, public: form.elements.public.checked, graph });
    status.className = "ok"; status.textContent = T("saved");
  } catch (err) { status.className = "error"; status.textContent = err.message; }
}

// A new app starts from the starter graph; the builder configures it.
async function createApp(form) {
  const status = form.querySelector('[data-role="status"]');
  try {
    const app = await api("POST", "/api/apps", { name: form.elements.name.value, public: false, graph: JSON.parse(form.dataset.graph) });
    location.href = "/apps/" + encodeURIComponent(app.appId) + "/edit";
  } catch (err) { status.textContent = err.message; }
}

// Deleting a chat returns once the deletion is recorded; the workers
// delete its sandbox afterwards.
async function deleteChat(button) {
  if (!confirm(T("deleteChatConfirm"))) return;
  const app = encodeURIComponent(button.dataset.app);
  try {
    await api("DELETE", "/api/apps/" + app + "/chats", { chatIds: [button.dataset.chat] });
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
    actions.append(el("button", { class: "secondary", "data-user-action": "password", onclick: () => resetPassword(u) }, T("resetPassword")));
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
  try {
    const u = await api("POST", "/admin/api/users", { name: f.name.value.trim(), password: f.password.value, role: f.role.value });
    form.reset();
    say(line, named("userCreated", u.name), true);
  } catch (err) { fail(line, err); return; }
  await loadUsers();
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
      el("td", {}, el("button", { class: "secondary", "data-key-action": "revoke", onclick: () => revokeKey(k) }, T("revoke")))));
  }
  section.querySelector('[data-role="empty"]').hidden = keys.length > 0;
}

// A new key's secret is shown once, from the answer that made it; the
// list shows keys by their prefix only.
async function createKey(form) {
  const line = document.querySelector('#keys [data-role="status"]');
  const box = document.getElementById("new-key-secret");
  try {
    const k = await api("POST", "/api/keys", { name: form.elements.name.value.trim() });
    box.querySelector('[data-role="key-name"]').textContent = k.name;
    box.querySelector("input").value = k.key;
    box.hidden = false;
    form.reset();
    line.textContent = "";
  } catch (err) { fail(line, err); return; }
  await loadKeys();
}

function hideSecret() {
  const box = document.getElementById("new-key-secret");
  box.querySelector("input").value = "";
  box.hidden = true;
}

async function copySecret() {
  const input = document.querySelector("#new-key-secret input");
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
  on("#builder", "submit", saveApp);
  on("#login", "submit", signIn);
  on("#new-app", "submit", createApp);
  on("#delete-chat", "click", deleteChat);
  on("#save-file", "click", saveFile);
  on("#new-user", "submit", createUser);
  on("#change-password", "submit", changePassword);
  on("#new-key", "submit", createKey);
  on('#new-key-secret [data-role="copy"]', "click", copySecret);
  on('#new-key-secret [data-role="hide"]', "click", hideSecret);
  if (document.getElementById("users")) loadUsers();
  if (document.getElementById("keys")) loadKeys();
  on("#logout", "click", async () => { await api("POST", "/api/logout"); location.href = "/login"; });
  document.querySelectorAll(".history-answer").forEach((n) => renderMarkdown(n, n.dataset.text));
  document.querySelectorAll(".tool-card[data-response]").forEach((c) => finishCard(c, c.dataset.response, c.dataset.status, parseInt(c.dataset.duration, 10)));
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

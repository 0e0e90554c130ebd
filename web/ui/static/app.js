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

// humanSize writes a size as the server does (workspace.HumanSize).
function humanSize(n) {
  if (n < 1024) return n + " B";
  let exp = 0, div = 1024;
  for (let m = Math.floor(n / 1024); m >= 1024 && exp < 5; m = Math.floor(m / 1024)) { div *= 1024; exp++; }
  return (n / div).toFixed(1).replace(/\.0$/, "") + " " + "KMGTPE"[exp] + "iB";
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
  on("#login", "submit", signIn);
  on("#new-app", "submit", createApp);
  on("#import-app", "submit", importApp);
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

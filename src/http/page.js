"use strict";
const cards = new Map();
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("askgate-token");
$("name").value = localStorage.getItem("askgate-name") || "";
$("name").addEventListener("change", () => localStorage.setItem("askgate-name", $("name").value.trim()));

function say(text) { $("status").textContent = text; }
// Whether the page has the whole picture: "nothing waits" is only said once askgate said so.
let live = false;
function refreshEmpty() {
  $("empty").hidden = !live || cards.size > 0;
  $("keys").hidden = cards.size === 0;
  // The tab says how many wait, so that a question asked while it is in the background shows.
  const waiting = [...cards.values()].filter((c) => !c.node.dataset.status).length;
  document.title = (waiting ? "(" + waiting + ") " : "") + "askgate — questions";
}

// A browser notification for a question asked while the tab is hidden, once the person allowed it.
const notifications = "Notification" in window;
function offerNotifications() { $("notify").hidden = !notifications || Notification.permission !== "default"; }
$("notify").addEventListener("click", async () => { await Notification.requestPermission(); offerNotifications(); });
function notify(q) {
  if (!notifications || Notification.permission !== "granted" || !document.hidden) return;
  const n = new Notification("askgate: " + (q.kind === "approval" ? "approve " : "") + q.prompt, { tag: q.id, body: "asked by " + (q.asked_by || "a run") });
  n.onclick = () => { window.focus(); n.close(); };
}
// The connection, shown apart from the messages: live, reconnecting or offline.
function setConn(state) {
  $("conn").dataset.state = state;
  $("conn-text").textContent = state;
}

// "in 28 min", "3 min ago": how far `ms` is from now, in words.
function relative(ms) {
  const diff = ms - Date.now(), past = diff < 0, abs = Math.abs(diff);
  if (past && abs < 10e3) return "just now";
  const unit = abs < 60e3 ? [Math.round(abs / 1e3), "s"] : abs < 3600e3 ? [Math.round(abs / 60e3), "min"] : abs < 86400e3 ? [Math.round(abs / 3600e3), "h"] : [Math.round(abs / 86400e3), "d"];
  const text = unit[0] + (unit[1] === "s" ? " s" : " " + unit[1]);
  return past ? text + " ago" : "in " + text;
}
function timeEl(ms, words) {
  return el("time", { datetime: new Date(ms).toISOString(), title: new Date(ms).toLocaleString(), "data-ms": String(ms), "data-words": words }, words.replace("%", relative(ms)));
}
// Relative times move on by themselves.
setInterval(() => { for (const t of document.querySelectorAll("time[data-ms]")) t.textContent = t.dataset.words.replace("%", relative(Number(t.dataset.ms))); }, 15000);

// The questions resolved in the last hour, newest first: those askgate lists when the page
// connects, then each as it is resolved; each leaves the list an hour after it was resolved.
function remember(q) {
  const at = q.resolved_at || Date.now();
  const list = $("recent-list");
  if (at < Date.now() - 3600e3 || list.querySelector('li[data-id="' + q.id + '"]')) return;
  const item = el("li", { "data-id": q.id, "data-at": String(at) }, q.prompt + " — " + outcomeLine(q) + " ", timeEl(at, "%"));
  list.insertBefore(item, [...list.children].find((li) => Number(li.dataset.at) < at) || null);
  setTimeout(() => { item.remove(); refreshRecent(); }, at + 3600e3 - Date.now());
  refreshRecent();
}
// The standing allow-always grants, each with a Revoke button: read when the page connects
// and again after an approval is allowed always.
async function loadGrants() {
  try {
    const response = await api("/api/grants");
    if (!response.ok) return;
    const list = $("grants-list");
    list.replaceChildren();
    for (const g of (await response.json()).grants) {
      const until = g.expires_at ? timeEl(g.expires_at, "expires %") : "until revoked";
      const revoke = el("button", { type: "button", class: "danger" }, "Revoke");
      revoke.addEventListener("click", async () => {
        revoke.disabled = true;
        const r = await api("/api/grants/" + encodeURIComponent(g.id), { method: "DELETE" });
        say(r.status === 204 || r.status === 404 ? "Revoked: \u201c" + g.action + "\u201d will be asked again." : "Could not revoke (HTTP " + r.status + ").");
        loadGrants();
      });
      list.append(el("li", { "data-id": g.id }, g.pattern ? "rule " : "", el("code", {}, g.action), " in " + g.conversation + " — set by " + (g.granted_name || g.granted_by) + ", ", timeEl(g.created_at, "%"), ", ", until, revoke));
    }
    $("grants-count").textContent = String(list.children.length);
    $("grants").hidden = list.children.length === 0;
  } catch (e) { /* read again on the next connection */ }
}
let recentLoaded = false;
async function loadRecent() {
  recentLoaded = true;
  try {
    const response = await api("/api/questions?status=all&limit=100");
    if (!response.ok) { recentLoaded = false; return; }
    for (const q of (await response.json()).questions) if (q.status !== "pending") remember(q);
  } catch (e) { recentLoaded = false; /* tried again on the next connection */ }
}
function refreshRecent() {
  const n = $("recent-list").children.length;
  $("recent-count").textContent = String(n);
  $("recent").hidden = n === 0;
}

// A request to askgate's API with the token (and `extra` headers).
function api(path, init = {}, extra = {}) {
  return fetch(path, { ...init, headers: { "Authorization": "Bearer " + token, ...extra } });
}

async function call(path, body) {
  const response = await api(path, { method: "POST", body: JSON.stringify(body) },
    { "Content-Type": "application/json", "X-Askgate-Surface": "web" });
  let json = {};
  try { json = await response.json(); } catch (e) { /* not JSON */ }
  return { status: response.status, json };
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v); else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

// A detail is prose with fenced code blocks (lines starting with ```); an open block runs to the end.
function detail(text) {
  const box = el("div", { class: "detail" });
  let code = false, lines = [];
  const flush = () => {
    if (lines.length || code) box.append(el(code ? "pre" : "p", {}, lines.join("\n")));
    lines = [];
  };
  for (const line of text.split("\n")) {
    if (line.trimEnd().startsWith("```")) { flush(); code = !code; } else lines.push(line);
  }
  flush();
  return box;
}

function summary(kind, outcome) {
  if (!outcome) return "";
  const v = outcome.value;
  // A form's answer is an object: each field as `key: value`.
  const show = (x) => x && x.decision === "edited" ? "allowed as edited: " + x.action : Array.isArray(x) ? x.join(", ") : x && typeof x === "object" ? Object.entries(x).map(([k, y]) => k + ": " + show(y)).join(" · ") : x === true ? "Yes" : x === false ? "No" : kind === "approval" && x === "once" ? "allowed once" : kind === "approval" && x === "always" ? "allowed always" : String(x);
  switch (outcome.status) {
    case "answered": return "✅ " + show(v);
    case "declined": return "❌ " + (kind === "approval" ? "rejected" : "declined") + (outcome.feedback ? ": " + outcome.feedback : "");
    case "expired": return "⌛ expired" + (v != null ? ", used " + show(v) : ", no default");
    case "cancelled": return "⛔ " + (/^cancell?ed\b/.test(outcome.reason) ? outcome.reason : "cancelled (" + outcome.reason + ")");
  }
  return outcome.status;
}

function disable(card) { for (const c of card.querySelectorAll("button, input, select")) c.disabled = true; }
function enable(card) { for (const c of card.querySelectorAll("button, input, select")) c.disabled = false; }

// A quorum approval's count: `1 of 2 approvals: @alice`; "" for any other question.
function tally(q) {
  if (!(q.quorum > 1)) return "";
  const names = (q.approvals || []).map((a) => a.name || a.user);
  return names.length + " of " + q.quorum + " approvals" + (names.length ? ": " + names.join(", ") : "");
}

// `✅ sqlite — @alice via telegram`.
function outcomeLine(q) {
  let line = summary(q.kind, q.outcome);
  if (q.status === "answered" && tally(q)) line += " — " + tally(q);
  else if (q.answered_by && (q.status === "answered" || q.status === "declined")) line += " — " + (q.answered_name || q.answered_by) + (q.answered_via ? " via " + q.answered_via : "");
  return line;
}

// The control that stands for the answer given, whoever gave it, marked on the card.
function markChosen(q, node) {
  const v = q.outcome && q.status === "answered" ? q.outcome.value : undefined;
  // A form keeps what was filled in; its outcome line says the rest.
  if (v === undefined || q.form) return;
  const labels = q.kind === "confirm" ? [v ? "Yes" : "No"] : q.kind === "approval" ? [v === "always" ? "Allow always" : v === "once" ? (q.quorum > 1 ? "Approve" : "Allow once") : "Allow as edited"] : Array.isArray(v) ? v.map(String) : [String(v)];
  for (const b of node.querySelectorAll("button")) if (labels.includes(b.textContent)) { b.classList.add("chosen"); b.setAttribute("aria-pressed", "true"); }
  for (const l of node.querySelectorAll("label.choice")) if (labels.includes(l.textContent.trim())) l.classList.add("chosen");
}

function showOutcome(q) {
  const entry = cards.get(q.id);
  if (!entry) return;
  disable(entry.node);
  markChosen(q, entry.node);
  const line = outcomeLine(q);
  entry.outcome.textContent = line;
  entry.outcome.className = "outcome " + (q.status === "answered" ? "good" : "bad");
  entry.node.dataset.status = q.status;
  refreshEmpty();
  remember(q);
  if (q.kind === "approval" && q.outcome && q.outcome.value === "always") loadGrants();
  setTimeout(() => { entry.node.remove(); cards.delete(q.id); refreshEmpty(); }, 3000);
}

async function answer(q, entry, path, body) {
  disable(entry.node);
  // A person signed in as themselves answers under their own name; the operator's token may
  // say who holds it.
  const name = me && me.role === "person" ? "" : $("name").value.trim();
  const { status, json } = await call("/api/questions/" + q.id + "/" + path, name ? { ...body, name } : body);
  if (status === 200) { say("Recorded: " + q.prompt); return; }
  const receipt = json.error && json.error.receipt;
  if (status === 202 || (status === 409 && receipt && receipt.receipt === "already_counted")) {
    // A quorum approval: counted once; it waits for the others.
    const r = status === 202 ? json.receipt : receipt;
    say((status === 202 ? "Approval counted: " : "You approved already: ") + r.approvals + " of " + r.quorum + " — " + q.prompt);
    enable(entry.node);
    return;
  }
  if (status === 409 && receipt) {
    const by = receipt.by ? " — " + receipt.by : "";
    entry.outcome.textContent = receipt.receipt === "expired" ? "This question has expired." : "Already answered" + (receipt.outcome ? ": " + summary(q.kind, receipt.outcome) : "") + by;
    entry.outcome.className = "outcome bad";
    return;
  }
  enable(entry.node);
  if (status === 422 && entry.refused && json.error && json.error.code === "invalid_choice") { entry.refused(json.error.message); return; }
  say(json.error ? json.error.message : "Could not send the answer (" + status + ").");
}

// The line about option i, under its label, when it has one.
function about(q, i) {
  const line = (q.descriptions || [])[i];
  return line ? [el("span", { class: "about" }, line)] : [];
}

function render(q) {
  if (cards.has(q.id)) { cards.get(q.id).seen = true; return; }
  const title = "q-" + q.id;
  const outcome = el("p", { class: "outcome", "aria-live": "polite" });
  const body = [];
  const entry = { outcome, seen: true };
  const send = (value) => answer(q, entry, "reply", { value });
  if (q.form) {
    body.push(...formBody(q, entry, send));
  } else if (q.kind === "question" && q.multi) {
    // Positions, sent as numbers: a label that is itself a number cannot be mistaken.
    const boxes = q.options.map((o, i) => el("label", { class: "choice" }, el("input", { type: "checkbox", value: String(i + 1), name: title }), " " + o, ...about(q, i)));
    body.push(el("fieldset", {}, el("legend", { class: "meta" }, "Pick any"), ...boxes));
    body.push(el("div", { class: "row" }, el("button", { type: "button", onclick: () => {
      const picked = [...entry.node.querySelectorAll("input[type=checkbox]:checked")].map((b) => Number(b.value));
      if (picked.length === 0) { say("Pick at least one option."); return; }
      send(picked);
    } }, "Submit")));
  } else if (q.kind === "question") {
    body.push(el("div", { class: "row" }, ...q.options.map((o, i) => el("button", { type: "button", "data-key": String(i + 1), title: "key " + (i + 1), onclick: () => send(i + 1) }, o, ...about(q, i)))));
  } else if (q.kind === "confirm") {
    body.push(el("div", { class: "row" }, el("button", { type: "button", "data-key": "1", title: "key 1", onclick: () => send(true) }, "Yes"), el("button", { type: "button", class: "secondary", "data-key": "2", title: "key 2", onclick: () => send(false) }, "No")));
  } else if (q.quorum > 1) {
    // Several people must approve: each approves once; no one sets a standing rule.
    body.push(el("div", { class: "row" }, el("button", { type: "button", "data-key": "1", title: "key 1", onclick: () => send("once") }, "Approve")));
  } else {
    const covers = "Allow always also allows this same action in " + (q.conversation || "this conversation") + " from now on, without asking, until it is revoked (Standing grants below, or /revoke).";
    body.push(el("div", { class: "row" },
      el("button", { type: "button", "data-key": "1", title: "key 1", onclick: () => send("once") }, "Allow once"),
      el("button", { type: "button", class: "secondary", "data-key": "2", title: "key 2 — " + covers, "aria-describedby": title + "-always", onclick: () => send("always") }, "Allow always")));
    body.push(el("p", { class: "meta covers", id: title + "-always" }, covers));
  }
  if (q.kind === "approval" && q.allow_custom) {
    // An editable approval: allow it as edited, the original stays in the heading.
    const action = el("input", { type: "text", "aria-label": "Edited action", value: q.prompt });
    body.push(el("form", { class: "row", onsubmit: (e) => { e.preventDefault(); if (action.value.trim()) send({ decision: "edited", action: action.value.trim() }); } }, action, el("button", { type: "submit", class: "secondary" }, "Allow as edited")));
  }
  if (q.kind === "question" && q.allow_custom && !q.form) {
    const input = el("input", { type: "text", "aria-label": "Your own answer", placeholder: "Your own answer" });
    // Quoted: typed text is the answer as written, even "7".
    body.push(el("form", { class: "row", onsubmit: (e) => { e.preventDefault(); if (input.value.trim()) send('"' + input.value.trim() + '"'); } }, input, el("button", { type: "submit" }, "Send")));
  }
  if (q.kind !== "confirm") {
    const note = el("input", { type: "text", "aria-label": q.kind === "approval" ? "Why reject (optional)" : "Why decline (optional)", placeholder: "Feedback (optional)" });
    body.push(el("form", { class: "row", onsubmit: (e) => { e.preventDefault(); answer(q, entry, "reject", { feedback: note.value.trim() || null }); } },
      note, el("button", { type: "submit", class: q.kind === "approval" ? "danger" : "secondary" }, q.kind === "approval" ? "Reject" : "Decline")));
  }
  const fallback = q.expires_at && q.default != null ? ", then: " + summary(q.kind, { status: "answered", value: q.default }).slice(2) : "";
  const expires = q.expires_at ? timeEl(q.expires_at, "expires %" + fallback) : "never expires";
  const badge = el("span", { class: "badge " + q.kind }, q.kind);
  const heading = q.kind === "approval" ? el("h2", { id: title }, badge, "Approve ", el("code", {}, q.prompt)) : el("h2", { id: title }, badge, q.prompt);
  entry.tally = el("p", { class: "meta tally", "aria-live": "polite" }, tally(q));
  const node = el("li", {}, el("article", { "aria-labelledby": title, "data-id": q.id, "data-kind": q.kind, ...(q.form ? { "data-form": "" } : {}), tabindex: "0" },
    heading,
    q.detail ? detail(q.detail) : null,
    q.quorum > 1 ? entry.tally : null,
    el("p", { class: "meta" }, "id " + q.id.slice(0, 8) + " · in " + (q.conversation || "no conversation") + " · asked by " + (q.asked_by || "run " + String(q.run).slice(0, 8)) + " ", timeEl(q.created_at, "%"), " · ", expires),
    ...body, outcome));
  entry.node = node;
  cards.set(q.id, entry);
  $("cards").append(node);
  refreshEmpty();
  if (live) notify(q);
}

// Keys on a focused card: 1–9 pick an option (or toggle a checkbox); Enter sends a multi-select.
// A form's keys are its controls' own.
document.addEventListener("keydown", (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey || e.target.matches("input[type=text], input[type=password]")) return;
  const card = e.target.closest && e.target.closest("article");
  if (!card || card.parentElement.dataset.status || card.hasAttribute("data-form")) return;
  if (/^[1-9]$/.test(e.key)) {
    const box = card.querySelectorAll("input[type=checkbox]")[Number(e.key) - 1];
    const button = card.querySelector("button[data-key='" + e.key + "']");
    if (box && !box.disabled) { box.checked = !box.checked; e.preventDefault(); }
    else if (button && !button.disabled) { button.click(); e.preventDefault(); }
  } else if (e.key === "Enter" && (e.target === card || e.target.matches("input[type=checkbox]"))) {
    const submit = card.querySelector("fieldset + .row button");
    if (submit && !submit.disabled) { submit.click(); e.preventDefault(); }
  }
});

function handle(name, data) {
  if (name === "question.asked") render(data);
  else if (name === "question.counted") { const entry = cards.get(data.id); if (entry) entry.tally.textContent = tally(data); }
  else if (name.startsWith("question.")) showOutcome(data);
  else if (name === "replay.done") {
    for (const [id, entry] of cards) if (!entry.seen && !entry.node.dataset.status) { entry.node.remove(); cards.delete(id); }
    live = true;
    refreshEmpty();
    setConn("live");
  }
}

// The id of the last event received: a reconnect resumes after it (only what was missed comes
// again); without one, the pending questions are sent again and replay.done drops the rest.
let lastEventId = null;

async function connect() {
  let wait = 1000;
  for (;;) {
    try {
      for (const entry of cards.values()) entry.seen = false;
      const response = await api("/api/events", {}, lastEventId ? { "Last-Event-ID": lastEventId } : {});
      if (response.status === 401) { sessionStorage.removeItem("askgate-token"); token = null; askToken("That token was not accepted."); return; }
      if (!response.ok) throw new Error("HTTP " + response.status);
      wait = 1000;
      $("locked").hidden = true;
      if (lastEventId) setConn("live");
      if (!me) loadMe().then(readChat); else readChat();
      if (!recentLoaded) loadRecent();
      loadGrants();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end); buffer = buffer.slice(end + 2);
          let name = "message", data = "", id = null;
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
            else if (line.startsWith("id:")) id = line.slice(3).trim();
          }
          if (data) handle(name, JSON.parse(data));
          if (id) lastEventId = id;
        }
      }
    } catch (e) { /* shown by the indicator */ }
    setConn("reconnecting");
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 15000);
  }
}

// Who the token is: shown in the header; a person's own identity replaces the typed name.
let me = null;
async function loadMe() {
  try {
    const response = await api("/api/me");
    if (!response.ok) return;
    me = await response.json();
    $("me").textContent = "Signed in as " + me.user;
    $("me").hidden = false;
    document.querySelector(".who").hidden = me.role === "person";
  } catch (e) { /* shown again on the next connection */ }
}

// A link from a chat's /web (`#signin=<secret>`), opened in a fresh tab or pasted into this
// one. Whoever sent it would be who this tab answers as, so nothing signs in on its own: the
// page asks askgate whom the link is for (without using it), says so, and signs in only when
// the person agrees; a tab signed in already offers to switch. Resolves true once signed in.
function linkSecret() {
  const found = location.hash.match(/^#signin=([0-9a-f]{16,128})$/);
  return found && found[1];
}
const linkRefused = "That sign-in link was used already or has expired: send /web in the chat again.";
async function offerSignIn() {
  const secret = linkSecret();
  if (!secret) return false;
  history.replaceState(null, "", location.pathname);
  let link;
  try {
    const response = await fetch("/api/signin/check", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ link: secret }) });
    if (!response.ok) { say(linkRefused); return false; }
    link = await response.json();
  } catch (e) { say("askgate could not be reached to sign in."); return false; }
  const current = me && me.user;
  if (current === link.user) { say("This tab is signed in as " + current + " already; the link was not used."); return false; }
  $("signin-text").textContent = current
    ? "That link is " + link.user + "'s. This tab is signed in as " + current + ". Switch this tab to " + link.user + "?"
    : "This link signs this tab in as " + link.user + ". Go on only if that is you: whoever sent it would see what you answer and say here as theirs.";
  $("signin-yes").textContent = (current ? "Switch to " : "Sign in as ") + link.user;
  $("signin-no").textContent = current ? "Stay " + current : "Not me";
  $("signin").hidden = false;
  $("signin-yes").focus();
  const agreed = await new Promise((resolve) => {
    $("signin-yes").onclick = () => resolve(true);
    $("signin-no").onclick = () => resolve(false);
  });
  $("signin").hidden = true;
  if (!agreed) { say("Not signed in with the link."); return false; }
  try {
    const response = await fetch("/api/signin", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ link: secret, as: link.user }) });
    if (!response.ok) { say(linkRefused); return false; }
    token = (await response.json()).token;
    sessionStorage.setItem("askgate-token", token);
    return true;
  } catch (e) { say("askgate could not be reached to sign in."); return false; }
}
// A link pasted into the address bar changes only the fragment: no new page, so it is read here.
window.addEventListener("hashchange", async () => {
  if (!linkSecret()) return;
  const signedIn = !!me;
  if (!(await offerSignIn())) return;
  // Another person now: start over as them (cards, conversation, grants).
  if (signedIn) { location.reload(); return; }
  $("token-form").hidden = true;
  say("");
  setConn("reconnecting");
  connect();
});

// The person's own conversation (`web:<name>`): what they say, askgate's replies, the
// functions' messages, questions and outcomes, read by long-poll from the last line seen.
let chatAfter = 0, chatReading = false;
function addLine(line) {
  const mine = me && line.from === me.user;
  const item = el("li", { class: mine ? "mine" : "", "data-seq": String(line.seq) }, el("span", { class: "from" }, mine ? "you" : line.from), line.text);
  $("chat-log").append(item);
  item.scrollIntoView({ block: "nearest" });
  chatAfter = Math.max(chatAfter, line.seq);
}
async function readChat() {
  if (chatReading) return;
  chatReading = true;
  $("chat").hidden = false;
  let wait = 0;
  for (;;) {
    try {
      const response = await api("/api/messages?after=" + chatAfter + "&wait=" + wait);
      if (response.status === 401) break;
      if (!response.ok) throw new Error("HTTP " + response.status);
      const body = await response.json();
      $("chat-name").textContent = body.conversation;
      // askgate restarted (its lines are kept in memory): read on from its numbers.
      if (body.latest < chatAfter) chatAfter = 0;
      for (const line of body.lines) if (line.seq > chatAfter) addLine(line);
      wait = 25;
    } catch (e) { await new Promise((r) => setTimeout(r, 3000)); }
  }
  chatReading = false;
}
$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("say").value.trim();
  if (!text) return;
  $("say").disabled = true;
  const { status, json } = await call("/api/messages", { text });
  $("say").disabled = false;
  if (status === 200) { $("say").value = ""; say(""); }
  else say((json.error && json.error.message) || "Not sent (HTTP " + status + ").");
  $("say").focus();
});

function askToken(message) {
  live = false;
  setConn("offline");
  $("locked").hidden = false;
  refreshEmpty();
  $("token-form").hidden = false;
  if (message) say(message);
  $("token").focus();
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("askgate-token", token);
  $("token-form").hidden = true;
  say("");
  setConn("reconnecting");
  connect();
});

refreshEmpty();
offerNotifications();
// A tab that has a token says who it is before a link offers to replace it.
(token && linkSecret() ? loadMe() : Promise.resolve()).then(offerSignIn).then(() => {
  if (token) connect();
  else if (!$("status").textContent) askToken("Enter your token, or the operator's (askgate prints where it is kept when it starts).");
  else askToken();
});

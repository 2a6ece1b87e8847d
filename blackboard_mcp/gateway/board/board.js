// The board page. Every value shown comes from the board, which agents write: it is put in
// the page as text (textContent, setAttribute on inert attributes), never as markup.
"use strict";

const TOKEN_KEY = "bb-board-token";
const FIELDS = ["uri", "digest", "version", "author", "updated", "size"];
// Notes a page: list_keys' largest page, or fewer with ?page_size=N (a small screen or a test).
const MAX_PAGE = 200;
const PAGE = Math.min(MAX_PAGE,
  Math.max(1, parseInt(new URLSearchParams(location.search).get("page_size"), 10) || MAX_PAGE));
const state = { topic: null, rows: [], next: null, sortKey: "updated", sortDir: -1, note: null,
  feed: null, workspace: "", who: null, admin: false };

function $(id) { return document.getElementById(id); }

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function status(text, isError) {
  const node = $("status");
  node.textContent = text;
  node.className = isError ? "error" : "muted";
}

async function api(path, body) {
  const init = { headers: { Authorization: "Bearer " + token() }, cache: "no-store" };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch("/board/api/" + path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new Error((error.code || response.status) + ": " + (error.message || "refused"));
  }
  return data;
}

function callTool(tool, args) { return api("call", { tool: tool, arguments: args }); }

// A note's address as a button that opens it: shown relative to the workspace (or to
// ``base``, a topic's address), the whole address on hover and for a screen reader.
function linkButton(uri, base) {
  const prefix = base || ("bb://" + state.workspace + "/");
  const label = uri.startsWith(prefix) ? uri.slice(prefix.length) : uri;
  const button = el("button", label, { type: "button", title: uri });
  if (label !== uri) button.setAttribute("aria-label", uri);
  button.addEventListener("click", () => openNote(uri));
  return button;
}

// One convention for times, past or to come: how long ago (or how soon) in words, the exact
// UTC time on hover and in datetime. The words are said again every half minute (RELATIVE
// below), so that a "just now" left on screen does not stay one.
function timeAgo(value) {
  const at = new Date(value);
  if (value === "" || value === undefined || value === null || isNaN(at.getTime())) {
    return el("span", "");
  }
  const exact = at.toISOString().replace(/\.\d{3}Z$/, "Z");
  const node = el("time", relative(at.getTime()), { datetime: exact, title: exact + " (UTC)" });
  node.dataset.at = String(at.getTime());
  return node;
}

const timeExpiry = timeAgo;

function relative(ms) {
  const seconds = Math.round((Date.now() - ms) / 1000);
  const span = Math.abs(seconds);
  if (span < 45) return seconds >= 0 ? "just now" : "now";
  let text;
  if (span < 3600) text = plural(Math.round(span / 60), "minute");
  else if (span < 86400) text = plural(Math.round(span / 3600), "hour");
  else text = plural(Math.round(span / 86400), "day");
  return seconds > 0 ? text + " ago" : "in " + text;
}

const RELATIVE = 30000;
setInterval(() => {
  for (const node of document.querySelectorAll("time[data-at]")) {
    node.textContent = relative(Number(node.dataset.at));
  }
}, RELATIVE);

function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

// Durations as people write them, the CLI's form: a whole number and a unit. A number alone
// is refused (is 30 seconds, minutes or days?) before anything is sent.
const DURATION_FORMAT = "a whole number and a unit: s, m, h or d (90s, 30m, 12h, 7d)";
const UNITS = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];

function parseDuration(text) {
  const typed = text.trim();
  const match = /^(\d{1,9})([smhd])$/.exec(typed);
  if (!match) {
    const hint = /^\d+$/.test(typed) ? " (add a unit)" : "";
    throw new Error("\u201c" + typed + "\u201d is not a duration" + hint + ": use " +
      DURATION_FORMAT);
  }
  return Number(match[1]) * UNITS.find(([unit]) => unit === match[2])[1];
}

// Seconds in the largest unit that says them exactly: 2592000 is 30d, 5400 is 90m.
function duration(seconds) {
  for (const [unit, size] of UNITS) {
    if (seconds % size === 0) return seconds / size + unit;
  }
  return seconds + "s";
}

// The API counts in seconds ("between 1 and 7776000 seconds", "max age 2592000s"); the page
// says each as a duration, and drops a duration the API then repeats in parentheses.
function secondsSaid(text) {
  return String(text)
    .replace(/\bbetween (\d+) and (\d+) seconds?\b/g,
      (_, low, high) => "between " + duration(Number(low)) + " and " + duration(Number(high)))
    .replace(/\b(\d+) seconds?\b/g, (_, n) => duration(Number(n)))
    .replace(/\b(\d+)s\b/g, (_, n) => duration(Number(n)))
    .replace(/\b(\d+[smhd]) \(\1, /g, "$1 (");
}

function showWho(who, workspace) {
  const line = $("who");
  if (!who) { line.hidden = true; return; }
  // A token the admin issues cannot outlive the admin's own: offer no more than that, an
  // hour at most, in whole minutes while there are some.
  const left = Math.max(1, Math.floor((who.expires_at_ms - Date.now()) / 1000));
  $("issue-ttl").value = duration(Math.min(3600, left >= 60 ? left - left % 60 : left));
  const topics = list => list.length ? list.join(", ") : "none";
  line.replaceChildren(
    el("span", "Signed in as " + who.subject + " to workspace " + workspace + "; reads " +
      topics(who.read) + "; writes " + topics(who.write) + "; may " +
      (who.capabilities.join(", ") || "nothing") + "; the token expires "),
    timeExpiry(who.expires_at_ms), el("span", "."));
  line.hidden = false;
}

function topicOf(uri) { return uri.split("/")[3]; }

async function loadTopics() {
  const data = await api("topics");
  state.workspace = data.workspace;
  $("workspace").textContent = "· " + data.workspace;
  state.who = data.who;
  showWho(data.who, data.workspace);
  const list = $("topics");
  list.replaceChildren();
  for (const entry of data.topics) {
    const button = el("button", entry.topic + " (" + entry.notes + ")", { type: "button" });
    button.dataset.topic = entry.topic;
    if (entry.topic === state.topic) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openTopic(entry.topic));
    const li = el("li");
    li.append(button);
    list.append(li);
  }
  if (!data.topics.length) list.append(el("li", "No topic this token may read.", { class: "muted" }));
  return data;
}

function listPage(topic, limit, after) {
  const args = { topic: topic, fields: FIELDS, limit: limit, budget_tokens: 100000 };
  if (after) args.after = after;
  return callTool("list_keys", args);
}

// A refresh of the same topic (a change in it) reloads as many notes as were shown, up to
// one page of list_keys; "More" goes on from there.
async function openTopic(topic) {
  const again = state.topic === topic;
  state.topic = topic;
  for (const b of $("topics").querySelectorAll("button")) {
    b.setAttribute("aria-current", String(b.dataset.topic === topic));
  }
  $("notes-title").textContent = "Notes in " + topic;
  $("notes-prompt").hidden = true;
  const limit = again ? Math.min(MAX_PAGE, Math.max(PAGE, state.rows.length)) : PAGE;
  const data = await listPage(topic, limit);
  if (state.topic !== topic) return;  // another topic was opened meanwhile
  state.rows = data.items;
  state.next = data.next || null;
  renderNotes();
  if ($("topic-graph-details").open) await drawTopicGraph(topic);
}

// The topic's notes (the first 50 shown) as a ring, one node each, and the links between
// them; a node opens its note. Links to other topics' notes are counted, not drawn.
async function drawTopicGraph(topic) {
  const graph = $("topic-graph");
  graph.replaceChildren();
  const uris = state.rows.slice(0, 50).map(r => r.uri);
  if (!uris.length) { $("topic-graph-note").textContent = "No notes."; return; }
  const data = await callTool("get_state", { uris: uris, mode: "fields", fields: ["links"],
    budget_tokens: 100000 });
  if (state.topic !== topic || data.error) return;
  const width = Math.round(Math.max(320, Math.min(640, graph.clientWidth || 640)));
  const height = Math.round(width * 0.6);
  graph.setAttribute("viewBox", "0 0 " + width + " " + height);
  const at = new Map();
  const r = Math.min(width, height) / 2 - 30;
  uris.forEach((u, i) => {
    const angle = 2 * Math.PI * i / uris.length - Math.PI / 2;
    at.set(u, [width / 2 + r * Math.cos(angle), height / 2 + r * Math.sin(angle)]);
  });
  const edges = svg("g"), nodes = svg("g");
  graph.append(edges, nodes);
  let outside = 0;
  const counts = new Map(uris.map(u => [u, 0]));
  data.items.forEach((item, i) => {
    for (const link of item.links || []) {
      if (!link.to) continue;  // each link once, from its source
      if (!at.has(link.to)) { outside++; continue; }
      const [x1, y1] = at.get(uris[i]), [x2, y2] = at.get(link.to);
      const bad = link.rel === "supersedes" || link.rel === "contradicts";
      const line = svg("line", { x1: x1, y1: y1, x2: x2, y2: y2, class: "edge" + (bad ? " bad" : "") });
      line.append(svg("title", {}, short(uris[i]) + " " + link.rel + " " + short(link.to)));
      edges.append(line);
      counts.set(uris[i], counts.get(uris[i]) + 1);
      counts.set(link.to, counts.get(link.to) + 1);
    }
  });
  const prefix = "bb://" + state.workspace + "/" + topic + "/";
  for (const u of uris) {
    const [x, y] = at.get(u);
    const name = u.slice(prefix.length);
    const label = name.length > 18 ? name.slice(0, 17) + "…" : name;
    const g = svg("g", { class: "node", tabindex: "0", role: "button",
      transform: "translate(" + (x - 55) + "," + (y - 11) + ")",
      "aria-label": label + ": " + plural(counts.get(u), "link") + ", open " + u });
    g.append(svg("rect", { width: 110, height: 22, rx: 4 }),
      svg("text", { x: 55, y: 15, "text-anchor": "middle" }, label));
    g.addEventListener("click", () => openNote(u));
    g.addEventListener("keydown", e => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openNote(u); }
    });
    nodes.append(g);
  }
  $("topic-graph-note").textContent = (state.rows.length > 50 ? "The first 50 notes. " : "") +
    (outside ? plural(outside, "link") + " to notes of other topics not drawn." : "");
}

async function moreNotes() {
  const topic = state.topic, after = state.next;
  if (!topic || !after) return;
  const button = $("notes-more");
  button.disabled = true;
  try {
    const data = await listPage(topic, PAGE, after);
    if (state.topic !== topic || state.next !== after) return;
    const seen = new Set(state.rows.map(r => r.uri));
    state.rows = state.rows.concat(data.items.filter(r => !seen.has(r.uri)));
    state.next = data.next || null;
    renderNotes();
  } catch (err) {
    status("Could not load more notes: " + err.message, true);
  } finally {
    button.disabled = false;
    if (!button.hidden) button.focus();
  }
}

function compare(a, b) {
  const x = a[state.sortKey], y = b[state.sortKey];
  if (typeof x === "number" && typeof y === "number") return (x - y) * state.sortDir;
  return String(x).localeCompare(String(y)) * state.sortDir;
}

function renderNotes() {
  for (const th of $("notes").querySelectorAll("th")) {
    th.setAttribute("aria-sort", th.dataset.key === state.sortKey
      ? (state.sortDir > 0 ? "ascending" : "descending") : "none");
  }
  const body = $("notes").tBodies[0];
  body.replaceChildren();
  for (const row of [...state.rows].sort(compare)) {
    const tr = el("tr");
    const addr = el("td", null, { class: "addr", "data-label": "Address" });
    addr.append(linkButton(row.uri, "bb://" + state.workspace + "/" + state.topic + "/"));
    const updated = el("td", null, { "data-label": "Updated" });
    updated.append(timeAgo(row.updated));
    tr.append(addr, el("td", row.digest, { "data-label": "Digest" }),
      el("td", row.version, { "data-label": "Version" }),
      el("td", row.author, { "data-label": "Author" }), updated,
      el("td", row.size, { "data-label": "Bytes" }));
    body.append(tr);
  }
  const more = $("notes-more");
  more.hidden = !state.next;
  $("notes-count").textContent = state.rows.length + (state.next ? " shown; more in this topic"
    : (state.rows.length === 1 ? " note" : " notes"));
}

function sortBy(key) {
  state.sortDir = state.sortKey === key ? -state.sortDir : (key === "updated" ? -1 : 1);
  state.sortKey = key;
  renderNotes();
}

async function openNote(uri) {
  const data = await callTool("get_state", { uris: [uri], mode: "full", budget_tokens: 100000 });
  const item = data.items[0] || { uri: uri, error: "not_found" };
  state.note = uri;
  const panel = $("note-panel");
  panel.hidden = false;
  $("note-title").textContent = uri;
  const warnings = $("note-warnings");
  warnings.replaceChildren();
  for (const w of data.warnings || []) warnings.append(el("li", w));
  if (item.error) {
    $("note-digest").textContent = item.error === "forbidden"
      ? "This token may not read this note's topic."
      : "This note does not exist (" + item.error + ").";
    $("note-meta").replaceChildren();
    $("note-content").textContent = "";
    renderGraph(uri, [], []);
    $("note-sources").replaceChildren();
    $("note-links").replaceChildren();
    return;
  }
  $("note-digest").textContent = item.digest;
  const meta = $("note-meta");
  meta.replaceChildren();
  for (const key of ["version", "kind", "author", "created", "updated", "size", "confidence"]) {
    if (item[key] === undefined) continue;
    // "size" is the content's UTF-8 bytes (body or table TSV, not the digest): say so.
    const value = key === "created" || key === "updated" ? el("dd") : el("dd", item[key]);
    if (key === "created" || key === "updated") value.append(timeAgo(item[key]));
    meta.append(el("dt", key === "size" ? "bytes" : key), value);
  }
  const isTable = Array.isArray(item.rows);
  $("note-content").hidden = isTable;
  $("note-content").textContent = isTable ? "" : (item.body || "");
  $("note-table").hidden = !isTable;
  $("note-table").replaceChildren();
  if (isTable) $("note-table").append(tableOf(tsvOf(item)));
  const sources = $("note-sources");
  sources.replaceChildren();
  for (const s of item.sources || []) {
    const li = el("li");
    li.append(linkButton(s));
    sources.append(li);
  }
  if (item.sources_hidden) sources.append(el("li", item.sources_hidden + " in topics you cannot read", { class: "muted" }));
  if (!sources.childElementCount) sources.append(el("li", "none", { class: "muted" }));
  const links = item.links || [];
  const list = $("note-links");
  list.replaceChildren();
  list.className = "linklist";
  for (const link of links) {
    const li = el("li", (link.to ? "→ " : "← ") + link.rel + " ");
    li.append(linkButton(link.to || link.from), " ", withdrawButton(uri, link));
    list.append(li);
  }
  renderGraph(uri, links, item.sources || []);
  await loadVersions(uri);
  panel.scrollIntoView({ block: "nearest" });
}

// Withdrawing a link is link_state with remove: the gateway allows it to a token that could
// have made the link (write on its source's topic, read on its target's) and refuses it to
// any other, whose refusal is shown. The button asks once before it acts.
function withdrawButton(uri, link) {
  const src = link.to ? uri : link.from;
  const dst = link.to || uri;
  const label = "withdraw the " + link.rel + " link " + (link.to ? "to " + dst : "from " + src);
  const button = el("button", "Withdraw", { type: "button", "aria-label": label });
  button.addEventListener("click", async () => {
    if (button.dataset.armed !== "true") {
      button.dataset.armed = "true";
      button.textContent = "Withdraw this link?";
      return;
    }
    try {
      await callTool("link_state", { src: src, rel: link.rel, dst: [dst], remove: true });
      status("Withdrew the " + link.rel + " link " + (link.to ? "to " + dst : "from " + src) + ".");
      await openNote(uri);
    } catch (err) {
      button.dataset.armed = "";
      button.textContent = "Withdraw";
      status("The link was not withdrawn: " + err.message, true);
    }
  });
  return button;
}

// A note's versions: list_keys with the note's address as the topic, newest first.
async function loadVersions(uri) {
  const body = $("versions").querySelector("tbody");
  body.replaceChildren();
  $("diff").replaceChildren();
  $("versions-status").textContent = "";
  const rows = [];
  let after = null;
  do {
    const args = { topic: uri, mode: "table", limit: 200, budget_tokens: 100000,
      fields: ["version", "digest", "author", "updated", "size"] };
    if (after) args.after = after;
    const page = await callTool("list_keys", args);
    if (page.error) { $("versions-status").textContent = page.error.message; return; }
    const lines = (page.table || "").split("\n").slice(1).filter(line => line);
    for (const line of lines) rows.push(line.split("\t"));
    after = page.next;
  } while (after && rows.length < 1000);
  rows.forEach((cells, i) => {
    const tr = el("tr");
    for (const [side, checked] of [["old", i === 1], ["new", i === 0]]) {
      const td = el("td");
      const input = el("input", null, { type: "radio", name: side, value: cells[0],
        "aria-label": side + " version " + cells[1] });
      input.checked = checked;
      td.append(input);
      tr.append(td);
    }
    cells.slice(1).forEach((cell, c) => {
      const td = el("td", c === 3 ? null : cell);  // the fourth is when it was written
      if (c === 3) td.append(timeAgo(cell));
      tr.append(td);
    });
    body.append(tr);
  });
  $("compare").disabled = rows.length < 2;
  $("versions-status").textContent = rows.length + (rows.length === 1 ? " version" : " versions");
}

async function compareVersions(event) {
  event.preventDefault();
  const form = $("compare-form");
  const older = form.querySelector("input[name=old]:checked");
  const newer = form.querySelector("input[name=new]:checked");
  const list = $("diff");
  list.replaceChildren();
  if (!older || !newer) return;
  const data = await callTool("get_state", { uris: [older.value, newer.value], mode: "full",
    budget_tokens: 100000 });
  if (data.error) { $("versions-status").textContent = data.error.message; return; }
  const [a, b] = data.items;
  if (!a || !b || a.error || b.error) {
    $("versions-status").textContent = "A version could not be read in full.";
    return;
  }
  const changes = Array.isArray(a.rows) && Array.isArray(b.rows)
    ? tableChanges(tsvOf(a), tsvOf(b)) : lineChanges(text(a), text(b));
  for (const [kind, line] of changes) list.append(el("li", line, { class: kind }));
  if (!changes.some(([kind]) => kind !== "same")) list.append(el("li", "No change in content.", { class: "same" }));
  $("versions-status").textContent = "Changes from " + short(older.value) + " to " + short(newer.value);
}

function text(item) { return item.body !== undefined ? item.body : tsvOf(item); }

// A table note's columns and rows as TSV, one header line then a line per row (no cell holds
// a raw tab or line break), the form the page compares and draws.
function tsvOf(item) {
  const lines = [(item.columns || []).join("\t")];
  for (const row of item.rows || []) lines.push(row.join("\t"));
  return lines.join("\n");
}

// Lines removed and added, by the longest common subsequence; past 2,000 lines a side the
// page does not compare (the grid would be millions of cells) and shows both whole instead.
function lineChanges(before, after) {
  const a = before.split("\n"), b = after.split("\n");
  if (a.length > 2000 || b.length > 2000) {
    return [...a.map(l => ["removed", l]), ...b.map(l => ["added", l])];
  }
  const common = Array.from({ length: a.length + 1 }, () => new Int32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1
        : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) { out.push(["same", a[i]]); i++; j++; }
    else if (common[i + 1][j] >= common[i][j + 1]) out.push(["removed", a[i++]]);
    else out.push(["added", b[j++]]);
  }
  while (i < a.length) out.push(["removed", a[i++]]);
  while (j < b.length) out.push(["added", b[j++]]);
  return out;
}

// Two tables with the same columns: each changed cell by row and column, then rows added or
// removed at the end; other tables are compared as lines.
function tableChanges(before, after) {
  const a = before.split("\n").map(l => l.split("\t"));
  const b = after.split("\n").map(l => l.split("\t"));
  if (a[0].join("\t") !== b[0].join("\t")) return lineChanges(before, after);
  const out = [];
  const columns = a[0];
  for (let r = 1; r < Math.max(a.length, b.length); r++) {
    if (r >= a.length) { out.push(["added", "row " + r + ": " + b[r].join(" | ")]); continue; }
    if (r >= b.length) { out.push(["removed", "row " + r + ": " + a[r].join(" | ")]); continue; }
    columns.forEach((name, c) => {
      if (a[r][c] !== b[r][c]) {
        out.push(["cell", "row " + r + ", " + name + ": " + a[r][c] + " → " + b[r][c]]);
      }
    });
  }
  return out;
}

// A table note's TSV as a table: its first line the header row.
function tableOf(tsv) {
  const [header, ...rows] = tsv.split("\n");
  const table = el("table", null, { class: "note-table" });
  const head = el("tr");
  for (const name of header.split("\t")) head.append(el("th", name, { scope: "col" }));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const line of rows) {
    const tr = el("tr");
    for (const cell of line.split("\t")) tr.append(el("td", cell));
    table.tBodies[0].append(tr);
  }
  return table;
}

async function search(event) {
  event.preventDefault();
  const q = $("search").value.trim();
  const panel = $("search-results");
  if (!q) { panel.hidden = true; return; }
  panel.hidden = false;
  const warnings = $("search-warnings");
  warnings.replaceChildren();
  const hits = $("search-hits");
  hits.replaceChildren();
  let data;
  try {
    data = await callTool("search_keys", { q: q });
  } catch (err) {
    // A refused search (a query the board cannot take) is said where its results go.
    warnings.append(el("li", "The search was refused: " + err.message));
    $("search-title").textContent = "No results for " + q;
    return;
  }
  for (const w of data.warnings || []) warnings.append(el("li", w));
  for (const item of data.items) {
    const li = el("li");
    li.append(linkButton(item.uri), el("span", " — " + item.digest));
    hits.append(li);
  }
  if (!data.items.length) hits.append(el("li", "Nothing found for " + q + ".", { class: "muted" }));
  $("search-title").textContent = plural(data.items.length, "result") + " for " + q;
}

function short(uri) {
  const rest = uri.split("/").slice(3).join("/");
  return rest.length > 28 ? rest.slice(0, 27) + "…" : rest;
}

// A note's neighbours: one node per other note (its relations listed in it), incoming on the
// left, outgoing and sources on the right. The drawing is as wide as its box, so labels
// keep their size on a phone rather than shrinking with the picture.
let lastGraph = null;
let resizeTimer = null;
// Drawn again when the window changes width, so that its labels keep their size.
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (lastGraph) renderGraph(...lastGraph); }, 150);
});

function renderGraph(uri, links, sources) {
  lastGraph = [uri, links, sources];
  const graph = $("note-graph");
  for (const child of [...graph.childNodes]) if (child.nodeName !== "title") child.remove();
  const group = (entries) => {
    const byUri = new Map();
    for (const { uri: other, rel } of entries) {
      if (!byUri.has(other)) byUri.set(other, []);
      if (!byUri.get(other).includes(rel)) byUri.get(other).push(rel);
    }
    return [...byUri].map(([other, rels]) => ({ uri: other, rels: rels }));
  };
  const left = group(links.filter(l => l.from).map(l => ({ uri: l.from, rel: l.rel })));
  const right = group(links.filter(l => l.to).map(l => ({ uri: l.to, rel: l.rel }))
    .concat(sources.map(s => ({ uri: s, rel: "source" }))));
  const width = Math.round(Math.max(320, Math.min(640, graph.clientWidth || 640)));
  const box = Math.round(Math.min(170, width * 0.3));
  const rows = Math.max(left.length, right.length, 1);
  const height = Math.max(80, rows * 52 + 16);
  graph.setAttribute("viewBox", "0 0 " + width + " " + height);
  const cx = width / 2, cy = height / 2;
  const lx = box / 2 + 4, rx = width - box / 2 - 4;
  const place = (items, x) => items.map((it, i) => ({ ...it, x: x,
    y: (height / (items.length + 1)) * (i + 1) }));
  const edges = svg("g");
  const nodes = svg("g");
  graph.append(edges, nodes);
  for (const [items, x] of [[place(left, lx), lx], [place(right, rx), rx]]) {
    for (const it of items) {
      const bad = it.rels.includes("supersedes") || it.rels.includes("contradicts");
      const x1 = x < cx ? x + box / 2 : cx + box / 2, x2 = x < cx ? cx - box / 2 : x - box / 2;
      const y1 = x < cx ? it.y : cy, y2 = x < cx ? cy : it.y;
      edges.append(svg("line", { x1: x1, y1: y1, x2: x2, y2: y2,
        class: "edge" + (bad ? " bad" : "") }));
      nodes.append(graphNode(it.uri, x, it.y, false, box, it.rels.join(", ")));
    }
  }
  nodes.append(graphNode(uri, cx, cy, true, box, ""));
}

function graphNode(uri, x, y, center, box, rels) {
  const tall = rels ? 40 : 28;
  const g = svg("g", { class: "node" + (center ? " center" : ""), transform:
    "translate(" + (x - box / 2) + "," + (y - tall / 2) + ")" });
  // The note itself is named by its title; a neighbour, a button, by its aria-label below
  // (a title in it would be text inside the button that its name does not say).
  if (center) g.append(svg("title", {}, uri));
  g.append(svg("rect", { width: box, height: tall, rx: 4 }));
  const label = svg("text", { x: box / 2, y: 18, "text-anchor": "middle" }, short(uri));
  // The relations on a second line of the same text, after a space: read as one phrase.
  if (rels) label.append(svg("tspan", { x: box / 2, dy: 15, class: "rel" }, " " + rels));
  g.append(label);
  if (!center) {
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
    // The name starts with what the node shows (short address, relations), then says more.
    g.setAttribute("aria-label", short(uri) + " " + rels + ": open " + uri);
    g.addEventListener("click", () => openNote(uri));
    g.addEventListener("keydown", e => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openNote(uri); }
    });
  }
  return g;
}

// Writes a minute over the last hour, per topic and per author: one row of bars each, the
// busiest first, drawn as SVG here (no chart library), each row named in words as well.
let activityAt = 0;
async function loadActivity() {
  activityAt = Date.now();
  const data = await api("activity");
  $("activity-note").textContent = data.complete ? ""
    : "A busy hour: drawn from the newest 10,000 changes.";
  const refusals = $("activity-refusals");
  refusals.hidden = !data.outcomes;
  if (data.outcomes) {
    const parts = Object.entries(data.outcomes).map(([code, n]) => n + " " + code);
    refusals.textContent = "Calls not answered in the last hour: " +
      (parts.length ? parts.join(", ") : "none") + ".";
  }
  drawActivity($("activity-topics"), data.by_topic, data.minutes, "topic");
  drawActivity($("activity-authors"), data.by_author, data.minutes, "author");
}

function drawActivity(list, series, minutes, what) {
  list.replaceChildren();
  const rows = Object.entries(series)
    .map(([name, counts]) => [name, counts, counts.reduce((a, b) => a + b, 0)])
    .sort((a, b) => b[2] - a[2]).slice(0, 8);
  if (!rows.length) { list.append(el("li", "No writes in the last hour.", { class: "muted" })); return; }
  const top = Math.max(1, ...rows.flatMap(([, counts]) => counts));
  for (const [name, counts, total] of rows) {
    const busiest = Math.max(...counts);
    const summary = what + " " + name + ": " + plural(total, "write") + " in the last hour, at most " +
      busiest + " in a minute";
    const chart = svg("svg", { viewBox: "0 0 " + minutes * 4 + " 20", preserveAspectRatio: "none",
      role: "img", "aria-label": summary });
    chart.append(svg("title", {}, summary));
    counts.forEach((n, i) => {
      if (!n) return;
      const h = Math.max(1, Math.round(18 * n / top));
      chart.append(svg("rect", { x: i * 4, y: 20 - h, width: 3, height: h }));
    });
    const li = el("li");
    li.append(el("span", name + " (" + total + ")", { class: "name", title: name }), chart);
    list.append(li);
  }
}

// The admin's tools: each goes through the admin API, which checks the token again.
async function admin(path, body) {
  const init = { headers: { Authorization: "Bearer " + token() } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch("/admin/" + path, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data.error || {};
    const hint = error.hint ? " (" + error.hint + ")" : "";
    throw new Error(secondsSaid((error.message || response.statusText) + hint));
  }
  return data;
}

const topicList = text => text.split(",").map(t => t.trim()).filter(t => t);

async function issueToken(event) {
  event.preventDefault();
  const caps = [...document.querySelectorAll("#issue-form input[name=cap]:checked")].map(c => c.value);
  try {
    const ttl = parseDuration($("issue-ttl").value);
    const data = await admin("tokens", { sub: $("issue-sub").value.trim(),
      read: topicList($("issue-read").value), write: topicList($("issue-write").value),
      caps: caps, ttl_seconds: ttl });
    $("issued").hidden = false;
    $("issued-token").value = data.token;
    $("issued-snippet").textContent = "claude mcp add --transport http blackboard " +
      location.origin + "/mcp/ --header \"Authorization: Bearer " + data.token + "\"";
    $("issue-status").textContent = "Issued to " + $("issue-sub").value.trim() + ".";
    await loadTokens().catch(() => {});
    await refreshAudit().catch(() => {});
  } catch (err) {
    $("issued").hidden = true;
    $("issue-status").textContent = "Not issued: " + err.message;
  }
}

async function copyToken() {
  try {
    await navigator.clipboard.writeText($("issued-token").value);
    $("issue-status").textContent = "Copied.";
  } catch (err) {
    $("issued-token").select();
    $("issue-status").textContent = "Select the token and copy it.";
  }
}

// The workspace's tokens, from the admin API's record of every token the board issued. The
// audit's own subjects (the CLI's root, the retention sweep) hold no token: none is offered.
const INTERNAL_SUBJECTS = new Set(["cli:root", "retention"]);

function revokeStatus(text, isError) {
  $("revoke-status").textContent = text;
  $("revoke-status").className = isError ? "error" : "";
}

// Whether revoking this target ends the signed-in token itself.
function isOwn(target) {
  const who = state.who || {};
  return target.id !== undefined ? target.id === who.token_id : target.sub === who.subject;
}

function targetName(target) {
  return target.id !== undefined ? "token " + target.id + (target.of ? " of " + target.of : "")
    : "every token of " + target.sub;
}

// A button that acts on its second press; the first says what the second will do.
function armed(button, question) {
  if (button.dataset.armed === "true") return true;
  button.dataset.armed = "true";
  button.textContent = question;
  return false;
}

function shortId(id) { return id.length > 9 ? id.slice(0, 8) + "…" : id; }

async function revoke(target, force) {
  const body = target.id !== undefined ? { id: target.id } : { sub: target.sub };
  if (force) body.force = true;
  const own = isOwn(target);
  try {
    await admin("revoke", body);
  } catch (err) {
    revokeStatus("Not revoked: " + err.message, true);
    return;
  }
  if (own) {
    // Every later call with this token is refused: say so, and stop the feed retrying.
    if (state.feed) state.feed.abort();
    state.admin = false;
    const said = "Revoked " + targetName(target) + ", this session's own: its token no " +
      "longer works. Sign in with another token.";
    revokeStatus(said, true);
    status(said, true);
    return;
  }
  revokeStatus("Revoked " + targetName(target) + ".");
  await loadTokens().catch(err => revokeStatus("Revoked; the list did not reload: " + err.message,
    true));
  await refreshAudit().catch(() => {});
}

async function loadTokens() {
  const data = await admin("tokens");
  const body = $("tokens").tBodies[0];
  body.replaceChildren();
  const subjects = new Set();
  for (const t of data.tokens) {
    const tr = el("tr", null, { "data-id": t.id });
    const id = el("td", null, { "data-label": "Id" });
    id.append(el("code", shortId(t.id), { title: t.id }));
    const expires = el("td", null, { "data-label": "Expires" });
    const ends = t.expires * 1000;
    expires.append(ends > Date.now() ? timeExpiry(ends) : timeAgo(ends));
    const used = el("td", t.last_used ? null : "never", { "data-label": "Last used" });
    if (t.last_used) used.append(timeAgo(t.last_used * 1000));
    const parent = el("td", null, { "data-label": "Delegated from" });
    if (t.parent) parent.append(el("code", shortId(t.parent), { title: t.parent }));
    const action = el("td");
    if (t.status === "active" && !INTERNAL_SUBJECTS.has(t.sub)) {
      subjects.add(t.sub);
      action.append(revokeButton({ id: t.id, of: t.sub }, "Revoke"));
    }
    tr.append(el("td", t.sub, { "data-label": "Subject" }), id,
      el("td", t.status, { "data-label": "Status" }), expires, used, parent, action);
    body.append(tr);
  }
  const list = $("token-subjects");
  list.replaceChildren();
  for (const sub of [...subjects].sort()) {
    const li = el("li");
    li.append(revokeButton({ sub: sub }, "Revoke every token of " + sub));
    list.append(li);
  }
  $("tokens-count").textContent = data.tokens.length
    ? plural(data.tokens.length, "token") + " on record, oldest first."
    : "No token on record yet.";
}

// A token's button revokes at once; a subject's, or the session's own token, asks first.
function revokeButton(target, text) {
  const own = isOwn(target);
  const name = "Revoke " + targetName(target) + (own ? ", your own token" : "");
  const button = el("button", text, { type: "button", "aria-label": name });
  button.addEventListener("click", async () => {
    const question = own ? "Revoke your own token? This session stops working"
      : "Revoke " + targetName(target) + "?";
    if ((own || target.sub !== undefined) && !armed(button, question)) return;
    button.disabled = true;
    await revoke(target, false);
    button.disabled = false;
  });
  return button;
}

async function revokeTyped(event) {
  event.preventDefault();
  const kind = $("revoke-kind").value;
  const value = $("revoke-target").value.trim();
  if (!value) return;
  if (INTERNAL_SUBJECTS.has(value)) {
    revokeStatus(value + " is the board's own name in its audit, not a token holder: " +
      "nothing to revoke.", true);
    return;
  }
  const target = kind === "id" ? { id: value } : { sub: value };
  const submit = $("revoke-form").querySelector("button[type=submit]");
  if (isOwn(target) && submit.dataset.armed !== "true") {
    submit.dataset.armed = "true";
    submit.textContent = "Revoke your own token";
    revokeStatus("That is your own token: revoking it ends this session. Press \"Revoke " +
      "your own token\" to go on.", true);
    return;
  }
  disarmTyped();
  await revoke(target, $("revoke-force").checked);
}

function disarmTyped() {
  const submit = $("revoke-form").querySelector("button[type=submit]");
  submit.dataset.armed = "";
  submit.textContent = "Revoke";
}

async function loadRetention() {
  const policy = await admin("retention");
  // No age (the workspace's null, a topic's 0) keeps notes for ever.
  const age = s => s ? duration(s) : "forever";
  const parts = ["workspace: " + age(policy.max_age_seconds)];
  for (const [topic, seconds] of Object.entries(policy.topics || {})) {
    parts.push(topic + ": " + age(seconds));
  }
  $("retention-now").textContent = "How long notes are kept after their last write \u2014 " +
    parts.join("; ") + ".";
}

// The longest maximum age the admin API takes (its OpenAPI description says so).
const MAX_AGE = 100 * 365 * 86400;

// What the field asks for, as the admin API takes it: empty clears the setting (null);
// "forever" is a topic's 0 (kept whatever the workspace's age), or the workspace's null.
function retentionBody() {
  const topic = $("retention-topic").value.trim();
  const typed = $("retention-age").value.trim();
  let seconds = null;
  if (typed.toLowerCase() === "forever") seconds = topic ? 0 : null;
  else if (typed !== "") seconds = parseDuration(typed);
  if (seconds > MAX_AGE) {
    throw new Error(duration(seconds) + " is longer than the longest age the board keeps, " +
      duration(MAX_AGE) + " (100 years): for longer, use forever");
  }
  const body = { max_age_seconds: seconds };
  if (topic) body.topic = topic;
  return body;
}

// A setting that would delete notes is answered with what would go, not applied: the page
// says so, and the same button, pressed again for the same setting, sends it confirmed.
async function setRetention(event) {
  event.preventDefault();
  const said = $("retention-status");
  const submit = $("retention-form").querySelector("button[type=submit]");
  let body;
  try {
    body = retentionBody();
  } catch (err) {
    said.textContent = "Not set: " + err.message;
    return;
  }
  const asked = JSON.stringify(body);
  if (submit.dataset.armed === asked) body.confirm = true;
  disarmRetention();
  try {
    const answer = await admin("retention", body);
    if (answer.applied === false) {
      const shown = answer.uris.slice(0, 5);
      const more = answer.would_delete - shown.length;
      said.textContent = "Not set yet: this would delete " + plural(answer.would_delete, "note") +
        " at the next retention sweep: " + shown.join(", ") +
        (more > 0 ? " and " + more + " more" : "") + ". Press \u201cSet and delete " +
        plural(answer.would_delete, "note") + "\u201d to go on.";
      submit.dataset.armed = asked;
      submit.textContent = "Set and delete " + plural(answer.would_delete, "note");
      return;
    }
    said.textContent = answer.will_delete
      ? "Set: " + plural(answer.will_delete, "note") + " older than that go at the next " +
        "retention sweep."
      : "Set.";
    await loadRetention();
  } catch (err) {
    said.textContent = "Not set: " + err.message;
  }
  await refreshAudit().catch(() => {});
}

function disarmRetention() {
  const submit = $("retention-form").querySelector("button[type=submit]");
  submit.dataset.armed = "";
  submit.textContent = "Set";
}

// The audit tail, newest first, a page of 20 at a time. It follows the board: read again
// after a change the feed hears, after the admin's own work here, every AUDIT_EVERY while
// the page is seen (calls that change nothing, reads and refusals, reach no feed), and
// with its Refresh button.
const AUDIT_PAGE = 20;
const AUDIT_EVERY = 60000;
let auditRecords = [];
let auditShown = 0;

function showAudit() {
  const body = $("audit").tBodies[0];
  for (const r of auditRecords.slice(auditShown, auditShown + AUDIT_PAGE)) {
    const tr = el("tr");
    const when = el("td");
    when.append(timeAgo(r.at * 1000));
    tr.append(when, el("td", r.subject),
      el("td", r.tool), el("td", secondsSaid(r.outcome)), el("td", r.addresses.join(" ")));
    body.append(tr);
  }
  auditShown = Math.min(auditRecords.length, auditShown + AUDIT_PAGE);
  $("audit-more").hidden = auditShown >= auditRecords.length;
  $("audit-count").textContent = auditShown + " of the newest " + auditRecords.length + " records";
}

// The newest records again, as many shown as before.
async function refreshAudit() {
  if (!state.admin) return;
  const data = await api("audit");
  const shown = Math.max(AUDIT_PAGE, auditShown);
  auditRecords = data.records;
  auditShown = 0;
  $("audit").tBodies[0].replaceChildren();
  while (auditShown < Math.min(shown, auditRecords.length)) showAudit();
  if (!auditRecords.length) showAudit();
}

setInterval(() => {
  if (state.admin && document.visibilityState === "visible") refreshAudit().catch(() => {});
}, AUDIT_EVERY);

async function loadAudit() {
  const data = await api("audit");
  state.admin = true;
  $("audit-panel").hidden = false;
  $("audit").tBodies[0].replaceChildren();
  auditRecords = data.records;
  auditShown = 0;
  showAudit();
  $("admin-panel").hidden = false;
  await loadTokens().catch(err => { $("tokens-count").textContent = err.message; });
  await loadRetention().catch(err => { $("retention-now").textContent = err.message; });
}

let refreshTimer = null;
function scheduleRefresh(change) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(async () => {
    await loadTopics().catch(() => {});
    // The chart reads up to 10,000 change-log entries: at most twice a minute, however busy.
    if (Date.now() - activityAt > 30000) await loadActivity().catch(() => {});
    if (state.topic && topicOf(change.uri) === state.topic) await openTopic(state.topic).catch(() => {});
    if (state.note === change.uri) await openNote(change.uri).catch(() => {});
    await refreshAudit().catch(() => {});
  }, 250);
}

function showChange(change) {
  const li = el("li");
  li.append(timeAgo(change.at_ms), el("span", " " + change.op + " v" + change.version + " by " +
    change.author + " "), linkButton(change.uri));
  const feed = $("feed");
  feed.prepend(li);
  while (feed.childElementCount > 100) feed.lastChild.remove();
  scheduleRefresh(change);
}

// EventSource cannot send an Authorization header, so the stream is read with fetch().
async function follow() {
  if (state.feed) state.feed.abort();
  const controller = new AbortController();
  state.feed = controller;
  $("feed-status").textContent = "connecting…";
  try {
    const response = await fetch("/board/api/events", { signal: controller.signal,
      headers: { Authorization: "Bearer " + token(), Accept: "text/event-stream" } });
    if (!response.ok) throw new Error("HTTP " + response.status);
    $("feed-status").textContent = "live";
    $("feed-status").dataset.live = "true";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame.split("\n").filter(l => l.startsWith("data: ")).map(l => l.slice(6));
        if (data.length) showChange(JSON.parse(data.join("\n")));
      }
    }
  } catch (err) {
    if (controller.signal.aborted) return;
    $("feed-status").textContent = "disconnected (" + err.message + "); retrying";
  }
  $("feed-status").dataset.live = "false";
  if (!controller.signal.aborted) setTimeout(follow, 3000);
}

async function start() {
  if (!token()) { status("Enter an access token to open the board."); return; }
  try {
    const data = await loadTopics();
    status("Signed in to " + data.workspace + ".");
    follow();
    await loadActivity();
    if (data.admin) await loadAudit();
    else $("audit-panel").hidden = true;
  } catch (err) {
    status("Could not open the board: " + err.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", e => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    start();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    if (state.feed) state.feed.abort();
    location.reload();
  });
  $("notes-more").addEventListener("click", moreNotes);
  $("compare-form").addEventListener("submit", compareVersions);
  $("search-form").addEventListener("submit", search);
  $("issue-form").addEventListener("submit", issueToken);
  $("copy-token").addEventListener("click", copyToken);
  $("retention-form").addEventListener("submit", setRetention);
  for (const id of ["retention-topic", "retention-age"]) $(id).addEventListener("input", disarmRetention);
  $("audit-refresh").addEventListener("click", async () => {
    const button = $("audit-refresh");
    button.disabled = true;
    await refreshAudit().catch(err => { $("audit-count").textContent = err.message; });
    button.disabled = false;
    button.focus();
  });
  $("revoke-form").addEventListener("submit", revokeTyped);
  for (const id of ["revoke-kind", "revoke-target"]) $(id).addEventListener("input", disarmTyped);
  $("audit-more").addEventListener("click", showAudit);
  $("topic-graph-details").addEventListener("toggle", () => {
    if ($("topic-graph-details").open && state.topic) drawTopicGraph(state.topic);
  });
  for (const th of $("notes").querySelectorAll("th")) {
    th.querySelector("button").addEventListener("click", () => sortBy(th.dataset.key));
  }
  start();
});

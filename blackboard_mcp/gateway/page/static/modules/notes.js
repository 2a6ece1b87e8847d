// The topics the token may read, a topic's notes, one note open (its links, sources, content
// and versions), and search.
import { ApiError, boardApi, callTool, panelRequests, said } from "./api.js";
import { $, el, plural, status, timeAgo } from "./dom.js";
import { clearVersions, loadVersions, tsvOf } from "./diff.js";
import { drawNoteGraph, drawTopicGraph } from "./graph.js";
import { session } from "./session.js";

const FIELDS = ["uri", "digest", "version", "author", "updated", "size"];
// Notes a page: list_keys' largest page, or fewer with ?page_size=N (a small screen or a test).
const MAX_PAGE = 200;
const PAGE = Math.min(MAX_PAGE,
  Math.max(1, parseInt(new URLSearchParams(location.search).get("page_size"), 10) || MAX_PAGE));
// The topic graph draws the first notes of the list, no more.
const GRAPHED = 50;
const state = { topic: null, rows: [], next: null, sortKey: "updated", sortDir: -1, note: null };

const topicsRequest = panelRequests();
const notesRequest = panelRequests();
const topicGraphRequest = panelRequests();
const noteRequest = panelRequests();
const searchRequest = panelRequests();

export function topicShown() { return state.topic; }

export function noteShown() { return state.note; }

// A note's address as a button that opens it: shown relative to the workspace (or to
// ``base``, a topic's address), the whole address on hover and for a screen reader.
export function linkButton(uri, base) {
  const prefix = base || ("bb://" + session.workspace + "/");
  const label = uri.startsWith(prefix) ? uri.slice(prefix.length) : uri;
  const button = el("button", label, { type: "button", title: uri });
  if (label !== uri) button.setAttribute("aria-label", uri);
  button.addEventListener("click", () => openNote(uri));
  return button;
}

// The topics answer (workspace, who is signed in, the readable topics), its list drawn; it
// throws what refused it, for the caller to say. An answer overtaken by a later one is
// returned but not drawn.
export async function loadTopics() {
  const isCurrent = topicsRequest();
  const data = await boardApi("topics");
  if (!isCurrent()) return data;
  session.workspace = data.workspace;
  session.who = data.who;
  $("workspace").textContent = "· " + data.workspace;
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
export async function openTopic(topic) {
  const isCurrent = notesRequest();
  const again = state.topic === topic;
  state.topic = topic;
  for (const b of $("topics").querySelectorAll("button")) {
    b.setAttribute("aria-current", String(b.dataset.topic === topic));
  }
  $("notes-title").textContent = "Notes in " + topic;
  $("notes-prompt").hidden = true;
  const limit = again ? Math.min(MAX_PAGE, Math.max(PAGE, state.rows.length)) : PAGE;
  let data;
  try {
    data = await listPage(topic, limit);
  } catch (err) {
    if (!isCurrent()) return;
    // Another topic's notes are not left under this one's title; this one's stay.
    if (!again) {
      state.rows = [];
      state.next = null;
      renderNotes();
    }
    $("notes-count").textContent = "The notes were not listed: " + said(err);
    return;
  }
  if (!isCurrent()) return;  // another topic, or this one again, was asked for meanwhile
  state.rows = data.items;
  state.next = data.next || null;
  renderNotes();
  if ($("topic-graph-details").open) await showTopicGraph(topic);
}

// The links between the topic's first notes; a node opens its note.
export async function showTopicGraph(topic) {
  const isCurrent = topicGraphRequest();
  const note = $("topic-graph-note");
  const uris = state.rows.slice(0, GRAPHED).map(r => r.uri);
  if (!uris.length) {
    $("topic-graph").replaceChildren();
    note.textContent = "No notes.";
    return;
  }
  let data;
  try {
    data = await callTool("get_state", { uris: uris, mode: "fields", fields: ["links"],
      budget_tokens: 100000 });
  } catch (err) {
    if (isCurrent()) note.textContent = "The links were not read: " + said(err);
    return;
  }
  if (!isCurrent() || state.topic !== topic) return;
  const prefix = "bb://" + session.workspace + "/" + topic + "/";
  const outside = drawTopicGraph(prefix, uris, data.items, openNote);
  note.textContent = (state.rows.length > GRAPHED ? "The first " + GRAPHED + " notes. " : "") +
    (outside ? plural(outside, "link") + " to notes of other topics not drawn." : "");
}

export async function moreNotes() {
  const topic = state.topic, after = state.next;
  if (!topic || !after) return;
  const button = $("notes-more");
  button.disabled = true;
  try {
    const data = await listPage(topic, PAGE, after);
    // The list was opened again, or went on, meanwhile: this page no longer follows it.
    if (state.topic !== topic || state.next !== after) return;
    const seen = new Set(state.rows.map(r => r.uri));
    state.rows = state.rows.concat(data.items.filter(r => !seen.has(r.uri)));
    state.next = data.next || null;
    renderNotes();
  } catch (err) {
    status("Could not load more notes: " + said(err), true);
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
    addr.append(linkButton(row.uri, "bb://" + session.workspace + "/" + state.topic + "/"));
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

export function sortBy(key) {
  state.sortDir = state.sortKey === key ? -state.sortDir : (key === "updated" ? -1 : 1);
  state.sortKey = key;
  renderNotes();
}

// The note panel for a note that cannot be shown: ``why`` in place of its digest.
function showNothingOf(uri, why) {
  $("note-digest").textContent = why;
  $("note-meta").replaceChildren();
  $("note-content").hidden = false;
  $("note-content").textContent = "";
  $("note-table").hidden = true;
  $("note-table").replaceChildren();
  drawNoteGraph(uri, [], [], openNote);
  $("note-sources").replaceChildren();
  $("note-links").replaceChildren();
  clearVersions();
}

export async function openNote(uri) {
  const isCurrent = noteRequest();
  state.note = uri;
  let data;
  try {
    data = await callTool("get_state", { uris: [uri], mode: "full", budget_tokens: 100000 });
  } catch (err) {
    if (!isCurrent()) return;
    showPanel(uri, []);
    showNothingOf(uri, "This note was not read: " + said(err));
    return;
  }
  if (!isCurrent()) return;  // another note was asked for meanwhile
  const item = data.items[0] || { uri: uri, error: "not_found" };
  const panel = showPanel(uri, data.warnings || []);
  if (item.error) {
    showNothingOf(uri, item.error === "forbidden"
      ? "This token may not read this note's topic."
      : "This note does not exist (" + item.error + ").");
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
  drawNoteGraph(uri, links, item.sources || [], openNote);
  await loadVersions(uri);
  if (isCurrent()) panel.scrollIntoView({ block: "nearest" });
}

function showPanel(uri, warnings) {
  const panel = $("note-panel");
  panel.hidden = false;
  $("note-title").textContent = uri;
  const list = $("note-warnings");
  list.replaceChildren();
  for (const w of warnings) list.append(el("li", w));
  return panel;
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
    } catch (err) {
      button.dataset.armed = "";
      button.textContent = "Withdraw";
      status("The link was not withdrawn: " + said(err), true);
      return;
    }
    status("Withdrew the " + link.rel + " link " + (link.to ? "to " + dst : "from " + src) + ".");
    await openNote(uri);
  });
  return button;
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

export async function search(event) {
  event.preventDefault();
  const isCurrent = searchRequest();
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
    if (!isCurrent()) return;
    // A refused search (a query the board cannot take) is said where its results go.
    const what = err instanceof ApiError ? "The search was refused: " : "The search failed: ";
    warnings.append(el("li", what + said(err)));
    $("search-title").textContent = "No results for " + q;
    return;
  }
  if (!isCurrent()) return;  // a later search was asked for meanwhile
  for (const w of data.warnings || []) warnings.append(el("li", w));
  for (const item of data.items) {
    const li = el("li");
    li.append(linkButton(item.uri), el("span", " — " + item.digest));
    hits.append(li);
  }
  if (!data.items.length) hits.append(el("li", "Nothing found for " + q + ".", { class: "muted" }));
  $("search-title").textContent = plural(data.items.length, "result") + " for " + q;
}

// A note's versions, and the changes between any two of them: lines for text, cells for
// tables with the same columns.
import { callTool, panelRequests, said } from "./api.js";
import { $, el, short, timeAgo } from "./dom.js";

const versionsRequest = panelRequests();
const compareRequest = panelRequests();

export function clearVersions() {
  versionsRequest();
  compareRequest();
  $("versions").querySelector("tbody").replaceChildren();
  $("diff").replaceChildren();
  $("versions-status").textContent = "";
  $("compare").disabled = true;
}

// list_keys with the note's address as the topic, newest first.
export async function loadVersions(uri) {
  clearVersions();
  const isCurrent = versionsRequest();
  const rows = [];
  let after = null;
  try {
    do {
      const args = { topic: uri, mode: "table", limit: 200, budget_tokens: 100000,
        fields: ["version", "digest", "author", "updated", "size"] };
      if (after) args.after = after;
      const page = await callTool("list_keys", args);
      if (!isCurrent()) return;
      const lines = (page.table || "").split("\n").slice(1).filter(line => line);
      for (const line of lines) rows.push(line.split("\t"));
      after = page.next;
    } while (after && rows.length < 1000);
  } catch (err) {
    if (isCurrent()) $("versions-status").textContent = "The versions were not listed: " + said(err);
    return;
  }
  const body = $("versions").querySelector("tbody");
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

export async function compareVersions(event) {
  event.preventDefault();
  const isCurrent = compareRequest();
  const form = $("compare-form");
  const older = form.querySelector("input[name=old]:checked");
  const newer = form.querySelector("input[name=new]:checked");
  const list = $("diff");
  list.replaceChildren();
  if (!older || !newer) return;
  let data;
  try {
    data = await callTool("get_state", { uris: [older.value, newer.value], mode: "full",
      budget_tokens: 100000 });
  } catch (err) {
    if (isCurrent()) $("versions-status").textContent = "The versions were not compared: " + said(err);
    return;
  }
  if (!isCurrent()) return;
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
export function tsvOf(item) {
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

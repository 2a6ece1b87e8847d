// The link drawings, as SVG made here (no chart library): a note's neighbours, and the links
// between a topic's notes. Each node is a button that opens its note through ``open``.
import { $, plural, short, svg } from "./dom.js";

// A node that opens its note by click, Enter or Space.
function opens(node, uri, open) {
  node.addEventListener("click", () => open(uri));
  node.addEventListener("keydown", e => {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(uri); }
  });
}

// The drawing is as wide as its box, so labels keep their size on a phone rather than
// shrinking with the picture.
function widthOf(graph) { return Math.round(Math.max(320, Math.min(640, graph.clientWidth || 640))); }

// A note's neighbours: one node per other note (its relations listed in it), incoming on the
// left, outgoing and sources on the right.
let lastNoteGraph = null;
let resizeTimer = null;
// Drawn again when the window changes width, so that its labels keep their size.
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (lastNoteGraph) drawNoteGraph(...lastNoteGraph); }, 150);
});

export function drawNoteGraph(uri, links, sources, open) {
  lastNoteGraph = [uri, links, sources, open];
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
  const width = widthOf(graph);
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
      nodes.append(noteGraphNode(it.uri, x, it.y, box, it.rels.join(", "), open));
    }
  }
  nodes.append(noteGraphNode(uri, cx, cy, box, "", null));
}

// The note itself (no ``open``) or a neighbour, a button.
function noteGraphNode(uri, x, y, box, rels, open) {
  const center = open === null;
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
    opens(g, uri, open);
  }
  return g;
}

// A topic's notes (``uris``, under ``prefix``) as a ring, one node each, and the links between
// them from ``items`` (get_state's answer for ``uris``, in their order). Links to other
// topics' notes are counted, not drawn: the count is returned.
export function drawTopicGraph(prefix, uris, items, open) {
  const graph = $("topic-graph");
  graph.replaceChildren();
  const width = widthOf(graph);
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
  items.forEach((item, i) => {
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
  for (const u of uris) {
    const [x, y] = at.get(u);
    const name = u.slice(prefix.length);
    const label = name.length > 18 ? name.slice(0, 17) + "…" : name;
    const g = svg("g", { class: "node", tabindex: "0", role: "button",
      transform: "translate(" + (x - 55) + "," + (y - 11) + ")",
      "aria-label": label + ": " + plural(counts.get(u), "link") + ", open " + u });
    g.append(svg("rect", { width: 110, height: 22, rx: 4 }),
      svg("text", { x: 55, y: 15, "text-anchor": "middle" }, label));
    opens(g, u, open);
    nodes.append(g);
  }
  return outside;
}

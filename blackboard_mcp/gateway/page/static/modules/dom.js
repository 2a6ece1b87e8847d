// Putting the board's values in the page. Every value shown comes from the board, which
// agents write: it goes in as text (textContent, setAttribute on inert attributes), never as
// markup.

export function $(id) { return document.getElementById(id); }

export function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

export function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

// The line under the header: what the page did last, or why it could not.
export function status(text, isError) {
  const node = $("status");
  node.textContent = text;
  node.className = isError ? "error" : "muted";
}

export function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

// A note's address past its workspace, cut to fit a label.
export function short(uri) {
  const rest = uri.split("/").slice(3).join("/");
  return rest.length > 28 ? rest.slice(0, 27) + "…" : rest;
}

export function topicOf(uri) { return uri.split("/")[3]; }

// One convention for times, past or to come: how long ago (or how soon) in words, the exact
// UTC time on hover and in datetime. The words are said again every half minute (RELATIVE
// below), so that a "just now" left on screen does not stay one.
export function timeAgo(value) {
  const at = new Date(value);
  if (value === "" || value === undefined || value === null || isNaN(at.getTime())) {
    return el("span", "");
  }
  const exact = at.toISOString().replace(/\.\d{3}Z$/, "Z");
  const node = el("time", relative(at.getTime()), { datetime: exact, title: exact + " (UTC)" });
  node.dataset.at = String(at.getTime());
  return node;
}

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

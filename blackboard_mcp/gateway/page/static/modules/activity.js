// Writes a minute over the last hour, per topic and per author: one row of bars each, the
// busiest first, drawn as SVG here (no chart library), each row named in words as well.
import { boardApi, panelRequests, said } from "./api.js";
import { $, el, plural, svg } from "./dom.js";

// The chart reads up to 10,000 change-log entries: at most twice a minute, however busy.
const EVERY = 30000;
const activityRequest = panelRequests();
let askedAt = 0;

export function activityIsDue() { return Date.now() - askedAt > EVERY; }

export async function loadActivity() {
  const isCurrent = activityRequest();
  askedAt = Date.now();
  let data;
  try {
    data = await boardApi("activity");
  } catch (err) {
    if (isCurrent()) $("activity-note").textContent = "The activity was not read: " + said(err);
    return;
  }
  if (!isCurrent()) return;
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

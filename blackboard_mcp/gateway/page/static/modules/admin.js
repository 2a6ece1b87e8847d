// The admin's tools: issuing and revoking tokens, retention, and the audit tail. Each goes
// through the admin API (or, for the audit, the page's API), which checks the token again.
import { adminApi, boardApi, panelRequests, said } from "./api.js";
import { $, el, plural, status, timeAgo } from "./dom.js";
import { stopFollowing } from "./feed.js";
import { session } from "./session.js";

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
export function duration(seconds) {
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

// What the admin API refused, its seconds said as durations.
function refused(err) { return secondsSaid(said(err)); }

// A token the admin issues cannot outlive the admin's own: the form offers no more than
// that, an hour at most, in whole minutes while there are some.
export function offerTokenLife(who) {
  const left = Math.max(1, Math.floor((who.expires_at_ms - Date.now()) / 1000));
  $("issue-ttl").value = duration(Math.min(3600, left >= 60 ? left - left % 60 : left));
}

const topicList = text => text.split(",").map(t => t.trim()).filter(t => t);

export async function issueToken(event) {
  event.preventDefault();
  const caps = [...document.querySelectorAll("#issue-form input[name=cap]:checked")].map(c => c.value);
  let data;
  try {
    const ttl = parseDuration($("issue-ttl").value);
    data = await adminApi("tokens", { sub: $("issue-sub").value.trim(),
      read: topicList($("issue-read").value), write: topicList($("issue-write").value),
      caps: caps, ttl_seconds: ttl });
  } catch (err) {
    $("issued").hidden = true;
    $("issue-status").textContent = "Not issued: " + refused(err);
    return;
  }
  $("issued").hidden = false;
  $("issued-token").value = data.token;
  $("issued-snippet").textContent = "claude mcp add --transport http blackboard " +
    location.origin + "/mcp/ --header \"Authorization: Bearer " + data.token + "\"";
  $("issue-status").textContent = "Issued to " + $("issue-sub").value.trim() + ".";
  await loadTokens();
  await refreshAudit();
}

export async function copyToken() {
  try {
    await navigator.clipboard.writeText($("issued-token").value);
    $("issue-status").textContent = "Copied.";
  } catch (err) {
    // No clipboard for this page (not allowed, or not a secure context): the person copies.
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
  const who = session.who || {};
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
    await adminApi("revoke", body);
  } catch (err) {
    revokeStatus("Not revoked: " + refused(err), true);
    return;
  }
  if (own) {
    // Every later call with this token is refused: say so, and stop the feed retrying.
    stopFollowing();
    session.admin = false;
    const text = "Revoked " + targetName(target) + ", this session's own: its token no " +
      "longer works. Sign in with another token.";
    revokeStatus(text, true);
    status(text, true);
    return;
  }
  revokeStatus("Revoked " + targetName(target) + ".");
  await loadTokens();
  await refreshAudit();
}

const tokensRequest = panelRequests();

export async function loadTokens() {
  const isCurrent = tokensRequest();
  let data;
  try {
    data = await adminApi("tokens");
  } catch (err) {
    if (isCurrent()) $("tokens-count").textContent = "The tokens were not listed: " + refused(err);
    return;
  }
  if (!isCurrent()) return;
  const body = $("tokens").tBodies[0];
  body.replaceChildren();
  const subjects = new Set();
  for (const t of data.tokens) {
    const tr = el("tr", null, { "data-id": t.id });
    const id = el("td", null, { "data-label": "Id" });
    id.append(el("code", shortId(t.id), { title: t.id }));
    const expires = el("td", null, { "data-label": "Expires" });
    expires.append(timeAgo(t.expires * 1000));
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

export async function revokeTyped(event) {
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

export function disarmTyped() {
  const submit = $("revoke-form").querySelector("button[type=submit]");
  submit.dataset.armed = "";
  submit.textContent = "Revoke";
}

const retentionRequest = panelRequests();

async function loadRetention() {
  const isCurrent = retentionRequest();
  let policy;
  try {
    policy = await adminApi("retention");
  } catch (err) {
    if (isCurrent()) $("retention-now").textContent = "The retention was not read: " + refused(err);
    return;
  }
  if (!isCurrent()) return;
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
export async function setRetention(event) {
  event.preventDefault();
  const line = $("retention-status");
  const submit = $("retention-form").querySelector("button[type=submit]");
  let body;
  try {
    body = retentionBody();
  } catch (err) {
    line.textContent = "Not set: " + err.message;
    return;
  }
  const asked = JSON.stringify(body);
  if (submit.dataset.armed === asked) body.confirm = true;
  disarmRetention();
  let answer;
  try {
    answer = await adminApi("retention", body);
  } catch (err) {
    line.textContent = "Not set: " + refused(err);
    await refreshAudit();
    return;
  }
  if (answer.applied === false) {
    const shown = answer.uris.slice(0, 5);
    const more = answer.would_delete - shown.length;
    line.textContent = "Not set yet: this would delete " + plural(answer.would_delete, "note") +
      " at the next retention sweep: " + shown.join(", ") +
      (more > 0 ? " and " + more + " more" : "") + ". Press \u201cSet and delete " +
      plural(answer.would_delete, "note") + "\u201d to go on.";
    submit.dataset.armed = asked;
    submit.textContent = "Set and delete " + plural(answer.would_delete, "note");
  } else {
    line.textContent = answer.will_delete
      ? "Set: " + plural(answer.will_delete, "note") + " older than that go at the next " +
        "retention sweep."
      : "Set.";
    await loadRetention();
  }
  await refreshAudit();
}

export function disarmRetention() {
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
const auditRequest = panelRequests();
let auditRecords = [];
let auditShown = 0;

export function showAudit() {
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

// The newest records again, as many shown as before; a failure is said under the table,
// whose last records stay.
export async function refreshAudit() {
  if (!session.admin) return;
  const isCurrent = auditRequest();
  let data;
  try {
    data = await boardApi("audit");
  } catch (err) {
    if (isCurrent()) $("audit-count").textContent = "The audit was not read again: " + said(err);
    return;
  }
  if (!isCurrent()) return;
  const shown = Math.max(AUDIT_PAGE, auditShown);
  auditRecords = data.records;
  auditShown = 0;
  $("audit").tBodies[0].replaceChildren();
  while (auditShown < Math.min(shown, auditRecords.length)) showAudit();
  if (!auditRecords.length) showAudit();
}

setInterval(() => {
  if (session.admin && document.visibilityState === "visible") refreshAudit();
}, AUDIT_EVERY);

// The audit tail and the admin panel, for an admin token that holds every topic; it throws
// what refused the audit, for the caller to say.
export async function loadAudit() {
  const isCurrent = auditRequest();
  const data = await boardApi("audit");
  if (!isCurrent()) return;
  session.admin = true;
  $("audit-panel").hidden = false;
  $("audit").tBodies[0].replaceChildren();
  auditRecords = data.records;
  auditShown = 0;
  showAudit();
  $("admin-panel").hidden = false;
  await loadTokens();
  await loadRetention();
}

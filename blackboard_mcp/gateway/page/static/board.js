// The board page: a person signs in with a token, and each panel's module is wired to the
// page's controls and to the live feed. Every value shown comes from the board, which agents
// write: it is put in the page as text, never as markup (modules/dom.js).
import { forgetToken, keepToken, said, token } from "./modules/api.js";
import { $, el, status, timeAgo, topicOf } from "./modules/dom.js";
import { loadActivity, activityIsDue } from "./modules/activity.js";
import * as admin from "./modules/admin.js";
import { compareVersions } from "./modules/diff.js";
import { follow, stopFollowing } from "./modules/feed.js";
import {
  loadTopics, moreNotes, noteShown, openNote, openTopic, search, showTopicGraph, sortBy,
  topicShown,
} from "./modules/notes.js";
import { session } from "./modules/session.js";

// Who is signed in and what the token allows, said at once under the header.
function showWho() {
  const who = session.who;
  const line = $("who");
  if (!who) { line.hidden = true; return; }
  admin.offerTokenLife(who);
  const topics = list => list.length ? list.join(", ") : "none";
  line.replaceChildren(
    el("span", "Signed in as " + who.subject + " to workspace " + session.workspace +
      "; reads " + topics(who.read) + "; writes " + topics(who.write) + "; may " +
      (who.capabilities.join(", ") || "nothing") + "; the token expires "),
    timeAgo(who.expires_at_ms), el("span", "."));
  line.hidden = false;
}

// A change the feed heard: the panels it touches are read again, once the changes of a
// burst have arrived. Each panel says its own failure and keeps its last answer.
const SETTLE = 250;
let refreshTimer = null;

function afterChange(change) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => refresh(change), SETTLE);
}

async function refresh(change) {
  try {
    await loadTopics();
    showWho();
  } catch (err) {
    status("The topics were not read again: " + said(err), true);
  }
  if (activityIsDue()) await loadActivity();
  const topic = topicShown();
  if (topic && topicOf(change.uri) === topic) await openTopic(topic);
  if (noteShown() === change.uri) await openNote(change.uri);
  await admin.refreshAudit();
}

// Signs in with the kept token; resolves once the page has done all it does at sign-in.
export async function start() {
  if (!token()) { status("Enter an access token to open the board."); return; }
  try {
    const data = await loadTopics();
    showWho();
    status("Signed in to " + data.workspace + ".");
    follow(afterChange);
    await loadActivity();
    if (data.admin) await admin.loadAudit();
    else $("audit-panel").hidden = true;
  } catch (err) {
    status("Could not open the board: " + said(err), true);
  }
}

$("token-form").addEventListener("submit", e => {
  e.preventDefault();
  keepToken($("token").value.trim());
  $("token").value = "";
  start();
});
$("forget").addEventListener("click", () => {
  forgetToken();
  stopFollowing();
  location.reload();
});
$("notes-more").addEventListener("click", moreNotes);
$("compare-form").addEventListener("submit", compareVersions);
$("search-form").addEventListener("submit", search);
$("issue-form").addEventListener("submit", admin.issueToken);
$("copy-token").addEventListener("click", admin.copyToken);
$("retention-form").addEventListener("submit", admin.setRetention);
for (const id of ["retention-topic", "retention-age"]) {
  $(id).addEventListener("input", admin.disarmRetention);
}
$("audit-refresh").addEventListener("click", async () => {
  const button = $("audit-refresh");
  button.disabled = true;
  await admin.refreshAudit();
  button.disabled = false;
  button.focus();
});
$("revoke-form").addEventListener("submit", admin.revokeTyped);
for (const id of ["revoke-kind", "revoke-target"]) $(id).addEventListener("input", admin.disarmTyped);
$("audit-more").addEventListener("click", admin.showAudit);
$("topic-graph-details").addEventListener("toggle", () => {
  if ($("topic-graph-details").open && topicShown()) showTopicGraph(topicShown());
});
for (const th of $("notes").querySelectorAll("th")) {
  th.querySelector("button").addEventListener("click", () => sortBy(th.dataset.key));
}
start();

// The live changes the token may see, newest first. EventSource cannot send an Authorization
// header, so the event stream is read with fetch().
import { send, said } from "./api.js";
import { $, el, timeAgo } from "./dom.js";
import { linkButton } from "./notes.js";

const KEPT = 100;
const RETRY = 3000;
let following = null;

export function stopFollowing() {
  if (following) following.abort();
}

function showChange(change) {
  const li = el("li");
  li.append(timeAgo(change.at_ms), el("span", " " + change.op + " v" + change.version + " by " +
    change.author + " "), linkButton(change.uri));
  const feed = $("feed");
  feed.prepend(li);
  while (feed.childElementCount > KEPT) feed.lastChild.remove();
}

// Each change is shown, then handed to ``onChange``; a stream that ends or fails is opened
// again until stopFollowing().
export async function follow(onChange) {
  stopFollowing();
  const controller = new AbortController();
  following = controller;
  const state = $("feed-status");
  state.textContent = "connecting…";
  try {
    const response = await send("/board/api/events",
      { signal: controller.signal, accept: "text/event-stream" });
    state.textContent = "live";
    state.dataset.live = "true";
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
        if (data.length) {
          const change = JSON.parse(data.join("\n"));
          showChange(change);
          onChange(change);
        }
      }
    }
  } catch (err) {
    if (controller.signal.aborted) return;
    state.textContent = "disconnected (" + said(err) + "); retrying";
  }
  state.dataset.live = "false";
  if (!controller.signal.aborted) setTimeout(() => follow(onChange), RETRY);
}

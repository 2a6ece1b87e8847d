// The one way the page talks to the gateway. Every request carries the token as a bearer
// header (never in a URL, where logs and history would keep it), and every refusal becomes
// an ApiError that the panel which asked shows where its answer would have gone.

const TOKEN_KEY = "bb-board-token";

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

export function keepToken(value) { sessionStorage.setItem(TOKEN_KEY, value); }

export function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); }

// A refusal as the gateway words it: {"error": {"code", "message", "hint", ...}}.
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || "HTTP " + status);
    this.name = "ApiError";
    this.status = status;
    this.code = error.code || String(status);
    this.hint = error.hint || "";
  }
}

// What a panel says of a failure: the gateway's code, message and hint for a refusal, the
// browser's own reason for a request that got no answer (offline, the connection cut).
export function said(err) {
  if (!(err instanceof ApiError)) return err.message;
  return err.code + ": " + err.message + (err.hint ? " (" + err.hint + ")" : "");
}

function refusalOf(text) {
  try {
    const body = JSON.parse(text);
    if (body && typeof body.error === "object" && body.error) return body.error;
  } catch (err) {
    // A body that is not the gateway's JSON (a proxy's error page): its status says enough.
  }
  return {};
}

// The answer to one request, or an ApiError if it was refused. A stream's caller reads the
// body itself; everyone else takes the JSON through answer() below.
export async function send(url, { body, signal, accept } = {}) {
  const init = { headers: { Authorization: "Bearer " + token() }, cache: "no-store" };
  if (signal) init.signal = signal;
  if (accept) init.headers.Accept = accept;
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  if (!response.ok) {
    throw new ApiError(response.status, refusalOf(await response.text()));
  }
  return response;
}

async function answer(url, body) {
  return JSON.parse(await (await send(url, { body: body })).text());
}

// The page's own API (/board/api/...) and the admin API (/admin/...), which checks the token
// again on every call.
export function boardApi(path, body) { return answer("/board/api/" + path, body); }

export function adminApi(path, body) { return answer("/admin/" + path, body); }

export function callTool(tool, args) { return boardApi("call", { tool: tool, arguments: args }); }

// A panel's requests, in the order they were made. Each call starts a new one and returns a
// check that holds while no later one has started: an answer overtaken by a newer request
// (a slow note while the person already opened the next) is dropped, not shown over it.
export function panelRequests() {
  let newest = 0;
  return function begin() {
    const mine = ++newest;
    return () => mine === newest;
  };
}

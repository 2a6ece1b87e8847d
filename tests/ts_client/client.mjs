// Drives a blackboard-mcp gateway with the TypeScript MCP SDK's own client and prints one JSON
// object of what came back. It decides nothing: the Python test asserts on the printed JSON, so
// a failure reads the same as every other test in the suite.
//
//   BB_TOKEN=<jwt> node client.mjs <mcp url> <workspace>
//
// The token travels in the environment rather than argv so it never shows in a process listing.

import { readFile } from "node:fs/promises";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const [url, workspace] = process.argv.slice(2);
const token = process.env.BB_TOKEN;
if (!url || !workspace || !token) {
  process.stderr.write("usage: BB_TOKEN=<jwt> node client.mjs <mcp url> <workspace>\n");
  process.exit(2);
}

const CLIENT_INFO = { name: "blackboard-mcp-ts-test", version: "0.0.0" };

function transportFor(headers) {
  return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}

// StreamableHTTPError carries the HTTP status in `code`; the Python side asserts on it.
function describe(error) {
  return {
    name: error?.constructor?.name ?? "Error",
    code: error?.code ?? null,
    message: String(error?.message ?? error),
  };
}

// Transport errors reported through onerror do not always reject a pending call (the SDK
// reports a failed optional GET stream that way), so they are collected and reported too.
function watch(transport, sink) {
  transport.onerror = (error) => sink.push(describe(error));
  return transport;
}

// Keeps both faces of a tool result: structuredContent for clients that read it, and the
// text block that clients without structured output would show the model.
function observed(result) {
  const text = result.content?.find((block) => block.type === "text")?.text;
  let textJson = null;
  if (text !== undefined) {
    try {
      textJson = JSON.parse(text);
    } catch {
      textJson = { unparsable: text };
    }
  }
  return {
    isError: result.isError === true,
    structured: result.structuredContent ?? null,
    textJson,
    contentTypes: (result.content ?? []).map((block) => block.type),
  };
}

async function withToken(out) {
  const errors = [];
  const transport = watch(transportFor({ Authorization: `Bearer ${token}` }), errors);
  const client = new Client(CLIENT_INFO);
  await client.connect(transport);
  out.server = {
    info: client.getServerVersion() ?? null,
    instructions: client.getInstructions() ?? null,
    protocolVersion: transport.protocolVersion ?? null,
    sessionId: transport.sessionId ?? null,
  };

  const listed = await client.listTools();
  out.tools = listed.tools.map((tool) => ({
    name: tool.name,
    required: tool.inputSchema?.required ?? [],
    hasOutputSchema: tool.outputSchema !== undefined,
  }));

  const call = async (name, args) => observed(await client.callTool({ name, arguments: args }));
  const first = `bb://${workspace}/findings/otters/habitat`;
  const second = `bb://${workspace}/findings/otters/habitat-revised`;
  out.uris = { first, second };

  out.create = await call("update_state", {
    uri: first,
    digest: "Sea otters hold hands while sleeping",
    body: "Seen in kelp beds off Monterey.",
    expect_version: 0,
  });
  // Stale on purpose: the note is at version 1, so create-only must lose.
  out.conflict = await call("update_state", {
    uri: first,
    digest: "a write that must not land",
    body: "overwritten?",
    expect_version: 0,
  });
  out.update = await call("update_state", {
    uri: first,
    digest: "Sea otters hold hands while sleeping in kelp",
    body: "Seen in kelp beds off Monterey, twice.",
    expect_version: 1,
  });
  out.createSecond = await call("update_state", {
    uri: second,
    digest: "Otter rafts anchor to kelp, not to each other",
    columns: ["site", "rafts"],
    rows: [["Monterey", 12], ["Morro Bay", 3]],
    expect_version: 0,
  });
  out.getDigest = await call("get_state", { uris: [first], mode: "digest" });
  out.getFull = await call("get_state", { uris: [first, second], mode: "full" });
  out.listTable = await call("list_keys", { topic: "findings", mode: "table" });
  out.search = await call("search_keys", { q: "holding hands sleeping", topic: "findings" });
  out.link = await call("link_state", { src: second, rel: "supersedes", dst: [first] });
  out.getSuperseded = await call("get_state", { uris: [first] });

  await client.close();
  out.transportErrors = errors;
}

async function withoutToken(out) {
  const client = new Client(CLIENT_INFO);
  try {
    await client.connect(transportFor({}));
    out.noToken = { connected: true, tools: (await client.listTools()).tools.map((t) => t.name) };
  } catch (error) {
    out.noToken = { connected: false, ...describe(error) };
  } finally {
    await client.close().catch(() => {});
  }
}

// Read from disk because the package's exports map sends "./package.json" into dist/.
const sdkManifest = new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url);
const out = {
  sdkVersion: JSON.parse(await readFile(sdkManifest, "utf8")).version,
  clientLatestProtocol: LATEST_PROTOCOL_VERSION,
};
try {
  await withToken(out);
  await withoutToken(out);
} catch (error) {
  out.fatal = { ...describe(error), stack: String(error?.stack ?? "") };
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(1);
}
process.stdout.write(JSON.stringify(out) + "\n");

-- wrk script: every connection sends the same tools/call again and again (a read: its answer
-- does not depend on the last one). The JSON-RPC request is the script's one argument.
--
--   wrk -t8 -c8 -d4s -H "Authorization: Bearer $TOKEN" http://127.0.0.1:PORT/mcp/ \
--       -s bench/read_call.lua -- '{"jsonrpc":"2.0","id":1,"method":"tools/call",...}'
--
-- done() prints one line: READ ok=<n> error=<n> http_error=<n>

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  body = args[1]
  ok, error_, http_error = 0, 0, 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
end

function request()
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, reply)
  if status ~= 200 then
    http_error = http_error + 1
  elseif string.find(reply, '"isError":true', 1, true) then
    error_ = error_ + 1
  else
    ok = ok + 1
  end
end

function done(summary, latency, requests)
  local totals = { ok = 0, error_ = 0, http_error = 0 }
  for _, thread in ipairs(threads) do
    for name, _ in pairs(totals) do
      totals[name] = totals[name] + thread:get(name)
    end
  end
  io.write(string.format(
    "READ ok=%d error=%d http_error=%d\n", totals.ok, totals.error_, totals.http_error
  ))
end

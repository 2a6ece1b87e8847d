-- wrk script: every connection rewrites its own note through the gateway's tools/call
-- update_state, with expect_version set to the version the last reply gave back and a new
-- digest and body every time (what agents send: CAS, nothing a cache could reuse).
--
-- Run with one connection per thread (-t N -c N): wrk keeps one Lua state per thread and
-- response() does not say which connection answered, so a thread owns exactly one note.
--
--   wrk -t8 -c8 -d5s -H "Authorization: Bearer $TOKEN" http://127.0.0.1:PORT/mcp/ \
--       -s bench/cas_update.lua -- WORKSPACE TAG V1,V2,...,V8
--
-- The notes are bb://WORKSPACE/TAG/c<i> for thread i (1-based); Vi is the note's version
-- now (bench/cas_load.py creates the notes first). done() prints one line:
--   CAS ok=<n> conflict=<n> error=<n> http_error=<n>

local threads = {}
local counter = 1

function setup(thread)
  thread:set("id", counter)
  table.insert(threads, thread)
  counter = counter + 1
end

function init(args)
  workspace = args[1]
  tag = args[2]
  local versions = {}
  for v in string.gmatch(args[3], "%d+") do
    table.insert(versions, tonumber(v))
  end
  version = versions[id]
  uri = string.format("bb://%s/%s/c%d", workspace, tag, id)
  ok, conflict, error_, http_error = 0, 0, 0, 0
  seq = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
end

function request()
  seq = seq + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"update_state",'
      .. '"arguments":{"uri":"%s","expect_version":%d,'
      .. '"digest":"Status of worker %d, step %d: %d items left.",'
      .. '"body":"Step %d of worker %d rewrote this note; the next step will read it and '
      .. 'rewrite it again with its own findings, %d of them so far."}}}',
    seq, uri, version, id, seq, 100000 - seq, seq, id, seq * 7
  )
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 then
    http_error = http_error + 1
    return
  end
  if string.find(body, '"isError":true', 1, true) then
    if string.find(body, '"code":"conflict"', 1, true) then
      conflict = conflict + 1
    else
      error_ = error_ + 1
    end
    -- A stale version says which one it found: carry on from there.
    local current = string.match(body, '"current_version":(%d+)')
    if current then
      version = tonumber(current)
    end
    return
  end
  local v = string.match(body, '"version":(%d+)')
  if v then
    version = tonumber(v)
    ok = ok + 1
  else
    error_ = error_ + 1
  end
end

function done(summary, latency, requests)
  local totals = { ok = 0, conflict = 0, error_ = 0, http_error = 0 }
  for _, thread in ipairs(threads) do
    for name, _ in pairs(totals) do
      totals[name] = totals[name] + thread:get(name)
    end
  end
  io.write(string.format(
    "CAS ok=%d conflict=%d error=%d http_error=%d\n",
    totals.ok, totals.conflict, totals.error_, totals.http_error
  ))
end

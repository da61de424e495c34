-- The benchmark's workload, in the wrk/wrk2 Lua dialect: every request carries a bearer token picked at
-- random from the pool of 100k (one per user), non-200 answers are counted by status, and done() prints
-- one machine-readable line for the harness.
--
--   wrk2 -t T -c C -d 30s -R RATE -s wrk/bench.lua URL -- SHARDS wrk2
--   wrk  -t C -c C -d 32s         -s wrk/bench.lua URL -- SHARDS paced RATE_PER_THREAD OUTDIR START_US
--   wrk  -t T -c C -d 30s         -s wrk/bench.lua URL -- SHARDS closed
-- SHARDS is a folder with the token pool split into one file per thread: 0.txt, 1.txt, ...
--
-- Statuses are counted one by one in paced mode only; in the other modes wrk's own count of answers with a
-- status >= 400 (errors.status) is what the harness reads.
--
-- Modes: `wrk2` leaves pacing and coordinated-omission correction to wrk2. `closed` is Debian wrk's
-- closed loop (max throughput). `paced` turns Debian wrk into an open-model generator the way wrk2
-- does it: each thread owns exactly one connection (so every response belongs to the last request
-- sent), sends on a fixed schedule through delay(), and times each request from its intended send
-- time, so a stalled server is charged for every request it held back. All threads start their
-- schedules at START_US (CLOCK_MONOTONIC, microseconds), after every thread has loaded its tokens.
-- Each answer is written to OUTDIR/latency-<thread>.txt as "<intended send time - START_US> <latency>"
-- (microseconds); the harness keeps the measured window and builds the HdrHistogram.

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clk_id, bench_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

-- main state: number the threads so each one reads its own share of the pool
local threads = {}
local counter = 0
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

-- thread state
local requests, count = {}, 0
local mode, interval_us, slack_us, out
statuses = {}  -- a global: done() reads it from each thread with thread:get
local next_due, sent_at, due_at, start_us = nil, nil, nil, nil
local paced_delay, paced_response  -- defined below; init() installs them as delay() and response() in paced mode

function init(args)
  local shards = args[1]
  mode = args[2] or "closed"
  -- The harness splits the pool into one shard per thread (SHARDS/<id>.txt): together the threads cover
  -- the pool, each request's token is uniform over it, and start-up stays fast with many threads.
  -- Requests are formatted once, up front, to keep request() cheap.
  for line in io.lines(string.format("%s/%d.txt", shards, id)) do
    if line ~= "" then
      count = count + 1
      requests[count] = wrk.format("GET", wrk.path, { ["Authorization"] = "Bearer " .. line })
    end
  end
  math.randomseed(1000 + id)
  if mode == "paced" then
    local rate = tonumber(args[3])  -- req/s of this thread's single connection
    interval_us = 1000000 / rate
    -- wrk's timers tick in whole milliseconds: a send up to one tick late is the generator's own doing,
    -- not the server's, so it is not charged; anything later is (coordinated-omission correction).
    slack_us = 1000
    out = io.open(string.format("%s/latency-%d.txt", args[4], id), "w")
    start_us = tonumber(args[5])
    -- fully buffered; wrk's exit flushes what is left
    out:setvbuf("full", 1048576)
    delay = paced_delay  -- defined only here: wrk paces a script that has delay()
    -- and only here a response() hook: wrk hands every answer's headers and body to Lua when one exists,
    -- which closed-loop and wrk2 runs do not need (wrk counts statuses >= 400 itself)
    response = paced_response
  end
end

function request()
  local now = now_us()
  sent_at = now
  if next_due then
    due_at = next_due
    next_due = next_due + interval_us
  else
    -- unscheduled: wrk's own check request at start-up, and each connection's first request
    due_at = now
  end
  return requests[math.random(count)]
end

paced_delay = function()
  local now = now_us()
  if not next_due then
    -- every thread starts at START_US, offset by a fraction of the interval to spread the sends
    next_due = start_us + interval_us * ((id * 0.6180339887) % 1)
  end
  local wait_ms = (next_due - now) / 1000
  return wait_ms > 0 and math.floor(wait_ms) or 0
end

paced_response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  out:write(string.format("%d %d\n", due_at - start_us, now_us() - math.min(sent_at, due_at + slack_us)))
end

function done(summary, latency, requests_)
  local by_status = {}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    for code, n in pairs(s or {}) do by_status[tostring(code)] = (by_status[tostring(code)] or 0) + n end
  end
  local parts = {}
  for code, n in pairs(by_status) do table.insert(parts, string.format('"%s":%d', code, n)) end
  local pct = {}
  for _, p in ipairs({ 10, 25, 50, 75, 90, 99, 99.9, 99.99 }) do
    table.insert(pct, string.format('"%s":%d', tostring(p), latency:percentile(p)))
  end
  local e = summary.errors
  io.write(string.format(
    '@@bench {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d},"statuses":{%s},"latency_us":{"min":%d,"max":%d,"mean":%.1f,"percentiles":{%s}}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    table.concat(parts, ","), latency.min, latency.max, latency.mean, table.concat(pct, ",")))
end

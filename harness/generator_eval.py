"""`just eval-generators`: the load-generator candidates measured against the five bars of docs/method.md
("Load generator"), on this machine, loopback only; about 8 minutes.

  1. coordinated omission: 30 s at 4,000 req/s against quarkus-vertx, the port frozen (SIGSTOP) for 1 s in the
     middle; p99 and p99.9 within 15 % of the open-model truth (a FIFO replay of the same schedule);
  2. cost: against nginx on loopback, <= 20 µs of generator CPU per request at 10,000 req/s and <= 15 µs at
     40,000 req/s, with >= 99 % of the target achieved;
  3. many connections: >= 5,000 keep-alive connections open and >= 5,000 requests in flight against a slow
     server, on <= 2 threads; memory reported;
  4. honest about itself: send lateness recorded per step, and a step the generator could not keep marked as
     the generator's failure, not the port's;
  5. the same workload: a random pool token per request, statuses counted, one result per step with the
     HdrHistogram of the whole window.

Writes results/generator-eval.json and the tables in docs/method.md between the generator-eval markers.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import requests
from hdrh.histogram import HdrHistogram

from . import calibrate, envinfo, loadgen, ports, settings as settings_mod, sideprocess, tokens
from .method.rule import Rule
from .errors import Fatal
from .paths import ROOT
from .db import LocalDatabase

NGINX_PORT = 18099
SLOW_PORT = 18098
RECORDER_PORT = 18097
STALL_PORT = "quarkus-vertx"
METHOD_DOC = ROOT / "docs" / "method.md"
MARK_START, MARK_END = "<!-- generator-eval:start -->", "<!-- generator-eval:end -->"
VEGETA = ROOT / "tools" / "bin" / "vegeta"


# --- the stall's open-model truth -------------------------------------------------------------------------

def stall_truth(rate: float, seconds: float, stall_at: float, stall_s: float, service_rate: float,
                base_ms: float) -> dict:
    """Latency percentiles an ideal open-model client would record: the schedule of the run (one request
    every 1/rate), a server that answers in base_ms, stops for stall_s at stall_at, and then works off the
    backlog first-in first-out at its measured service rate. The idealised formula (instant drain) is given
    beside it."""
    h = HdrHistogram(1, 3_600_000_000, 3)
    free_at = 0.0  # when the server can take the next request
    stall_end = stall_at + stall_s
    for i in range(int(rate * seconds)):
        due = i / rate
        begin = max(due, free_at)
        if stall_at <= begin < stall_end:
            begin = stall_end
        free_at = begin + 1.0 / service_rate
        h.record_value(max(1, int((free_at - due) * 1e6 + base_ms * 1000)))
    ideal = {f"p{p}": round((stall_s - (100 - p) / 100 * seconds) * 1000 + base_ms, 1) for p in (99, 99.9)}
    return {"p99": h.get_value_at_percentile(99) / 1000, "p99.9": h.get_value_at_percentile(99.9) / 1000,
            "idealised": ideal, "service_rate": round(service_rate)}


def within(measured: float, truth: float, bar: float = 0.15) -> bool:
    return abs(measured - truth) <= bar * truth


# --- candidates -------------------------------------------------------------------------------------------

def summary(r: loadgen.RateResult, **extra) -> dict:
    return {"generator": r.generator, "target_rps": r.target_rps, "achieved_rps": r.achieved_rps,
            "errors": sum(r.errors.values()), "latency_ms": r.latency_ms, "generator_cpu_s": r.generator_cpu_s,
            "generator_cpu_us_per_request": round(r.generator_cpu_s / max(r.requests, 1) * 1e6, 1),
            "send_lag_ms": r.send_lag_ms, "generator_behind": r.generator_behind, **r.extra, **extra}


def build_vegeta() -> Path | None:
    if not VEGETA.exists():
        go = shutil.which("go")
        if not go:
            return None
        print("eval: building vegeta 12.13.0 from the Go module proxy (tools/vegeta)", flush=True)
        if subprocess.run([go, "build", "-o", str(VEGETA), "github.com/tsenart/vegeta/v12"],
                          cwd=ROOT / "tools" / "vegeta").returncode != 0:
            return None
    return VEGETA


def vegeta_run(url: str, rate: int, seconds: int, connections: int, pool: list[str]) -> dict:
    """vegeta attack with random pool tokens (open model); latencies from its CSV into an HdrHistogram."""
    vegeta = build_vegeta()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        targets = Path(tmp) / "targets.txt"
        with open(targets, "w") as f:
            for token in rng.choices(pool, k=rate * seconds + 1000):
                f.write(f"GET {url}\nAuthorization: Bearer {token}\n\n")
        before = loadgen._children_cpu()
        subprocess.run([str(vegeta), "-cpus", str(len(os.sched_getaffinity(0))), "attack", f"-rate={rate}",
                        f"-duration={seconds}s", f"-max-connections={connections}", f"-connections={connections}",
                        "-timeout=10s", f"-targets={targets}", f"-output={tmp}/out.bin"], check=True)
        cpu = loadgen._children_cpu() - before
        encoded = subprocess.run([str(vegeta), "encode", "--to", "csv", f"{tmp}/out.bin"],
                                 capture_output=True, text=True, check=True).stdout
    h = HdrHistogram(1, 3_600_000_000, 3)
    ok = errors = 0
    for row in csv.reader(io.StringIO(encoded)):
        h.record_value(max(1, int(row[2]) // 1000))
        ok += row[1] == "200"
        errors += row[1] != "200"
    return {"generator": "vegeta", "target_rps": rate, "achieved_rps": round(ok / seconds, 1), "errors": errors,
            "latency_ms": loadgen.latency_from_histogram(h), "generator_cpu_s": round(cpu, 3),
            "generator_cpu_us_per_request": round(cpu / max(ok + errors, 1) * 1e6, 1)}


def candidates(threads_for_cost=(1, 2)) -> dict:
    wrk = shutil.which("wrk")
    found = {f"openloop ({t} thread{'s' if t > 1 else ''})": loadgen.openloop(t) for t in threads_for_cost}
    if wrk and not loadgen._takes_rate(wrk):
        found["wrk paced by bench.lua"] = loadgen.WrkPaced(wrk, loadgen._version(wrk))
    return found


# --- servers ----------------------------------------------------------------------------------------------

def nginx():
    """nginx on loopback returning a small JSON 200: the cheapest server there is, so the generator's cost shows."""
    return calibrate.nginx(NGINX_PORT, "'{\"ok\":true}'", 16384, " backlog=8192", "for the cost bar")


@contextlib.contextmanager
def serving(script: str, port: int, *args, what: str = "slow test server") -> Iterator[str]:
    """One of the test servers here (`script`, run with the port and `args`) for the duration of a block; its URL."""
    with sideprocess.running([sys.executable, "-c", script, str(port), *map(str, args)],
                             lambda: sideprocess.listening(port), poll_s=0.1,
                             exited=lambda code: f"the {what} did not start", late=f"the {what} did not start"):
        yield f"http://127.0.0.1:{port}/"


# answers every request after a fixed delay (asyncio, one thread): holds thousands of requests in flight
SLOW_SERVER = r'''
import asyncio, sys
port, delay = int(sys.argv[1]), float(sys.argv[2])
BODY = b'{"ok":true}'
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
open_now = 0
async def serve(reader, writer):
    global open_now
    open_now += 1
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(delay)
            writer.write(RESPONSE)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        open_now -= 1
        writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=8192, limit=65536)
    async with server:
        await server.serve_forever()
asyncio.run(main())
'''


# --- bars ---------------------------------------------------------------------------------------------------

def freeze_later(pid: int, at: float, seconds: float, record: dict) -> None:
    """SIGSTOP the process at monotonic time `at` for `seconds`, on a background thread."""
    def go():
        time.sleep(max(0.0, at - time.monotonic()))
        t0 = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
        os.kill(pid, signal.SIGCONT)
        record["stall_s"] = time.monotonic() - t0
        record["stall_at_s"] = t0 - record["window_start"]
    threading.Thread(target=go, daemon=True).start()


def bar1(settings, pool, gens) -> dict:
    rate, seconds, stall = 4000, 30, 1.0
    connections = settings["load"]["connections"]
    out: dict = {"rate": rate, "seconds": seconds, "stall_s": stall, "port": STALL_PORT, "candidates": {}}
    with LocalDatabase(settings["cpus"]["db"]):
        ports.build([ports.PORTS[STALL_PORT]])
        running = ports.start(ports.PORTS[STALL_PORT], settings, pool[0])
        try:
            url = running.url
            default = gens["openloop (1 thread)"]
            print("eval: bar 1: warm-up 20 s at 4,000 req/s", flush=True)
            default.run_rate(url, rate, 20, connections, None)
            closed = loadgen.closed_loop()
            service = closed.run(url, connections, 5, None).achieved_rps if closed else 10_000.0
            base = default.run_rate(url, rate, 10, connections, None).latency_ms["p50"]
            out["service_rate"], out["base_p50_ms"] = service, base
            for name, gen in [(n, g) for n, g in gens.items() if "2 threads" not in n]:
                stall_info: dict = {}
                if isinstance(gen, loadgen.Openloop):
                    # the schedule starts when the connections are open: start it at a known time instead
                    at = time.monotonic_ns() + 1_000_000_000
                    stall_info["window_start"] = at / 1e9
                    freeze_later(running.pid, at / 1e9 + 15, stall, stall_info)
                    r = gen.run_rate(url, rate, seconds, connections, None, extra=("--start-at-monotonic-ns", str(at)))
                else:
                    stall_info["window_start"] = time.monotonic() + loadgen.LEAD_IN_S
                    freeze_later(running.pid, stall_info["window_start"] + 15, stall, stall_info)
                    r = gen.run_rate(url, rate, seconds, connections, None)
                truth = stall_truth(rate, seconds, stall_info.get("stall_at_s", 15), stall_info.get("stall_s", stall),
                                    service, base)
                entry = summary(r, stall_s=round(stall_info.get("stall_s", 0), 3), truth=truth,
                                passes=within(r.latency_ms["p99"], truth["p99"]) and within(r.latency_ms["p99.9"], truth["p99.9"]))
                out["candidates"][name] = entry
                if "wrk_reported_latency_ms" in r.extra:
                    own = r.extra["wrk_reported_latency_ms"]
                    out["candidates"]["wrk built-in correction"] = {
                        "latency_ms": own, "truth": truth,
                        "passes": within(own["p99"], truth["p99"]) and within(own["p99.9"], truth["p99.9"])}
                print(f"eval: bar 1 {name}: p99 {r.latency_ms['p99']:.0f} / p99.9 {r.latency_ms['p99.9']:.0f} ms, "
                      f"truth {truth['p99']:.0f} / {truth['p99.9']:.0f} ms -> {'pass' if entry['passes'] else 'FAIL'}",
                      flush=True)
                time.sleep(3)
            if build_vegeta():
                # vegeta has no start-time option: freeze 15 s after its launch
                stall_info = {"window_start": time.monotonic()}
                freeze_later(running.pid, stall_info["window_start"] + 15, stall, stall_info)
                v = vegeta_run(url, rate, seconds, connections, pool)
                truth = stall_truth(rate, seconds, stall_info.get("stall_at_s", 15), stall_info.get("stall_s", stall), service, base)
                v.update(truth=truth, passes=within(v["latency_ms"]["p99"], truth["p99"]) and within(v["latency_ms"]["p99.9"], truth["p99.9"]))
                out["candidates"]["vegeta 12.13"] = v
        finally:
            running.stop()
    return out


def bar2(gens, pool) -> dict:
    out: dict = {"server": "nginx (1 worker) on loopback", "seconds": 15, "connections": 64, "rates": {}}
    with nginx() as url:
        for rate in (10_000, 40_000):
            row = {}
            for name, gen in gens.items():
                r = gen.run_rate(url, rate, 15, 64, None)
                s = summary(r)
                limit = 20 if rate == 10_000 else 15
                s["passes"] = s["generator_cpu_us_per_request"] <= limit and r.achieved_rps >= 0.99 * rate and not r.generator_behind
                row[name] = s
                print(f"eval: bar 2 {rate}/s {name}: {r.achieved_rps:.0f}/s, {s['generator_cpu_us_per_request']} µs/req "
                      f"-> {'pass' if s['passes'] else 'FAIL'}", flush=True)
            if build_vegeta():
                v = vegeta_run(url, rate, 15, 64, pool)
                v["passes"] = v["generator_cpu_us_per_request"] <= (20 if rate == 10_000 else 15) and v["achieved_rps"] >= 0.99 * rate
                row["vegeta 12.13"] = v
            out["rates"][str(rate)] = row
    return out


def bar3(gen: loadgen.Openloop) -> dict:
    """5,000 connections against a server that answers after 2 s, at 2,500 req/s: 5,000 requests in flight."""
    delay, rate, connections = 2.0, 2500, 5000
    with serving(SLOW_SERVER, SLOW_PORT, delay) as url:
        r = gen.run_rate(url, rate, 12, connections, None)
    s = summary(r, server_delay_s=delay, connections=connections, threads=gen.threads)
    s["passes"] = r.extra["connections_opened"] >= 5000 and r.extra["max_in_flight"] >= 5000 and gen.threads <= 2 \
        and r.errors["connect"] == 0
    print(f"eval: bar 3: {r.extra['connections_opened']} connections, {r.extra['max_in_flight']} in flight, "
          f"{r.extra['generator_max_rss_mb']} MiB -> {'pass' if s['passes'] else 'FAIL'}", flush=True)
    return s


def bar4(gen: loadgen.Openloop) -> dict:
    """Send lateness is recorded; a rate beyond the generator is marked as its own failure."""
    with nginx() as url:
        kept = gen.run_rate(url, 10_000, 5, 64, None)
        beyond = gen.run_rate(url, 400_000, 5, 64, None)
    kept_s, beyond_s = summary(kept), summary(beyond)
    kept_step = kept.record() | {"target_rps": 10_000}
    beyond_step = beyond.record() | {"target_rps": 400_000}
    verdict = lambda step: RULE.failure(target_rps=step["target_rps"], achieved_rps=step["achieved_rps"],  # noqa: E731
                                        errors=sum(step["errors"].values()), p99_ms=step["latency_ms"].get("p99"),
                                        generator_behind=step["generator_behind"], slo_ms=RULE.slo_ms())
    out = {"kept": kept_s, "beyond": beyond_s,
           "harness_verdict_kept": verdict(kept_step), "harness_verdict_beyond": verdict(beyond_step)}
    out["passes"] = (kept.send_lag_ms is not None and not kept.generator_behind and beyond.generator_behind
                     and out["harness_verdict_beyond"] == "generator behind its schedule")
    print(f"eval: bar 4: lag p99 {kept.send_lag_ms['p99']:.3f} ms at 10k (kept); at 400k asked, "
          f"{beyond.achieved_rps:.0f}/s -> {out['harness_verdict_beyond']} -> {'pass' if out['passes'] else 'FAIL'}", flush=True)
    return out


RULE = Rule.from_settings(settings_mod.load())

RECORDER = r'''
import http.server, sys, json, threading
seen = []
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        seen.append(auth)
        status = 200 if len(seen) % 10 else 404
        body = b'{}'
        self.send_response(status); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        body = json.dumps(seen).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def bar5(gen: loadgen.Openloop, pool: list[str]) -> dict:
    with serving(RECORDER, RECORDER_PORT, what="recording test server") as url:
        r = gen.run_rate(url, 500, 4, 8, None)
        seen = requests.post(url, timeout=10).json()
    index = {t: i for i, t in enumerate(pool)}
    sent = [h.removeprefix("Bearer ") for h in seen]
    h = HdrHistogram.decode(r.histogram)
    out = {"requests": len(sent), "all_from_pool": all(t in index for t in sent),
           "distinct_share": round(len(set(sent)) / max(len(sent), 1), 3),
           "lowest_index": min(index.get(t, 0) for t in sent), "highest_index": max(index.get(t, 0) for t in sent),
           "statuses": r.statuses, "histogram_count": h.get_total_count(), "completed": r.requests}
    out["passes"] = (out["all_from_pool"] and out["distinct_share"] > 0.97 and out["lowest_index"] < 5000
                     and out["highest_index"] > 95_000 and set(r.statuses) == {"200", "404"}
                     and out["histogram_count"] == r.requests)
    print(f"eval: bar 5: {len(sent)} requests, all from the pool: {out['all_from_pool']}, statuses {r.statuses}, "
          f"histogram holds {out['histogram_count']} of {r.requests} -> {'pass' if out['passes'] else 'FAIL'}", flush=True)
    return out


# --- docs/method.md ------------------------------------------------------------------------------------------

def method_tables(result: dict) -> str:
    b1, b2, b3, b4, b5 = (result["bars"][k] for k in ("1_coordinated_omission", "2_cost", "3_many_connections",
                                                      "4_honest", "5_workload"))
    lines = [f"Measured by `just eval-generators` on {result['date']} ({result['machine']}); raw: "
             "[results/generator-eval.json](../results/generator-eval.json).", "",
             f"**1. Coordinated omission**: {b1['seconds']} s at {b1['rate']:,} req/s against {b1['port']}, frozen with "
             f"SIGSTOP for {b1['stall_s']:g} s in the middle. Truth: the same schedule replayed first-in first-out "
             f"through a server that answers in {b1['base_p50_ms']:.2f} ms and drains the backlog at its measured "
             f"{b1['service_rate']:,.0f} req/s.", "",
             "| generator | p99 (ms) | p99.9 (ms) | truth p99 / p99.9 (ms) | idealised (instant drain) | within 15 % |",
             "|---|---:|---:|---:|---:|---|"]
    for name, c in b1["candidates"].items():
        t = c["truth"]
        lines.append(f"| {name} | {c['latency_ms']['p99']:.0f} | {c['latency_ms']['p99.9']:.0f} | "
                     f"{t['p99']:.0f} / {t['p99.9']:.0f} | {t['idealised']['p99']:.0f} / {t['idealised']['p99.9']:.0f} | "
                     f"{'yes' if c['passes'] else '**no**'} |")
    lines += ["", f"**2. Cost** against {b2['server']}, {b2['seconds']} s steps, {b2['connections']} connections: "
              "generator CPU (user + system) per request; bar ≤ 20 µs at 10,000 req/s and ≤ 15 µs at 40,000, "
              "with ≥ 99 % of the target.", "",
              "| generator | " + " | ".join(f"{int(r):,} req/s: achieved, µs/req" for r in b2["rates"]) + " | passes |",
              "|---|" + "---:|" * len(b2["rates"]) + "---|"]
    names = list(next(iter(b2["rates"].values())))
    for name in names:
        cells = [f"{row[name]['achieved_rps']:,.0f}, {row[name]['generator_cpu_us_per_request']}"
                 for row in b2["rates"].values() if name in row]
        ok = all(row[name]["passes"] for row in b2["rates"].values() if name in row)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'yes' if ok else '**no**'} |")
    lines += ["", f"**3. Many connections**: openloop, {b3['threads']} thread, {b3['connections']:,} connections, "
              f"{b3['target_rps']:,.0f} req/s against a server that answers after {b3['server_delay_s']:g} s: "
              f"{b3['connections_opened']:,} connections opened, {b3['max_in_flight']:,} requests in flight at most, "
              f"{b3['achieved_rps']:,.0f} req/s achieved, {b3['generator_max_rss_mb']} MiB resident, "
              f"{b3['generator_cpu_us_per_request']} µs CPU per request — {'pass' if b3['passes'] else '**fail**'}. "
              "(Paced wrk would need one thread per connection; vegeta was not tried at this size.)", "",
              f"**4. Honest about itself**: at 10,000 req/s openloop's send lateness was p99 "
              f"{b4['kept']['send_lag_ms']['p99']:.3f} ms (its pacer's p99 {b4['kept']['pacer_lag_ms']['p99']:.3f} ms: the "
              f"deliberate batching, at most 1 ms and not charged), its thread busy {b4['kept']['generator_busy']:.0%} of "
              f"the time. Asked for 400,000 req/s, its thread was busy {b4['beyond']['generator_busy']:.0%} of the time and "
              f"the answers came late (p50 {b4['beyond']['latency_ms']['p50']:,.0f} ms): it flagged itself behind, and the "
              f"harness called the step \"{b4['harness_verdict_beyond']}\", not the server's failure — "
              f"{'pass' if b4['passes'] else '**fail**'}.", "",
              f"**5. Same workload**: {b5['requests']:,} requests to a recording server carried pool tokens only "
              f"({b5['distinct_share']:.1%} distinct, indices {b5['lowest_index']:,}–{b5['highest_index']:,} of 100,000), "
              f"statuses counted {b5['statuses']}, the result's HdrHistogram holds {b5['histogram_count']:,} of "
              f"{b5['completed']:,} answers — {'pass' if b5['passes'] else '**fail**'}."]
    return "\n".join(lines)


def write_method_doc(result: dict) -> None:
    text = METHOD_DOC.read_text()
    if MARK_START not in text or MARK_END not in text:
        raise Fatal(f"docs/method.md lacks the {MARK_START} ... {MARK_END} markers")
    head, rest = text.split(MARK_START, 1)
    _, tail = rest.split(MARK_END, 1)
    METHOD_DOC.write_text(f"{head}{MARK_START}\n{method_tables(result)}\n{MARK_END}{tail}")


def main() -> None:
    settings = settings_mod.load()
    tokens.ensure()
    pool = tokens.load()
    gens = candidates()
    default = gens["openloop (1 thread)"]
    result = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
              "machine": f"{envinfo._cpu_model()}, {os.cpu_count()} cores", "bars": {}}
    result["bars"]["1_coordinated_omission"] = bar1(settings, pool, gens)
    result["bars"]["2_cost"] = bar2(gens, pool)
    result["bars"]["3_many_connections"] = bar3(default)
    result["bars"]["4_honest"] = bar4(default)
    result["bars"]["5_workload"] = bar5(default, pool)
    path = ROOT / "results" / "generator-eval.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    write_method_doc(result)
    print(f"eval: written to {path.relative_to(ROOT)} and docs/method.md")

"""Chooses the fallback load generator by measurement (README, "Load generator"): three bars, each candidate.

  1. coordinated omission: 30 s at 4k req/s, the port frozen (SIGSTOP) for 1 s in the middle; p99 and
     p99.9 must be within 15 % of the open-model truth (computed from the measured stall);
  2. cost: <= 30 us of generator CPU per request, and >= 99 % of target up to 40k req/s against nginx;
  3. no latency of its own: below saturation, p99 against the same port no worse than the others'.

Candidates: Debian wrk paced by wrk/bench.lua (ours), the same runs as wrk itself reports them (wrk 4's
built-in correction), and vegeta (open model, built from the Go module proxy into tools/bin).
Run: `just eval-generators` (about 8 minutes; loopback only). Writes results/generator-eval.json.
"""
from __future__ import annotations

import csv
import io
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from hdrh.histogram import HdrHistogram

from . import loadgen, ports, settings as settings_mod, tokens
from .errors import Fatal
from .paths import ROOT
from .verify import LocalDatabase

VEGETA = ROOT / "tools" / "bin" / "vegeta"
NGINX_PORT = 8099
STALL_PORT = "quarkus-vertx"


def build_vegeta() -> Path:
    if not VEGETA.exists():
        print("eval: building vegeta 12.13.0 from the Go module proxy (tools/vegeta)", flush=True)
        subprocess.run(["go", "build", "-o", str(VEGETA), "github.com/tsenart/vegeta/v12"],
                       cwd=ROOT / "tools" / "vegeta", check=True)
    return VEGETA


def vegeta_run(url: str, rate: int, seconds: int, connections: int, pool: list[str], on_start=None) -> dict:
    """vegeta attack with random pool tokens; latencies from its CSV encoding into an HdrHistogram."""
    vegeta = build_vegeta()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        targets = Path(tmp) / "targets.txt"
        with open(targets, "w") as f:
            for token in rng.choices(pool, k=rate * seconds + 1000):
                f.write(f"GET {url}\nAuthorization: Bearer {token}\n\n")
        before = loadgen._children_cpu()
        attack = subprocess.Popen([str(vegeta), "-cpus", str(len(os.sched_getaffinity(0))), "attack",
                                   f"-rate={rate}", f"-duration={seconds}s", f"-max-connections={connections}",
                                   f"-connections={connections}", "-timeout=10s", f"-targets={targets}",
                                   f"-output={tmp}/out.bin"])
        began = time.monotonic()
        if on_start:
            on_start(began)
        attack.wait()
        cpu = loadgen._children_cpu() - before
        encoded = subprocess.run([str(vegeta), "encode", "--to", "csv", f"{tmp}/out.bin"],
                                 capture_output=True, text=True, check=True).stdout
    h = HdrHistogram(1, 3_600_000_000, 3)
    ok = errors = 0
    for row in csv.reader(io.StringIO(encoded)):
        h.record_value(max(1, int(row[2]) // 1000))
        ok += row[1] == "200"
        errors += row[1] != "200"
    return {"achieved_rps": round(ok / seconds, 1), "errors": errors, "latency_ms": loadgen.latency_from_histogram(h),
            "generator_cpu_s": round(cpu, 3), "generator_cpu_us_per_request": round(cpu / max(ok + errors, 1) * 1e6, 1)}


def wrk_paced_run(url: str, rate: int, seconds: int, connections: int, on_start=None) -> tuple[dict, dict]:
    """Ours and, from the same run, what wrk itself reports."""
    gen = loadgen.open_model(env={"LOADGEN": "wrk-paced"})
    if on_start:
        # the schedule starts LEAD_IN_S after launch
        threading.Timer(0, lambda: on_start(time.monotonic() + loadgen.LEAD_IN_S)).start()
    r = loadgen.run_rate(gen, url, rate, seconds, connections, None)
    per_req = round(r["generator_cpu_s"] / max(r["requests"], 1) * 1e6, 1)
    errors = sum(r["errors"].values())
    ours = {"achieved_rps": r["achieved_rps"], "errors": errors, "latency_ms": r["latency_ms"],
            "generator_cpu_s": r["generator_cpu_s"], "generator_cpu_us_per_request": per_req}
    theirs = dict(ours, latency_ms=r["wrk_reported_latency_ms"])
    return ours, theirs


def stall_truth(stall_s: float, seconds: float, base_ms: float) -> dict:
    """Open-model truth for a stall of stall_s inside a run of `seconds` at a constant rate:
    requests due during the stall wait for its end, so latencies spread evenly from stall_s down to 0."""
    return {f"p{p}": round((stall_s - (100 - p) / 100 * seconds) * 1000 + base_ms, 1) for p in (99, 99.9)}


def main() -> None:
    settings = settings_mod.load()
    pool = tokens.load()
    out: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "bars": {}}
    connections = settings["load"]["connections"]
    with LocalDatabase(settings["cpus"]["db"]):
        ports.build([ports.PORTS[STALL_PORT]])
        running = ports.start(ports.PORTS[STALL_PORT], settings, pool[0])
        try:
            url = running.url
            print("eval: warm-up 15 s", flush=True)
            wrk_paced_run(url, 4000, 15, connections)

            # bar 3 first (no stall): p99 below saturation against the same port
            bar3 = {}
            for rate in (4000, 8000):
                ours, theirs = wrk_paced_run(url, rate, 30, connections)
                bar3[f"{rate}"] = {"wrk-paced (ours)": ours, "wrk built-in": theirs,
                                   "vegeta": vegeta_run(url, rate, 30, connections, pool)}
                print(f"eval: bar 3 at {rate}/s: " + ", ".join(f"{k} p99 {v['latency_ms']['p99']:.2f} ms"
                                                               for k, v in bar3[f'{rate}'].items()), flush=True)
            out["bars"]["3_own_latency"] = bar3

            # bar 1: the stall
            bar1 = {}
            for name in ("wrk-paced", "vegeta"):
                stall: dict = {}

                def freeze(window_start, stall=stall):
                    def go():
                        time.sleep(max(0.0, window_start + 15 - time.monotonic()))
                        t0 = time.monotonic()
                        os.kill(running.pid, signal.SIGSTOP)
                        time.sleep(1.0)
                        os.kill(running.pid, signal.SIGCONT)
                        stall["s"] = time.monotonic() - t0
                    threading.Thread(target=go, daemon=True).start()

                if name == "wrk-paced":
                    ours, theirs = wrk_paced_run(url, 4000, 30, connections, on_start=freeze)
                    bar1["wrk-paced (ours)"], bar1["wrk built-in"] = ours, theirs
                else:
                    bar1["vegeta"] = vegeta_run(url, 4000, 30, connections, pool, on_start=freeze)
                bar1.setdefault("stall_s", []).append(round(stall.get("s", 0), 3))
                time.sleep(3)
            base = bar3["4000"]["wrk-paced (ours)"]["latency_ms"]["p50"]
            bar1["truth"] = stall_truth(sum(bar1["stall_s"]) / len(bar1["stall_s"]), 30, base)
            out["bars"]["1_coordinated_omission"] = bar1
            print(f"eval: bar 1 truth {bar1['truth']}; " + ", ".join(
                f"{k} p99 {v['latency_ms']['p99']:.0f} / p99.9 {v['latency_ms']['p99.9']:.0f} ms"
                for k, v in bar1.items() if isinstance(v, dict) and "latency_ms" in v), flush=True)
        finally:
            running.stop()

    # bar 2: cost against a trivial target (nginx on loopback)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        raise Fatal("nginx is missing for the cost bar: `apt-get install nginx-light`")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "nginx.conf").write_text(
            f"worker_processes 1; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;\n"
            "events { worker_connections 4096; }\n"
            f"http {{ access_log off; server {{ listen 127.0.0.1:{NGINX_PORT}; keepalive_requests 100000000;\n"
            "location / { return 200 '{\"ok\":true}'; } } }\n")
        server = subprocess.Popen([nginx, "-c", f"{tmp}/nginx.conf", "-p", tmp], start_new_session=True)
        try:
            time.sleep(0.5)
            url = f"http://127.0.0.1:{NGINX_PORT}/"
            bar2 = {}
            for rate in (10000, 20000, 40000):
                ours, _ = wrk_paced_run(url, rate, 20, connections)
                bar2[f"{rate}"] = {"wrk-paced (ours)": ours,
                                   "vegeta": vegeta_run(url, rate, 20, connections, pool)}
                print(f"eval: bar 2 at {rate}/s: " + ", ".join(
                    f"{k} {v['achieved_rps']:.0f}/s, {v['generator_cpu_us_per_request']} us/req"
                    for k, v in bar2[f'{rate}'].items()), flush=True)
            out["bars"]["2_cost"] = bar2
        finally:
            server.terminate()
            server.wait()
    path = ROOT / "results" / "generator-eval.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    print(f"eval: written to {path.relative_to(ROOT)}")

"""A benchmark run: the DB's ceiling once, then `iterations` rounds over the ports in interleaved order, each
port in each round on a fresh JVM: start -> check -> capacity probe -> warm-up until steady -> common-rate
step -> MST search from the port's own capacity -> confirmation -> closed loop.

Data flows one way: settings -> this run -> results/<run>/<port>-<iteration>.json (rewritten after every
step, so an interrupted run keeps what finished, marked partial) -> `report` -> RESULTS.md.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import time
from contextlib import closing, nullcontext
from pathlib import Path

import requests

from . import db, envinfo, loadgen, ports, report, settings as settings_mod, tokens
from .errors import Fatal
from .paths import BUILD, ROOT, USERS_TSV
from .sampling import Sampler
from .verify import LocalDatabase

MIN_RATE = 100


def output_paths(settings: dict) -> tuple[Path, Path]:
    """Where raw results and the report go: a QUICK smoke run never replaces real results."""
    if os.environ.get("BENCH_RESULTS"):
        results = Path(os.environ["BENCH_RESULTS"])
        return results, results / "RESULTS.md"
    if settings["quick"]:
        return BUILD / "quick", BUILD / "quick" / "RESULTS.md"
    return ROOT / "results", ROOT / "RESULTS.md"


# --- pass/fail, steadiness and the max-sustainable-throughput search: pure functions, unit-tested ---------

def error_count(step: dict) -> int:
    return sum(step["errors"].values())


def failure(step: dict, slo_ms: float) -> str | None:
    """Why a constant-rate step fails, or None when it passes. A step counts only if the generator kept its
    own schedule and the target rate (>= 99 %), with 0 errors and p99 within the SLO."""
    if step.get("generator_behind"):
        return "generator behind its schedule"
    p99 = step["latency_ms"].get("p99")
    if step["achieved_rps"] < 0.99 * step["target_rps"]:
        return "rate not reached"
    if error_count(step):
        return "errors"
    if p99 is None or p99 > slo_ms:
        return "p99 over the SLO"
    return None


def passes(step: dict, slo_ms: float) -> bool:
    return failure(step, slo_ms) is None


def round_rate(rate: float) -> int:
    return int(round(rate / 100.0)) * 100 if rate >= 1000 else max(10, int(round(rate / 10.0)) * 10)


def steady(previous: dict, current: dict, tolerance: float, p50_floor_ms: float = 0.05) -> bool:
    """Two consecutive warm-up windows agree: CPU per request within `tolerance`, and p50 within `tolerance`
    (or within p50_floor_ms, since a 0.30 ms p50 moves by more than 5 % on scheduling noise alone)."""
    cpu_a, cpu_b = previous.get("app_cpu_us_per_request"), current.get("app_cpu_us_per_request")
    p50_a, p50_b = previous["latency_ms"].get("p50"), current["latency_ms"].get("p50")
    if None in (cpu_a, cpu_b, p50_a, p50_b):
        return False
    return abs(cpu_b - cpu_a) <= tolerance * cpu_a and abs(p50_b - p50_a) <= max(tolerance * p50_a, p50_floor_ms)


@dataclasses.dataclass
class Search:
    mst: int
    bounded: bool                 # a failing rate was found above the MST
    first_failing: int | None
    probes: list[tuple[int, bool]]


def search_mst(estimate: float, measure, growth: float, precision: float, max_probes: int) -> Search:
    """Brackets the MST from an estimate (up or down by `growth`, a larger step each time the outcome repeats,
    until it flips), then bisects until the bracket is within `precision`; at most `max_probes` measurements."""
    probes: list[tuple[int, bool]] = []
    lo, hi = 0, None

    def probe(rate: int) -> bool:
        ok = measure(rate)
        probes.append((rate, ok))
        return ok

    rate, factor = round_rate(estimate), growth
    while len(probes) < max_probes:
        if probe(rate):
            lo = rate
            if hi is not None:
                break
            rate = round_rate(rate * factor)
        else:
            hi = rate
            if lo:
                break
            rate = round_rate(rate / factor)
            if rate < MIN_RATE or rate == hi:
                break
        factor *= growth
    while hi is not None and lo and len(probes) < max_probes and hi - lo > max(precision * hi, 100 if hi >= 1000 else 10):
        mid = round_rate((lo + hi) / 2)
        if mid <= lo or mid >= hi:
            break
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return Search(lo, hi is not None, hi, probes)


# --- measuring ----------------------------------------------------------------------------------------------

class Progress:
    """One line per step: port, iteration, what ran, and an estimate of the time left from what has run."""

    def __init__(self, settings: dict, port_count: int):
        load = settings["load"]
        self.total = port_count * load["iterations"]
        self.done = 0
        self.guess_s = (30 + 2 * load["probe_seconds"] + 4 * load["warmup_window_seconds"]
                        + (load["mst_max_probes"] + 2) * (load["step_seconds"] + load["rewarm_seconds"] + 3)
                        + len(load["closed_connections"]) * (load["closed_seconds"] + 2))
        self.began = time.monotonic()

    def finished_one(self) -> None:
        self.done += 1

    def minutes_left(self) -> float:
        elapsed = time.monotonic() - self.began
        per = elapsed / self.done if self.done else self.guess_s
        return max(0.0, (self.total - self.done) * per - (0 if self.done else elapsed)) / 60

    def line(self, tag: str, text: str) -> None:
        print(f"[{tag}] {text}  (~{self.minutes_left():.0f} min left)", flush=True)


def correctness_check(url: str, pool: list[str], count: int) -> None:
    """A few random tokens must return exactly their rows before any load is sent."""
    with closing(db.connect()) as conn, conn.cursor() as cur, requests.Session() as http:
        for token in random.sample(pool, count):
            r = http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            expected = db.user_row(cur, tokens.email_of(token))
            if r.status_code != 200 or r.json() != expected:
                raise Fatal(f"{url} answered {r.status_code} {r.text[:200]!r} where the row {expected} was expected")


def add_resources(result: loadgen.RateResult, sampler: Sampler) -> dict:
    """The step's record with the app's and the DB's CPU and memory inside its measured window."""
    step = result.record()
    usage = sampler.window(*result.window)
    wall = usage.pop("wall_s")
    step.update(usage)
    step["generator_cpu_cores"] = round(step["generator_cpu_s"] / max(result.seconds, 1e-9), 3)
    step["generator_cpu_us_per_request"] = round(step["generator_cpu_s"] / max(step["requests"], 1) * 1e6, 1)
    served = step["achieved_rps"] * wall
    if usage["app_cpu_s"] is not None and served:
        step["app_cpu_us_per_request"] = round(usage["app_cpu_s"] / served * 1e6, 1)
    if usage["db_cpu_s"] is not None and served:
        step["db_cpu_us_per_request"] = round(usage["db_cpu_s"] / served * 1e6, 1)
    return step


@dataclasses.dataclass
class Target:
    """The port under load: where to send, which processes to sample, and the generators."""
    url: str
    app_pid: int | None
    db_pid: int | None
    gen: loadgen.OpenModel
    closed_gen: loadgen.ClosedLoop | None
    settings: dict

    def rate(self, rate: float, seconds: float) -> dict:
        load = self.settings["load"]
        with Sampler(self.app_pid, self.db_pid) as sampler:
            result = self.gen.run_rate(self.url, rate, seconds, load["connections"], self.settings["cpus"]["generator"])
        step = add_resources(result, sampler)
        step["failure"] = failure(step, load["slo_p99_ms"])
        step["passed"] = step["failure"] is None
        return step

    def closed(self, connections: int, seconds: float) -> dict:
        with Sampler(self.app_pid, self.db_pid) as sampler:
            result = self.closed_gen.run(self.url, connections, seconds, self.settings["cpus"]["generator"])
        return add_resources(result, sampler)


def warm_up(target: Target, rate: float, say) -> dict:
    """Constant load in windows until two consecutive windows agree on CPU per request and p50 (steady
    state), at a rate the port sustains: a window that fails lowers the rate and the comparison restarts."""
    load = target.settings["load"]
    windows, settled, began = [], False, time.monotonic()
    rate = round_rate(rate)
    while time.monotonic() - began < load["warmup_max_seconds"]:
        w = target.rate(rate, load["warmup_window_seconds"])
        w.pop("histogram", None)
        windows.append(w)
        say(f"warm-up {rate}/s: p50 {w['latency_ms'].get('p50', 0):.2f} ms, "
            f"{w.get('app_cpu_us_per_request') or 0:.0f} µs CPU/req{'' if w['passed'] else ' (' + w['failure'] + ')'}")
        if not w["passed"]:
            rate = max(MIN_RATE, round_rate(rate * 0.7))
            time.sleep(2)  # let a backlog drain
            continue
        if len(windows) >= 2 and windows[-2]["passed"] and windows[-2]["target_rps"] == rate \
                and steady(windows[-2], w, load["warmup_tolerance"]):
            settled = True
            break
    return {"rate": rate, "settled": settled, "seconds": round(time.monotonic() - began, 1),
            "tolerance": load["warmup_tolerance"], "windows": windows}


def db_ceiling(settings: dict) -> dict:
    """sysbench: the same primary-key SELECT, prepared, at the pool's concurrency, on the app's CPU set."""
    sysbench = shutil.which("sysbench")
    if not sysbench:
        raise Fatal("sysbench is missing: `apt-get install sysbench` (it measures the database's own ceiling)")
    cfg = db.config()
    seconds = settings["load"]["step_seconds"]
    cmd = [sysbench, str(ROOT / "db" / "point-select.lua"), f"--users={USERS_TSV}",
           f"--threads={settings['db']['pool_size']}", f"--time={seconds}", "--db-driver=mysql",
           f"--mysql-host={cfg['host']}", f"--mysql-port={cfg['port']}", f"--mysql-user={cfg['user']}",
           f"--mysql-password={cfg['password']}", f"--mysql-db={cfg['database']}", "run"]
    if settings["cpus"]["app"] and shutil.which("taskset"):
        cmd = ["taskset", "-c", settings["cpus"]["app"], *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True)
    match = re.search(r"queries:\s+\d+\s+\(([\d.]+) per sec", out.stdout)
    if not match:
        raise Fatal(f"sysbench failed: {(out.stdout + out.stderr).strip()[-300:]}")
    version = subprocess.run([sysbench, "--version"], capture_output=True, text=True).stdout.strip()
    return {"selects_per_s": round(float(match.group(1))), "threads": settings["db"]["pool_size"],
            "seconds": seconds, "tool": version}


def save(record: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)


def start_port(port, settings, token):
    """The port under test: started here (local), by compose, or already running elsewhere (external)."""
    from . import compose
    if compose.enabled():
        return compose.start(port, settings, token)
    if os.environ.get("BENCH_APP") == "external":
        return External(f"http://{settings['load']['target_host']}:{settings['load']['port']}/")
    return ports.start(port, settings, token)


class External:
    """A port someone else started (another host): measured from outside only."""
    pid = None
    startup_seconds = None
    idle_rss_mb = None
    log = None

    def __init__(self, url):
        self.url = url

    def stop(self):
        pass


def target_url(running, settings) -> str:
    """Traffic goes to the configured target host only (loopback by default)."""
    host = settings["load"]["target_host"]
    return re.sub(r"^http://[^/:]+", f"http://{host}", running.url) if running.url.startswith("http://") else running.url


def run_port(port, iteration: int, settings, gen, closed_gen, env, ceiling, progress, path: Path, run_id: str,
             previous_msts: list[int]) -> dict:
    """One port, one iteration, one fresh JVM."""
    load = settings["load"]
    slo = load["slo_p99_ms"]
    tag = f"{port.name} #{iteration}"
    record = {"port": port.name, "run_id": run_id, "iteration": iteration, "status": "partial", "environment": env,
              "db_ceiling": ceiling, "startup_s": None, "idle_rss_mb": None, "capacity": {}, "warmup": None,
              "steps": [], "mst": None, "closed": []}
    pool = tokens.load()
    running = start_port(port, settings, pool[0])
    say = lambda text: progress.line(tag, text)  # noqa: E731
    try:
        record["startup_s"] = running.startup_seconds and round(running.startup_seconds, 2)
        record["idle_rss_mb"] = running.idle_rss_mb and round(running.idle_rss_mb, 1)
        url = target_url(running, settings)
        correctness_check(url, pool, load["check_tokens"])
        target = Target(url, running.pid, db.server_pid(), gen, closed_gen, settings)
        say(f"up in {record['startup_s']} s, RSS {record['idle_rss_mb']} MiB; rows checked")

        def capacity(phase: str) -> float:
            probe = target.closed(load["connections"], load["probe_seconds"])
            record["capacity"][phase] = {k: probe[k] for k in ("achieved_rps", "app_cpu_cores", "app_cpu_us_per_request",
                                                               "latency_ms", "errors") if k in probe}
            save(record, path)
            say(f"{phase} capacity (closed loop, {load['connections']} connections, {load['probe_seconds']} s): "
                f"{probe['achieved_rps']:.0f}/s")
            return probe["achieved_rps"]

        cold = capacity("cold")
        record["warmup"] = warm_up(target, max(MIN_RATE, load["warmup_fraction"] * cold), say)
        w = record["warmup"]
        say(f"warm-up {'settled' if w['settled'] else 'did NOT settle'} after {w['seconds']:.0f} s at {w['rate']}/s")
        save(record, path)
        warm = capacity("warm")
        rewarm_rate = w["rate"]

        def step(rate: int, phase: str, rewarm: bool = True) -> bool:
            if rewarm and load["rewarm_seconds"]:
                target.rate(rewarm_rate, load["rewarm_seconds"])  # back to a known steady state, backlog drained
            result = target.rate(rate, load["step_seconds"])
            result["phase"] = phase
            record["steps"].append(result)
            save(record, path)
            p99 = result["latency_ms"].get("p99")
            say(f"{phase} {rate}/s: achieved {result['achieved_rps']:.0f}/s, p99 "
                f"{'-' if p99 is None else f'{p99:.2f} ms'}, errors {error_count(result)} "
                f"-> {'pass' if result['passed'] else 'FAIL (' + result['failure'] + ')'}")
            return result["passed"]

        step(load["common_rate"], "common", rewarm=False)
        estimate = statistics.median(previous_msts) if previous_msts else load["mst_first_guess"] * warm
        search = search_mst(estimate, lambda r: step(r, "mst"), load["mst_growth"], load["mst_precision"],
                            load["mst_max_probes"])
        # confirm once; a failed confirmation steps down by the search's precision and tries once more
        mst, confirmed, rate = search.mst, False, search.mst
        for _ in range(2):
            if rate < MIN_RATE:
                break
            if step(rate, "confirm"):
                mst, confirmed = rate, True
                break
            rate = round_rate(rate * (1 - load["mst_precision"]))
        record["mst"] = {"rps": mst if mst >= MIN_RATE else 0, "confirmed": confirmed,
                         "bounded": search.bounded, "first_failing_rps": search.first_failing, "slo_p99_ms": slo,
                         "estimate_rps": round_rate(estimate), "probes": search.probes}
        save(record, path)
        if closed_gen:
            for connections in load["closed_connections"]:
                result = target.closed(connections, load["closed_seconds"])
                record["closed"].append(result)
                save(record, path)
                say(f"closed loop {connections} connections: {result['achieved_rps']:.0f}/s, "
                    f"p99 {result['latency_ms']['p99']:.2f} ms")
        record["status"] = "complete"
    finally:
        running.stop()
        save(record, path)
    m = record["mst"]
    say(f"MST {'' if m['bounded'] else '>= '}{m['rps']}/s at p99 <= {slo} ms"
        f"{'' if m['confirmed'] else ' (NOT confirmed)'}")
    return record


def main(selected: list[ports.Port]) -> None:
    from . import scenarios
    if scenarios.select(os.environ.get("SCENARIO", "")):
        from .scenarios import common
        return common.main(os.environ["SCENARIO"], selected)
    settings = settings_mod.load()
    load = settings["load"]
    gen = loadgen.open_model(threads=load["generator_threads"], max_lag_ms=load["generator_max_lag_ms"])
    closed_gen = loadgen.closed_loop()
    if closed_gen is None:
        raise Fatal("the capacity probes need Debian's wrk (closed loop) on PATH: `apt-get install wrk`")
    out_dir, markdown = output_paths(settings)
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    from . import compose
    if compose.enabled():
        database = compose.Stack(settings)          # MySQL in compose, seeded by its db-seed service
    elif db.is_external():
        database = nullcontext()
        db.seed()
    else:
        database = LocalDatabase(settings["cpus"]["db"])
    progress = Progress(settings, len(selected))
    with database:
        tokens.ensure()
        if os.environ.get("BENCH_APP") != "external":
            ports.build(selected)  # compose images are built from these jars too
        env = envinfo.capture(settings, gen, closed_gen)
        print(f"bench: {len(selected)} port(s) x {load['iterations']} iteration(s) with {gen.describe()}; results in "
              f"{out_dir.relative_to(ROOT) if out_dir.is_relative_to(ROOT) else out_dir}/{run_id}/", flush=True)
        print(f"bench: measuring the database's own ceiling (sysbench, {load['step_seconds']} s)", flush=True)
        ceiling = db_ceiling(settings)
        print(f"bench: database ceiling {ceiling['selects_per_s']} selects/s (sysbench, {ceiling['threads']} threads)", flush=True)
        msts: dict[str, list[int]] = {p.name: [] for p in selected}
        try:
            for iteration in range(1, load["iterations"] + 1):
                shift = (iteration - 1) % len(selected)   # interleaved: each round starts one port later
                for port in selected[shift:] + selected[:shift]:
                    path = out_dir / run_id / f"{port.name}-{iteration}.json"
                    record = run_port(port, iteration, settings, gen, closed_gen, env, ceiling, progress, path,
                                      run_id, msts[port.name])
                    if record["mst"]["rps"]:
                        msts[port.name].append(record["mst"]["rps"])
                    progress.finished_one()
        finally:
            report.write(out_dir, markdown)
    print(f"bench: done in {(time.monotonic() - progress.began) / 60:.1f} min; report in "
          f"{markdown.relative_to(ROOT) if markdown.is_relative_to(ROOT) else markdown}", flush=True)

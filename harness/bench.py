"""A benchmark run: for each port, start -> check -> warm up -> rate sweep -> MST search -> closed loop.

Data flows one way: settings -> this run -> results/<run>/<port>.json (rewritten after every step, so an
interrupted run keeps what finished, marked partial) -> `report` -> RESULTS.md.
"""
from __future__ import annotations

import datetime
import json
import os
import random
import re
import shutil
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


def output_paths(settings: dict) -> tuple[Path, Path]:
    """Where raw results and the report go: a QUICK smoke run never replaces real results."""
    if os.environ.get("BENCH_RESULTS"):
        results = Path(os.environ["BENCH_RESULTS"])
        return results, results / "RESULTS.md"
    if settings["quick"]:
        return BUILD / "quick", BUILD / "quick" / "RESULTS.md"
    return ROOT / "results", ROOT / "RESULTS.md"


# --- pass/fail and the max-sustainable-throughput search: pure functions, unit-tested ---------------

def error_count(step: dict) -> int:
    return sum(step["errors"].values())


def passes(step: dict, slo_ms: float) -> bool:
    """A step counts only if the generator kept up (>= 99 % of target), with 0 errors and p99 within SLO."""
    p99 = step["latency_ms"].get("p99")
    return (step["achieved_rps"] >= 0.99 * step["target_rps"] and error_count(step) == 0
            and p99 is not None and p99 <= slo_ms)


def round_rate(rate: float) -> int:
    return int(round(rate / 100.0)) * 100 if rate >= 1000 else int(round(rate / 10.0)) * 10


def find_mst(lo: int, hi: int | None, measure, precision: float, max_steps: int) -> tuple[int, bool]:
    """Bisects between a passing rate `lo` and a failing rate `hi`; returns (MST, bounded).

    `bounded` is False when nothing failed (hi is None): the MST is then at least `lo`.
    """
    if hi is None:
        return lo, False
    for _ in range(max_steps):
        if hi - lo <= max(precision * hi, 100 if hi >= 1000 else 10):
            break
        mid = round_rate((lo + hi) / 2)
        if mid <= lo or mid >= hi:
            break
        if measure(mid):
            lo = mid
        else:
            hi = mid
    return lo, True


# --- one port --------------------------------------------------------------------------------------

class Progress:
    """One line per step: port i/N, step j/M, rate, p99, and an estimate of the time left."""

    def __init__(self, settings: dict, port_count: int):
        load = settings["load"]
        self.step_s = load["step_seconds"] + loadgen.LEAD_IN_S + loadgen.TAIL_S + 2
        self.per_port_steps = len(load["rates"]) + load["mst_max_steps"]
        self.per_port_s = (load["warmup_seconds"] + 15 + self.per_port_steps * self.step_s
                           + len(load["closed_connections"]) * (load["closed_seconds"] + 2))
        self.port_count = port_count
        self.began = time.monotonic()

    def line(self, index: int, port: str, step: int, steps_left: int, text: str) -> None:
        left = steps_left * self.step_s + (self.port_count - index) * self.per_port_s
        print(f"[{index}/{self.port_count} {port}] step {step}/{step + steps_left} {text}  "
              f"(~{left / 60:.0f} min left at most)", flush=True)


def correctness_check(url: str, pool: list[str], count: int) -> None:
    """A few random tokens must return exactly their rows before any load is sent."""
    with closing(db.connect()) as conn, conn.cursor() as cur, requests.Session() as http:
        for token in random.sample(pool, count):
            r = http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            expected = db.user_row(cur, tokens.email_of(token))
            if r.status_code != 200 or r.json() != expected:
                raise Fatal(f"{url} answered {r.status_code} {r.text[:200]!r} where the row {expected} was expected")


def measured(gen, url, rate, seconds, settings, app_pid, db_pid) -> dict:
    """A constant-rate step with the app's and the DB's CPU and memory sampled during it."""
    with Sampler(app_pid, db_pid) as sampler:
        step = loadgen.run_rate(gen, url, rate, seconds, settings["load"]["connections"], settings["cpus"]["generator"])
    return add_resources(step, sampler)


def add_resources(step: dict, sampler: Sampler) -> dict:
    start, end = step.pop("window")
    usage = sampler.window(start, end)
    wall = end - start
    step.update({k: v for k, v in usage.items() if k != "wall_s"})
    step["generator_cpu_cores"] = round(step["generator_cpu_s"] / max(wall, 1e-9), 3)
    step["generator_cpu_us_per_request"] = round(step["generator_cpu_s"] / max(step["requests"], 1) * 1e6, 1)
    served = step["achieved_rps"] * usage["wall_s"]
    if usage["app_cpu_s"] is not None and served:
        step["app_cpu_ms_per_1k_requests"] = round(usage["app_cpu_s"] / served * 1e6, 1)
    if usage["db_cpu_s"] is not None and served:
        step["db_cpu_ms_per_1k_requests"] = round(usage["db_cpu_s"] / served * 1e6, 1)
    return step


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


def run_port(port, index, settings, gen, closed_gen, env, ceiling, progress, out_dir, run_id) -> dict:
    load = settings["load"]
    slo = load["slo_p99_ms"]
    path = out_dir / run_id / f"{port.name}.json"
    record = {"port": port.name, "run_id": run_id, "status": "partial", "environment": env,
              "db_ceiling": ceiling, "startup_s": None, "idle_rss_mb": None,
              "warmup": None, "steps": [], "skipped_rates": [], "mst": None, "closed": []}
    pool = tokens.load()
    running = start_port(port, settings, pool[0])
    try:
        record["startup_s"] = running.startup_seconds and round(running.startup_seconds, 2)
        record["idle_rss_mb"] = running.idle_rss_mb and round(running.idle_rss_mb, 1)
        url = target_url(running, settings)
        correctness_check(url, pool, load["check_tokens"])
        db_pid = db.server_pid()
        steps_left = len(load["rates"]) + load["mst_max_steps"] + len(load["closed_connections"])
        step_no = 0

        print(f"[{index}/{progress.port_count} {port.name}] up in {record['startup_s']} s, "
              f"RSS {record['idle_rss_mb']} MiB; warming up {load['warmup_seconds']} s at {load['warmup_rate']}/s", flush=True)
        warm = measured(gen, url, load["warmup_rate"], load["warmup_seconds"], settings, running.pid, db_pid)
        warm.pop("histogram", None)
        record["warmup"] = warm
        save(record, path)

        def step(rate: int, phase: str) -> bool:
            nonlocal step_no, steps_left
            step_no += 1
            steps_left -= 1
            result = measured(gen, url, rate, load["step_seconds"], settings, running.pid, db_pid)
            result["phase"] = phase
            result["passed"] = passes(result, slo)
            record["steps"].append(result)
            save(record, path)
            p99 = result["latency_ms"].get("p99")
            progress.line(index, port.name, step_no, steps_left,
                          f"{phase} {rate}/s: achieved {result['achieved_rps']:.0f}/s, p99 "
                          f"{'-' if p99 is None else f'{p99:.2f} ms'}, errors {error_count(result)} "
                          f"-> {'pass' if result['passed'] else 'FAIL'}")
            if not result["passed"]:
                time.sleep(3)  # let a backlog drain before the next step
            return result["passed"]

        lo, hi = 0, None
        for i, rate in enumerate(load["rates"]):
            if step(rate, "sweep"):
                lo = rate
            else:
                hi = rate
                record["skipped_rates"] = load["rates"][i + 1:]  # above capacity: not worth the minutes
                steps_left -= len(record["skipped_rates"])
                break
        mst, bounded = find_mst(lo, hi, lambda r: step(r, "mst"), load["mst_precision"], load["mst_max_steps"])
        record["mst"] = {"rps": mst, "bounded": bounded, "first_failing_rps": hi, "slo_p99_ms": slo}
        steps_left = len(load["closed_connections"])
        if closed_gen:
            for connections in load["closed_connections"]:
                step_no += 1
                steps_left -= 1
                with Sampler(running.pid, db_pid) as sampler:
                    result = loadgen.run_closed(closed_gen, url, connections, load["closed_seconds"],
                                                settings["cpus"]["generator"])
                result = add_resources(result, sampler)
                record["closed"].append(result)
                save(record, path)
                progress.line(index, port.name, step_no, steps_left,
                              f"closed loop {connections} connections: {result['achieved_rps']:.0f}/s, "
                              f"p99 {result['latency_ms']['p99']:.2f} ms")
        record["status"] = "complete"
    finally:
        running.stop()
        save(record, path)
    print(f"[{index}/{progress.port_count} {port.name}] MST {'' if bounded else '>= '}{mst}/s at p99 <= {slo} ms", flush=True)
    return record


def main(selected: list[ports.Port]) -> None:
    settings = settings_mod.load()
    gen = loadgen.open_model()
    closed_gen = loadgen.closed_loop()
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
    with database:
        tokens.ensure()
        if os.environ.get("BENCH_APP") != "external":
            ports.build(selected)  # compose images are built from these jars too
        env = envinfo.capture(settings, gen, closed_gen)
        print(f"bench: {len(selected)} port(s) with {gen.describe()}; results in "
              f"{out_dir.relative_to(ROOT) if out_dir.is_relative_to(ROOT) else out_dir}/{run_id}/", flush=True)
        ceiling = db_ceiling(settings)
        print(f"bench: database ceiling {ceiling['selects_per_s']} selects/s (sysbench, {ceiling['threads']} threads)", flush=True)
        progress = Progress(settings, len(selected))
        try:
            for index, port in enumerate(selected, 1):
                run_port(port, index, settings, gen, closed_gen, env, ceiling, progress, out_dir, run_id)
        finally:
            report.write(out_dir, markdown)
    print(f"bench: done in {(time.monotonic() - progress.began) / 60:.1f} min; report in "
          f"{markdown.relative_to(ROOT) if markdown.is_relative_to(ROOT) else markdown}", flush=True)

"""Machine calibration (`just calibrate`, docs/method.md "Calibration"): what this machine does per unit of work, in well
under a minute, so that runs from two machines are never mixed in one table.

VMs of one kind (same CPU model string) differ up to 3.5x in speed. Every metric is measured in bench.toml
[calibration] rounds (three; a QUICK smoke run's one) and stored as {"median", "low", "high", "n", "unit"};
`differences()` names the metrics on which two calibrations differ by more than their own noise. A low-level
module: no imports from bench, report or the scenarios (the method's plan reader only).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import psutil

from . import db, envinfo, loadgen, ports, sideprocess
from .errors import Fatal
from .method import plan as plan_mod
from .method.calibration import GENERATOR_RATE, METRICS, differences, table  # noqa: F401 (calibrate.table: __main__)
from .paths import BUILD, RESULTS, ROOT, USERS_TSV

GENERATOR_CONNECTIONS = 64

BUSY_WARNING = 25              # % of all CPUs busy before the calibration: the numbers are not the machine's own

KERNEL_SOURCE = ROOT / "tools" / "calibrate" / "kernel.c"
JVM_WORK_SOURCE = ROOT / "tools" / "calibrate" / "JvmWork.java"
KERNEL = BUILD / "calibrate" / "kernel"

@dataclasses.dataclass(frozen=True)
class Plan:
    """bench.toml [calibration]: how long each piece runs, and how many rounds over them."""
    rounds: int
    db_seconds: int            # per sysbench point-select round
    cpu_seconds: int           # per `sysbench cpu` round
    kernel_ms: int             # per round of each native metric (tools/calibrate/kernel.c)
    generator_seconds: float   # openloop at GENERATOR_RATE against nginx, per round
    jvm_warmup_ms: int         # JvmWork.java's JIT warm-up, then one window of jvm_window_ms per round
    jvm_window_ms: int


# --- the pieces ---------------------------------------------------------------------------------------------

def summary(values: list[float], unit: str) -> dict:
    values = [float(v) for v in values]
    if not values:
        raise ValueError("no values")
    return {"median": _round(statistics.median(values)), "low": _round(min(values)), "high": _round(max(values)),
            "n": len(values), "unit": unit}


def _round(x: float) -> float:
    """Four significant digits: plenty for numbers whose noise is a few percent."""
    return float(f"{x:.4g}")


def _sysbench() -> str:
    sysbench = shutil.which("sysbench")
    if not sysbench:
        raise Fatal("sysbench is missing: `apt-get install sysbench` (it measures the database's own ceiling)")
    return sysbench


def db_ceiling(settings: dict, seconds: float) -> dict:
    """sysbench: the same primary-key SELECT, prepared, at the pool's concurrency, on the app's CPU set."""
    sysbench = _sysbench()
    cfg = db.config()
    seconds = max(1, round(seconds))
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


def cpu_events_per_s(seconds: int) -> float:
    """`sysbench cpu` on one thread: user-space integer speed (primes up to 10,000), events per second."""
    out = subprocess.run([_sysbench(), "cpu", "--threads=1", f"--time={seconds}", "run"],
                         capture_output=True, text=True)
    match = re.search(r"events per second:\s+([\d.]+)", out.stdout)
    if not match:
        raise Fatal(f"sysbench cpu failed: {(out.stdout + out.stderr).strip()[-300:]}")
    return float(match.group(1))


def jvm_work_us(windows: int, warmup_ms: int, window_ms: int) -> list[float]:
    """tools/calibrate/JvmWork.java on JDK 25, from source: the endpoint's own CPU work (HS256 verify, the email
    claim, JSON of a row) on one thread, JIT-warmed for `warmup_ms`, then µs per operation in `windows` windows."""
    java = ports.java_home() / "bin" / "java"
    out = subprocess.run([str(java), "-XX:+UseSerialGC", str(JVM_WORK_SOURCE), str(warmup_ms), str(window_ms),
                          str(windows)], capture_output=True, text=True, timeout=120)
    try:
        return [float(x) for x in json.loads(out.stdout.strip().splitlines()[-1])["us_per_op"]]
    except (IndexError, KeyError, ValueError):
        raise Fatal(f"tools/calibrate/JvmWork.java failed: {(out.stdout + out.stderr).strip()[-300:]}") from None


def kernel_stale() -> bool:
    return not KERNEL.exists() or KERNEL.stat().st_mtime < KERNEL_SOURCE.stat().st_mtime


def build_kernel() -> Path:
    """tools/calibrate/kernel.c -> build/calibrate/kernel with `cc -O2`, when missing or older than its source."""
    if kernel_stale():
        cc = shutil.which("cc")
        if not cc:
            raise Fatal("the calibration's C tool (tools/calibrate/kernel.c) needs a C compiler: `apt-get install gcc`")
        KERNEL.parent.mkdir(parents=True, exist_ok=True)
        tmp = KERNEL.with_name(f"kernel.{os.getpid()}.tmp")
        out = subprocess.run([cc, "-O2", "-o", str(tmp), str(KERNEL_SOURCE)], capture_output=True, text=True)
        if out.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise Fatal(f"compiling tools/calibrate/kernel.c failed: {(out.stdout + out.stderr).strip()[-300:]}")
        tmp.replace(KERNEL)
    return KERNEL


def kernel_costs(repeats: int, ms: int) -> dict:
    """The native tool's lists per metric: wake-ups across / on one CPU (µs), getppid (ns), loopback RTT (µs)."""
    binary = build_kernel()
    out = subprocess.run([str(binary), str(repeats), str(ms)], capture_output=True, text=True,
                         timeout=repeats * ms / 1000 * 4 + 60)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise Fatal(f"tools/calibrate/kernel failed: {(out.stdout + out.stderr).strip()[-300:]}") from None


@contextlib.contextmanager
def nginx(port: int | None = None, body: str = '"ok"', connections: int = 1024, listen: str = "",
          purpose: str = "(the generator-cost calibration's server)") -> Iterator[str]:
    """nginx (Debian's nginx-light) on a loopback port (a free one unless given) answering 200 `body`, from a
    temporary prefix, for the duration of a block (stopped on the way out, also on Ctrl-C); yields its URL."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(binary).exists():
        raise Fatal(f"nginx is missing {purpose}: `apt-get install nginx-light`")
    port = port or sideprocess.free_port()
    with tempfile.TemporaryDirectory(prefix="calibrate-nginx-") as tmp:
        temps = " ".join(f"{kind}_temp_path {tmp}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (Path(tmp) / "nginx.conf").write_text(
            f"worker_processes 1; daemon off; pid {tmp}/nginx.pid; error_log {tmp}/error.log;\n"
            f"events {{ worker_connections {connections}; }}\n"
            f"http {{ access_log off; {temps}\n"
            f"  server {{ listen 127.0.0.1:{port}{listen}; keepalive_requests 100000000; location / {{ return 200 {body}; }} }} }}\n")
        log = Path(tmp) / "nginx.out"
        # group=False: TERM to the master alone is nginx's fast shutdown (the master stops its worker)
        with sideprocess.running([binary, "-p", tmp, "-e", f"{tmp}/error.log", "-c", f"{tmp}/nginx.conf"],
                                 lambda: sideprocess.listening(port), log=log, group=False,
                                 exited=lambda code: f"nginx did not start: {log.read_text(errors='replace').strip()[-300:]}",
                                 late=f"nginx did not listen on 127.0.0.1:{port} within 10 s"):
            yield f"http://127.0.0.1:{port}/"


def generator_cost(gen, url: str, cpus: str | None, seconds: float) -> float:
    """openloop at a constant rate against a trivial server: its own CPU (µs) per request."""
    r = gen.run_rate(url, GENERATOR_RATE, seconds, GENERATOR_CONNECTIONS, cpus)
    failed = sum(r.errors.values())
    if r.requests <= 0 or failed > r.requests * 0.01:
        raise Fatal(f"openloop against nginx: {r.requests} requests, errors {r.errors}: the generator calibration failed")
    return r.generator_cpu_s / r.requests * 1e6


def cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs from /proc/stat; (0, 0) where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    # user nice system idle iowait irq softirq steal (guest time is counted in user already)
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_percent(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else 0.0


def busy_percent(seconds: float = 0.5) -> float:
    """Share of all CPUs busy (not idle, not waiting for I/O) over `seconds`: someone else's load."""
    before = psutil.cpu_times()
    time.sleep(seconds)
    after = psutil.cpu_times()
    delta = {f: getattr(after, f) - getattr(before, f) for f in after._fields}
    total = sum(v for f, v in delta.items() if f not in ("guest", "guest_nice"))
    idle = delta.get("idle", 0) + delta.get("iowait", 0)
    return 100.0 * (total - idle) / total if total > 0 else 0.0


# --- the record ---------------------------------------------------------------------------------------------

def measure(settings: dict, say=print) -> dict:
    """The calibration record: every metric of METRICS (bench.toml [calibration] rounds, >= 3; QUICK's smoke run 1),
    plus seconds, cpus, cpu_model, kernel. Needs the database up (the DB ceiling) and the token pool (openloop sends a
    token per request). The repeats are rounds over every metric, so each metric's spread covers the whole
    calibration, not one moment."""
    plan = plan_mod.section(settings, "calibration", Plan)
    busy = busy_percent()
    if busy > BUSY_WARNING:
        say(f"calibrate: warning: the machine was {busy:.0f} % busy before the calibration (other processes): "
            "wake-ups and the DB ceiling will read slower than this machine is")
    build_kernel()
    gen = loadgen.openloop()
    began, first = time.monotonic(), cpu_times()
    samples: dict[str, list[float]] = {key: [] for key, *_ in METRICS}
    mark = [first]

    def phase_done() -> None:   # steal per phase: its spread across the calibration
        now = cpu_times()
        samples["steal_percent"].append(steal_percent(mark[0], now))
        mark[0] = now

    with nginx() as nginx_url:
        say(f"calibrate: {plan.rounds} round(s) of: kernel costs ({plan.kernel_ms} ms each), sysbench cpu "
            f"({plan.cpu_seconds} s), openloop at {GENERATOR_RATE:,}/s against nginx ({plan.generator_seconds:g} s), "
            f"DB ceiling ({settings['db']['pool_size']} threads, {plan.db_seconds} s)")
        db_ceiling(settings, 1)   # warm-up, not counted: a freshly started server reads its pages in first
        phase_done()
        for round_ in range(1, plan.rounds + 1):
            native = kernel_costs(1, plan.kernel_ms)
            for key in ("wakeup_cross_cpu_us", "wakeup_same_cpu_us", "syscall_ns", "loopback_rtt_us"):
                samples[key] += native.get(key, [])
            phase_done()
            samples["cpu_single_thread_events_per_s"].append(cpu_events_per_s(plan.cpu_seconds))
            phase_done()
            cost = generator_cost(gen, nginx_url, settings["cpus"]["generator"], plan.generator_seconds)
            samples["generator_us_per_request"].append(cost)
            phase_done()
            c = db_ceiling(settings, plan.db_seconds)
            samples["db_ceiling_selects_per_s"].append(c["selects_per_s"])
            phase_done()
            say(f"calibrate: round {round_}/{plan.rounds} done")
    samples["jvm_work_us_per_op"] = jvm_work_us(plan.rounds, plan.jvm_warmup_ms, plan.jvm_window_ms)
    phase_done()
    say(f"calibrate: JVM work (tools/calibrate/JvmWork.java, {plan.jvm_warmup_ms / 1000:g} s warm-up, {plan.rounds} "
        "window(s)) done")

    record = {key: summary(samples[key], unit) for key, _, unit, *_ in METRICS if samples[key]}
    record["steal_percent"]["whole"] = _round(steal_percent(first, cpu_times()))
    record |= {
        "seconds": round(time.monotonic() - began, 1),
        "cpus": len(os.sched_getaffinity(0)),
        "busy_percent_before": round(busy, 1),
        "cpu_model": envinfo._cpu_model(),
        "kernel": platform.release(),
        "method": {"db": f"{c['tool']}, db/point-select.lua, {c['threads']} threads on CPUs {settings['cpus']['app']}",
                   "generator": f"{gen.version}, {GENERATOR_CONNECTIONS} connections, CPUs {settings['cpus']['generator']}",
                   "native": f"tools/calibrate/kernel.c, CPUs {native['cpus'][0]} and {native['cpus'][1]}",
                   "jvm_work": f"tools/calibrate/JvmWork.java, {ports.java_version()}, one thread"},
    }
    return record


def latest_recorded(results: Path | None = None, run_ids=None) -> tuple[Path, dict] | None:
    """The calibration stored in the newest run record under results/ (BENCH_RESULTS, else results/): any
    `**/*.json` with a top-level "calibration" (of one of `run_ids` when given); newest by run id, then file time.
    None when there is none."""
    results = results or Path(os.environ.get("BENCH_RESULTS") or RESULTS)
    found = []
    for path in results.rglob("*.json"):
        try:
            text = path.read_text()
            record = json.loads(text) if '"calibration"' in text else None
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("calibration"), dict) \
                and (run_ids is None or record.get("run_id") in run_ids):
            found.append((str(record.get("run_id", "")), path.stat().st_mtime, path, record["calibration"]))
    if not found:
        return None
    *_, path, calibration = max(found, key=lambda f: (f[0], f[1]))
    return path, calibration

"""Load generators behind one interface (docs/method.md, "Load generator").

Every open-model generator runs one constant-rate step and returns a `RateResult`: rates, latency
percentiles (ms) from each request's intended send time, errors by kind, statuses, the generator's own CPU,
and the HdrHistogram of the whole window. Choice (`LOADGEN`, default `auto`):

- `wrk2` when it is on PATH (its own coordinated-omission correction; wrk/bench.lua is its workload);
- `openloop`, the project's own generator (tools/openloop, Rust), built here with cargo: one schedule,
  latency from the intended send time, send lateness recorded, thousands of connections on one thread;
- `wrk-paced`: Debian wrk paced by wrk/bench.lua, one connection per thread (kept for comparison).

Closed-loop steps (fixed connections, as fast as answers come) use plain wrk.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from hdrh.histogram import HdrHistogram

from .errors import Fatal
from .method.constants import BUSY_LIMIT, TIMEOUT_S  # noqa: F401 (why each: method/constants.py)
from .paths import ROOT, TOKENS, TOKENS_DIR

SCRIPT = ROOT / "wrk" / "bench.lua"
OPENLOOP_DIR = ROOT / "tools" / "openloop"
OPENLOOP = OPENLOOP_DIR / "target" / "release" / "openloop"
PERCENTILES = [("p10", 10), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90), ("p99", 99),
               ("p99.9", 99.9), ("p99.99", 99.99)]
LEAD_IN_S = 1.0   # paced wrk: time for every wrk thread to load its tokens before the schedule starts
TAIL_S = 1.0      # paced wrk: time for the window's last requests to be answered
WRK2_CALIBRATION_S = 10  # wrk2 resets its histograms after a 10-s calibration: it runs that much longer
NO_ERRORS = {"non_2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}


@dataclasses.dataclass
class RateResult:
    """One step of any generator: what every report, chart and pass/fail decision reads."""
    generator: str
    target_rps: float | None           # None for a closed-loop step
    connections: int
    seconds: float
    achieved_rps: float
    requests: int
    errors: dict
    statuses: dict
    latency_ms: dict
    histogram: str | None              # HdrHistogram of the window (µs), base64; None where the tool has none
    generator_cpu_s: float
    window: tuple[float, float]        # CLOCK_MONOTONIC seconds of the measured window
    send_lag_ms: dict | None = None    # actual send minus intended send, where the generator records it
    generator_behind: bool = False     # the generator could not keep its own schedule: not the port's failure
    extra: dict = dataclasses.field(default_factory=dict)

    def record(self) -> dict:
        data = dataclasses.asdict(self)
        data.pop("window")
        data.update(data.pop("extra"))
        return data


class OpenModel(Protocol):
    name: str
    whole_rates: bool      # takes whole req/s only (wrk2's -R): a search's rates stay on whole numbers

    def describe(self) -> str: ...

    def run_rate(self, url: str, rate: float, seconds: float, connections: int, cpus: str | None) -> RateResult: ...


# --- helpers shared by the generators --------------------------------------------------------------

def _version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True)
    text = (out.stdout + out.stderr).strip().splitlines()
    return text[0] if text else binary


def _takes_rate(binary: str) -> bool:
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return bool(re.search(r"(^|\s)-R[,\s]", out.stdout + out.stderr))


def _run(cmd: list[str], cpus: str | None, timeout: float) -> str:
    """Runs the generator and returns its output. Its CPU shows in the children's times."""
    name = Path(cmd[0]).name
    if cpus and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpus, *cmd]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.returncode not in (0, None) and not out.strip():
        raise Fatal(f"{name} failed: {err.strip()[-300:]}")
    return out + err


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def _threads(connections: int) -> int:
    """wrk2 and closed-loop wrk: one thread per CPU the generator may use."""
    return min(connections, max(1, len(os.sched_getaffinity(0))))


def _report(out: str, cmd: list[str]) -> dict:
    for line in out.splitlines():
        if line.startswith("@@bench "):
            return json.loads(line[len("@@bench "):])
    raise Fatal(f"the generator printed no result ({' '.join(cmd[:3])} ...): {out.strip()[-300:]}")


def _errors(report: dict) -> dict:
    e = report["errors"]
    non2xx = sum(n for code, n in report["statuses"].items() if not code.startswith("2"))
    return {"non_2xx": max(non2xx, e.get("status", 0)), "connect": e["connect"], "read": e["read"],
            "write": e["write"], "timeout": e["timeout"]}


def _latency_from_wrk(report: dict) -> dict:
    lat = report["latency_us"]
    return {"min": lat["min"] / 1000, **{k: lat["percentiles"][str(p)] / 1000 for k, p in PERCENTILES},
            "max": lat["max"] / 1000, "mean": lat["mean"] / 1000}


def _whole_run(name: str, cmd: list[str], cpus: str | None, run_s: float, target_rps: float | None,
               connections: int, seconds: float) -> RateResult:
    """Runs a wrk-family generator whose report covers its whole run (wrk2, closed-loop wrk); the window is
    the run's last `seconds` (wrk2's calibration comes first)."""
    cpu_before = _children_cpu()
    began = time.monotonic()
    report = _report(_run(cmd, cpus, run_s + 120), cmd)
    end = time.monotonic()
    return RateResult(
        generator=name, target_rps=target_rps, connections=connections, seconds=seconds,
        achieved_rps=round(report["requests"] / (report["duration_us"] / 1e6), 1), requests=report["requests"],
        errors=_errors(report), statuses=report["statuses"], latency_ms=_latency_from_wrk(report),
        histogram=None, generator_cpu_s=round(_children_cpu() - cpu_before, 3),
        window=(max(began, end - seconds), end))


def latency_from_histogram(h: HdrHistogram) -> dict:
    if h.get_total_count() == 0:
        return {}
    return {"min": h.get_min_value() / 1000,
            **{k: h.get_value_at_percentile(p) / 1000 for k, p in PERCENTILES},
            "max": h.get_max_value() / 1000, "mean": h.get_mean_value() / 1000}


def shards(threads: int) -> Path:
    """The token pool split into one file per wrk thread (round robin), made once per thread count."""
    folder = TOKENS_DIR / f"shards-{threads}"
    stamp = folder / ".complete"
    if stamp.exists() and stamp.stat().st_mtime >= TOKENS.stat().st_mtime:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    lines = TOKENS.read_text().split()
    for i in range(threads):
        (folder / f"{i}.txt").write_text("\n".join(lines[i::threads]) + "\n")
    stamp.touch()
    return folder


def is_loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- the generators ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Openloop:
    """tools/openloop: one schedule per step, latency from the intended send time, keep-alive connections
    served in turn from one (or a few) event-loop threads."""
    binary: str
    version: str
    threads: int = 1
    max_lag_ms: float = 5.0   # pacer lateness p99 above this: the generator fell behind its own schedule
    arrivals: str = "even"    # "even" (request i at i/rate) or "poisson" (exponential gaps, the same mean rate)
    name: str = "openloop"
    whole_rates = False

    def describe(self) -> str:
        return (f"{self.version} (tools/openloop: open model, latency from the intended send time"
                + (f"; {self.arrivals} arrivals" if self.arrivals != "even" else "") + ")")

    def command(self, url: str, rate: float, seconds: float, connections: int, extra: tuple = ()) -> list[str]:
        return [self.binary, "--url", url, "--rate", f"{rate:g}", "--duration", f"{seconds:g}",
                "--connections", str(connections), "--threads", str(self.threads), "--tokens", str(TOKENS),
                "--timeout", str(TIMEOUT_S), "--max-pacer-lag-ms", f"{self.max_lag_ms:g}",
                *([] if self.arrivals == "even" else ["--arrivals", self.arrivals]),
                *([] if is_loopback(url) else ["--allow-remote"]), *extra]

    def run_rate(self, url, rate, seconds, connections, cpus, extra: tuple = ()) -> RateResult:
        cpu_before = _children_cpu()
        cmd = self.command(url, rate, seconds, connections, extra)
        began = time.monotonic()
        out = _run(cmd, cpus, seconds + TIMEOUT_S + 120)
        wall = time.monotonic() - began
        result = parse_openloop(out)
        start = result["schedule_start_monotonic_ns"] / 1e9
        histogram = HdrHistogram.decode(result["latency_hdr"])
        # Behind its schedule: its pacer released requests late (its thread did not get the CPU), or its
        # threads were busy nearly all the time (it, not the port, was the bottleneck).
        busy = (result["cpu_user_s"] + result["cpu_system_s"]) / max(wall * self.threads, 1e-9)
        errors = dict(NO_ERRORS, **{k: result["errors"].get(k, 0) for k in ("connect", "read", "write", "timeout")})
        errors["non_2xx"] = sum(n for code, n in result["statuses"].items() if not code.startswith("2"))
        return RateResult(
            generator=self.name, target_rps=rate, connections=connections, seconds=seconds,
            achieved_rps=round(result["achieved_rps"], 1), requests=result["completed"], errors=errors,
            statuses=result["statuses"], latency_ms=latency_from_histogram(histogram),
            histogram=result["latency_hdr"], generator_cpu_s=round(_children_cpu() - cpu_before, 3),
            window=(start, start + seconds),
            send_lag_ms=_ms(result["send_lag_us"]),
            generator_behind=bool(result["generator_behind"]) or busy > BUSY_LIMIT,
            extra={"pacer_lag_ms": _ms(result["pacer_lag_us"]),
                   "generator_busy": round(busy, 3),
                   "max_in_flight": result["max_in_flight"], "connections_opened": result["connections_opened"],
                   "generator_max_rss_mb": round(result["max_rss_kb"] / 1024, 1),
                   **({k: result[k] for k in ("idle_connections_opened", "idle_connections_open_at_end",
                                              "idle_connect_errors")} if "--idle-connections" in extra else {}),
                   **({"intervals": parse_intervals(out)} if "--report-interval" in extra else {}),
                   **({"unsent_at_end": result["unsent_at_end"]} if "--no-sends-after-end" in extra else {}),
                   **({"mix": _mix(result["mix"])} if result.get("mix") else {}),
                   # Poisson: the schedule's own count is random (sd = its square root), so the rate it offered,
                   # not the mean, is what the port is judged to have served
                   **({"offered_rps": round(result["planned_slots"] / seconds, 1), "arrivals": self.arrivals}
                      if self.arrivals != "even" else {})})


def _ms(percentiles_us: dict) -> dict:
    return {k: v / 1000 for k, v in percentiles_us.items() if k != "count"}


def parse_intervals(out: str) -> list[dict]:
    """openloop's --report-interval lines: per interval of the schedule (by completion time: the answers
    that came back in it), how many completed, their p50/p99/max (ms), how many of them were not 2xx, and
    how many requests failed without an answer in it (timeout, read, write, connect)."""
    intervals = []
    for line in out.splitlines():
        if line.startswith('{"type":"interval"'):
            i = json.loads(line)
            intervals.append({"t_s": i["t_s"], "completed": i["completed"], "p50_ms": i["p50_us"] / 1000,
                              "p99_ms": i["p99_us"] / 1000, "max_ms": i.get("max_us", 0) / 1000,
                              "non_2xx": i.get("non_2xx", 0), "errors": i.get("errors", 0)})
    return intervals


def _mix(mix: dict) -> dict:
    """openloop's --mix-authorization requests, counted apart from the main figures."""
    return {"fraction": mix["fraction"], "completed": mix["completed"], "statuses": mix["statuses"],
            "statuses_by_line": mix["statuses_by_line"], "errors": mix["errors"],
            "unfinished_at_end": mix["unfinished_at_end"], "latency_ms": _ms(mix["latency_us"]),
            "histogram": mix["latency_hdr"]}


def parse_openloop(out: str) -> dict:
    for line in out.splitlines():
        if line.startswith('{"type":"result"'):
            return json.loads(line)
    raise Fatal(f"openloop printed no result: {out.strip()[-300:]}")


@dataclasses.dataclass(frozen=True)
class Wrk2:
    binary: str
    version: str
    name: str = "wrk2"
    whole_rates = True        # -R is parsed as a whole number

    def describe(self) -> str:
        return f"wrk2 (-R, its own coordinated-omission correction), {self.version}"

    def run_rate(self, url, rate, seconds, connections, cpus) -> RateResult:
        # wrk2 spends its first 10 s calibrating and then resets its histograms: run that much longer so the
        # histogram covers `seconds`, the same window as every other generator's step.
        threads = _threads(connections)
        total = int(seconds) + WRK2_CALIBRATION_S
        cmd = [self.binary, f"-t{threads}", f"-c{connections}", f"-d{total}s", f"-R{rate}", "--latency",
               f"--timeout={TIMEOUT_S}s", "-s", str(SCRIPT), url, "--", str(shards(threads)), "wrk2"]
        return _whole_run(self.name, cmd, cpus, total, rate, connections, seconds)


@dataclasses.dataclass(frozen=True)
class WrkPaced:
    """Debian wrk paced by wrk/bench.lua: one connection per thread, latency from the intended send time."""
    binary: str
    version: str
    name: str = "wrk-paced"
    whole_rates = False

    def describe(self) -> str:
        return f"Debian wrk paced by wrk/bench.lua (wrk2-style intended-time latency), {self.version}"

    def run_rate(self, url, rate, seconds, connections, cpus) -> RateResult:
        cpu_before = _children_cpu()
        with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
            folder = shards(connections)
            start_us = int((time.monotonic() + LEAD_IN_S) * 1e6)
            cmd = [self.binary, f"-t{connections}", f"-c{connections}",
                   f"-d{int(LEAD_IN_S + seconds + TAIL_S)}s", f"--timeout={TIMEOUT_S}s", "-s", str(SCRIPT), url,
                   "--", str(folder), "paced", f"{rate / connections:.6f}", tmp, str(start_us)]
            report = _report(_run(cmd, cpus, seconds + 120), cmd)
            h, count = read_paced(Path(tmp), seconds * 1e6)
        return RateResult(
            generator=self.name, target_rps=rate, connections=connections, seconds=seconds,
            achieved_rps=round(count / seconds, 1), requests=report["requests"], errors=_errors(report),
            statuses=report["statuses"], latency_ms=latency_from_histogram(h), histogram=h.encode().decode(),
            generator_cpu_s=round(_children_cpu() - cpu_before, 3),
            window=(start_us / 1e6, start_us / 1e6 + seconds),
            # what wrk itself reports for the same requests (wrk 4's own correction): to compare, never used
            extra={"wrk_reported_latency_ms": _latency_from_wrk(report)})


def read_paced(outdir: Path, window_us: float) -> tuple[HdrHistogram, int]:
    """Latencies of the requests due inside the measured window, from the Lua scripts' files."""
    h = HdrHistogram(1, 3_600_000_000, 3)
    count = 0
    for f in outdir.glob("latency-*.txt"):
        with open(f) as lines:
            for line in lines:
                due, _, latency = line.partition(" ")
                if 0 <= int(due) < window_us and latency:
                    h.record_value(max(1, int(latency)))
                    count += 1
    return h, count


@dataclasses.dataclass(frozen=True)
class ClosedLoop:
    """Plain wrk: fixed connections, each sending its next request when the last answer arrives."""
    binary: str
    version: str
    name: str = "wrk-closed"

    def describe(self) -> str:
        return f"wrk closed loop (fixed connections), {self.version}"

    def run(self, url: str, connections: int, seconds: float, cpus: str | None) -> RateResult:
        threads = _threads(connections)
        cmd = [self.binary, f"-t{threads}", f"-c{connections}", f"-d{int(seconds)}s", f"--timeout={TIMEOUT_S}s",
               "-s", str(SCRIPT), url, "--", str(shards(threads)), "closed"]
        return _whole_run(self.name, cmd, cpus, seconds, None, connections, seconds)


# --- choosing -----------------------------------------------------------------------------------------

def openloop_stale() -> bool:
    if not OPENLOOP.exists():
        return True
    built = OPENLOOP.stat().st_mtime
    sources = [OPENLOOP_DIR / "Cargo.toml", OPENLOOP_DIR / "Cargo.lock", *(OPENLOOP_DIR / "src").rglob("*.rs")]
    return any(p.exists() and p.stat().st_mtime > built for p in sources)


def build_openloop() -> Path:
    """Builds tools/openloop with cargo (crates.io) when its binary is missing or older than its sources."""
    if openloop_stale():
        cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
        if not Path(cargo).exists():
            raise Fatal("openloop (the default load generator) needs Rust's cargo to build: install Rust "
                        "(https://rustup.rs), or choose LOADGEN=wrk-paced")
        print("loadgen: building tools/openloop (cargo build --release)", flush=True)
        if subprocess.run([cargo, "build", "--release", "--quiet", "--locked"], cwd=OPENLOOP_DIR).returncode != 0:
            raise Fatal("building tools/openloop failed (output above)")
    return OPENLOOP


def openloop(threads: int = 1, max_lag_ms: float = 5.0, arrivals: str = "even") -> Openloop:
    binary = build_openloop()
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout.strip()
    return Openloop(str(binary), version or "openloop", threads, max_lag_ms, arrivals)


ARRIVALS = ("even", "poisson")


def open_model(env=os.environ, threads: int = 1, max_lag_ms: float = 5.0, arrivals: str = "even") -> OpenModel:
    """The constant-rate generator: LOADGEN (wrk2 | openloop | wrk-paced) or, by default, wrk2 when it is
    on PATH and openloop otherwise; Poisson arrivals only from openloop."""
    choice = env.get("LOADGEN", "auto")
    choices = ("auto", "wrk2", "openloop", "wrk-paced")
    if choice not in choices:
        raise Fatal(f"LOADGEN={choice} is not a generator: use one of {', '.join(choices[1:])}, or unset it")
    if arrivals not in ARRIVALS:
        raise Fatal(f"arrivals = {arrivals!r}: use one of {', '.join(ARRIVALS)} (bench.toml [load] or the "
                    "scenario's section, e.g. BENCH_BASELINE_ARRIVALS)")
    if arrivals != "even":
        if choice not in ("auto", "openloop"):
            raise Fatal(f"{arrivals} arrivals come from openloop only: unset LOADGEN={choice}, or set "
                        "BENCH_LOAD_ARRIVALS=even (and BENCH_BASELINE_ARRIVALS=even in the baseline)")
        return openloop(threads, max_lag_ms, arrivals)
    wrk = shutil.which("wrk")
    wrk2 = shutil.which("wrk2") or (wrk if wrk and _takes_rate(wrk) else None)
    if choice in ("auto", "wrk2") and wrk2:
        return Wrk2(wrk2, _version(wrk2))
    if choice == "wrk2":
        raise Fatal("LOADGEN=wrk2 but no wrk2 on PATH: build it from https://github.com/giltene/wrk2, or unset LOADGEN")
    if choice == "wrk-paced":
        if not wrk or _takes_rate(wrk):
            raise Fatal("LOADGEN=wrk-paced needs Debian's wrk 4 on PATH: `apt-get install wrk`")
        return WrkPaced(wrk, _version(wrk))
    return openloop(threads, max_lag_ms)


def closed_loop() -> ClosedLoop | None:
    """Debian/upstream wrk for closed-loop steps; wrk2 cannot run without a rate."""
    wrk = shutil.which("wrk")
    return ClosedLoop(wrk, _version(wrk)) if wrk and not _takes_rate(wrk) else None

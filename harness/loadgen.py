"""Load generators: wrk2 when present, else Debian wrk paced by wrk/bench.lua (see README, "Load generator").

Every step returns the same record whatever produced it: rates, latency percentiles (ms), errors by kind,
the generator's own CPU, and the latency histogram (HdrHistogram, base64) it was computed from.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from hdrh.histogram import HdrHistogram

from .errors import Fatal
from .paths import ROOT, TOKENS, TOKENS_DIR

SCRIPT = ROOT / "wrk" / "bench.lua"
PERCENTILES = [("p10", 10), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90), ("p99", 99),
               ("p99.9", 99.9), ("p99.99", 99.99)]
LEAD_IN_S = 1.0   # paced mode: time for every wrk thread to load its tokens before the schedule starts
TAIL_S = 1.0      # paced mode: time for the window's last requests to be answered
TIMEOUT = "10s"   # wrk's default 2 s would count slow answers as errors instead of measuring them


@dataclasses.dataclass(frozen=True)
class Generator:
    kind: str     # wrk2 | wrk-paced | wrk-closed
    binary: str
    version: str

    def describe(self) -> str:
        return {"wrk2": "wrk2 (-R, its own coordinated-omission correction)",
                "wrk-paced": "Debian wrk paced by wrk/bench.lua (wrk2-style intended-time latency)",
                "wrk-closed": "wrk closed loop (fixed connections)"}[self.kind] + f", {self.version}"


def _version(binary: str) -> str:
    out = subprocess.run([binary, "-v"], capture_output=True, text=True)
    text = (out.stdout + out.stderr).strip().splitlines()
    return text[0] if text else binary


def _takes_rate(binary: str) -> bool:
    out = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return bool(re.search(r"(^|\s)-R[,\s]", out.stdout + out.stderr))


def open_model(env=os.environ) -> Generator:
    """The constant-rate generator: LOADGEN (wrk2 | wrk-paced) or the best one found on PATH."""
    choice = env.get("LOADGEN", "auto")
    wrk2 = shutil.which("wrk2") or (shutil.which("wrk") if shutil.which("wrk") and _takes_rate("wrk") else None)
    wrk = shutil.which("wrk")
    if choice in ("auto", "wrk2") and wrk2:
        return Generator("wrk2", wrk2, _version(wrk2))
    if choice == "wrk2":
        raise Fatal("LOADGEN=wrk2 but no wrk2 on PATH: build it from https://github.com/giltene/wrk2, or unset LOADGEN")
    if choice in ("auto", "wrk-paced") and wrk and not _takes_rate(wrk):
        return Generator("wrk-paced", wrk, _version(wrk))
    if choice not in ("auto", "wrk-paced"):
        raise Fatal(f"LOADGEN={choice} is not a generator: use wrk2 or wrk-paced")
    raise Fatal("no load generator: put wrk2 on PATH (https://github.com/giltene/wrk2) or install Debian's wrk (`apt-get install wrk`)")


def closed_loop() -> Generator | None:
    """Debian/upstream wrk for closed-loop steps; wrk2 cannot run without a rate."""
    wrk = shutil.which("wrk")
    return Generator("wrk-closed", wrk, _version(wrk)) if wrk and not _takes_rate(wrk) else None


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


def _run(cmd: list[str], cpus: str | None, timeout: float) -> str:
    """Runs the generator and returns its output. Its CPU shows in the children's times."""
    if cpus and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpus, *cmd]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return out


def _timed_report(cmd: list[str], cpus: str | None, seconds: float) -> tuple[dict, tuple[float, float]]:
    """Runs a generator that measures its whole run: its report and the run's monotonic window."""
    began = time.monotonic()
    out = _run(cmd, cpus, seconds + 120)
    return _report(out, cmd), (began, time.monotonic())


def _threads(connections: int) -> int:
    """wrk2 and closed-loop wrk: one thread per CPU the generator may use."""
    return min(connections, max(1, len(os.sched_getaffinity(0))))


def _report(out: str, cmd: list[str]) -> dict:
    for line in out.splitlines():
        if line.startswith("@@bench "):
            return json.loads(line[len("@@bench "):])
    raise Fatal(f"the generator printed no result ({' '.join(cmd[:3])} ...): {out.strip()[-300:]}")


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def _errors(report: dict) -> dict:
    e = report["errors"]
    non2xx = sum(n for code, n in report["statuses"].items() if not code.startswith("2"))
    return {"non_2xx": non2xx, "connect": e["connect"], "read": e["read"], "write": e["write"],
            "timeout": e["timeout"]}


def _latency_from_wrk(report: dict) -> dict:
    lat = report["latency_us"]
    return {"min": lat["min"] / 1000, **{k: lat["percentiles"][str(p)] / 1000 for k, p in PERCENTILES},
            "max": lat["max"] / 1000, "mean": lat["mean"] / 1000}


def latency_from_histogram(h: HdrHistogram) -> dict:
    if h.get_total_count() == 0:
        return {}
    return {"min": h.get_min_value() / 1000,
            **{k: h.get_value_at_percentile(p) / 1000 for k, p in PERCENTILES},
            "max": h.get_max_value() / 1000, "mean": h.get_mean_value() / 1000}


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


def run_rate(gen: Generator, url: str, rate: int, seconds: float, connections: int, cpus: str | None) -> dict:
    """One constant-rate step."""
    cpu_before = _children_cpu()
    with tempfile.TemporaryDirectory(prefix="bench-step-") as tmp:
        wrk_own = None
        if gen.kind == "wrk2":
            threads = _threads(connections)
            cmd = [gen.binary, f"-t{threads}", f"-c{connections}", f"-d{int(seconds)}s", f"-R{rate}",
                   "--latency", f"--timeout={TIMEOUT}", "-s", str(SCRIPT), url, "--", str(shards(threads)), "wrk2"]
            report, window = _timed_report(cmd, cpus, seconds)
            latency, histogram = _latency_from_wrk(report), None
            achieved = report["requests"] / (report["duration_us"] / 1e6)
        else:
            folder = shards(connections)
            start_us = int((time.monotonic() + LEAD_IN_S) * 1e6)
            cmd = [gen.binary, f"-t{connections}", f"-c{connections}",
                   f"-d{int(LEAD_IN_S + seconds + TAIL_S)}s", f"--timeout={TIMEOUT}", "-s", str(SCRIPT), url,
                   "--", str(folder), "paced", f"{rate / connections:.6f}", tmp, str(start_us)]
            window = (start_us / 1e6, start_us / 1e6 + seconds)
            report = _report(_run(cmd, cpus, seconds + 120), cmd)
            h, count = read_paced(Path(tmp), seconds * 1e6)
            latency, histogram = latency_from_histogram(h), h.encode().decode()
            achieved = count / seconds
            # what wrk itself reports for the same requests (from actual send time, wrk 4's own correction):
            # kept to compare, never used for results
            wrk_own = _latency_from_wrk(report)
    return {"target_rps": rate, "achieved_rps": round(achieved, 1), "seconds": seconds,
            "requests": report["requests"], "errors": _errors(report), "statuses": report["statuses"],
            "latency_ms": latency, "histogram": histogram, "generator_cpu_s": round(_children_cpu() - cpu_before, 3),
            "window": window, **({"wrk_reported_latency_ms": wrk_own} if wrk_own else {})}


def run_closed(gen: Generator, url: str, connections: int, seconds: float, cpus: str | None) -> dict:
    """One closed-loop step: fixed connections, as many requests as they can."""
    threads = _threads(connections)
    cpu_before = _children_cpu()
    cmd = [gen.binary, f"-t{threads}", f"-c{connections}", f"-d{int(seconds)}s", f"--timeout={TIMEOUT}",
           "-s", str(SCRIPT), url, "--", str(shards(threads)), "closed"]
    report, window = _timed_report(cmd, cpus, seconds)
    return {"connections": connections, "seconds": seconds,
            "achieved_rps": round(report["requests"] / (report["duration_us"] / 1e6), 1),
            "requests": report["requests"], "errors": _errors(report), "statuses": report["statuses"],
            "latency_ms": _latency_from_wrk(report), "generator_cpu_s": round(_children_cpu() - cpu_before, 3),
            "window": window}

"""memory: each port in a container's memory limit (a cgroup, largest first), its heap a share of the limit: per
limit a fresh JVM, warmed up, the common rate, the MST search and a step with idle keep-alive connections, each step
with its GC pauses, each cell with whether the JVM started or died (OOM kill, OutOfMemoryError) and its own memory
account. Below a limit the JVM did not live in, the smaller ones are not run (docs/scenarios.md, "memory").
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
import subprocess
import time
from pathlib import Path
from typing import Iterator

from .. import compose, driver, ports
from ..cgroup import MemoryLimit
from ..errors import Fatal
from ..method.memory import fatal_to_jvm
from ..method.record import Step
from ..paths import BUILD
from ..session import Context, baseline_msts, choose_rate

GC_LOGS = BUILD / "memory"
PAUSE = re.compile(r"^\[(?P<t>\d+(?:\.\d+)?)s\].*\bPause\b.*?(?P<ms>\d+(?:\.\d+)?)ms\s*$")
NMT_CATEGORY = re.compile(r"^-\s+(?P<name>[A-Za-z][\w ]*?)\s+\(reserved=\d+KB, committed=(?P<kb>\d+)KB")
NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(?P<kb>\d+)KB")
NMT_THREADS = re.compile(r"^\(threads #(?P<n>\d+)\)")
OOM_KIND = re.compile(r"OutOfMemoryError(?::\s*(?P<kind>[^\n]*))?")
HEAP_MAX = re.compile(r"Heap Max Capacity: (?P<n>\d+(?:\.\d+)?)(?P<unit>[KMG])")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [memory]."""
    limits_mb: list[int]
    max_ram_percentage: float
    rate: int                    # the cap of the common rate: min(rate, mst_fraction x the lowest baseline MST)
    mst_fraction: float


def checked(plan: Plan) -> Plan:
    if not plan.limits_mb or min(plan.limits_mb) < 32:
        raise Fatal("[memory] limits_mb: sizes >= 32 MiB")
    return dataclasses.replace(plan, limits_mb=sorted(plan.limits_mb, reverse=True))


# --- pure logic (unit-tested) ------------------------------------------------------------------------------------

def gc_pauses(text: str) -> list[tuple[float, float]]:
    """(JVM uptime s, pause ms) of every stop-the-world pause in a -Xlog:gc:file=...:uptime log."""
    out = []
    for line in text.splitlines():
        m = PAUSE.match(line.strip())
        if m:
            out.append((float(m["t"]), float(m["ms"])))
    return out


def nmt_summary(text: str) -> dict:
    """`jcmd PID VM.native_memory summary` -> committed MiB per category ("Total" too) and "threads" (a count)."""
    out: dict = {}
    for line in text.splitlines():
        line = line.strip()
        if m := NMT_TOTAL.match(line):
            out["Total"] = round(int(m["kb"]) / 1024, 1)
        elif m := NMT_CATEGORY.match(line):
            out[m["name"]] = round(int(m["kb"]) / 1024, 1)
        elif (m := NMT_THREADS.match(line)) and "threads" not in out:
            out["threads"] = int(m["n"])
    return out


def heap_max_mb(text: str) -> float | None:
    """The heap the JVM sized for itself (its gc+init log line), in MiB."""
    m = HEAP_MAX.search(text)
    if not m:
        return None
    return round(float(m["n"]) * {"K": 1 / 1024, "M": 1, "G": 1024}[m["unit"]], 1)


def gc_window(pauses: list[tuple[float, float]], start_s: float, end_s: float) -> dict:
    """The pauses inside [start_s, end_s] of uptime: their share of the window, count and longest."""
    inside = [p for t, p in pauses if start_s <= t <= end_s]
    span = max(end_s - start_s, 1e-9)
    return {"gc_pause_share": round(sum(inside) / 1000 / span, 4), "gc_pauses": len(inside),
            "gc_pause_max_ms": round(max(inside), 2) if inside else 0.0}


def jvm_options(options: list[str], percentage: float, gc_log: Path) -> tuple[str, ...]:
    """The [jvm] options with the fixed heap replaced by a share of the container's memory, and a GC log."""
    kept = [o for o in options if not o.startswith(("-Xms", "-Xmx", "-XX:MaxRAMPercentage", "-XX:MinRAMPercentage",
                                                   "-XX:InitialRAMPercentage"))]
    # both: below about 250 MiB the JVM takes MinRAMPercentage (50 % by default) instead of MaxRAMPercentage
    # NativeMemoryTracking=summary: the JVM's own account of heap, metaspace, thread stacks, code and buffers, so a
    # cell that dies says what filled the limit (a few % of CPU, the same for every port)
    return (*kept, f"-XX:MinRAMPercentage={percentage:g}", f"-XX:MaxRAMPercentage={percentage:g}",
            "-XX:NativeMemoryTracking=summary", f"-Xlog:gc,gc+init:file={gc_log}:uptime")


# --- measuring ----------------------------------------------------------------------------------------------------

def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = checked(ctx.plan(Plan))
    if compose.enabled() or ctx.settings["load"]["target_host"] not in ("127.0.0.1", "localhost"):
        raise Fatal("memory runs locally only (cgroups)")
    rate, basis = choose_rate(plan.rate, plan.mst_fraction, baseline_msts(ctx.results))
    print(f"{ctx.scenario}: common rate {rate:,} req/s, set by {basis}", flush=True)
    driver.run(ctx, Memory(basis), dataclasses.replace(plan, rate=rate), selected)


class Memory(driver.Scenario):
    """Per limit a fresh JVM in a memory cgroup, its heap a share of the limit, its GC logged; one cell."""

    def __init__(self, rate_basis: str = ""):
        self.rate_basis = rate_basis

    def jvms(self, plan: Plan, port: ports.Port) -> list[dict]:
        return [{"limit_mb": limit} for limit in plan.limits_mb]

    def skip(self, plan: Plan, port: ports.Port, coords: dict, done: list[dict]) -> str | None:
        """Largest first: below a limit the JVM could not live in, it cannot either."""
        fatal_at = next((r["jvm"]["limit_mb"] for r in done if fatal_to_jvm(r)), None)
        return fatal_at and (f"not run: the JVM did not start or died before passing the common rate at "
                             f"{fatal_at:,} MiB")

    def path(self, jvm: driver.Jvm) -> str:
        return f"-{jvm.coords['limit_mb']}mb-{jvm.iteration}"

    def fields(self, jvm: driver.Jvm) -> dict:
        options = jvm_options(jvm.ctx.settings["jvm"]["options"], jvm.plan.max_ram_percentage, gc_log(jvm))
        return {"jvm_options": list(options), "started": False, "heap_max_mb": None, "died": None,
                "start_failure": None, "oom_kills": None, "out_of_memory_error": False, "out_of_memory_kind": None,
                "cgroup_peak_mb": None, "nmt": {}, "rate_basis": self.rate_basis}

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm) -> Iterator[dict]:
        """The JVM inside the cgroup, its options from the limit; what the group and the log say after it."""
        GC_LOGS.mkdir(parents=True, exist_ok=True)
        gc_log(jvm).unlink(missing_ok=True)
        limit, record = jvm.coords["limit_mb"], jvm.record
        with MemoryLimit(f"bench-{jvm.port.name}", limit) as group:
            try:
                yield {"variant": ports.Variant(f"{limit} MiB", ports.java_home(), jvm.port.jar_path,
                                                options=tuple(record["jvm_options"]), prefix=group.prefix)}
            finally:
                record.update(oom_kills=group.oom_kills(), cgroup_peak_mb=group.peak_mb())
                kind = OOM_KIND.search(_read(ports.LOGS / f"{jvm.port.name}.log"))
                record.update(out_of_memory_error=bool(kind),
                              out_of_memory_kind=kind and ((kind["kind"] or "").strip() or "unnamed"))

    def started(self, jvm: driver.Jvm) -> None:
        jvm.record.update(started=True, heap_max_mb=heap_max_mb(_read(gc_log(jvm))))
        jvm.say(f"up {jvm.record['startup_s']} s, heap {jvm.record['heap_max_mb']} MiB, "
                f"idle {jvm.record['idle_rss_mb']} MiB")
        account(jvm, "started")

    def warmup_rate(self, jvm: driver.Jvm) -> float:
        return jvm.plan.rate * jvm.plan.warmup_fraction

    def common_rate(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.plan.rate

    def estimate(self, jvm: driver.Jvm, cell: dict) -> float:
        """mst_first_guess x the port's baseline MST, else x the common rate."""
        return jvm.plan.mst_first_guess * (jvm.previous_mst or jvm.plan.rate)

    def stepped(self, jvm: driver.Jvm, cell: dict, result: Step, began: float) -> str:
        """The GC's pauses in the step's window of the JVM's uptime (0 at its creation)."""
        started = jvm.running.started
        result.extra.update(gc_window(gc_pauses(_read(gc_log(jvm))), began - started, time.monotonic() - started))
        return (f", GC {result.extra['gc_pause_share']:.1%} (longest {result.extra['gc_pause_max_ms']} ms), "
                f"RSS {result.app_rss_mb_peak} MiB")

    def after_phase(self, jvm: driver.Jvm, cell: dict, phase: str) -> None:
        if phase in ("common", "idle"):
            account(jvm, phase)


def gc_log(jvm: driver.Jvm) -> Path:
    return GC_LOGS / f"{jvm.port.name}-{jvm.coords['limit_mb']}mb.log"


def account(jvm: driver.Jvm, when: str) -> None:
    jvm.record["nmt"][when] = native_memory(jvm.running.pid)
    jvm.save()


def native_memory(pid: int) -> dict:
    """The JVM's native memory summary now; {} when it cannot answer (it is dying: the cell says so elsewhere)."""
    try:
        return nmt_summary(ports.jcmd(pid, "VM.native_memory", "summary", timeout=30))
    except (Fatal, subprocess.TimeoutExpired):
        return {}


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""

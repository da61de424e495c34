"""memory: each port in a container-sized memory limit: how small can it run, and what does it cost there.

Per port, iteration and limit (largest first), a fresh JVM inside a memory cgroup of that size (harness/cgroup.py:
the limit a container runtime sets, swap included), its heap sized by the JVM from the limit
(-XX:MaxRAMPercentage, the same share for every port) instead of the fixed [jvm] heap; the rest of the [jvm]
options as everywhere. Then the one method: warm-up until steady below the common rate (a JIT-cold JVM offered the
full rate at once can fall into an overload it does not leave: the startup scenario shows it) and capped shorter
than elsewhere (a fresh JVM per cell is what makes this scenario long), the common rate for a step, the MST search,
and one step at a low rate with `idle_connections` idle keep-alive connections held beside it. Below a limit at which the JVM did not
start or died before passing the common rate, the smaller limits of that iteration are recorded as not run (less
memory cannot do better). Every
step carries the GC's pause time share and longest pause in its window (-Xlog:gc); a cell records whether the JVM
started, and whether it died (the kernel's OOM kills in the group, an OutOfMemoryError in the log: the JVM exits
on one, -XX:+ExitOnOutOfMemoryError). The headline: the smallest limit at which a port passed the common rate in
every iteration.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
import subprocess
import time
from pathlib import Path
from typing import Iterator

from .. import driver, ports
from ..cgroup import MemoryLimit
from ..errors import Fatal
from ..method.record import Mst, Step, steps_of, warmups_text
from ..method.runset import RunSet
from ..method.spans import cell, ms, num, span, spread
from ..paths import BUILD
from ..session import Context, baseline_msts, choose_rate
from ..report import charts, table
from ..report.section import Decision, Section

GC_LOGS = BUILD / "memory"
PAUSE = re.compile(r"^\[(?P<t>\d+(?:\.\d+)?)s\].*\bPause\b.*?(?P<ms>\d+(?:\.\d+)?)ms\s*$")
NMT_CATEGORY = re.compile(r"^-\s+(?P<name>[A-Za-z][\w ]*?)\s+\(reserved=\d+KB, committed=(?P<kb>\d+)KB")
NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(?P<kb>\d+)KB")
NMT_THREADS = re.compile(r"^\(threads #(?P<n>\d+)\)")
# what the table shows of the JVM's own account (-XX:NativeMemoryTracking=summary), in MiB committed
NMT_SHOWN = ("Java Heap", "Metaspace", "Class", "Thread", "Code", "GC", "Other", "Total")
OOM_KIND = re.compile(r"OutOfMemoryError(?::\s*(?P<kind>[^\n]*))?")
HEAP_MAX = re.compile(r"Heap Max Capacity: (?P<n>\d+(?:\.\d+)?)(?P<unit>[KMG])")
DIED_IN = re.compile(r"exited during an? (?P<phase>[\w-]+) step")      # target.AppExited's message: the step it died in


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [memory]."""
    limits_mb: list[int]
    max_ram_percentage: float
    rate: int                    # the cap of the common rate: min(rate, mst_fraction x the lowest baseline MST)
    mst_fraction: float


def checked(plan: Plan) -> Plan:
    if not plan.limits_mb or min(plan.limits_mb) < 32:
        raise Fatal("bench.toml [memory]: limits_mb must be a non-empty list of sizes >= 32 (MiB)")
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


def common_outcome(record: dict) -> str:
    """"pass"; "fail" (the JVM did not start, died, or failed the common rate once warm); or "unsettled" (it failed
    the common rate before its warm-up had settled: a JIT still compiling, not the limit, may be the cause)."""
    if _common_passed(record):
        return "pass"
    if record.get("skipped") or fatal_to_jvm(record) or (record.get("warmup") or {}).get("settled"):
        return "fail"
    return "unsettled"


def descent(cells: dict[int, list[dict]]) -> tuple[int | None, int | None]:
    """(the smallest limit at which the common rate passed in every iteration, and at every larger limit too;
    the limit where the descent stopped without a verdict: a failure there came only before a settled warm-up)."""
    passing = None
    for limit in sorted(cells, reverse=True):
        outcomes = {common_outcome(r) for r in cells[limit]}
        if cells[limit] and outcomes == {"pass"}:
            passing = limit
            continue
        return passing, (limit if "fail" not in outcomes else None)
    return passing, None


def fatal_to_jvm(record: dict) -> bool:
    """The JVM did not start, or died before it passed the common rate: a smaller limit cannot do better. A JVM
    that passed the common rate and died later (above it, or under the idle connections) leaves the smaller limits
    worth running: the common rate may still pass there."""
    if record.get("start_failure"):
        return True
    return bool(record.get("died") or record.get("oom_kills")) and not _common_passed(record)


def idle_outcome(record: dict) -> str | None:
    """How a cell's idle-connections step ended: "held" (it passed the rule), "failed" (it did not), "OOM-killed"
    or "died" (the JVM died during it: the kernel's OOM kill in the group, else another death); None when the cell
    never reached it (it did not start, or died or was interrupted before)."""
    if idle := _cell_of(record).get("idle"):
        return "held" if idle.get("passed") else "failed"
    if (m := DIED_IN.search(record.get("died") or "")) and m["phase"] == "idle":
        return "OOM-killed" if record.get("oom_kills") else "died"
    return None


def idle_failures(records: list[dict], there: str = "") -> tuple[str, str] | None:
    """What the cells of one limit that did not hold the idle connections did, counted, and the idle steps'
    failures: ("OOM-killed in 3 of 3", ""), ("failed the rule in 2 of 3", "rate not reached"); `there` (" there")
    goes after the verb. None when every cell held them."""
    outcomes = [idle_outcome(r) for r in records]
    if outcomes.count("held") == len(records):
        return None
    n = len(records)
    reasons = sorted({s.get("failure") or "failed" for r in records if idle_outcome(r) == "failed"
                      for s in _cell_of(r).get("steps", []) if s.get("phase") == "idle" and not s.get("passed")})
    words = {"OOM-killed": "OOM-killed", "died": "died", "failed": "failed the rule", None: "did not reach it"}
    parts = [f"{words[kind]}{there} in {outcomes.count(kind)} of {n}" for kind in words if outcomes.count(kind)]
    return ", ".join(parts), ", ".join(reasons)


def _idle_cell(records: list[dict]) -> str:
    """The table's idle column: how many cells held the idle connections, and how many the JVM died in."""
    outcomes = [idle_outcome(r) for r in records]
    if not any(outcomes):
        return "–"
    n = len(records)
    deaths = [f"{kind} in it {outcomes.count(kind)}/{n}" for kind in ("OOM-killed", "died") if kind in outcomes]
    return "; ".join([f"held {outcomes.count('held')}/{n}", *deaths])


def _cell_of(record: dict) -> dict:
    """A record's one cell ({} where the JVM did not start or was not run)."""
    return (record.get("cells") or [{}])[0]


def _common_passed(record: dict) -> bool:
    return any(s.get("phase") == "common" and s.get("passed") for s in _cell_of(record).get("steps", []))


# --- measuring ----------------------------------------------------------------------------------------------------

def run(ctx: Context, selected: list[ports.Port]) -> None:
    from .. import compose
    plan = checked(ctx.plan(Plan))
    if compose.enabled() or ctx.settings["load"]["target_host"] not in ("127.0.0.1", "localhost"):
        raise Fatal("memory puts a process the harness starts itself into a cgroup: run it locally")
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
        jvm.say(f"up in {jvm.record['startup_s']} s, heap {jvm.record['heap_max_mb']} MiB, "
                f"{jvm.record['idle_rss_mb']} MiB at idle")
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


# --- the report ---------------------------------------------------------------------------------------------------

def _common_cell(records: list[dict]) -> str:
    outcomes = [common_outcome(r) for r in records]
    unsettled = outcomes.count("unsettled")
    return f"pass {outcomes.count('pass')}/{len(records)}" + (f"; {unsettled} before a settled warm-up" if unsettled else "")


def _cells(records: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in records:
        if r.get("status") != "partial":        # run to its end: complete, died, not started or skipped
            out.setdefault(r["jvm"]["limit_mb"], []).append(r)
    return dict(sorted(out.items(), reverse=True))


def _steps(records: list[dict], phase: str) -> list[Step]:
    return [s for r in records for s in steps_of(r, phase)]


def _msts(records: list[dict]) -> list[Mst]:
    return [Mst.from_json(_cell_of(r)["mst"]) for r in records if _cell_of(r).get("mst")]


def _outcome(records: list[dict], sep: str = "; ") -> str:
    n = len(records)
    skipped = sum(1 for r in records if r.get("skipped"))
    failed = sum(1 for r in records if r.get("start_failure"))
    died = sum(1 for r in records if r.get("died"))
    oom = sum(1 for r in records if r.get("oom_kills"))
    error = sum(1 for r in records if r.get("out_of_memory_error"))
    parts = [f"not run {skipped}/{n} (died at a larger limit)" if skipped else "",
             f"did not start {failed}/{n}" if failed else "", f"died {died}/{n}{died_in(records)}" if died else "",
             f"OOM-killed {oom}/{n}" if oom else "", f"OutOfMemoryError {error}/{n}" if error else ""]
    return sep.join(p for p in parts if p) or "ran"


# the driver's phase names (target.AppExited's message) as a reader says them
PHASE_WORDS = {"warmup-closed": "the closed-loop warm-up", "warmup": "the warm-up", "common": "the common step",
               "mst": "the search", "idle": "the idle step"}


def died_in(records: list[dict]) -> str:
    """Where the JVMs that died did, counted: " (3 in the closed-loop warm-up)"; "" where no message names a step.
    A death in the closed-loop warm-up came under a load above the common rate, before the common step."""
    counts = collections.Counter(PHASE_WORDS.get(m["phase"], f"a {m['phase']} step") for r in records
                                 if (m := DIED_IN.search(r.get("died") or "")))
    return f" ({', '.join(f'{k} in {phase}' for phase, k in counts.items())})" if counts else ""


def limit_below(cells: dict[int, list[dict]], limit: int) -> int | None:
    """The largest limit under `limit` at which a JVM ran (started, or tried to), None where none did."""
    return max((m for m, records in cells.items() if m < limit and not all(r.get("skipped") for r in records)),
               default=None)


def per_mib_cell(records: list[dict]) -> str:
    """The table's req/s per MiB: "–" where the MST is a lower bound (≥: a bound enters no ratio), else the figure
    over the iterations that confirmed a bounded MST, their count shown when fewer than those searched."""
    msts = _msts(records)
    found = table.mst_spread(msts)
    if found is None or found.at_least:
        return "–"
    return span(spread(per_mib(records), of=len(msts)), lambda v: num(v, 1))


def resolution(records: list[dict], settings: dict, search: dict) -> str:
    """What the memory search's MST resolves, from the probes recorded: it is the highest probed rate that passed
    twice, and the limit lies between it and the lowest probed rate that failed (✗), however far apart the few
    probes left them; the search is not bisected to the rule's precision as elsewhere. Runs without a probe cap
    (issue 34) used the one search: bisected, its precision stated by the report."""
    gaps = [((m.first_failing_rps - m.rps) / m.rps, r.get("port"), m) for r in records
            if (m := Mst.from_json(_cell_of(r).get("mst"))) and m.confirmed and m.first_failing_rps]
    probes, confirm = settings.get("mst_max_probes"), settings.get("mst_confirm_probes")
    if not probes:      # issue 34: the one search, bisected to its precision (its line follows the section)
        return ("MST: the highest rate that passed twice, searched as in every section (from the port's baseline "
                "MST, bisected to the precision stated below).")
    budget = (f" ({num(probes)} probes, more while none passed, and {num(confirm)} confirmations"
              + (f", stepping by a growing factor from ×{search['growth']:g}" if search.get("growth") else "")
              + ")" if probes else "")
    text = (f"MST: the highest of the probed rates that passed twice; the search here is short{budget} and not "
            "bisected" + (f" to {100 * search['precision']:g} %" if search.get("precision") else "") + " as elsewhere, "
            "so the limit lies between the MST and the lowest probed rate that failed (✗)")
    if not gaps:
        return text + "."
    widest, port, m = max(gaps, key=lambda g: g[0])
    return (text + f", {num(100 * min(g[0] for g in gaps))}–{num(100 * widest)} % apart here (widest: {port} "
            f"{num(m.rps)} ✗ {num(m.first_failing_rps)}): two MSTs within that gap are not told apart.")


def warmed_up(records: list[dict]) -> str:
    """The uncapped warm-up (issue 34): each cell's JVM until steady, as in every scenario."""
    warm = [w for r in records if (w := r.get("warmup")) and w.get("seconds") is not None]
    if not warm:
        return ""
    return (f"Each cell's JVM warms up until steady ([warmup], as in every scenario): {warmups_text(warm)}; compare "
            "limits within a port, and the baseline for MSTs.")


def per_mib(records: list[dict]) -> list[float | None]:
    """Requests per second per MiB of peak RSS at the confirmed MST."""
    out = []
    for r in records:
        mst = Mst.from_json(_cell_of(r).get("mst"))
        at = [Step.from_json(s) for s in _cell_of(r).get("steps", [])
              if mst and mst.confirmed and s.get("target_rps") == mst.rps and s.get("passed")]
        rss = max((s.app_rss_mb_peak or 0 for s in at), default=0)
        out.append(round(mst.rps / rss, 1) if at and rss and mst.bounded else None)
    return out


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    by = {label: _cells(records) for label, records in rs.by_label.items()}
    if not any(by.values()):
        return None
    rate = next((s["target_rps"] for r in rs.records for s in _cell_of(r).get("steps", [])
                 if s.get("phase") == "common"), None)
    percentage = next((o.split("=")[1] for r in rs.records for o in r.get("jvm_options") or []
                       if o.startswith("-XX:MaxRAMPercentage")), "?")
    warmup_cap = max((w.get("seconds") or 0 for r in rs.records if (w := r.get("warmup"))), default=None)
    iterations = sorted({len(v) for cells in by.values() for v in cells.values()})
    idle_n = rs.plan.get("idle_connections")
    idle_words = f"{num(idle_n)} idle keep-alive connections" if idle_n else "the idle keep-alive connections"
    body = [f"Each port in a memory cgroup of the size shown (swap included), a fresh JVM per cell, its heap "
            f"{percentage} % of the limit (`-XX:MaxRAMPercentage`), G1 as everywhere; "
            f"{'–'.join(map(str, iterations))} iteration(s) (run {', '.join(rs.run_ids)}). The common rate is "
            f"{num(rate)} req/s" + (f", set by {basis}" if (basis := rs.records[0].get("rate_basis")) else "")
            + f". {resolution(rs.records, rs.plan, rs.settings('search'))} "
            "req/s per MiB: the confirmed MST over the peak RSS at it; – where the MST is a lower bound (≥: a bound "
            "enters no ratio). GC: the stop-the-world pause share of the common step's window and its longest pause "
            f"(-Xlog:gc). Idle: a step at a low rate with {idle_words} beside it. "
            + (f"The warm-up is capped (it lasted at most {num(warmup_cap)} s here; the baseline warms up until steady) so that "
               "a fresh JVM per cell fits an hour: compare limits within a port, and the baseline for MSTs."
               if rs.plan.get("warmup_max_seconds") else warmed_up(rs.records)),
            ""]
    header = ["port", "limit (MiB)", "heap (MiB)", "outcome", f"{num(rate)} req/s", "p99 (ms)", "MST (req/s)", "GC pause share",
              "longest pause (ms)", "RSS peak (MiB)", "req/s per MiB", f"{num(idle_n)} idle" if idle_n else "idle"]
    rows = []
    for label, cells in by.items():
        for limit, records in cells.items():
            common = _steps(records, "common")
            rows.append([label, f"{limit:,}", cell(r.get("heap_max_mb") for r in records), _outcome(records),
                         _common_cell(records), cell((s.p99 for s in common), ms),
                         table.mst_cell(_msts(records)) if _msts(records) else "–",
                         cell((s.extra.get("gc_pause_share") * 100 for s in common
                               if s.extra.get("gc_pause_share") is not None), lambda v: f"{v:.1f} %"),
                         cell((s.extra.get("gc_pause_max_ms") for s in common), ms),
                         cell(max((s.app_rss_mb_peak or 0 for s in steps_of(r)), default=None) for r in records),
                         per_mib_cell(records), _idle_cell(records)])
    body += table.markdown(header, rows, text_columns=4) + [""]
    series = {label: [(limit, table.mst_spread(_msts(records)))
                      for limit, records in cells.items()] for label, cells in by.items()}
    body += charts.link("MST against the memory limit, per port", charts.lines(
        chart_dir / "memory-mst.png", "MST against the container's memory limit", "memory limit (MiB, log)",
        "MST (req/s)", series, logx=True))
    p99 = {label: [(limit, spread(s.p99 for s in _steps(records, "common"))) for limit, records in cells.items()]
           for label, cells in by.items()}
    body += charts.link(f"p99 at {num(rate)} req/s against the memory limit", charts.lines(
        chart_dir / "memory-p99.png", f"p99 at {num(rate)} req/s against the memory limit", "memory limit (MiB, log)",
        "p99 (ms, log)", p99, logx=True, logy=True))
    body += where_memory_goes(by)
    descents = {label: descent(cells) for label, cells in by.items()}
    smallest = {label: d[0] for label, d in descents.items()}
    open_at = {label: d[1] for label, d in descents.items() if d[1]}
    body += ["Smallest limit at which the port passed the common rate in every iteration (and at every larger one): "
             + "; ".join(f"{label} {num(v)} MiB" if v else f"{label} none" for label, v in smallest.items()) + "."
             + (" Not determined below that: " + "; ".join(
                 f"{label} at {num(at)} MiB" for label, at in open_at.items())
                + " (the common rate failed there only in cells whose warm-up, which lasted at most "
                f"{num(warmup_cap)} s here, had not settled: a JIT still compiling, not the limit, may be the cause)."
                if open_at else ""), ""]
    decisions, verdict = [], []
    known = {label: v for label, v in smallest.items() if v}
    # the criterion is the common rate; what the same limit then did with the idle connections is the verdict's
    # (beside each limit) and the table's idle column: the row names the ports and the limit only (issue 34: no
    # cell over 220 characters)
    there = {label: idle_failures(by[label][v], " there") for label, v in known.items()}
    beside = f"{num(idle_n)} idle connections" if idle_n else "the idle connections"
    if known:
        least = min(known.values())
        best = [label for label, v in known.items() if v == least]
        decisions.append(Decision("Memory-limited containers (the smallest limit passing the common rate)",
                                  "heap, metaspace, thread stacks and buffers under the limit",
                                  f"{', '.join(best)} at {least:,} MiB"
                                  + (f"; not determined: {', '.join(open_at)}" if open_at else ""),
                                  f"-XX:MaxRAMPercentage={percentage}"))
        verdict.append(f"Under a container's memory limit, the smallest limit passing {num(rate)} req/s in every run was "
                       + "; ".join(f"{num(v)} MiB for {label}" + (" (not determined below it)" if label in open_at else "")
                                   + (f" ({there[label][0]} with {beside}"
                                      + (f": {there[label][1]})" if there[label][1] else ")") if there[label] else "")
                                   for label, v in sorted(known.items(), key=lambda kv: kv[1]))
                       + (f"; {', '.join(l for l, v in smallest.items() if not v and l not in open_at)} passed at "
                          "none of the limits" if any(not v and l not in open_at for l, v in smallest.items()) else "")
                       + ".")
    # what the next limit down did, where it was run: a death in the warm-up's closed loop came before the common
    # rate was offered, under a heavier load
    below = {label: lower for label, v in known.items() if (lower := limit_below(by[label], v))}
    if below:
        verdict.append("One limit lower: " + "; ".join(
            f"{label} at {num(lower)} MiB {_outcome(by[label][lower], sep=', ')}" for label, lower in below.items())
            + ".")
    if open_at:
        verdict.append("Not determined by these runs: " + ", ".join(open_at) + " (the common rate failed only before "
                       "the warm-up had settled" + ("; the scenario's warm-up is capped to fit its fresh JVM per cell)."
                                                    if rs.plan.get("warmup_max_seconds") else ")."))
    return Section("Memory-limited containers", rs.scenario, body, appendix=appendix(by), decisions=decisions,
                   verdict=verdict, warnings=rs.warnings)


def where_memory_goes(by: dict[str, dict[int, list[dict]]]) -> list[str]:
    """The JVM's own account (NMT) after the common step, else right after start, beside the group's peak and how
    the cell ended: what filled each limit."""
    header = ["port", "limit (MiB)", *[f"{c} (MiB)" if c != "Thread" else "thread stacks (MiB)" for c in NMT_SHOWN],
              "threads", "cgroup peak (MiB)", "<ended"]
    rows = []
    for label, cells in by.items():
        for limit, records in cells.items():
            ran = [r for r in records if not r.get("skipped")]
            accounts = [(nmt := r.get("nmt") or {}).get("common") or nmt.get("started") or {} for r in ran]
            if not any(accounts):
                continue
            kinds = sorted({r["out_of_memory_kind"] for r in ran if r.get("out_of_memory_kind")})
            rows.append([label, f"{limit:,}", *[cell(a.get(c) for a in accounts if a) for c in NMT_SHOWN],
                         cell(a.get("threads") for a in accounts if a), cell(r.get("cgroup_peak_mb") for r in ran),
                         "; ".join(filter(None, [_outcome(records),
                                                 ", ".join(f"OutOfMemoryError: {k}" for k in kinds)]))])
    if not rows:
        return []
    return ["Where the memory goes: the JVM's own account (`-XX:NativeMemoryTracking=summary`, committed MiB, after the "
            "common step, else right after start) beside the cgroup's peak charge (which also counts the page cache "
            "the process touched); \"Other\" holds direct (NIO) buffers, \"Thread\" the stacks.", "",
            *table.markdown(header, rows, text_columns=2), ""]


def appendix(by: dict[str, dict[int, list[dict]]]) -> list[str]:
    out = ["## Memory: every step", ""]
    for label, cells in by.items():
        for limit, records in cells.items():
            out += [f"### memory: {label}, {limit:,} MiB", ""]
            for r in records:
                if r.get("skipped"):
                    out += [f"**Iteration {r.get('iteration')}**: {r['skipped']}", ""]
                    continue
                out += [f"**Iteration {r.get('iteration')}**: {_outcome([r])}; cgroup peak {num(r.get('cgroup_peak_mb'))} "
                        f"MiB" + (f"; {r['start_failure'] or r['died']}" if r.get("start_failure") or r.get("died") else ""),
                        ""]
                out += table.step_table(steps_of(r),
                                        (("GC %", lambda s: f"{(s.extra.get('gc_pause_share') or 0) * 100:.1f}"),
                                         ("longest GC ms", lambda s: ms(s.extra.get("gc_pause_max_ms"))), "threads"))
    return out

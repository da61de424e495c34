"""memory's part of the report: per port and memory limit whether it passed the common rate, its MST, GC pauses,
RSS and what filled the limit (the JVM's own account); the headline is the smallest limit passing everywhere."""
from __future__ import annotations

import collections
import re
from pathlib import Path

from ...method.memory import cell_of, common_passed, fatal_to_jvm
from ...method.record import Mst, Step, steps_of, warmups_text
from ...method.runset import RunSet
from ...method.spans import cell, ms, num, span, spread
from .. import charts, table
from ..section import Decision, Regime, Section, text

# what the table shows of the JVM's own account (-XX:NativeMemoryTracking=summary), in MiB committed
NMT_SHOWN = ("Java Heap", "Metaspace", "Class", "Thread", "Code", "GC", "Other", "Total")
DIED_IN = re.compile(r"exited during an? (?P<phase>[\w-]+) step")      # target.AppExited's message: the step it died in


def common_outcome(record: dict) -> str:
    """"pass"; "fail" (the JVM did not start, died, or failed the common rate once warm); or "unsettled" (it failed
    the common rate before its warm-up had settled: a JIT still compiling, not the limit, may be the cause)."""
    if common_passed(record):
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


def idle_outcome(record: dict) -> str | None:
    """How a cell's idle-connections step ended: "held" (it passed the rule), "failed" (it did not), "OOM-killed"
    or "died" (the JVM died during it: the kernel's OOM kill in the group, else another death); None when the cell
    never reached it (it did not start, or died or was interrupted before)."""
    if idle := cell_of(record).get("idle"):
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
                      for s in cell_of(r).get("steps", []) if s.get("phase") == "idle" and not s.get("passed")})
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


def _common_cell(records: list[dict]) -> str:
    outcomes = [common_outcome(r) for r in records]
    unsettled = outcomes.count("unsettled")
    return f"pass {outcomes.count('pass')}/{len(records)}" + (f"; {unsettled} before a settled warm-up" if unsettled else "")


def heap_percentage(record: dict) -> str:
    """The record's heap as a share of its limit: its -XX:MaxRAMPercentage, else (a limit not run) its settings'."""
    planned = ((record.get("environment") or {}).get("settings") or {}).get("memory", {}).get("max_ram_percentage")
    return next((o.split("=")[1] for o in record.get("jvm_options") or [] if o.startswith("-XX:MaxRAMPercentage")),
                f"{planned:g}" if planned is not None else "?")


def by_heap(rs: RunSet) -> tuple[dict[str, dict[int, list[dict]]], dict[str, tuple[str, str]], list[str]]:
    """The cells per row label, each label's (port, heap percentage), and the percentages run (largest first): the
    label is the port, or "port, heap P %" where the run set measured more than one share of the limit."""
    shares = sorted({heap_percentage(r) for r in rs.records}, key=lambda p: -float(p) if p != "?" else 0.0)
    by, of = {}, {}
    for port, records in rs.by_label.items():
        for p in shares:
            label = port if len(shares) == 1 else f"{port}, heap {p} %"
            if cells := _cells([r for r in records if heap_percentage(r) == p]):
                by[label], of[label] = cells, (port, p)
    return by, of, shares


def _cells(records: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for r in records:
        if r.get("status") != "partial":        # run to its end: complete, died, not started or skipped
            out.setdefault(r["jvm"]["limit_mb"], []).append(r)
    return dict(sorted(out.items(), reverse=True))


def _steps(records: list[dict], phase: str) -> list[Step]:
    return [s for r in records for s in steps_of(r, phase)]


def _msts(records: list[dict]) -> list[Mst]:
    return [Mst.from_json(cell_of(r)["mst"]) for r in records if cell_of(r).get("mst")]


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
    used the one search: bisected, its precision stated by the report."""
    gaps = [((m.first_failing_rps - m.rps) / m.rps, r.get("port"), m) for r in records
            if (m := Mst.from_json(cell_of(r).get("mst"))) and m.confirmed and m.first_failing_rps]
    probes, confirm = settings.get("mst_max_probes"), settings.get("mst_confirm_probes")
    if not probes:      # the one search, bisected to its precision (its line follows the section)
        return ("MST: the highest rate that passed twice, searched as in every section (from the port's baseline "
                "MST, bisected to the precision stated below).")
    budget = (f" ({num(probes)} probes, more while none passed, and {num(confirm)} confirmations"
              + (f", stepping by a growing factor from ×{search['growth']:g}" if search.get("growth") else "")
              + ")")
    sentence = (f"MST: the highest of the probed rates that passed twice; the search here is short{budget} and not "
                "bisected" + (f" to {100 * search['precision']:g} %" if search.get("precision") else "")
                + " as elsewhere, so the limit lies between the MST and the lowest probed rate that failed (✗)")
    if not gaps:
        return sentence + "."
    widest, port, m = max(gaps, key=lambda g: g[0])
    return (sentence + f", {num(100 * min(g[0] for g in gaps))}–{num(100 * widest)} % apart here (widest: {port} "
            f"{num(m.rps)} ✗ {num(m.first_failing_rps)}): two MSTs within that gap are not told apart.")


def warmed_up(records: list[dict]) -> str:
    """The uncapped warm-up: each cell's JVM until steady, as in every scenario."""
    warm = [w for r in records if (w := r.get("warmup")) and w.get("seconds") is not None]
    if not warm:
        return ""
    return (f"Each cell's JVM warms up until steady ([warmup], as in every scenario): {warmups_text(warm)}; compare "
            "limits within a port, and the baseline for MSTs.")


def per_mib(records: list[dict]) -> list[float | None]:
    """Requests per second per MiB of peak RSS at the confirmed MST."""
    out = []
    for r in records:
        mst = Mst.from_json(cell_of(r).get("mst"))
        at = [Step.from_json(s) for s in cell_of(r).get("steps", [])
              if mst and mst.confirmed and s.get("target_rps") == mst.rps and s.get("passed")]
        rss = max((s.app_rss_mb_peak or 0 for s in at), default=0)
        out.append(round(mst.rps / rss, 1) if at and rss and mst.bounded else None)
    return out


def heap_setting(chosen: list[str], shares: list[str]) -> str:
    """The decision's setting: the heap share(s) of the ports it names, and which other shares were run."""
    chosen = list(dict.fromkeys(chosen))
    others = [p for p in shares if p not in chosen]
    said = f"-XX:MaxRAMPercentage={' or '.join(chosen)}"
    if others:
        return f"{said} (as run; also run: {', '.join(others)})"
    return f"{said} (as run; no other fraction measured)" if len(shares) == 1 else f"{said} (each as run)"


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    by, of, shares = by_heap(rs)
    if not any(by.values()):
        return None
    rate = next((s["target_rps"] for r in rs.records for s in cell_of(r).get("steps", [])
                 if s.get("phase") == "common"), None)
    percentage = " or ".join(shares)
    warmup_cap = max((w.get("seconds") or 0 for r in rs.records if (w := r.get("warmup"))), default=None)
    iterations = sorted({len(v) for cells in by.values() for v in cells.values()})
    idle_n = rs.plan.get("idle_connections")
    idle_words = f"{num(idle_n)} idle keep-alive connections" if idle_n else "the idle keep-alive connections"
    basis = rs.records[0].get("rate_basis")
    capped = text("memory-warmup-capped").format(cap=num(warmup_cap))
    body = [text("memory-method").format(
        percentage=percentage, iterations="–".join(map(str, iterations)), runs=", ".join(rs.run_ids), rate=num(rate),
        basis=f", set by {basis}" if basis else "", resolution=resolution(rs.records, rs.plan, rs.settings("search")),
        idle=idle_words, warmup=capped if rs.plan.get("warmup_max_seconds") else warmed_up(rs.records)), ""]
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
        chart_dir / "memory-mst.png", "MST against the container's memory limit", "memory limit (MiB)",
        "MST (req/s)", series))
    p99 = {label: [(limit, spread(s.p99 for s in _steps(records, "common"))) for limit, records in cells.items()]
           for label, cells in by.items()}
    body += charts.link(f"p99 at {num(rate)} req/s against the memory limit", charts.lines(
        chart_dir / "memory-p99.png", f"p99 at {num(rate)} req/s against the memory limit", "memory limit (MiB)",
        "p99 (ms, log)", p99, logy=True))
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
    # (beside each limit) and the table's idle column: the row names the ports and the limit only (no cell over
    # 220 characters)
    there = {label: idle_failures(by[label][v], " there") for label, v in known.items()}
    beside = f"{num(idle_n)} idle connections" if idle_n else "the idle connections"
    if known:
        least = min(known.values())
        best = [label for label, v in known.items() if v == least]
        decisions.append(Decision("Memory-limited containers (the smallest limit passing the common rate)",
                                  "heap, metaspace, thread stacks and buffers under the limit",
                                  f"{', '.join(best)} at {least:,} MiB"
                                  + "".join(f" ({label} {there[label][0]} with {beside})" for label in best
                                            if there[label])
                                  + (f"; not determined: {', '.join(open_at)}" if open_at else ""),
                                  heap_setting([of[label][1] for label in best], shares)))
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
    # the matrix's row is per port: at the largest share run (the scenario's default), the others in the section
    main = [label for label in smallest if of[label][1] == shares[0]]
    figures = {of[label][0]: spread([known[label]]) for label in main if label in known}
    notes = {of[label][0]: ("not determined", None) if label in open_at else ("passed at no limit", 0.0)
             for label in main if label not in known}
    remarks = {of[label][0]: f"{there[label][0]} with {beside}" for label in main if label in known and there[label]}
    regimes = [Regime(f"Container memory limit, {num(rate)} req/s", "the smallest limit passing the rate in every "
                      "run, and at every larger one", figures, "MiB", higher_is_better=False, notes=notes,
                      remarks=remarks, setting=f"heap {shares[0]} % of the limit (`-XX:MaxRAMPercentage`), as run")] \
        if figures else []
    return Section("Memory-limited containers", rs.scenario, body, appendix=appendix(by), decisions=decisions,
                   verdict=verdict, warnings=rs.warnings, regimes=regimes)


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
    return [text("memory-where"), "",
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

"""The baseline's ladder: the same fixed rates for every port, after its warm-up and before its search. From it, CPU
per request against the rate relative to the reference port at each rung (the figure that replicates across
machines), latency against load, and the latency distribution at the common rate. Only ladder steps draw the
curves, so no line joins the search's probes of different JVMs."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

from .. import port_facts, settings as settings_mod
from ..method.record import Step, steps_of
from ..method.rule import GENERATOR
from ..method.runset import scenario_of
from ..method.spans import Spread, ms, num, span, spread
from . import charts, table

PHASE = "ladder"
QUANTILES = ("p50", "p99", "p99.9")
EVEN = "even"            # a step that names no arrival process ran under even ones (openloop names every other)
SPACING = {"even": "request i at i ÷ rate, released in batches of at most 1 ms",   # how each process spaces requests
           "poisson": "exponential gaps of the same mean rate: many independent users"}


def process(step: dict) -> str:
    return step.get("arrivals") or EVEN


def main_process(by: dict[str, list[dict]]) -> str:
    """The arrival process every figure is drawn from: the run set's own, as its settings name it."""
    first = next((r for records in by.values() for r in records), {})
    return settings_mod.arrivals((first.get("environment") or {}).get("settings") or {}, scenario_of(first))


def under(records: list[dict], arrivals: str) -> list[dict]:
    """The records with their ladder rungs of one arrival process only (a JVM that ran the ladder under two,
    [baseline] ladder_arrivals, holds both); every other step as it was."""
    def cell(c: dict) -> dict:
        return {**c, "steps": [s for s in c.get("steps", []) if s.get("phase") != PHASE or process(s) == arrivals]}
    return [{**r, "cells": [cell(c) for c in r.get("cells", [])]} if "cells" in r else r for r in records]


def main(by: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Per port, its records with the ladder of the main arrival process only: what every figure below reads."""
    arrivals = main_process(by)
    return {name: under(records, arrivals) for name, records in by.items()}


def processes(by: dict[str, list[dict]]) -> list[str]:
    """The arrival processes the records' ladders ran under, the main one first."""
    seen = {process(s) for rs in by.values() for r in rs for c in r.get("cells", []) for s in c.get("steps", [])
            if s.get("phase") == PHASE}
    first = main_process(by)
    return sorted(seen, key=lambda p: (p != first, p))


def total_cpu(s: Step) -> float:
    """µs of CPU per request on the shared cores: app + database + generator."""
    return sum(v or 0 for v in (s.app_cpu_us_per_request, s.db_cpu_us_per_request, s.generator_cpu_us_per_request))


def app_cpu(s: Step) -> float | None:
    return s.app_cpu_us_per_request


PARTS = {"app": ("the app's CPU", app_cpu), "total": ("app + database + generator CPU", total_cpu)}


def laddered(records: list[dict]) -> list[dict]:
    """The records that ran a ladder (older ones did not)."""
    return [r for r in records if steps_of(r, PHASE)]


def rates(by: dict[str, list[dict]]) -> list[float]:
    return sorted({s.target_rps for records in by.values() for r in records for s in steps_of(r, PHASE)})


def own_failure(s: Step) -> bool:
    """The port failed the rung itself (a generator that fell behind says nothing of the port)."""
    return not s.passed and s.failure != GENERATOR


def held(by: dict[str, list[dict]]) -> list[float]:
    """The rungs no run of any port failed itself, and every port passed in some run: the rates at which the ports
    are compared (a rung a run did not reach, or whose generator fell behind, leaves that run's figure out there)."""
    ladders = [r for rs in by.values() for r in laddered(rs)]
    if not ladders:
        return []
    failed = {s.target_rps for r in ladders for s in steps_of(r, PHASE) if own_failure(s)}
    passed = [{s.target_rps for r in laddered(rs) for s in steps_of(r, PHASE) if s.passed}
              for rs in by.values() if laddered(rs)]
    return sorted(set.intersection(*passed) - failed)


def reference(by: dict[str, list[dict]]) -> str | None:
    """The port relative figures divide by: port_facts.reference() where it ran a ladder, else the first that did."""
    with_ladder = [n for n, rs in by.items() if laddered(rs)]
    ref = port_facts.reference()
    return ref if ref in with_ladder else next(iter(with_ladder), None)


def at_rung(records: list[dict], rate: float) -> list[Step]:
    return [s for r in records for s in steps_of(r, PHASE) if s.target_rps == rate]


def reference_medians(by: dict[str, list[dict]], rungs: list[float], part: str = "app",
                      run: str | None = None) -> dict[float, float]:
    """The reference port's median CPU per request at each of `rungs` over its passed steps: those of `run` where the
    reference ran a ladder in it (a set run in parts on a machine whose speed drifts between them: each part is
    divided by its own reference), else of all its runs; a rung without one is left out (none where no CPU was read:
    an app on another host)."""
    ref, value = reference(by), PARTS[part][1]
    if ref is None:
        return {}
    records = [r for r in laddered(by[ref]) if r.get("run_id") == run] or by[ref]
    return {rate: statistics.median(vs) for rate in rungs
            if (vs := [v for s in at_rung(records, rate) if s.passed and (v := value(s))])}


def medians_by_run(by: dict[str, list[dict]], rungs: list[float], part: str = "app") -> dict[str | None, dict]:
    """reference_medians for each run that ran a ladder: what each of its records is divided by."""
    return {run: reference_medians(by, rungs, part, run)
            for run in {r.get("run_id") for rs in by.values() for r in laddered(rs)}}


def anchored(by: dict[str, list[dict]]) -> bool:
    """Every run that ran a ladder holds the reference's ladder too: every ratio is taken within one run."""
    ref = reference(by)
    own = {r.get("run_id") for r in laddered(by.get(ref, []))}
    return ref is not None and all(r.get("run_id") in own for rs in by.values() for r in laddered(rs))


def relative(by: dict[str, list[dict]], part: str = "app") -> dict[str, dict[float, Spread]]:
    """Per port and rung: each run's CPU per request ÷ the reference port's median there, in its own run where the
    reference ran in it (the reference's own row shows its spread around 1); a rung some run failed is partial."""
    value, out = PARTS[part][1], {}
    mids = medians_by_run(by, rates(by), part)
    for rate in rates(by):
        for name, records in by.items():
            ratios = [value(s) / mid for r in laddered(records) if (mid := mids[r.get("run_id")].get(rate))
                      for s in at_rung([r], rate) if s.passed and value(s)]
            if sp := spread(ratios, of=len(laddered(records))):
                out.setdefault(name, {})[rate] = sp
    return out


def runs_over_ladder(by: dict[str, list[dict]], part: str = "app") -> dict[str, tuple[list[float], int]]:
    """Per port: per run, the median over the held rungs it passed of its CPU per request ÷ the reference's median
    at that rung, in its own run where the reference ran in it (a median, not a mean: on this VM one rung of one JVM
    can cost 1.7x its neighbours); and how many runs ran a ladder."""
    value, rungs = PARTS[part][1], held(by)
    if not reference_medians(by, rungs, part):
        return {}
    out, mids = {}, medians_by_run(by, rungs, part)
    for name, records in by.items():
        runs = []
        for r in laddered(records):
            mid = mids[r.get("run_id")]
            steps = {s.target_rps: s for s in steps_of(r, PHASE) if s.target_rps in mid and s.passed and value(s)}
            if steps:
                runs.append(statistics.median(value(s) / mid[x] for x, s in steps.items()))
        if laddered(records):
            out[name] = (runs, len(laddered(records)))
    return out


def over_ladder(by: dict[str, list[dict]], part: str = "app") -> dict[str, Spread]:
    """runs_over_ladder's median (min–max) per port."""
    return {name: sp for name, (runs, of) in runs_over_ladder(by, part).items() if (sp := spread(runs, of=of))}


def ratios(by: dict[str, list[dict]], couples: list[tuple[str, str]], part: str = "app") -> dict[tuple[str, str], Spread]:
    """Per (a, b) of `couples`, both with a ladder: each run of a over the ladder ÷ b's median there."""
    runs = runs_over_ladder(by, part)
    out = {}
    for a, b in couples:
        if a in runs and b in runs and runs[b][0]:
            mid = statistics.median(runs[b][0])
            if sp := spread((v / mid for v in runs[a][0]), of=runs[a][1]):
                out[(a, b)] = sp
    return out


def pairs(by: dict[str, list[dict]], part: str = "app") -> dict[tuple[str, str], Spread]:
    """Per model pair (port_facts.model_pairs): ratios(), so the pair's ratio is the model's on one framework."""
    return ratios(by, port_facts.model_pairs(), part)


def variant_pairs(by: dict[str, list[dict]], part: str = "app") -> dict[tuple[str, str], Spread]:
    """Per variant pair (port_facts.variant_pairs): ratios(), so the ratio is the part of the stack the variant
    changes (e.g. JPA against JdbcTemplate), on one model."""
    return ratios(by, port_facts.variant_pairs(), part)


def paired_arrivals(records: list[dict], main: str, other: str, value) -> tuple[dict[float, Spread], Spread | None]:
    """One port's JVMs that ran the ladder under both `main` and `other`: per rung, each JVM's `value` under `other` ÷
    its own under `main` (paired in one JVM: the JIT, the heap and the machine's moment are the same); and per JVM
    the median of those ratios over the rungs it passed under both, median (min–max) over the JVMs."""
    per_rung: dict[float, list[float]] = {}
    per_run = []
    for r in records:
        a = {s.target_rps: s for s in steps_of(under([r], main)[0], PHASE) if s.passed and value(s)}
        b = {s.target_rps: s for s in steps_of(under([r], other)[0], PHASE) if s.passed and value(s)}
        ratios = {x: value(b[x]) / value(a[x]) for x in sorted(set(a) & set(b))}
        for x, v in ratios.items():
            per_rung.setdefault(x, []).append(v)
        if ratios:
            per_run.append(statistics.median(ratios.values()))
    return ({x: sp for x, vs in per_rung.items() if (sp := spread(vs))}, spread(per_run))


def two(v) -> str:
    return num(v, 2)


def cpu_table(by: dict[str, list[dict]], part: str) -> list[str]:
    """Per port: CPU per request ÷ the reference's at each rung, and over the held rungs; a rung not held: its count."""
    rel, whole, all_rates = relative(by, part), over_ladder(by, part), rates(by)
    rows = []
    for name, records in by.items():
        if not (ladders := laddered(records)):
            continue
        row = [name]
        for rate in all_rates:
            steps = at_rung(ladders, rate)
            failed = sum(1 for s in steps if not s.passed)
            cell = span(rel.get(name, {}).get(rate), two) if len(steps) > failed else "–"
            row.append(cell + (f"; failed in {failed} of {len(ladders)}" if failed else "")
                       + (f"; not run in {len(ladders) - len(steps)}" if len(steps) < len(ladders) else ""))
        rows.append(row + [span(whole.get(name), two)])
    return table.markdown(["port", *(f"{num(x)} req/s" for x in all_rates), "over the held rungs"], rows)


def absolute_table(by: dict[str, list[dict]]) -> list[str]:
    """Per port and rung: app CPU µs per request and p99 (ms), median (min–max) of the runs that passed there."""
    def cell(steps: list[Step]) -> str:
        passed = [s for s in steps if s.passed]
        if not passed:
            return "failed" if steps else "–"
        return (f"{span(spread(app_cpu(s) for s in passed))} µs, p99 {span(spread(s.p99 for s in passed), ms)} ms"
                + (f" ({len(passed)} of {len(steps)} passed)" if len(passed) < len(steps) else ""))
    rows = [[name, *(cell(at_rung(records, x)) for x in rates(by))] for name, records in by.items() if laddered(records)]
    return table.markdown(["port", *(f"{num(x)} req/s" for x in rates(by))], rows)


def latency_chart(path: Path, by: dict[str, list[dict]], slo_ms: float) -> Path | None:
    """p50, p99 and p99.9 against the offered rate, one line per port through the medians of the rungs it passed;
    a failed rung is drawn apart (an ✕ at its median), never joined to the line."""
    panels, failed = [], {}
    for q in QUANTILES:
        series = {name: [(x, spread(s.latency_ms.get(q) for s in at_rung(records, x) if s.passed))
                         for x in rates(by)] for name, records in by.items() if laddered(records)}
        panels.append((f"{q} (ms, log)", series))
        failed[q] = {name: [(x, statistics.median(v)) for x in rates(by)
                            if (v := [s.latency_ms.get(q) for s in at_rung(records, x) if not s.passed
                                      and s.latency_ms.get(q) is not None])]
                     for name, records in by.items()}
    return charts.panels(path, "Latency against the offered rate: the ladder's rungs (median, bars min–max; ✕ a rung "
                         "that failed)", "offered rate (req/s)", panels, failed, hline=(slo_ms, f"SLO {slo_ms:g} ms"))


def cpu_chart(path: Path, by: dict[str, list[dict]]) -> Path | None:
    """App CPU µs per request against the offered rate, one line per port (the rungs it passed)."""
    series = {name: [(x, spread(app_cpu(s) for s in at_rung(records, x) if s.passed)) for x in rates(by)]
              for name, records in by.items() if laddered(records)}
    return charts.lines(path, "App CPU per request against the offered rate: the ladder (median, bars min–max)",
                        "offered rate (req/s)", "app CPU µs per request", series)


def percentile_chart(path: Path, by: dict[str, list[dict]], phase: str, rate) -> Path | None:
    """The latency distribution of each port's passed `phase` steps (their HdrHistograms merged over the runs)."""
    merged = {name: h for name, records in by.items()
              if (h := merge([s for r in records for s in steps_of(r, phase)]))}
    if not merged:
        return None
    points = (50, 90, 99, 99.9, 99.99)
    series = {name: [(p, v, *([] if beyond >= ENOUGH_BEYOND else [lo, hi]))
                     for p in points for lo, v, hi, beyond in [quantile_interval(h, p / 100)]]
              for name, h in merged.items()}
    return charts.percentiles(path, f"Latency by percentile at {num(rate)} req/s (the common step's histograms merged "
                              f"over the runs that passed it; bars: the 95 % interval where < {ENOUGH_BEYOND:,} "
                              "requests lie beyond)", series)


ENOUGH_BEYOND = 1000     # a quantile with fewer requests beyond it is shown with its interval


def quantile_interval(h, q: float, z: float = 1.96) -> tuple[float, float, float, int]:
    """The q-quantile of an HdrHistogram in ms with its distribution-free 95 % interval (the order statistics at
    ranks n·q ± z·sqrt(n·q·(1 − q))), and how many requests lie beyond it."""
    n = h.get_total_count()
    half = z * math.sqrt(n * q * (1 - q))
    at = lambda rank: h.get_value_at_percentile(100 * min(max(rank, 0), n) / n) / 1000 if n else 0.0  # noqa: E731
    return at(n * q - half), at(n * q), at(n * q + half), round(n * (1 - q))


def merge(steps: list[Step]):
    """The HdrHistograms of the passed `steps` merged into one (None without any)."""
    from hdrh.histogram import HdrHistogram       # here: only a report with histograms loads it
    hists = [HdrHistogram.decode(s.histogram) for s in steps if s.passed and s.histogram]
    for h in hists[1:]:
        hists[0].add(h)
    return hists[0] if hists else None


def quantile_table(by: dict[str, list[dict]]) -> list[str]:
    """Per port and rung: p99 and p99.9 of every run's requests together, with the 95 % order-statistics interval
    where fewer than ENOUGH_BEYOND requests lie beyond."""
    def text(h, q: float) -> str:
        lo, v, hi, beyond = quantile_interval(h, q)
        return ms(v) + ("" if beyond >= ENOUGH_BEYOND else f" [{ms(lo)}–{ms(hi)}]")
    rows = []
    for name, records in by.items():
        if not laddered(records):
            continue
        cells = []
        for x in rates(by):
            h = merge(at_rung(records, x))
            cells.append(f"{text(h, 0.99)} / {text(h, 0.999)}" if h and h.get_total_count() else "–")
        rows.append([name, *cells])
    return table.markdown(["port", *(f"{num(x)} req/s: p99 / p99.9 (ms)" for x in rates(by))], rows)


def named(items: dict[str, Spread]) -> dict[str, Spread]:
    """The same figures under each port's label (its stack said where it sets the port apart)."""
    return {port_facts.labelled(n): s for n, s in items.items()}


def section_lines(by: dict[str, list[dict]], chart_dir: Path, common_rate) -> list[str]:
    """The baseline section's ladder part: the relative and absolute tables and the charts drawn from the ladder."""
    if not (ref := reference(by)):
        return []
    rungs = held(by)
    slo = next((s.slo_ms for rs in by.values() for r in rs for s in steps_of(r, PHASE) if s.slo_ms), 50.0)
    arrivals = main_process(by)
    out = ["### CPU per request and latency against load: the ladder", "",
           f"Every port at the same fixed rates ({', '.join(num(x) for x in rates(by))} req/s; {arrivals} arrivals: "
           f"{SPACING[arrivals]}), lowest first, after its "
           "warm-up and before its search; each rung at least 20 s and 10,000 requests; nothing above a rung that "
           f"failed is run. CPU per request ÷ {ref}'s median at that rung "
           + (f"in the same run (every part of the set ran {ref}: the machine's speed drifts between parts)"
              if anchored(by) else f"(in the same run where the run holds {ref}, else over all its runs)")
           + f" ({ref}'s own row: its runs' spread around 1); the last column, per run the median of its ratios over "
           "the rungs no run of any port failed ("
           + (", ".join(num(x) for x in rungs) + " req/s" if rungs else "none") + "), median (min–max) of the runs.", "",
           f"The app's CPU per request ÷ {ref}'s:", "", *cpu_table(by, "app"),
           f"App + database + generator CPU per request (all on the same cores) ÷ {ref}'s:", "", *cpu_table(by, "total"),
           "App CPU per request and p99 at each rung (median (min–max) of the runs that passed it):", "",
           *absolute_table(by),
           "p99 and p99.9 at each rung, every passed run's requests together; in brackets the 95 % order-statistics "
           f"interval where fewer than {ENOUGH_BEYOND:,} requests lie beyond the quantile (a rung holds 10,000–80,000 "
           "requests a run: 100–800 beyond its p99):", "", *quantile_table(by)]
    out += charts.link("latency against the offered rate (the ladder)",
                       latency_chart(chart_dir / "baseline-latency-vs-load.png", by, slo))
    out += charts.link("app CPU per request against the offered rate (the ladder)",
                       cpu_chart(chart_dir / "baseline-cpu-vs-rate.png", by))
    out += charts.link(f"latency by percentile at {num(common_rate)} req/s",
                       percentile_chart(chart_dir / "baseline-percentiles.png", by, "common", common_rate))
    return out


def verdict(by: dict[str, list[dict]]) -> list[str]:
    """The ladder's sentences: the order by relative CPU per request over the held rungs, and the model pairs."""
    rel, rungs, ref = over_ladder(by), held(by), reference(by)
    if not rel or not rungs:
        return []
    firm = {n: s for n, s in rel.items() if not s.partial}
    where = f"{len(rungs)} rates from {num(rungs[0])} to {num(rungs[-1])} req/s" if len(rungs) > 1 else \
        f"{num(rungs[0])} req/s"
    out = [f"Over the ladder ({where}, held by every run of every port) app CPU per request relative to {ref}: "
           + ", ".join(f"{n} {span(s, two)}" for n, s in rel.items() if n != ref)
           + f"; lower first: {table.order(named(firm), higher_is_better=False)}."]
    if duo := pairs(by):
        out.append("The model alone, on one framework (each pair shares its framework's web stack): "
                   + ", ".join(f"{a} ÷ {b} {span(s, two)}" for (a, b), s in duo.items()) + " (app CPU per request "
                   "over the ladder; below 1: the first costs less).")
    return out


def relation(s: Spread) -> str:
    """A ratio's spread in words: "the same CPU per request as" where it holds 1, else how much less or more."""
    if s.low <= 1 <= s.high:
        return "the same CPU per request as"
    return f"{abs(1 - s.median):.0%} {'less' if s.high < 1 else 'more'} CPU per request than"


def answer(by: dict[str, list[dict]], statements: dict[str, Spread]) -> list[str]:
    """The front page's sentences: each model pair over the ladder in plain words (`statements`: database statements
    per request at the common rate, said where a pair's differ)."""
    rungs, out = held(by), []
    if not rungs:
        return []
    where = f"{num(rungs[0])}–{num(rungs[-1])} req/s"
    for i, ((a, b), s) in enumerate(pairs(by).items()):
        title = lambda n: port_facts.PORTS[n].title if n in port_facts.PORTS and port_facts.PORTS[n].title else n  # noqa: E731
        sent = (f"{'On a fast database (loopback), ' if i == 0 else ''}{title(a)} costs {relation(s)} "
                f"{title(b)} ({a} ÷ {b}: {span(s, two)} over {where})")
        qa, qb = statements.get(a), statements.get(b)
        if qa and qb and round(qa.median, 1) != round(qb.median, 1):
            sent += f", and sends {num(qa.median, 1)} database statements per request to {num(qb.median, 1)}"
        out.append(sent + ".")
    return out

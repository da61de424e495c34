"""downstream's part of RESULTS.md: per cell (latency L, K, mode) each port's MST and what capped it, the common
rate's figures, requests in flight, a decision row per cell (and one with each remedy's larger client pool where
a remedy was run: the pool it was given, not every bound sized, which is render_sized's), the deaths of JVMs that
died. What to expect: a port whose request holds a platform thread for the whole wait is capped at threads / (L [x K
sequential]): Tomcat's 200 threads give 1,000 req/s at 200 ms. Virtual threads
and event loops hold no OS thread while waiting: the CPU and the HTTP client's connection pool (its default size,
shown per port in docs/configuration.md) cap them. The database's pool no longer decides (one lookup per request)."""
from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

from ... import port_facts
from ...method import caps, runset, spans
from ...method.constants import BOUND_HELD
from ...method.record import Mst, Step, at_mst
from ...method.runset import RunSet
from ...method.spans import cell, ms, num
from .. import charts, table
from ..section import BOUND, CPU, Decision, Regime, Section


def _key(cell: dict) -> tuple:
    return cell["coords"]["latency_ms"], cell["coords"]["calls"], cell["coords"]["mode"]


def _done(record: dict) -> list[dict]:
    """The record's cells that finished (a JVM that died leaves its cell partial)."""
    return [c for c in record["cells"] if c["status"] == "complete"]


def _cells(records: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in records:
        for c in _done(r):
            out.setdefault(_key(c), []).append(c)
    return out


def _msts(entries: list[dict]) -> list[Mst | None]:
    return [Mst.from_json(e.get("mst")) for e in entries]


def _mst(entries: list[dict]) -> spans.Spread | None:
    return table.mst_spread(_msts(entries))


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    by = {label: _cells(records) for label, records in rs.by_label.items()}
    keys = sorted({k for cells in by.values() for k in cells}, key=lambda k: (k[2], k[1], k[0]))
    if not keys:          # every JVM died before finishing a cell: the deaths are the result
        dead = deaths(rs)
        if not dead:
            return None
        body = [f"No cell was measured: every iteration's JVM died before it finished one (run "
                f"{', '.join(rs.run_ids)}).", "", *_died_list(rs)]
        return Section("Slow downstream services (parallel fan-out)", rs.scenario, body, verdict=dead,
                       warnings=rs.warnings)
    body = [f"Each port calls nginx K times per request (`GET /feed?calls=K`, in parallel unless marked sequential), "
            f"with the downstream latency L added to every call; {rs.iterations} iteration(s), a fresh "
            f"JVM each (run {', '.join(rs.run_ids)}). MST at the one rule with the downstream wait added; beside it "
            "the first failing rate and what capped it.", ""]
    names = ["port", *map(_cell_name, keys)]
    body += ["MST (req/s) ✗ first failing rate; cap (utilisation at the MST):", ""]
    body += table.markdown(names, [[label, *(f"{table.mst_cell(_msts(es))}; {_capped(es)}" if (es := cells.get(k))
                                             else "–" for k in keys)] for label, cells in by.items()])
    body += [*died, ""] if (died := _died_list(rs)) else []
    body += _defaults_that_bite(by, keys)
    body += ["At the common rate: p99 (ms) and app CPU µs per request; nginx's CPU µs per downstream call; the most "
             "downstream connections the port held:", "",
             "| port | cell | p50 | p99 | app µs/req | nginx µs/call | downstream conns | RSS (MiB) | threads |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, cells in by.items():
        for k in keys:
            common = [Step.from_json(s) for e in cells.get(k, []) for s in e["steps"] if s.get("phase") == "common"]
            skipped = [e["common_skipped"] for e in cells.get(k, []) if e.get("common_skipped")]
            where = _cell_name(k)
            if skipped:
                body.append(f"| {label} | {where} | not run in {len(skipped)} of {len(cells.get(k, []))}: above the "
                            f"first failing rate ({cell(skipped, spans.rate)}/s) | | | | | | |")
            if not common:
                continue
            body.append(f"| {label} | {where} | "
                        f"{cell((s.latency_ms.get('p50') for s in common), ms)} | {cell((s.p99 for s in common), ms)}"
                        f"{'' if all(s.passed for s in common) else ' (' + str(sum(not s.passed for s in common)) + ' failed)'} | "
                        f"{cell(s.app_cpu_us_per_request for s in common)} | "
                        f"{cell((s.extra.get('downstream_cpu_us_per_call') for s in common), lambda v: num(v, 1))} | "
                        f"{cell(e.get('downstream_connections_peak') for e in cells.get(k, []))} | "
                        f"{cell(s.app_rss_mb_peak for s in common)} | {cell(s.app_threads_peak for s in common)} |")
    body += ["", "Requests in flight at the MST (Little's law: achieved rate × mean latency of the passing steps there) "
             "and, × K, downstream calls in flight:", ""]
    body += table.markdown(names, [[label, *(_in_flight(cells.get(k, []), k) for k in keys)]
                                   for label, cells in by.items()])
    for calls in sorted({k[1] for k in keys if k[2] == "parallel"}):
        series = {label: [(k[0], _mst(cells.get(k, []))) for k in keys if k[1] == calls and k[2] == "parallel"]
                  for label, cells in by.items()}
        body += charts.link(f"MST against downstream latency, K={calls}", charts.lines(
            chart_dir / f"downstream-k{calls}.png", f"MST against downstream latency, K={calls} parallel calls",
            "downstream latency (ms, log)", "MST (req/s, log)", series, logx=True, logy=True))
    decisions, verdict, sized = judge(by, keys, died_cells(rs))
    verdict += deaths(rs)
    regimes, answer = front_rows(by, keys, died_cells(rs))
    return Section("Slow downstream services (parallel fan-out)", rs.scenario, body, appendix=appendix(by),
                   decisions=decisions, verdict=verdict, findings=sized, warnings=rs.warnings, regimes=regimes,
                   answer=answer)


def predicted_limit(port: str, k: tuple) -> tuple[float, str] | None:
    """The rate the port's tightest default bound allows in cell k, by Little's law: a pool or executor held once
    per call, K calls of L each per request, allows size / (K x L) (in parallel K units for L, one after another one
    unit for K x L); a request thread held for the whole request, size / L in parallel, size / (K x L) one after
    another. None: no bound on the path at its defaults (the JDK client's connections are unbounded)."""
    facts = port_facts.PORTS.get(port)
    latency_s, calls, sequential = k[0] / 1000, k[1], k[2] == "sequential"
    limits = []
    if facts and facts.downstream_pool and not (sequential and facts.downstream_pool_parallel_only):
        limits.append((facts.downstream_pool / (calls * latency_s), port_facts.downstream_bound(port)))
    if threads := port_facts.request_threads(port, {}):
        limits.append((threads / (calls * latency_s if sequential else latency_s),
                       GAUGE_WORDS["request threads"][0].format(size=threads)))
    return min(limits) if limits else None


def _defaults_that_bite(by: dict[str, dict], keys: list[tuple]) -> list[str]:
    """Each port at its defaults: the bound that holds it in each cell, the rate that bound allows, the MST beside
    it. A list of the defaults' limits, not a ranking of the models: where the MST sits at the predicted rate, the
    port's default bound decided it."""
    rows = []
    for label, cells in by.items():
        if label not in port_facts.PORTS:            # a remedy row: its bound is the one it set
            continue
        row = [label]
        for k in keys:
            limit, es = predicted_limit(label, k), cells.get(k)
            measured = table.mst_cell(_msts(es)) if es else "–"
            row.append(f"{limit[1]}: ≤ {spans.rate(round(limit[0], 1))}; measured {measured}" if limit
                       else f"no bound at its defaults; measured {measured}")
        rows.append(row)
    if not rows:
        return []
    return ["Defaults that bite: the tightest bound each port's defaults put on a request's downstream calls, the rate "
            "it allows (its size ÷ the seconds one request holds a unit of it: K × L for a pool held per call, L or "
            "K × L for a request thread), and the MST measured (req/s). Where the two meet, the default decided, not "
            "the model; the next section sizes every bound.", "",
            *table.markdown(["port", *map(_cell_name, keys)], rows), ""]


# the cells on the front page: the fan-out at its longest latency with K = 3, and calls one after another
FRONT = ((200, 3, "parallel"), (50, 3, "sequential"))


def front_rows(by: dict[str, dict], keys: list[tuple], died: dict) -> tuple[list[Regime], list[str]]:
    """The front page's rows at each port's defaults: the MST, and the bound that held it where its client's pool
    (or executor) capped it; a port that passed no rate or died is said so. The answer's sentence: how many ports
    their downstream bound held at the fan-out."""
    defaults, _ = runset.split_remedies(by)
    regimes, answer = [], []
    for k in (k for k in FRONT if k in keys):
        msts, failed = _figures(defaults, k, died)
        caps = {label: table.dominant([e["cap"] for e in cells.get(k, []) if e.get("cap")])
                for label, cells in defaults.items()}
        bound = {label: port_facts.downstream_bound(label) or "its client's pool" for label in msts
                 if "client pool" in (caps.get(label) or "")}
        notes = {label: ("no rate passed", 0.0) for label in failed}
        notes |= {label: ("died here", 0.0) for label, cells in died.items() if k in cells and label not in msts}
        what = (f"{k[1]} downstream calls of {k[0]:g} ms one after another" if k[2] == "sequential"
                else f"{k[1]} downstream calls of {k[0]:g} ms in parallel")
        regimes.append(Regime(what.capitalize(), "the HTTP client's connection bound, where one binds; then CPU",
                              msts, "req/s", notes=notes, bound=bound,
                              setting="each client's connection bound (every bound sized: its own row)", kind=BOUND))
        if k[2] == "parallel" and bound:
            answer.append(f"With slow downstream calls the HTTP client's connection bound decides before the model: "
                          f"with {what}, {len(bound)} of {len(defaults)} ports were held by theirs at their defaults "
                          f"({', '.join(f'{n}: {b}' for n, b in bound.items())}).")
    return regimes, answer


def _capped(entries: list[dict]) -> str:
    return table.cap_cell([e["cap"] for e in entries if e.get("cap")],
                          [e.get("utilisation") for e in entries if e.get("cap")])


def _died_list(rs: RunSet) -> list[str]:
    """The body's line on the iterations whose JVM died, each with its log line; [] when none did."""
    died = [f"{label} #{r.get('iteration')}: {r['died']}" for label, records in rs.by_label.items() for r in records
            if r.get("status") == "died"]
    return ["Died during the run (the cells after it are missing from that iteration): " + "; ".join(died) + "."] \
        if died else []


def judge(by: dict[str, dict], keys: list[tuple], died: dict | None = None) \
        -> tuple[list[Decision], list[str], list[str]]:
    """A decision row and a verdict sentence per cell, from the ports at their defaults (and, where a remedy run
    exists, a row and the section's sentence with the remedies' larger pools: each remedy in its port's place, the
    row's settings the settings the remedies raised, the defaults' row pointing to it). The row's choice is among the
    ports with a figure only (a partial one, from the runs that survived a death in the cell, is in no comparison).
    A port whose searches passed no rate there is the verdict's (_failed_clause: below the ports that passed its
    lowest rate in every run), as is a port that died (`died`, from died_cells: the runs of its cell count the dead
    ones; render adds the deaths sentences). The row names; the figures and exclusions are the verdict's."""
    died = died or {}
    defaults, remedied = runset.split_remedies(by)
    decisions, verdict, sized_verdict = [], [], []     # the defaults' sentences in the verdict, the sized ones
    remedied_ports, pools = {runset.port_of(r) for r in remedied}, port_facts.client_pools()
    for k in keys:
        msts, failed = _figures(defaults, k, died)
        if not msts and not failed and not any(k in d for d in died.values()):
            continue
        counted = _caps_counted(defaults.values(), k)
        sized_names = dict.fromkeys(f"`{name}`" for label, cells in remedied.items() if cells.get(k)
                                    for name in runset.settings_of(label))
        untried = sorted({f"`{pools[label][1]}`" for label, cells in defaults.items()
                          if pools.get(label, (0, None))[1] and label not in remedied_ports
                          and any("client pool" in (e.get("cap") or "") for e in cells.get(k, []))})
        sized_setting = f"the remedies raise: {', '.join(sized_names)}"
        what = (f"{k[1]} calls of {k[0]:g} ms one after another" if k[2] == "sequential"
                else f"{k[1]} calls of {k[0]:g} ms in parallel")
        # each port with its remedy's larger client pool where a remedy run exists (the remedy's row instead of the
        # defaults'): the pool the remedy was given often binds in its turn (`limited` names it)
        remedy_msts, remedy_failed = _figures(remedied, k, died)
        tried = [r for r in remedied if r in remedy_msts or r in remedy_failed]
        replaced = {runset.port_of(r) for r in tried}
        sized = {**{p: m for p, m in msts.items() if p not in replaced}, **remedy_msts}
        sized_failed = {**{p: f for p, f in failed.items() if p not in replaced}, **remedy_failed}
        # the settings: the bounds the remedies raised, named in their own row where it follows (here both lists would
        # pass 220 characters), and the client pools that capped a port at its defaults with no remedy run
        settings = ["the remedies raise: the next row" if tried else sized_setting] if sized_names else []
        settings += [f"size the client pool: {', '.join(untried)} (not run here)"] if untried else []
        # the row orders every port: by MST where a bound decides (the client pools, at the defaults),
        # then those that passed no rate, died in the cell or were not measured; the figures are the verdict's
        decisions.append(Decision(f"Slow downstream services: {what} per request",
                                  f"caps: {counted}" if counted else "unclear",
                                  _ranked(msts, failed, died, k, list(defaults)), "; ".join(settings) or "defaults"))
        if tried:         # a row of its own (in the defaults' row one cell would pass 220 characters)
            labels = [lab for lab in defaults if lab not in replaced] + tried
            sized_counted = _caps_counted([({**defaults, **remedied})[lab] for lab in labels], k)
            limited = {lab: size for lab in labels if (size := _limited(({**defaults, **remedied})[lab].get(k, [])))}
            decisions.append(Decision(f"Slow downstream services: {what} per request, the remedies' larger client "
                                      "pools",
                                      f"caps: {sized_counted}" if sized_counted else "unclear",
                                      _ranked(sized, sized_failed, died, k, labels, _short, limited), sized_setting))
        verdict.append(f"With {what} per request, at each port's defaults, the confirmed MST runs "
                       f"{_range(msts)}{_failed_clause(failed, msts)}.")
        if tried:
            sized_verdict.append(f"With {what} per request and each remedy's larger client pool where one was run, it "
                                 f"runs {_range(sized)}{_failed_clause(sized_failed, sized)}.")
    return decisions, verdict, sized_verdict


def _caps_counted(cells_of_ports, k: tuple) -> str:
    """"client pool (4 ports), CPU": each port's dominant cap in cell k, counted."""
    named = [dominant for cells in cells_of_ports
             if (dominant := table.dominant([e["cap"] for e in cells.get(k, []) if e.get("cap")]))]
    return ", ".join(f"{name} ({named.count(name)} ports)" if named.count(name) > 1 else name
                     for name in dict.fromkeys(named))


def _short(by_label: dict) -> dict:
    """A remedy run as "port (remedy)": the settings cell names the settings (full labels where one port has two)."""
    short = {(f"{runset.port_of(label)} (remedy)" if runset.port_of(label) != label else label): v
             for label, v in by_label.items()}
    return short if len(short) == len(by_label) else by_label


def _figures(cells_of_label: dict[str, dict], k: tuple, died: dict) -> tuple[dict[str, spans.Spread], dict]:
    """The ports' MSTs in cell `k`, and (lowest rate tried, runs, runs of the cell) for the ports whose searches
    passed no rate there. The runs of a cell count the iterations that died in it: a figure from the runs that
    survived is partial (in no comparison)."""
    msts, failed = {}, {}
    for label, cells in cells_of_label.items():
        entries = cells.get(k, [])
        dead = died.get(label, {}).get(k, 0)
        if m := _mst(entries):
            msts[label] = dataclasses.replace(m, of=len(entries) + dead) if dead else m
        elif f := _none_passed(entries):
            failed[label] = (*f, len(entries) + dead)
    return msts, failed


def _limited(entries: list[dict]) -> int | None:
    """The client pool's size where the client's own gauge (its open connections to the downstream ÷ its pool)
    reached BOUND_HELD of it at the MST in most runs: the bound, not the model, held the port there."""
    held = [e for e in entries if (e.get("utilisation") or {}).get("client pool", 0) >= BOUND_HELD]
    if not entries or len(held) * 2 <= len(entries):
        return None
    return held[0].get("client_pool")


def _ranked(figures: dict[str, spans.Spread], failed: dict[str, tuple], died: dict, k: tuple, labels: list[str],
            names=lambda by_label: by_label, limited: dict[str, int] | None = None) -> str:
    """table.ranked over `labels` in cell k: by MST (`>` only where the whole ranges, and the searches' brackets, lie
    apart); below them the ports whose searches passed no rate down to a rate every figure lies at or above; not
    compared: the other ports that passed none, those whose JVM died in this cell in every run or in an earlier
    one (not measured here), and those a bound held (`limited`: the bound named, not ranked as a model). `names`
    shortens the labels (_short)."""
    limited = limited or {}
    shown = {label: s for label, s in figures.items() if label in labels and label not in limited}
    firm = table.complete(shown)
    below, apart = {}, {}
    for label in labels:
        if label in figures or label in limited:
            continue
        if label in failed:
            lowest, n, of = failed[label]
            if n < of:                      # the other runs died here: a partial result, in no comparison
                apart[label] = f"none passed in {n} of {of} runs"
            elif lowest and all(s.low >= lowest for s in firm.values()):
                below[label] = "none passed"
            else:
                apart[label] = f"none passed ≥ {lowest:,}/s" if lowest else "none passed"
        elif died.get(label, {}).get(k):
            apart[label] = "died here"
        elif label in died:
            apart[label] = "not measured: died earlier"
    held = "; held by the client pool (not ranked as a model): " + ", ".join(
        f"{runset.port_of(label)} {size:,}" for label, size in limited.items()) if limited else ""
    return table.ranked(names(shown), names(below), names(apart)) + held


def _range(msts: dict[str, spans.Spread]) -> str:
    return table.range_sentence(msts) if msts else "nowhere (no port has a confirmed MST here)"


def _none_passed(entries: list[dict]) -> tuple[int | None, int] | None:
    """(the lowest rate tried, iterations) when every iteration's search passed no rate (table.mst_cell's "none
    passed ≥ X/s", the same X): a result, not a bound: the port's MST is below X in each."""
    msts = [m for m in _msts(entries) if m]
    if not msts or any(m.passed_once for m in msts):   # a rate passed once: "not confirmed", as table.mst_cell
        return None
    return max((x for m in msts if (x := table.lowest_tried(m))), default=None), len(msts)


def _below(f: tuple, figures: dict[str, spans.Spread]) -> str:
    """"below every port with a figure here", "below a, b" or "": the ports that passed a rate at least as low as
    the lowest one this port tried (f: (lowest rate tried, runs, runs of the cell)), in every iteration."""
    lowest, n, of = f
    above = [name for name, s in figures.items() if n == of and not s.partial and lowest and s.low >= lowest]
    if above and len(above) == len(figures):
        return "below every port with a figure here"
    return f"below {', '.join(above)}" if above else ""


def _failed_clause(failed: dict[str, tuple], figures: dict[str, spans.Spread]) -> str:
    """"; a, b passed no rate down to 10 req/s in every run (3 each), below every port with a figure here": the
    ports whose searches passed nothing (failed: (lowest rate tried, runs, runs of the cell) from _figures), and the
    ports above them for certain (_below). Where some runs of the cell died, "in 2 of 3 runs (1 died here)" and no
    comparison (a partial figure)."""
    groups: dict[tuple, list[str]] = {}
    for label, f in failed.items():
        groups.setdefault(f, []).append(label)
    out = []
    for (lowest, n, of), labels in groups.items():
        each = " each" if len(labels) > 1 else ""
        text = (f"{', '.join(labels)} passed no rate" + (f" down to {lowest:,} req/s" if lowest else "")
                + (f" in every run ({n}{each})" if n == of else f" in {n} of {of} runs{each} ({of - n} died here)"))
        below = _below((lowest, n, of), figures)
        out.append(text + (f", {below}" if below else ""))
    return "".join(f"; {t}" for t in out)


def _order(rs: RunSet) -> list[tuple]:
    """The cells in run order: the plan the records carry ([downstream] cells), else a complete record's."""
    planned = rs.plan.get("cells")
    if planned:
        return [(float(c[0]), int(c[1]), str(c[2])) for c in planned]
    return next(([_key(c) for c in r["cells"]] for r in rs.records if r.get("status") == "complete"), [])


def _died_in(rs: RunSet) -> dict[str, list[tuple[tuple | None, dict]]]:
    """Per label whose JVM died: (the cell each dead iteration died in, the first of the run order it did not
    finish, None for the warm-up (no cell finished and no warm probe recorded); its record)."""
    order = _order(rs)
    out: dict[str, list] = {}
    for label, records in rs.by_label.items():
        for r in records:
            if r.get("status") == "died":
                done = {_key(c) for c in _done(r)}
                warm = bool(done) or r["capacity"]["warm"] is not None
                out.setdefault(label, []).append((next((k for k in order if k not in done), None) if warm else None,
                                                  r))
    return out


def died_cells(rs: RunSet) -> dict[str, dict[tuple | None, int]]:
    """Per label whose JVM died, per cell it died in: the iterations that died there."""
    return {label: dict(collections.Counter(at for at, _ in dead)) for label, dead in _died_in(rs).items()}


def deaths(rs: RunSet) -> list[str]:
    """A sentence per port whose JVM died during the run: in how many iterations, in which cell (the first one it
    did not finish), with the log's last line."""
    out = []
    for label, dead in _died_in(rs).items():
        where = sorted({f"the cell {_cell_name(k)}" if k else "the warm-up" for k, _ in dead})
        reasons = sorted({r["died"].split(": ", 1)[-1] for _, r in dead})
        out.append(f"{label} died in {len(dead)} of {len(rs.by_label[label])} iterations, in "
                   f"{', '.join(where)} (the app's last log line: {'; '.join(reasons)}); its later cells are "
                   "missing.")
    return out


def _cell_name(k: tuple) -> str:
    return f"{k[0]:g} ms, K={k[1]}{' seq.' if k[2] == 'sequential' else ''}"


def in_flight(entry: dict) -> float | None:
    """Requests in flight at this cell's MST: rate x mean latency of the passing steps at that rate."""
    at = [Step.from_json(s) for s in at_mst(entry.get("steps", []), Mst.from_json(entry.get("mst")))]
    values = [s.achieved_rps * s.latency_ms["mean"] / 1000 for s in at if s.latency_ms.get("mean") is not None]
    return max(values) if values else None


def _in_flight(entries: list[dict], k: tuple) -> str:
    values = [in_flight(e) for e in entries]
    if not any(v is not None for v in values):
        return "–"
    calls = [v * k[1] if k[2] == "parallel" else v for v in values if v is not None]
    return f"{cell(values)} ({cell(calls)} calls)"


def appendix(by: dict[str, dict]) -> list[str]:
    out = ["## Downstream: every step", ""]
    for label, cells in by.items():
        for k, entries in cells.items():
            out += [f"### downstream: {label}, {k[0]:g} ms, K={k[1]} {k[2]}", ""]
            for e in entries:
                out += table.step_table([Step.from_json(raw) for raw in e["steps"]], ("slo", "nginx us", "threads"))
    return out


# --- every bound sized: a run set of its own (report.SIZED_KEY) ------------------------------------------------

# a gauge in a Java engineer's words, with what its size counts
GAUGE_WORDS = {"downstream connections": ("its client's pool of {size:,} connections", "connections open"),
               "request threads": ("Tomcat's {size:,} request threads", "request threads alive")}


def _reading_at_mst(entry: dict, gauge: str) -> float | None:
    """The gauge's reading in the last passing step at the MST (caps.gauge_reading: its own peak, or its mean
    occupancy where the peak is an earlier step's mark); None where the steps read none."""
    at = at_mst(entry.get("steps", []), Mst.from_json(entry.get("mst")))
    return caps.gauge_reading(entry["steps"], at[-1], gauge, caps.per_request(gauge, entry["coords"])) if at else None


def held_by(entries: list[dict]) -> str | None:
    """The bound whose gauge read BOUND_HELD of its size at the MST in most runs, in words ("its client's pool of
    4,000 connections"): the bound, not the model, held the port there."""
    for gauge, (words, _) in GAUGE_WORDS.items():
        held = [e for e in entries if (size := (e.get("bounds") or {}).get(gauge))
                and (_reading_at_mst(e, gauge) or 0) >= BOUND_HELD * size]
        if entries and len(held) * 2 > len(entries):
            return words.format(size=held[0]["bounds"][gauge])
    return None


def _gauge_cell(entries: list[dict], gauge: str) -> str:
    """"1,530 (1,410–1,620) of 4,000": the gauge's reading at the MST over the runs, beside its size; "–" without one."""
    sizes = {(e.get("bounds") or {}).get(gauge) for e in entries} - {None}
    readings = [_reading_at_mst(e, gauge) for e in entries]
    if not sizes or not any(r is not None for r in readings):
        return "–"
    return f"{cell(readings)} of {', '.join(f'{s:,}' for s in sorted(sizes))}"


def _dead_in(died: dict, label: str, k: tuple) -> int:
    """The iterations of `label` whose JVM died in cell k or before any cell."""
    return died.get(label, {}).get(k, 0) + died.get(label, {}).get(None, 0)


def _passed_once(entries: list[dict]) -> str | None:
    """"1,200 (1,100–1,300)": the rates that passed once where no search confirmed one; None where none did."""
    once = [x.rps for x in _msts(entries) if x and x.rps]
    return spans.span(spans.spread(once), spans.rate) if once else None


def _sized_name(label: str, by: dict) -> str:
    """A port run at several sizes, by the setting its labels differ in: "spring-webflux (pool 8,000)"."""
    port = runset.port_of(label)
    mine = {part for other in by if other != label and runset.port_of(other) == port
            for part in other.split(" + ")[1:]}
    differ = [part.strip("`").split("=", 1) for part in label.split(" + ")[1:] if part not in mine]
    return f"{port} ({', '.join(f'pool {int(v):,}' if k.endswith('POOL_SIZE') else f'{k}={v}' for k, v in differ)})"


def render_sized(rs: RunSet) -> Section | None:
    """Each port with every bound on the path sized above the demand at the highest rate any port reaches (bench.toml
    [remedies] downstream), one cell: the MST, what each bound's gauge read there, the CPU; the ports no bound held
    ordered by MST (there the CPU, i.e. the model and its stack, decides), the others named with their bound."""
    if not rs:
        return None
    by = {label: _cells(records) for label, records in rs.by_label.items()}
    keys = sorted({k for cells in by.values() for k in cells}, key=lambda k: (k[2], k[1], k[0]))
    if not keys:
        return None
    title = "Slow downstream services, every bound sized"
    body = [f"The same endpoint as the section above, each port with every bound on its path sized above the demand "
            f"at the highest rate any port reaches there (bench.toml `[remedies] downstream`: the client's pool, "
            f"spring-platform's executor and Tomcat's request threads; {rs.iterations} iteration(s), a fresh JVM each, "
            f"run {', '.join(rs.run_ids)}). Every step reads each bound's gauge from outside the JVM: the port's "
            "connections open to the downstream (which also counts spring-platform's busy executor threads: each "
            "holds one call's connection) and Tomcat's request threads alive. Both are high-water marks (a pool "
            "keeps its idle connections, Tomcat its idle threads for 60 s), so a failed probe whose queue filled a pool "
            "leaves it full for the steps after. The reading at the MST is the gauge's peak where it rose in that step "
            "(at most its rate × its longest latency, × K connections in parallel), else that step's own mean "
            "occupancy by Little's law (its rate × its mean latency, × K). Below 90 % of its size, that bound did "
            "not hold the port there.", ""]
    decisions, verdict = [], []
    died = died_cells(rs)
    ports = [runset.port_of(label) for label in by]      # a port run at two sizes is named by its label
    for k in keys:
        rows, msts, held, apart, costs = [], {}, {}, {}, {}
        for label, cells in by.items():
            entries = cells.get(k, [])
            port = runset.port_of(label) if ports.count(runset.port_of(label)) == 1 else _sized_name(label, by)
            if dead := _dead_in(died, label, k):
                apart[port] = f"died in {dead} of {len(rs.by_label[label])}"
                if not entries:
                    passed = [s["target_rps"] for r in rs.by_label[label] for c in r["cells"] if _key(c) == k
                              for s in c["steps"] if s.get("passed") and s.get("phase") in ("mst", "confirm")]
                    rows.append([port, ", ".join(f"`{name}`" for name in runset.settings_of(label)),
                                 f"died in {dead} of {len(rs.by_label[label])} runs"
                                 + (f" (passed up to {max(passed):,} req/s before)" if passed else ""),
                                 "", "", "", "", ""])
                    continue
            if (m := _mst(entries)) is not None:
                msts[port] = m
            elif once := _passed_once(entries):
                apart[port] = f"unconfirmed, {once}"
            if bound := held_by(entries):
                held[port] = bound
            cpu = [(e.get("utilisation") or {}).get("CPU") for e in entries]
            common = [Step.from_json(s) for e in entries for s in e["steps"] if s.get("phase") == "common"]
            if cost := spans.spread(s.app_cpu_us_per_request for s in common):
                costs[port] = cost
            rows.append([port, ", ".join(f"`{name}`" for name in runset.settings_of(label)) or "defaults",
                         table.mst_cell(_msts(entries)), cell(cpu, lambda v: num(v, 2)),
                         *(_gauge_cell(entries, g) for g in GAUGE_WORDS),
                         cell(s.app_cpu_us_per_request for s in common), cell((s.p99 for s in common), ms)])
        what = (f"{k[1]} calls of {k[0]:g} ms one after another" if k[2] == "sequential"
                else f"{k[1]} calls of {k[0]:g} ms in parallel")
        body += [f"{what.capitalize()} per request: the MST, the share of the CPU set busy there, each gauge's peak "
                 "there beside its size; app CPU µs per request and p99 at the common rate:", ""]
        body += table.markdown(["port", "settings", "MST (req/s) ✗ first failing rate", "CPU busy at the MST",
                                *(f"{GAUGE_WORDS[g][1]} at the MST" for g in GAUGE_WORDS), "app µs/req (common)",
                                "p99 ms (common)"], rows, text_columns=2)
        body.append("")
        free = {p: m for p, m in msts.items() if p not in held and p not in apart}
        held_text = ", ".join(f"{p} by {b}" for p, b in held.items())
        sentence = f"With {what} per request and every bound sized, "
        if free:
            sentence += (f"no pool or thread limit held {', '.join(free)} at the MST (every gauge below "
                         f"{BOUND_HELD:.0%} of its size): the MST runs {_range(free)}")
        sentence += (f"{'; still limited: ' if free else 'every port was limited: '}{held_text}" if held else "")
        verdict.append(sentence + ".")
        if len(costs) > 1:
            rate = next((x for e in by.values() for c in e.get(k, []) for x in
                         [st.get("target_rps") for st in c["steps"] if st.get("phase") == "common"] if x), None)
            verdict.append(f"At the common rate ({num(rate)} req/s) the app's CPU per request "
                           f"orders them (lowest first) {table.order(costs, higher_is_better=False)}: "
                           + ", ".join(f"{p} {spans.span(c)} µs" for p, c in costs.items()) + ".")
        decisions.append(Decision(f"Slow downstream services: {what} per request, every bound sized",
                                  "CPU per request, once no pool or thread limit binds" if free else "the bounds",
                                  "; ".join(filter(None, [table.ranked(free, apart=apart) if free or apart else "",
                                                          f"limited: {held_text}" if held else ""])),
                                  "every bound sized (the section's table)", evidence=f"#{rs.scenario}-sized"))
    body += [*dead_lines, ""] if (dead_lines := _died_list(rs)) else []
    return Section(title, rs.scenario + "-sized", body, decisions=decisions, verdict=verdict + deaths(rs),
                   warnings=rs.warnings, regimes=sized_front_rows(rs, by, keys, died))


def sized_front_rows(rs: RunSet, by: dict[str, dict], keys: list[tuple], died: dict) -> list[Regime]:
    """The front page's row of the fan-out with every bound sized: per port its MST (a port run at two sizes by its
    first), a bound whose gauge reached 90 % of its size named and not ranked, a JVM that died or a search that never
    confirmed said so."""
    regimes = []
    for k in (k for k in FRONT if k in keys and k[2] == "parallel"):
        figures, notes, bound = {}, {}, {}
        for label, cells in by.items():
            port = runset.port_of(label)
            if port in figures or port in notes:
                continue
            entries = cells.get(k, [])
            if dead := _dead_in(died, label, k):
                heap = any("Java heap space" in (r.get("died") or "") for r in rs.by_label[label])
                if not entries or dead == len(rs.by_label[label]):
                    notes[port] = (f"died in {dead} of {len(rs.by_label[label])} runs"
                                   + (" (out of heap)" if heap else ""), 0.0)
                    continue
            if (m := _mst(entries)) is not None:
                figures[port] = m
                if held := held_by(entries):
                    bound[port] = held
            elif once := _passed_once(entries):
                notes[port] = (f"no MST confirmed (passed once at {once})", None)
        what = f"{k[1]} downstream calls of {k[0]:g} ms in parallel, every bound sized"
        regimes.append(Regime(what[0].upper() + what[1:], "CPU, once no pool or thread limit binds", figures, "req/s",
                              notes=notes, bound=bound, setting="every bound above the demand (the section's table)",
                              evidence=f"#{rs.scenario}-sized", kind=CPU))
    return regimes

"""queries: `GET /?queries=N`, N lookups of the token's user one after another inside one request (a loop of
blocking calls, a chain of reactive steps; README "The contract"), on loopback and through the latency proxy
(harness/proxy.py) at [queries] latency_ms per database round trip.

Per port and iteration, two fresh JVMs: one on loopback, one through the proxy (warmed up with the proxy at 0 ms,
then its round trips per lookup counted from one request alone at 0 ms and at the latency). In each: every N's rows
checked -> a cold closed-loop probe -> warm-up until steady ([warmup]) -> per N: a closed-loop probe at N, a step at
the common rate (common_queries_per_s / N req/s: the same database work for every N), then the MST search
([search], at most mst_max_probes steps before the confirmation, down to mst_floor_rps) from mst_first_guess x that
probe. Every step is judged by [rule] with slo_ms = rule.slo_ms(N x latency): the N waits a request cannot avoid.

What to expect: on loopback the CPU caps every port, and each model pays its own CPU per lookup; at the latency
the pool does, at pool / (N x round trips per lookup x latency) req/s (16 / (20 x 5 ms) = 160 req/s), lower for a
port whose driver adds a round trip per lookup (r2dbc-mysql's ping on release).

Time: about 60 min for `all` with bench.toml's four cells (per port and iteration two JVMs with warm-ups of 20-120 s
and about 26 s per cell); `estimate_seconds` has the arithmetic and the run prints it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from pathlib import Path

from .. import charts, ports, proxy as proxy_mod, tokens
from ..errors import Fatal
from ..method import caps, spans, table
from ..method.record import Mst, Step, round_rate
from ..method.rule import GENERATOR
from ..method.runset import RunSet
from ..method.search import find_mst
from ..method.spans import cell, ms, num, span, spread
from ..session import Context, baseline_msts, rounds
from ..target import correctness_check, round_trips, sequential_ms
from . import Decision, Section

NAME = "queries"
ANCHOR = "queries"
MAX_N = 20                  # the contract serves 1 <= N <= 20
# for estimate_seconds only (what a run takes here, not settings): JVM start with its rows checked (Spring ~4 s,
# Quarkus ~2 s), and each step's fixed cost besides its seconds (the generator's start, samplers, DB counters)
START_S = 6.0
STEP_OVERHEAD_S = 0.8
DRAIN_S = 1.0         # a drain's usual length (harness/target.py), for the estimate


@dataclasses.dataclass(frozen=True)
class Plan:
    """bench.toml [queries]."""
    iterations: int
    loopback_queries: list[int]      # N on loopback ([] : no loopback JVM)
    latency_ms: float                # the proxy's added latency per round trip for the second JVM
    latency_queries: list[int]       # N at latency_ms ([] : no proxied JVM)
    common_queries_per_s: int
    step_seconds: float
    probe_seconds: float
    warmup_fraction: float
    warmup_baseline_fraction: float
    mst_first_guess: float
    mst_max_probes: int
    mst_floor_rps: int
    pause_seconds: float


def checked(plan: Plan) -> Plan:
    for key in ("loopback_queries", "latency_queries"):
        if not all(1 <= n <= MAX_N for n in getattr(plan, key)):
            raise Fatal(f"bench.toml [queries] {key} = {getattr(plan, key)}: the contract serves 1 <= N <= {MAX_N}")
    if not plan.loopback_queries and not plan.latency_queries:
        raise Fatal("bench.toml [queries]: loopback_queries and latency_queries are both empty: nothing to measure")
    if plan.latency_queries:
        proxy_mod.whole_ms(plan.latency_ms)
        if plan.latency_ms <= 0:
            raise Fatal("bench.toml [queries] latency_ms must be > 0 (loopback is loopback_queries)")
    if plan.iterations < 1 or plan.mst_max_probes < 1 or plan.mst_floor_rps < 10:
        raise Fatal("bench.toml [queries]: iterations >= 1, mst_max_probes >= 1, mst_floor_rps >= 10 (the rate grid)")
    return dataclasses.replace(plan, loopback_queries=sorted(set(plan.loopback_queries)),
                               latency_queries=sorted(set(plan.latency_queries)))


def jvms(plan: Plan) -> list[tuple[float, list[int]]]:
    """(latency, the Ns measured in that JVM): loopback first."""
    return [(lat, ns) for lat, ns in ((0.0, plan.loopback_queries), (float(plan.latency_ms), plan.latency_queries))
            if ns]


# --- pure logic (unit-tested) --------------------------------------------------------------------------------

def common_rate(n: int, queries_per_s: int) -> int:
    """Requests per second that make queries_per_s lookups per second at N: the same database work for every N."""
    return round_rate(queries_per_s / n)


def pool_limit(n: int, latency_ms: float, pool: int, trips: int = 1) -> float | None:
    """Requests per second the pool allows when each of the N lookups holds a connection for `trips` round trips of
    `latency_ms` (None on loopback, where the round trip is microseconds and the pool is no limit)."""
    return pool * 1000.0 / (n * trips * latency_ms) if latency_ms > 0 else None


def where(latency: float) -> str:
    return "loopback" if not latency else f"{latency:g} ms"


def url_for(url: str, n: int) -> str:
    return f"{url}{'&' if '?' in url else '?'}queries={n}"


def estimate_seconds(plan: Plan, port_count: int, warmup_s: float) -> float:
    """A run's wall time: per port and iteration, each JVM (start, cold probe, a warm-up of `warmup_s`) and each
    cell (closed-loop probe, the common step, mst_max_probes search steps and one confirmation that passes)."""
    pause = (plan.pause_seconds + DRAIN_S) / 2
    per_step = plan.step_seconds + STEP_OVERHEAD_S + pause
    per_cell = plan.probe_seconds + STEP_OVERHEAD_S + DRAIN_S + (1 + plan.mst_max_probes + 1) * per_step
    per_jvm = START_S + plan.probe_seconds + STEP_OVERHEAD_S + warmup_s + DRAIN_S
    return plan.iterations * port_count * sum(per_jvm + len(ns) * per_cell for _, ns in jvms(plan))


# --- measuring -----------------------------------------------------------------------------------------------

def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = checked(ctx.plan(Plan))
    search = dataclasses.replace(ctx.search, max_probes=plan.mst_max_probes)
    window = ctx.warmup.window_seconds
    low, typical, high = (estimate_seconds(plan, len(selected), k * window) / 60 for k in (2, 4, 8))
    ctx.say("plan", "; ".join(f"{where(lat)}: N = {', '.join(map(str, ns))}" for lat, ns in jvms(plan))
            + f"; {plan.iterations} iteration(s) of {len(selected)} port(s): about {typical:.0f} min "
              f"({low:.0f}-{high:.0f} with warm-ups of 2-8 windows)")
    for iteration, port in rounds(selected, plan.iterations):
        run_port(ctx, plan, search, port, iteration)


def run_port(ctx: Context, plan: Plan, search, port: ports.Port, iteration: int) -> dict:
    """One port, one iteration: a fresh JVM per latency."""
    pool = int(ctx.settings["db"]["pool_size"])
    path = ctx.path(port, f"-{iteration}")
    record = ctx.new_record(port, iteration, pool_size=pool, cpus=dict(ctx.settings["cpus"]), jvms=[])
    say = lambda text: ctx.say(f"{port.name} #{iteration}", text)  # noqa: E731
    try:
        for latency, ns in jvms(plan):
            jvm = {"latency_ms": latency, "proxy": None, "startup_s": None, "idle_rss_mb": None,
                   "capacity_cold": None, "warmup": None, "sequential_ms_at_0": None, "sequential_ms": None,
                   "round_trips_per_lookup": 1, "cells": []}
            record["jvms"].append(jvm)
            run_jvm(ctx, plan, search, port, jvm, ns, pool, lambda: ctx.save(record, path), say)
        record["status"] = "complete"
    finally:
        ctx.save(record, path)
    return record


def run_jvm(ctx: Context, plan: Plan, search, port: ports.Port, jvm: dict, ns: list[int], pool: int, save,
            say) -> None:
    latency = jvm["latency_ms"]
    load = ctx.settings["load"]
    # proxied: started at 0 ms, so a cold JVM's slow first seconds do not queue behind the pool's limit
    proxied = proxy_mod.latency_proxy(0, ctx.settings["cpus"]["db"]) if latency else contextlib.nullcontext()
    with proxied as px, ctx.port(port, extra_env=px.env() if px else None) as (running, target):
        if px:
            target = dataclasses.replace(target, sides={"proxy": px.cpu_seconds})
        jvm["startup_s"] = running.startup_seconds and round(running.startup_seconds, 2)
        jvm["idle_rss_mb"] = running.idle_rss_mb and round(running.idle_rss_mb, 1)
        if px:
            jvm["proxy"] = {"tool": f"toxiproxy {proxy_mod.version()}", "latency_ms": latency}
        pool_tokens = tokens.load()
        for n in ns:                     # every N answers its rows before any load is sent
            correctness_check(url_for(target.url, n), pool_tokens, load["check_tokens"])
        one = dataclasses.replace(target, url=url_for(target.url, 1))
        cold = one.closed(load["connections"], plan.probe_seconds, "capacity-cold")
        jvm["capacity_cold"] = cold.to_json(histogram=False)
        save()
        say(f"{where(latency)}: up in {jvm['startup_s']} s; cold capacity at N = 1 (closed loop): "
            f"{cold.achieved_rps:,.0f}/s")
        rate = max(plan.warmup_fraction * cold.achieved_rps,
                   plan.warmup_baseline_fraction * baseline_msts(ctx.results).get(port.name, 0))
        jvm["warmup"] = one.warm_up(rate, ctx.warmup, say).to_json()
        save()
        one.drain()
        if px:
            # round trips per lookup, measured in this JVM (they set the pool's limit): one request alone
            token = pool_tokens[0]
            jvm["sequential_ms_at_0"] = sequential_ms(one.url, token)
            px.set_latency(latency)
            jvm["sequential_ms"] = sequential_ms(one.url, token)
            jvm["round_trips_per_lookup"] = round_trips(jvm["sequential_ms"], jvm["sequential_ms_at_0"], latency)
            save()
            say(f"one request alone: {jvm['sequential_ms_at_0']} ms at 0 ms, {jvm['sequential_ms']} ms at "
                f"{latency:g} ms: {jvm['round_trips_per_lookup']} round trip(s) per lookup")
        for n in ns:
            run_cell(ctx, plan, search, target, jvm, n, pool, save, say)


def run_cell(ctx: Context, plan: Plan, search, target, jvm: dict, n: int, pool: int, save, say) -> None:
    latency, trips = jvm["latency_ms"], jvm["round_trips_per_lookup"]
    t = dataclasses.replace(target, url=url_for(target.url, n))
    slo = ctx.rule.slo_ms(n * latency)
    limit = pool_limit(n, latency, pool, trips)
    rate = common_rate(n, plan.common_queries_per_s)
    entry = {"n": n, "slo_ms": slo, "pool_limit_rps": limit and round(limit, 1), "round_trips_per_lookup": trips,
             "common_rps": rate, "floor_rps": plan.mst_floor_rps, "capacity": None, "steps": [], "mst": None}
    jvm["cells"].append(entry)
    tag = f"{where(latency)} N={n}"
    time.sleep(plan.pause_seconds)
    capacity = t.closed(ctx.settings["load"]["connections"], plan.probe_seconds, "capacity")
    entry["capacity"] = capacity.to_json(histogram=False)
    save()
    say(f"{tag}: capacity (closed loop) {capacity.achieved_rps:,.0f}/s; SLO p99 <= {slo:g} ms"
        + (f"; pool limit {limit:,.0f}/s" if limit else ""))
    backlog = [True]                     # the closed loop's queue may still be draining

    def step(r: int, phase: str) -> str | None:
        if backlog[0]:
            t.drain(slo)                 # until a request is answered in time again: the queue is gone
        else:
            time.sleep(plan.pause_seconds)
        s = t.rate(r, plan.step_seconds, phase, slo_ms=slo)
        backlog[0] = not s.passed
        entry["steps"].append(s.to_json(histogram=False))
        save()
        say(f"{tag}: {s.line()}")
        return s.failure

    step(rate, "common")
    mst = find_mst(step, plan.mst_first_guess * capacity.achieved_rps, search, slo, floor=plan.mst_floor_rps)
    entry["mst"] = mst.to_json()
    save()
    say(f"{tag}: MST {table.mst_cell([mst])}")


# --- reading the records -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Cell:
    """One (latency, N) of one iteration."""
    latency: float
    n: int
    iteration: int
    mst: Mst | None
    steps: list[Step]
    pool_limit: float | None
    trips: int
    slo_ms: float | None
    common_rps: float | None
    floor: int

    @property
    def confirmed(self) -> bool:
        return bool(self.mst and self.mst.rps and self.mst.confirmed)

    @property
    def none_passed(self) -> bool:
        return bool(self.mst) and not self.mst.rps

    @property
    def lowest(self) -> int:
        return (table.lowest_tried(self.mst) if self.mst else None) or self.floor

    @property
    def below_floor(self) -> bool:
        """No rate passed down to the floor: the MST lies below every rate the search could name."""
        return self.none_passed and self.lowest <= self.floor

    def common(self) -> Step | None:
        return next((s for s in self.steps if s.phase == "common"), None)

    def at_mst(self) -> list[Step]:
        return [s for s in self.steps if self.mst and s.target_rps == self.mst.rps and s.passed
                and s.phase in ("mst", "confirm")]


def cells_of(record: dict) -> list[Cell]:
    out = []
    iteration = record.get("iteration", 1)
    for jvm in record.get("jvms") or []:
        latency = float(jvm.get("latency_ms") or 0)
        for c in jvm.get("cells") or []:
            out.append(Cell(latency, c["n"], iteration, Mst.from_json(c.get("mst")),
                            [Step.from_json(s) for s in c.get("steps") or []], c.get("pool_limit_rps"),
                            c.get("round_trips_per_lookup") or jvm.get("round_trips_per_lookup") or 1,
                            c.get("slo_ms"), c.get("common_rps"), c.get("floor_rps") or 0))
    return out


def grouped(rs: RunSet) -> dict[str, dict[tuple[float, int], list[Cell]]]:
    """label -> (latency, N) -> that cell of every iteration."""
    out: dict[str, dict[tuple[float, int], list[Cell]]] = {}
    for label, records in rs.by_label.items():
        by: dict[tuple[float, int], list[Cell]] = {}
        for r in records:
            for c in cells_of(r):
                by.setdefault((c.latency, c.n), []).append(c)
        out[label] = by
    return out


def mst_spread(cs: list[Cell]) -> spans.Spread | None:
    return table.mst_spread(c.mst for c in cs)


def compared(cs: list[Cell]) -> spans.Spread | None:
    """For pairwise comparison only (never shown): an iteration where no rate passed down to the floor lies below
    every rate the search names, so it counts as 0; unconfirmed iterations, and those whose search ran out of steps
    before a rate passed (the MST lies somewhere below the lowest rate tried), leave the figure partial."""
    values = [c.mst.rps for c in cs if c.confirmed] + [0 for c in cs if c.below_floor]
    return spread(values, at_least=any(not c.mst.bounded for c in cs if c.confirmed), of=sum(1 for c in cs if c.mst))


def mst_text(cs: list[Cell]) -> str:
    return table.mst_cell(c.mst for c in cs)


def utilisation(cs: list[Cell], cpus: dict) -> tuple[dict[str, float], bool]:
    """Median over the confirmed iterations of each limit's use at the MST: CPU (busy share of the cores at the MST
    steps) and pool (MST / pool limit, with the round trips measured in that JVM); and whether the generator stopped
    a search."""
    cpu, pool = [], []
    for c in cs:
        if not c.confirmed:
            continue
        at = [u for s in c.at_mst() if (u := caps.cpu_utilisation(s, cpus)) is not None]
        if at:
            cpu.append(statistics.median(at))
        if c.pool_limit:
            pool.append(c.mst.rps / c.pool_limit)
    util = {k: round(statistics.median(v), 2) for k, v in (("CPU", cpu), ("pool", pool)) if v}
    return util, any(c.mst and c.mst.limit == GENERATOR for c in cs)


NOT_REACHED = "not reached"


def cap_text(cs: list[Cell], cpus: dict) -> tuple[str, str]:
    """The cap's name (caps.classify) and the text with its margins (caps.explain). An MST that never met a failing
    rate (≥) reached no limit: nothing is named for it."""
    util, generator = utilisation(cs, cpus)
    if not util and not generator:
        return "–", "–"
    confirmed = [c for c in cs if c.confirmed]
    if not generator and confirmed and any(not c.mst.bounded for c in confirmed):
        name = NOT_REACHED
    else:
        name = caps.classify(util, generator)
    return name, f"{name} ({caps.explain(util)})" if util else name


def trips_of(cs: list[Cell]) -> int:
    return int(statistics.median(c.trips for c in cs)) if cs else 1


# --- the report ---------------------------------------------------------------------------------------------

def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    by = grouped(rs)
    keys = sorted({k for cells in by.values() for k in cells})
    if not keys:
        return None
    plan, cpus, pool = rs.settings(NAME), rs.first("cpus") or rs.settings("cpus"), rs.first("pool_size")
    latencies = sorted({lat for lat, _ in keys})
    ns_at = {lat: sorted({n for la, n in keys if la == lat}) for lat in latencies}
    qps = plan.get("common_queries_per_s")
    proxies = sorted({(j.get("proxy") or {}).get("tool") for r in rs.records
                      for j in r.get("jvms") or [] if j.get("proxy")} - {None})
    body = ["`GET /?queries=N`: N lookups of the token's user one after another inside the request, "
            + " and ".join(f"N = {', '.join(map(str, ns_at[lat]))} "
                           + ("on loopback" if not lat else f"at {lat:g} ms per database round trip")
                           for lat in latencies)
            + (f" (the latency added by {', '.join(proxies)})" if proxies else "")
            + ". Per port and iteration a fresh JVM per latency, warmed up until steady; per N a step at the common "
            + (f"rate ({num(qps)} lookups/s: {num(qps)} / N req/s)" if qps else "rate") + " and an MST search "
            "confirmed by a second pass; "
            f"every step judged by the one rule with p99 ≤ SLO = rule.slo_ms(N × latency). "
            f"{rs.iterations} iteration(s) per port (run {', '.join(rs.run_ids)}); cells are median "
            f"(min–max) of the confirmed MSTs; beside each the lowest rate that failed; pool {num(pool)} connections.",
            ""]
    if rs.environment.get("quick"):
        body += ["> **QUICK=1 smoke run: these numbers are not results.**", ""]
    for lat in latencies:
        body += mst_table(by, lat, ns_at[lat], cpus, pool)
    unconfirmed = [f"{label} {where(c.latency)} N = {c.n} #{c.iteration}: {c.mst.rps:,}/s passed once ({c.mst.reason})"
                   for label, cells in by.items() for cs in cells.values() for c in cs
                   if c.mst and c.mst.rps and not c.mst.confirmed]
    if unconfirmed:
        body += ["Not in the MST columns (not confirmed): " + "; ".join(unconfirmed) + ".", ""]
    body += charts.link("MST against N, per port and latency", mst_chart(chart_dir / "queries-mst-vs-n.png", by,
                                                                          latencies))
    decisions = [d for lat in latencies if (d := decision(by, lat, ns_at[lat], cpus, pool))]
    return Section("N sequential queries per request", ANCHOR, body,
                   appendix=appendix(by, latencies, ns_at) + jvm_table(rs),
                   decisions=decisions, verdict=verdict(by, latencies, ns_at, cpus, pool), warnings=rs.warnings)


def mst_table(by, lat: float, ns: list[int], cpus: dict, pool) -> list[str]:
    slos = sorted({c.slo_ms for cells in by.values() for (la, n), cs in cells.items() if la == lat for c in cs
                   if c.slo_ms is not None})
    out = [f"**{where(lat).capitalize()}**"
           + (f" (SLO p99 ≤ {', '.join(f'{s:g}' for s in slos)} ms)" if slos else "") + ":", "",
           "| port | " + " | ".join(f"N={n} MST (req/s) ✗ first failing | cap at N={n}" for n in ns) + " |",
           "|---|" + "---:|---|" * len(ns)]
    for label, cells in by.items():
        row = []
        for n in ns:
            cs = cells.get((lat, n), [])
            row += [mst_text(cs), cap_text(cs, cpus)[1]]
        out.append(f"| {label} | {' | '.join(row)} |")
    if lat and pool:
        limits = [x for n in ns for x in (f"*{num(pool_limit(n, lat, pool))}*", "")]
        out.append(f"| *pool limit {pool} / (N × {lat:g} ms)* | " + " | ".join(limits) + " |")
        doubled = {label: trips_of(cs) for label, cells in by.items() for (la, n), cs in cells.items()
                   if la == lat and trips_of(cs) > 1}
        if doubled:
            out += ["", f"Measured in each JVM (one request alone at 0 ms and at {lat:g} ms): "
                    + ", ".join(f"{label} takes {k} round trips per lookup" for label, k in sorted(doubled.items()))
                    + "; its pool limit is that row divided by them (the cap's margin uses it)."]
    return out + [""]


def mst_chart(path: Path, by, latencies: list[float]) -> Path | None:
    series, styles = {}, {}
    for label, cells in by.items():
        for lat in latencies:
            name = f"{label} ({where(lat)})"
            series[name] = [(n, mst_spread(cs)) for (la, n), cs in sorted(cells.items()) if la == lat]
            styles[name] = "-" if not lat else "--"
    return charts.lines(path, "Confirmed MST against N (solid: loopback, dashed: with the latency)",
                        "N (sequential lookups per request, log)", "MST (req/s, log)", series, logx=True, logy=True,
                        styles=styles)


def decision(by, lat: float, ns: list[int], cpus: dict, pool) -> Decision | None:
    per_n = {n: {label: s for label, cells in by.items() if (s := compared(cells.get((lat, n), [])))} for n in ns}
    per_n = {n: items for n, items in per_n.items() if items}
    if not any(c.confirmed for cells in by.values() for n in per_n for c in cells.get((lat, n), [])):
        return None                      # a choice rests on confirmed MSTs only
    names = [cap_text(cells.get((lat, n), []), cpus)[0] for cells in by.values() for n in per_n]
    names = [x for x in names if x != "–"]
    counted = {x: names.count(x) for x in sorted(set(names), key=lambda x: (-names.count(x), x))}
    top = [x for x in counted if counted[x] == max(counted.values(), default=0)]
    top_cap = top[0] if len(top) == 1 else "unclear"
    text = {"pool": f"the pool: {num(pool)} / (N × round trips × {lat:g} ms)",
            "CPU": "CPU per request (app, database and generator on the same cores)"}
    tally = f"{', '.join(f'{k} in {v}' for k, v in counted.items())} of {len(names)} (port, N) cells"
    if not names:
        decided = "no confirmed MST"
    elif top_cap in text:
        decided = f"{text[top_cap]} (caps: {tally})"
    else:
        decided = f"no one limit explains the MSTs (caps: {tally})"
    choice = table.choice(list(per_n.values()), [f"N = {n}" for n in per_n])
    settings = (f"DB_POOL_SIZE ([db] pool_size {num(pool)}): the limit is pool / (N × round trips × RTT)"
                if top_cap == "pool" else "defaults")
    regime = ("N sequential queries per request, database on loopback" if not lat else
              f"N sequential queries per request, {lat:g} ms per database round trip")
    return Decision(regime, decided, choice, settings, f"#{ANCHOR}")


def verdict(by, latencies: list[float], ns_at: dict, cpus: dict, pool) -> list[str]:
    out = []
    for lat in latencies:
        n = ns_at[lat][-1]
        items = {label: s for label, cells in by.items() if (s := mst_spread(cells.get((lat, n), [])))}
        if items:
            out.append(f"{where(lat).capitalize()}, N = {n}: the confirmed MST "
                       + ("is " if len(items) == 1 else "runs ") + table.range_sentence(items) + ".")
        if lat and pool:
            shares = {(label, m): c for label, cells in by.items() for m in ns_at[lat]
                      if (s := mst_spread(cs := cells.get((lat, m), []))) and not s.at_least and not s.partial
                      and (c := utilisation(cs, cpus)[0].get("pool")) is not None}
            if shares:
                lo, hi = min(shares, key=shares.get), max(shares, key=shares.get)
                limits = " and ".join(f"{num(pool_limit(m, lat, pool))} req/s at N = {m}" for m in ns_at[lat])
                reach = (f"{shares[lo]:.2f} ({lo[0]}, N = {lo[1]})" if lo == hi else
                         f"{shares[lo]:.2f} ({lo[0]}, N = {lo[1]}) to {shares[hi]:.2f} ({hi[0]}, N = {hi[1]})")
                out.append(f"At {lat:g} ms the pool of {num(pool)} allows {num(pool)} / (N × {lat:g} ms) = {limits} "
                           f"with one round trip per lookup; the confirmed MSTs reach {reach} of each port's own "
                           f"limit (medians; bounds and partial figures left out).")
            doubled = sorted({(label, trips_of(cs)) for label, cells in by.items() for (la, _), cs in cells.items()
                              if la == lat and trips_of(cs) > 1})
            for label, k in doubled:
                out.append(f"{label} takes {k} database round trips per lookup at {lat:g} ms (one request alone, "
                           f"measured in each JVM): its pool limit is 1/{k} of the others'.")
        for m in ns_at[lat]:
            for label, cells in by.items():
                cs = [c for c in cells.get((lat, m), []) if c.mst]
                none = [c for c in cs if c.none_passed]
                if none:
                    failing = cell(c.mst.first_failing_rps for c in none if c.mst.first_failing_rps)
                    out.append(f"{label} at {where(lat)}, N = {m}: no rate ≥ {max(c.lowest for c in none):,}/s passed "
                               f"in {len(none)} of {len(cs)} iteration(s)"
                               + (f" (first failing {failing}/s)" if failing != "–" else "") + ".")
    if 0.0 in ns_at and len(ns_at[0.0]) > 1:
        lo_n, hi_n = ns_at[0.0][0], ns_at[0.0][-1]
        ratios = {label: r for label, cells in by.items()
                  if (r := spans.ratio(mst_spread(cells.get((0.0, lo_n), [])),
                                       mst_spread(cells.get((0.0, hi_n), [])))) is not None}
        if ratios:
            lo, hi = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
            out.append(f"On loopback, going from N = {lo_n} to N = {hi_n} divides the median MST by "
                       f"{ratios[lo]:.1f} ({lo})" + (f" to {ratios[hi]:.1f} ({hi})" if hi != lo else "") + ".")
        n = ns_at[0.0][-1]
        cost = {label: s for label, cells in by.items()
                if (s := spread(c.common().app_cpu_us_per_request for c in cells.get((0.0, n), [])
                                if c.common() and c.common().passed))}
        if cost:
            cheap, dear = min(cost, key=lambda k: cost[k].median), max(cost, key=lambda k: cost[k].median)
            rate = next((c.common_rps for cells in by.values() for c in cells.get((0.0, n), []) if c.common_rps), None)
            out.append(f"On loopback at N = {n} and the common rate ({num(rate)} req/s): app CPU per request "
                       + (f"{span(cost[cheap])} µs ({cheap})." if cheap == dear else
                          f"from {span(cost[cheap])} µs ({cheap}) to {span(cost[dear])} µs ({dear})."))
    return out


def appendix(by, latencies: list[float], ns_at: dict) -> list[str]:
    out = ["## N sequential queries per request: every step", "",
           "At the common rate (the same lookups per second for every N): median (min–max) over the iterations of "
           "the steps that passed. Latency in ms from each request's intended send time.", ""]
    for lat in latencies:
        out += [f"### queries at the common rate, {where(lat)}", "",
                "| port | N | rate (req/s) | p50 (ms) | p99 (ms) | app µs/req | DB µs/req | proxy µs/req | "
                "DB statements/req | passed |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, cells in by.items():
            for n in ns_at[lat]:
                cs = cells.get((lat, n), [])
                common = [s for c in cs if (s := c.common())]
                ok = [s for s in common if s.passed]
                out.append(
                    f"| {label} | {n} | {cell(s.target_rps for s in common)} | "
                    f"{cell((s.latency_ms.get('p50') for s in ok), ms)} | {cell((s.p99 for s in ok), ms)} | "
                    f"{cell(s.app_cpu_us_per_request for s in ok)} | {cell(s.db_cpu_us_per_request for s in ok)} | "
                    f"{cell(s.extra.get('proxy_cpu_us_per_request') for s in ok)} | "
                    f"{cell((s.kernel.get('db_questions_per_request') for s in ok), lambda v: num(v, 1))} | "
                    f"{len(ok)}/{len(common)} |")
        out.append("")
    for label, cells in by.items():
        out += [f"### queries: {label}", ""]
        for (lat, n), cs in sorted(cells.items()):
            for c in sorted(cs, key=lambda c: c.iteration):
                m = c.mst
                out += [f"**{where(lat)}, N = {n}, iteration {c.iteration}**: SLO p99 ≤ {num(c.slo_ms, 1)} ms; MST "
                        f"{table.mst_cell([m])}"
                        + (f", first failing {m.first_failing_rps:,}/s" if m and m.first_failing_rps else "")
                        + (f"; pool limit {num(c.pool_limit)}/s ({c.trips} round trip(s) per lookup)"
                           if c.pool_limit else "") + ".", ""]
                out += table.step_table(c.steps, ("proxy cores",))
    return out


def jvm_table(rs: RunSet) -> list[str]:
    out = ["### queries: the JVMs", "", "| port | iteration | where | startup (s) | warm-up (s) | warm-up rate (req/s) "
           "| alone at 0 ms (ms) | alone at the latency (ms) | round trips per lookup |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for label, records in rs.by_label.items():
        for r in records:
            for j in r.get("jvms") or []:
                w = j.get("warmup") or {}
                out.append(f"| {label} | {r.get('iteration', 1)} | {where(j.get('latency_ms') or 0)} | "
                           f"{num(j.get('startup_s'), 1)} | {num(w.get('seconds'))}"
                           f"{'' if not w or w.get('settled') else ' (**not settled**)'} | {num(w.get('rate'))} | "
                           f"{num(j.get('sequential_ms_at_0'), 2)} | {num(j.get('sequential_ms'), 2)} | "
                           f"{j.get('round_trips_per_lookup') or 1} |")
    return out + [""] if len(out) > 2 else []

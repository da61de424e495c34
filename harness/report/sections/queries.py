"""queries' part of the report: per latency the confirmed MSTs against N and what capped them, a decision per
latency, the verdict, and every step in the appendix."""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from .. import charts, table
from ..section import Decision, Section
from ...method import caps, spans
from ...method.queries import pool_limit, where
from ...method.record import Mst, Step, dig, steps_of
from ...method.runset import RunSet
from ...method.spans import cell, ms, num, span, spread


@dataclasses.dataclass
class Cell:
    """One (latency, N) of one iteration."""
    iteration: int
    mst: Mst | None
    steps: list[Step]
    pool_limit: float | None
    trips: int
    slo_ms: float
    common_rps: float | None
    floor: int

    @property
    def confirmed(self) -> bool:
        return bool(self.mst and self.mst.rps and self.mst.confirmed)

    @property
    def none_passed(self) -> bool:
        return bool(self.mst) and not self.mst.passed_once

    @property
    def none_twice(self) -> bool:
        """Rates passed once, none twice: no MST, but not a port that failed every rate either."""
        return bool(self.mst) and not self.mst.rps and self.mst.passed_once

    @property
    def lowest(self) -> int:
        """The lowest rate the search tried (the floor when it tried none)."""
        return table.lowest_tried(self.mst) or self.floor

    @property
    def p50_at_lowest(self) -> float | None:
        """The median latency at the lowest rate the search tried: over the SLO, half the requests alone take longer
        than the p99 may, so no lower rate passes either (the search need not reach its floor)."""
        return min(((s.target_rps, s.latency_ms.get("p50")) for s in self.steps if s.phase == "mst"),
                   default=(None, None))[1]

    @property
    def failed_every_rate(self) -> bool:
        return self.none_passed and (self.lowest <= self.floor or (self.p50_at_lowest or 0) > self.slo_ms)

    def common(self) -> Step | None:
        return next((s for s in self.steps if s.phase == "common"), None)

    def at_mst(self) -> list[Step]:
        """The steps that passed at a confirmed MST."""
        return [s for s in self.steps if s.target_rps == self.mst.rps and s.passed and s.phase in ("mst", "confirm")]


def cells_of(record: dict) -> list[tuple[tuple[float, int], Cell]]:
    return [((record["jvm"]["latency_ms"], c["coords"]["n"]),
             Cell(record["iteration"], Mst.from_json(c["mst"]), steps_of(c), c["pool_limit_rps"],
                  c.get("round_trips_per_lookup") or record["round_trips_per_lookup"], c["slo_ms"], c["common_rps"],
                  c["floor_rps"]))
            for c in record["cells"]]


def grouped(rs: RunSet) -> tuple[dict[str, dict[tuple[float, int], list[Cell]]], dict[float, list[int]]]:
    """label -> (latency, N) -> that cell of every iteration ([] where it has none); and latency -> its Ns."""
    found = {label: [kc for r in records for kc in cells_of(r)] for label, records in rs.by_label.items()}
    keys = sorted({k for pairs in found.values() for k, _ in pairs})
    ns_at = {lat: [n for la, n in keys if la == lat] for lat, _ in keys}
    return {label: {k: [c for key, c in pairs if key == k] for k in keys} for label, pairs in found.items()}, ns_at


def mst_spread(cs: list[Cell]) -> spans.Spread | None:
    return table.mst_spread(c.mst for c in cs)


def compared(cs: list[Cell]) -> spans.Spread | None:
    """For pairwise comparison only (never shown): no rate passed down to the floor, or a median over the SLO at the
    lowest rate tried, counts as 0; unconfirmed searches and those that ran out of steps above the floor leave the
    figure partial."""
    values = [c.mst.rps for c in cs if c.confirmed] + [0 for c in cs if c.failed_every_rate]
    return spread(values, at_least=any(not c.mst.bounded for c in cs if c.confirmed), of=sum(1 for c in cs if c.mst))


def utilisation(cs: list[Cell], cpus: dict) -> dict[str, float]:
    """Median over the confirmed iterations of each limit's use at the MST: CPU (the CPU set's) and pool."""
    found = [c for c in cs if c.confirmed]
    cpu = [u.median for c in found if (u := spread(caps.cpu_utilisation(s, cpus) for s in c.at_mst()))]
    pool = [c.mst.rps / c.pool_limit for c in found if c.pool_limit]
    return {k: statistics.median(v) for k, v in (("CPU", cpu), ("pool", pool)) if v}   # unrounded: 0.797 is < 0.8


def cap_text(cs: list[Cell], cpus: dict) -> tuple[str, str]:
    """The cap's name and its text with margins, from the confirmed MSTs only (those that give the figure); the
    generator's only where it stopped them all, else the others' limit and how many it stopped."""
    util = utilisation(cs, cpus)
    found = [c for c in cs if c.confirmed]
    stopped = sum(1 for c in found if caps.generator_cap(c.mst.limit))
    if not util and not stopped:
        return "–", "–"
    unbounded = any(not c.mst.bounded and not caps.generator_cap(c.mst.limit) for c in found)
    name = ("generator" if stopped == len(found) else "not reached" if unbounded
            else caps.classify(util, mst=True))
    text = caps.text(util, name) if util else name
    return name, text + (f"; the generator stopped {stopped} of {len(found)}" if 0 < stopped < len(found) else "")


def doubled(by, lat: float) -> list[tuple[str, int]]:
    """(port, round trips per lookup) per N at `lat` where a port takes more than one (the median of its JVMs)."""
    return [(label, k) for label, cells in by.items() for (la, _), cs in cells.items()
            if la == lat and cs and (k := int(statistics.median(c.trips for c in cs))) > 1]


def low_to_high(values: dict, text, first: str = "") -> str:
    """text(key) of the lowest value, or `first` + "text(lowest) to text(highest)" where they differ."""
    lo, hi = min(values, key=values.get), max(values, key=values.get)
    return text(lo) if lo == hi else f"{first}{text(lo)} to {text(hi)}"


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    by, ns_at = grouped(rs)
    if not ns_at:
        return None
    cpus, pool, qps = rs.first("cpus"), rs.first("pool_size"), rs.plan.get("common_queries_per_s")
    proxies = sorted({r["proxy"]["tool"] for r in rs.records if r.get("proxy")})
    body = ["`GET /?queries=N`: N lookups of the token's user one after another inside the request, "
            + " and ".join(f"N = {', '.join(map(str, ns))} "
                           + ("on loopback" if not lat else f"at {lat:g} ms per database round trip")
                           for lat, ns in ns_at.items())
            + (f" (the latency added by {', '.join(proxies)})" if proxies else "")
            + ". Per port and iteration a fresh JVM per latency, warmed up until steady; per N a step at the common "
            + (f"rate ({num(qps)} lookups/s: {num(qps)} / N req/s)" if qps else "rate")
            + " and an MST search confirmed by a second pass; every step judged by the one rule with p99 ≤ SLO = "
            f"rule.slo_ms(N × latency). {rs.iterations} iteration(s) per port (run {', '.join(rs.run_ids)}); cells "
            f"are median (min–max) of the confirmed MSTs; beside each the lowest rate that failed; pool {num(pool)} "
            "connections.", ""]
    if rs.environment.get("quick"):
        body += ["> **QUICK=1 smoke run: these numbers are not results.**", ""]
    for lat, ns in ns_at.items():
        body += mst_table(by, lat, ns, cpus, pool)
    unconfirmed = [f"{label} {where(lat)} N = {n} #{c.iteration}: {c.mst.rps:,}/s passed once ({c.mst.reason})"
                   for label, cells in by.items() for (lat, n), cs in cells.items() for c in cs
                   if c.mst and c.mst.rps and not c.mst.confirmed]
    if unconfirmed:
        body += ["Not in the MST columns (not confirmed): " + "; ".join(unconfirmed) + ".", ""]
    body += charts.link("MST against N, per port and latency", mst_chart(chart_dir / "queries-mst-vs-n.png", by, ns_at))
    decisions = [d for lat, ns in ns_at.items() if (d := decision(by, lat, ns, cpus, pool))]
    headline, findings = verdict(by, ns_at, cpus, pool)
    return Section("N sequential queries per request", rs.scenario, body, appendix=appendix(by, ns_at) + jvm_table(rs),
                   decisions=decisions, verdict=headline, findings=findings, warnings=rs.warnings)


def mst_table(by, lat: float, ns: list[int], cpus: dict, pool: int) -> list[str]:
    slos = sorted({c.slo_ms for cells in by.values() for n in ns for c in cells[(lat, n)]})
    header = ["port"] + [h for n in ns for h in (f"N={n} MST (req/s) ✗ first failing", f"<cap at N={n}")]
    rows = [[label] + [x for n in ns for x in (table.mst_cell(c.mst for c in cells[(lat, n)]),
                                               cap_text(cells[(lat, n)], cpus)[1])]
            for label, cells in by.items()]
    if lat:
        rows.append([f"*pool limit {pool} / (N × {lat:g} ms)*"]
                    + [x for n in ns for x in (f"*{num(pool_limit(n, lat, pool))}*", "")])
    out = [f"**{where(lat).capitalize()}**" + (f" (SLO p99 ≤ {', '.join(f'{s:g}' for s in slos)} ms)" if slos else "")
           + ":", ""] + table.markdown(header, rows)
    if twice := sorted(dict(doubled(by, lat)).items()):
        out += [f"Measured in each JVM (one request alone at 0 ms and at {lat:g} ms): "
                + ", ".join(f"{label} takes {k} round trips per lookup" for label, k in twice)
                + "; its pool limit is that row divided by them (the cap's margin uses it).", ""]
    return out


def mst_chart(path: Path, by, ns_at: dict) -> Path | None:
    series = {f"{label} ({where(lat)})": [(n, mst_spread(cells[(lat, n)])) for n in ns]
              for label, cells in by.items() for lat, ns in ns_at.items()}
    return charts.lines(path, "Confirmed MST against N (solid: loopback, dashed: with the latency)",
                        "N (sequential lookups per request, log)", "MST (req/s, log)", series, logx=True, logy=True,
                        styles={f"{label} ({where(lat)})": "--" for label in by for lat in ns_at if lat})


def common_cost(by, n: int) -> dict[str, spans.Spread]:
    """App CPU per request in each port's common steps on loopback at N that passed (partial where some failed)."""
    return {label: sp for label, cells in by.items()
            if (sp := spread((s.app_cpu_us_per_request for c in cells[(0.0, n)] if (s := c.common()) and s.passed),
                             of=sum(1 for c in cells[(0.0, n)] if c.common())))}


def loopback_common_rps(by, n: int) -> float | None:
    """The common rate each record noted on loopback at N (the same for every port)."""
    return next((c.common_rps for cells in by.values() for c in cells[(0.0, n)] if c.common_rps), None)


def decision(by, lat: float, ns: list[int], cpus: dict, pool: int) -> Decision | None:
    if not lat and (cost := common_cost(by, ns[-1])):
        # CPU decides on loopback, as in the baseline: every role shares the cores, and the CPU per request is the
        # figure that is stable across iterations (an MST near the cores' limit flips with the box's noise)
        rate = loopback_common_rps(by, ns[-1])
        return Decision("N sequential queries per request, database on loopback",
                        f"app CPU per request at N = {ns[-1]} and {num(rate)} req/s, lower first (≈: ranges overlap)",
                        table.ranked(cost, higher_is_better=False), "defaults")
    per_n = {n: items for n in ns
             if (items := {label: s for label, cells in by.items() if (s := compared(cells[(lat, n)]))})}
    if not any(c.confirmed for cells in by.values() for n in per_n for c in cells[(lat, n)]):
        return None                      # a choice rests on confirmed MSTs only
    names = [x for cells in by.values() for n in per_n if (x := cap_text(cells[(lat, n)], cpus)[0]) != "–"]
    counted = {x: names.count(x) for x in sorted(set(names), key=lambda x: (-names.count(x), x))}
    top = [x for x, k in counted.items() if k == max(counted.values())]
    top_cap = top[0] if len(top) == 1 else "unclear"
    text = {"pool": f"the pool: {num(pool)} / (N × round trips × {lat:g} ms)",
            "CPU": "CPU per request (app, database and generator on the same cores)"}
    tally = f"{', '.join(f'{k} in {v}' for k, v in counted.items())} of {len(names)} (port, N) cells"
    return Decision("N sequential queries per request, "
                    + ("database on loopback" if not lat else f"{lat:g} ms per database round trip"),
                    f"{text.get(top_cap, 'no one limit explains the MSTs')} (caps: {tally})" if names
                    else "no confirmed MST",
                    table.choice(list(per_n.values()), [f"N = {n}" for n in per_n], reasons=False),
                    f"DB_POOL_SIZE ([db] pool_size {num(pool)}): the limit is pool / (N × round trips × RTT)"
                    if top_cap == "pool" else "defaults")


def verdict(by, ns_at: dict, cpus: dict, pool: int) -> tuple[list[str], list[str]]:
    """The verdict's sentences (the MSTs at the largest N, what takes a port out or halves its limit) and the
    section's other findings."""
    out, more = [], []
    for lat, ns in ns_at.items():
        if items := {label: s for label, cells in by.items() if (s := mst_spread(cells[(lat, ns[-1])]))}:
            out.append(f"{where(lat).capitalize()}, N = {ns[-1]}: the confirmed MST "
                       + ("is " if len(items) == 1 else "runs ") + table.range_sentence(items) + ".")
        # the pool's share is measured at a latency only (loopback cells have no pool limit)
        shares = {(label, m): u for label, cells in by.items() for m in ns
                  if (s := mst_spread(cs := cells[(lat, m)])) and not s.at_least and not s.partial
                  and (u := utilisation(cs, cpus).get("pool")) is not None}
        if shares:
            more.append(f"At {lat:g} ms the pool of {num(pool)} allows {num(pool)} / (N × {lat:g} ms) = "
                        + " and ".join(f"{num(pool_limit(m, lat, pool))} req/s at N = {m}" for m in ns)
                        + " with one round trip per lookup; the confirmed MSTs reach "
                        + low_to_high(shares, lambda k: f"{shares[k]:.2f} ({k[0]}, N = {k[1]})")
                        + " of each port's own limit (medians; bounds and partial figures left out).")
        out += [f"{label} takes {k} database round trips per lookup at {lat:g} ms (one request alone, measured in "
                f"each JVM): its pool limit is 1/{k} of the others'." for label, k in sorted(set(doubled(by, lat)))]
        for m in ns:
            for label, cells in by.items():
                searched = sum(1 for c in cells[(lat, m)] if c.mst)
                if none := [c for c in cells[(lat, m)] if c.none_passed]:
                    failing = spread(c.mst.first_failing_rps for c in none)
                    slow = spread(p for c in none if (p := c.p50_at_lowest) and p > c.slo_ms)
                    out.append(f"{label} at {where(lat)}, N = {m}: no rate ≥ {max(c.lowest for c in none):,}/s passed "
                               f"in {len(none)} of {searched} iteration(s)"
                               + (f" (first failing {span(failing)}/s)" if failing else "")
                               + (f"; p50 at the lowest rate tried {span(slow, ms)} ms, over the p99 SLO of "
                                  f"{max(c.slo_ms for c in none):g} ms, so no lower rate passes either" if slow else "")
                               + ".")
                if once := [c for c in cells[(lat, m)] if c.none_twice]:
                    passed = spread(max(p[0] for p in c.mst.probes if p[1]) for c in once)
                    out.append(f"{label} at {where(lat)}, N = {m}: no rate passed twice in {len(once)} of {searched} "
                               f"iteration(s) (the highest passing once: {span(passed)}/s).")
    if len(ns_at.get(0.0, [])) > 1:
        lo, hi = ns_at[0.0][0], ns_at[0.0][-1]
        ratios = {label: r for label, cells in by.items()
                  if (r := spans.ratio(mst_spread(cells[(0.0, lo)]), mst_spread(cells[(0.0, hi)]))) is not None}
        if ratios:
            more.append(f"On loopback, going from N = {lo} to N = {hi} divides the median MST by "
                        + low_to_high(ratios, lambda k: f"{ratios[k]:.1f} ({k})") + ".")
        if cost := common_cost(by, hi):
            rate = loopback_common_rps(by, hi)
            out.append(f"On loopback CPU decides: by app CPU per request at N = {hi} and {num(rate)} req/s (the runs "
                       f"whose common step passed) the ports order {table.ranked(cost, higher_is_better=False)}; a > "
                       "holds for every pair across it, ≈ where ranges overlap.")
            more.append(f"On loopback at N = {hi} and the common rate ({num(rate)} req/s): app CPU per request "
                        + low_to_high({k: s.median for k, s in cost.items()}, lambda k: f"{span(cost[k])} µs ({k})",
                                     "from ") + ".")
    return out, more


def appendix(by, ns_at: dict) -> list[str]:
    out = ["## N sequential queries per request: every step", "",
           "At the common rate (the same lookups per second for every N): median (min–max) over the iterations of "
           "the steps that passed. Latency in ms from each request's intended send time.", ""]
    for lat, ns in ns_at.items():
        rows = []
        for label, cells in by.items():
            for n in ns:
                common = [s for c in cells[(lat, n)] if (s := c.common())]
                ok = [s for s in common if s.passed]
                rows.append([label, n, cell(s.target_rps for s in common),
                             cell((s.latency_ms.get("p50") for s in ok), ms), cell((s.p99 for s in ok), ms),
                             cell(s.app_cpu_us_per_request for s in ok), cell(s.db_cpu_us_per_request for s in ok),
                             cell(s.extra.get("proxy_cpu_us_per_request") for s in ok),
                             cell((s.kernel.get("db_questions_per_request") for s in ok), lambda v: num(v, 1)),
                             f"{len(ok)}/{len(common)}"])
        out += [f"### queries at the common rate, {where(lat)}", ""] + table.markdown(
            ["port", "N", "rate (req/s)", "p50 (ms)", "p99 (ms)", "app µs/req", "DB µs/req", "proxy µs/req",
             "DB statements/req", "passed"], rows)
    for label, cells in by.items():
        out += [f"### queries: {label}", ""]
        for (lat, n), cs in cells.items():
            for c in cs:
                failing = c.mst and c.mst.first_failing_rps
                out += [f"**{where(lat)}, N = {n}, iteration {c.iteration}**: SLO p99 ≤ {num(c.slo_ms, 1)} ms; MST "
                        f"{table.mst_cell([c.mst])}" + (f", first failing {failing:,}/s" if failing else "")
                        + (f"; pool limit {num(c.pool_limit)}/s ({c.trips} round trip(s) per lookup)"
                           if c.pool_limit else "") + ".", "", *table.step_table(c.steps, ("proxy cores",))]
    return out


def jvm_table(rs: RunSet) -> list[str]:
    rows = [[label, r["iteration"], where(r["jvm"]["latency_ms"]), num(r.get("startup_s"), 1),
             # a warm-up that ran and did not settle is marked
             num(dig(r, "warmup", "seconds")) + (" (**not settled**)" if dig(r, "warmup", "settled") is False else ""),
             num(dig(r, "warmup", "rate")), num(r.get("sequential_ms_at_0"), 2), num(r.get("sequential_ms"), 2),
             r["round_trips_per_lookup"]] for label, records in rs.by_label.items() for r in records]
    return ["### queries: the JVMs", ""] + table.markdown(
        ["port", "iteration", "<where", "startup (s)", "warm-up (s)", "warm-up rate (req/s)", "alone at 0 ms (ms)",
         "alone at the latency (ms)", "round trips per lookup"], rows)

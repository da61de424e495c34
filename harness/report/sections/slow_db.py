"""slow-db's part of the report: per port, pool and latency the confirmed MST and what held it, a decision per pool
and band of latencies, the verdict, the proxy's own cost, and every step in the appendix."""
from __future__ import annotations

import collections
import itertools
import re
from pathlib import Path

from ... import port_facts
from .. import charts, table
from ..section import BOUND, CPU, Decision, Regime, Section, text
from ...method import caps, runset, spans
from ...method.record import Mst, steps_of, warmup_text
from ...method.slow_db import AT_MST, LIMITS, classify, latency_of
from ...method.spans import cell, ms, num, span


DECIDED_BY = {
    "pool": "the pool: pool / (round trips × round-trip time)",
    "CPU": "CPU per request (app, database, generator and proxy on the same cores)",
    "threads": "Tomcat's threads / (round trips × round-trip time)",
    "generator": "the generator (it fell behind: the ports' limits lie higher)",
    "generator connections": "the generator's connections / round-trip time",
    "unclear": "no single limit (see the margins in the table)",
    caps.UNCLEAR + ": pool model exceeded": "no single limit: the MST lies above pool / (round trips × round-trip "
                                            "time), so the pool's model does not fit (see the margins in the table)",
    caps.UNCLEAR + ": threads model exceeded": "no single limit: the MST lies above Tomcat's threads / (round trips "
                                               "× round-trip time), so that model does not fit",
    "mixed": "no single limit",
    "not reached": "nothing yet: no rate failed (the MSTs are lower bounds)",
    "none passed": "nothing passed the rule, not even the lowest rate tried (see the steps)",
    caps.NOT_CONFIRMED: "not settled: no MST confirmed (a rate passed once only)",
    "not measured": "not measured (the run stopped during the search)",
}
SETTINGS_FOR = {
    "not reached": "none indicated (no limit met)",
    "generator": "none on the ports: a generator with more CPU (these MSTs are the generator's)",
}
MIXED = "mixed"      # no cap named in more than half of a latency's searches (DECIDED_BY["mixed"])
# per kind of generator_searches: the note's sentence and the verdict's clause
GENERATOR_TEXTS = (
    (" It stopped {n} ({which}): there the MST is where the generator stopped, a lower bound of the port (≥), cap "
     "`generator`.", "it stopped {n} (those MSTs are the generator's limit, lower bounds of the port)"),
    (" It stopped {n} during the confirmation ({which}): no MST was confirmed there.",
     "it stopped {n} during the confirmation (no MST confirmed there)"),
    (" In {n} more it fell behind at some rates but the port failed a rate of its own ({which}): those steps count as "
     "the generator's failure, not the port's, and the search probed lower, so ✗ is a rate the port itself failed and "
     "the cap comes from the margins.",
     "it fell behind at some step of {n} more (steps not counted as the port's failures)"),
)


def settings_for(cap: str, pool: int, pools: list[int], gains: list[str]) -> str:
    """What to change where `cap` held pool `pool`'s MSTs; a larger pool's effect only as measured (`gains`: the
    ports the largest pool lifted above this one's range)."""
    if cap in ("CPU", "pool"):
        if pool == max(pools):
            measured = f"no pool above {pool} was run"
            return f"`DB_POOL_SIZE` (not measured: {measured})" if cap == "pool" else f"none measured ({measured})"
        return (f"`DB_POOL_SIZE` (pool {max(pools)} raised the MST of {', '.join(gains)})" if gains
                else f"none measured: pool {max(pools)} lifted no port's MST above pool {pool}'s")
    if cap.startswith(caps.UNCLEAR) or cap == MIXED:
        return "none indicated (no single limit" + ("; a limit's model does not fit)" if "exceeded" in cap else ")")
    if "threads" in cap:
        return "`SERVER_TOMCAT_THREADS_MAX` (spring-platform's Tomcat threads) or virtual threads"
    if "pool" in cap:
        other = cap.replace("pool", "").replace(" and ", "")
        return f"none alone: `DB_POOL_SIZE` helps only as far as the {other} allows"
    return SETTINGS_FOR.get(cap, "none indicated (no single limit)")


def cap_name(cap: str) -> str:
    """A combination of limits as one name, in LIMITS' order (classify() orders it by margin), also within "unclear:
    threads and pool models exceeded"."""
    head, joined, tail = re.fullmatch(r"(unclear: )?(.*?)( models? exceeded)?", cap).groups("")
    parts = joined.split(" and ")
    if len(parts) < 2 or not set(parts) <= set(LIMITS):
        return cap
    return head + " and ".join(sorted(parts, key=LIMITS.index)) + tail


def tally(names: list[str]) -> str:
    """"CPU in 6, generator in 4, unclear in 3 of 18 searches": the caps counted, most frequent first."""
    counted = collections.Counter(names).most_common()      # equal counts in the order first named
    return f"{', '.join(f'{k} in {n}' for k, n in counted)} of {len(names)} searches"


def decisive(names: list[str]) -> str | None:
    """The cap named in more than half of the searches, else MIXED; None without searches."""
    top = table.dominant(names)
    return None if top is None else (top if 2 * names.count(top) > len(names) else MIXED)


def decided_text(cap: str, names: list[str]) -> str:
    """The decision's "what decided it": `cap` and in how many of the searches (`names`: their caps) it held."""
    head = DECIDED_BY.get(cap, f"{cap} together, each near its limit" if " and " in cap else cap)
    if cap == MIXED:
        return f"{head}: no cap held more than half of the {len(names)} searches"
    return f"{head}; {cap} in {names.count(cap)} of {len(names)} searches"


def cap_text(cs: list[dict]) -> str:
    """The caps of one table cell's searches (named as the decisions count them), counted, with median margins."""
    return table.cap_cell([cap_name(classify(c)) for c in cs], [c.get("utilisation") for c in cs])


def generator_searches(records: list[dict]) -> tuple[dict[str, list[int]], ...]:
    """{"port pool P at +L ms": [iterations]} of the searches the generator stopped at a confirmed MST (cap
    `generator`), of those it stopped during the confirmation, and of those it fell behind in at some step only."""
    groups: tuple[dict[str, list[int]], ...] = ({}, {}, {})
    for r in records:
        for c in r.get("cells") or []:
            mst = Mst.from_json(c.get("mst"))
            behind = any(caps.generator_cap(s.failure) for s in steps_of(c) if s.phase in ("mst", "confirm"))
            which = (0 if classify(c) == "generator" else 1 if mst and caps.generator_cap(mst.limit)
                     else 2 if behind else None)
            if which is not None:
                groups[which].setdefault(f"{runset.label(r)} pool {runset.pool_of(r)} at +{latency_of(c)} ms",
                                         []).append(r["iteration"])
    return groups


def searches_text(searches: dict[str, list[int]]) -> str:
    """"spring-virtual pool 64 at +5 ms #1, #2, #3; quarkus-virtual pool 256 at +50 ms #1"."""
    return "; ".join(f"{k} {', '.join(f'#{i}' for i in sorted(its))}" for k, its in searches.items())


def pools_and_latencies(rs: runset.RunSet) -> tuple[list[int], list]:
    """The pools and the latencies the run set measured, each ascending (the first method's records have no cells)."""
    pools = sorted({runset.pool_of(r) for r in rs.records if r.get("cells")})
    return pools, sorted({latency_of(c) for r in rs.records for c in r.get("cells") or []})


def cells_by(by: dict[str, list[dict]], pools: list[int], latencies: list) -> dict[tuple, list[dict]]:
    """(port, pool, latency) -> its cells over the runs, every combination (an empty list where none ran)."""
    return {(n, p, lat): [c for r in recs if runset.pool_of(r) == p for c in r["cells"] if latency_of(c) == lat]
            for n, recs in by.items() for p in pools for lat in latencies}


def render(rs: runset.RunSet, chart_dir: Path) -> Section | None:
    by = rs.by_label
    pools, latencies = pools_and_latencies(rs)
    if not pools:
        return None
    default = rs.settings("db").get("pool_size")
    default = default if default in pools else pools[0]
    cost, plan, search = rs.first("proxy_cost"), rs.plan, rs.settings("search")
    group = cells_by(by, pools, latencies)
    mst_lists = {key: [Mst.from_json(c.get("mst")) for c in cs] for key, cs in group.items()}
    common = {(n, lat): [s for c in group[n, default, lat] for s in steps_of(c, "common")]
              for n in by for lat in latencies}
    slos = {lat: next((c["slo_ms"] for n in by for c in group[n, default, lat]), None) for lat in latencies}
    rate_at = {lat: next((s.target_rps for n in by for s in common[n, lat]), None) for lat in latencies}
    msts = {(p, lat): {n: s for n in by if (s := table.mst_spread(mst_lists[n, p, lat]))}
            for p in pools for lat in latencies}
    runs = {(r["port"], runset.pool_of(r), r["iteration"]) for r in rs.records}   # a remedy run's iterations count once
    iterations = sorted(set(collections.Counter(run[:2] for run in runs).values()))
    body = [f"Every port behind Toxiproxy ({cost.get('toxiproxy')}), which adds a fixed latency to every "
            f"database round trip, with pool(s) {', '.join(map(str, pools))} (default {default}); "
            f"{'–'.join(map(str, iterations))} iteration(s) on a fresh JVM per pool (run {', '.join(rs.run_ids)}). "
            "MST: the highest rate that passed the rule twice, ✗ the lowest that failed; SLO per latency: "
            + ", ".join(f"+{lat} ms → p99 ≤ {slos[lat]:g} ms" for lat in latencies if slos[lat] is not None)
            + ". " + text("slow_db-cap").format(exceeded=f"{caps.EXCEEDED - 1:.0%}"), ""]
    rows = []
    for name, lat in itertools.product(by, latencies):
        if not (every := [c for p in pools for c in group[name, p, lat]]):
            continue
        passed = [s for s in common[name, lat] if s.passed]
        failed = [s.failure for s in common[name, lat] if not s.passed]
        at_rate = (f"{cell((s.latency_ms.get('p50') for s in passed), ms)} / {cell((s.p99 for s in passed), ms)} "
                   f"at {num(rate_at[lat])}/s" + (f" ({len(failed)} failed: {failed[0]})" if failed else "")) \
            if common[name, lat] else "–"
        trips = "/".join(map(str, sorted({c.get("round_trips") for c in every} - {None}))) or "–"
        loaded = "/".join(map(str, sorted({c.get("round_trips_under_load") for c in every} - {None})))
        trips += f" ({loaded} under load)" if loaded and loaded != trips else ""
        per_pool = [(table.mst_cell(mst_lists[name, p, lat]), cap_text(group[name, p, lat])) for p in pools]
        rows.append([name, lat, trips, *itertools.chain(*per_pool), at_rate])
    header = ["port", "+ms", "round trips", *(h for p in pools for h in (f"MST pool {p}", f"<cap pool {p}")),
              f"p50 / p99 at the common rate, pool {default} (ms)"]
    body += table.markdown(header, rows)
    behind = [(sum(map(len, g.values())), searches_text(g), texts)
              for g, texts in zip(generator_searches(rs.records), GENERATOR_TEXTS) if g]
    fell = sum(n for n, _, _ in behind)
    if behind:
        body += [f"- The generator fell behind its schedule in {fell} of {sum(len(r['cells']) for r in rs.records)} "
                 "searches." + "".join(note.format(n=n, which=which) for n, which, (note, _) in behind), ""]
    series = {f"{name} pool {p}": [(lat, msts[p, lat].get(name)) for lat in latencies] for name in by for p in pools}
    chart = charts.lines(chart_dir / "slow-db-mst.png", "MST against the database's added latency (solid: pool "
                         f"{default}, dashed: larger pools)", "added latency per round trip (ms)", "MST (req/s, log)",
                         series, logx=True, logy=True,
                         styles={f"{n} pool {p}": "-" if p == default else "--" for n in by for p in pools})
    body += charts.link("MST against database latency, per port and pool", chart)
    body += [f"The proxy itself: a sequential `SELECT 1` takes {cost['direct']['p50_ms']} ms directly and "
             f"{cost['through_proxy'][0]['p50_ms']} ms through it at 0 ms; its own CPU per query "
             + ", ".join(f"{num(row['proxy_cpu_us_per_query'])} µs at +{row['latency_ms']} ms"
                         for row in cost["through_proxy"])
             + " (one connection, sequential). Under load its CPU counts in the CPU cap (it runs on the database's "
             "cores, the same for every port). Table per latency in the appendix.", "",
             f"Settings: {plan.get('step_seconds', '?')}-s steps, {plan.get('connections', '?')} generator "
             f"connections, MST search of at most {plan.get('mst_max_probes', '?')} bracketing probes"
             + (f", then bisection to {search['precision']:.0%} (at most {search['bisect_probes']} probes)"
                if search.get("bisect_probes") else "")
             + " plus the confirmation; other latencies, pools or Tomcat threads: see bench.toml [slow-db].", ""]

    # decisions and verdict compare the ports at their defaults; a remedy run ([remedies]) is named apart
    defaults, remedied = runset.split_remedies(by)
    plain = {key: {n: s for n, s in m.items() if n in defaults} for key, m in msts.items()}
    caps_of = {(p, lat): [cap_name(classify(c)) for n in defaults for c in group[n, p, lat]]
               for p in pools for lat in latencies}

    def lifted(name: str, hi: int, lo: int, lats: list[int], base: str | None = None) -> bool:
        """`name`'s MST range at pool `hi` lies above `base`'s (else its own) at pool `lo` at every `lats`."""
        return all((a := msts[hi, lat].get(name)) and (b := plain[lo, lat].get(base or name))
                   and spans.compare(a, b) == ">" for lat in lats)

    decisions, verdict, findings = [], [], []      # the verdict: the default (smallest) pool and its first lift
    for pool in pools:
        # latencies side by side share a row when the same cap held more than half of the searches at each
        for cap, lats in itertools.groupby(latencies, key=lambda lat: decisive(caps_of[pool, lat])):
            band = list(lats)
            if cap is None:
                continue
            gains = [n for n in defaults if lifted(n, max(pools), pool, band)]
            where = f"+{band[0]} ms" if len(band) == 1 else f"+{band[0]}–{band[-1]} ms"
            helped = [f"{n} (above its defaults)" for n in remedied if lifted(n, pool, pool, band, runset.port_of(n))]
            decisions.append(Decision(
                f"database {where} away per round trip, pool {pool}",
                decided_text(cap, [name for lat in band for name in caps_of[pool, lat]]),
                table.choice([plain[pool, lat] for lat in band], reasons=False),
                "; ".join([settings_for(cap, pool, pools, gains), *helped])))
        for lat in dict.fromkeys((latencies[0], latencies[-1])):
            if m := table.complete(plain[pool, lat]):
                (verdict if pool == pools[0] else findings).append(
                    f"At +{lat} ms per database round trip with pool {pool}, the confirmed MST runs "
                    f"{table.from_to(m)}{table.unplaced_note(plain[pool, lat])}; caps: {tally(caps_of[pool, lat])}.")
    for name in remedied:
        base = runset.port_of(name)
        compared = [f"pool {p} at +{lat} ms {span(a)} against {span(b)} ({spans.relation(a, b)})"
                    for p in pools for lat in latencies
                    if (a := msts[p, lat].get(name)) and (b := plain[p, lat].get(base))]
        if compared:
            findings.append(f"{name} against {base} at its defaults, MST in req/s: " + "; ".join(compared) + ".")
    lat = latencies[-1]
    for lo, hi in zip(pools, pools[1:]):     # each pool against the next smaller one
        rises = {n: spans.ratio(plain[hi, lat][n], plain[lo, lat][n]) for n in defaults if lifted(n, hi, lo, [lat])}
        (verdict if lo == pools[0] else findings).append(
            f"At +{lat} ms, pool {hi} lifts the MST above pool {lo}'s (whole ranges) for "
            + (", ".join(f"{n} {f'{r:.1f}×' if r else '(a bound: no ratio)'}" for n, r in rises.items()) or "no port")
            + ".")
    regimes, answer = front_rows(plan, pools, latencies, defaults, group, plain, caps_of, rises if pools[1:] else {})
    if behind:
        *first, last = [clause.format(n=n) for n, _, (_, clause) in behind]
        findings.append(f"The generator fell behind its schedule in {fell} slow-db search(es): "
                        + ", ".join(first) + (" and " if first else "") + last + ".")
    return Section("Slow database", rs.scenario, body, appendix=appendix(by, group, cost), decisions=decisions,
                   verdict=verdict, findings=findings, warnings=rs.warnings, regimes=regimes, answer=answer)


# what held a port's MST, in the words of the front page (the caps a bound names; CPU is the model's own cost)
BOUNDS = {"pool": "its pool of {pool}", "threads": "Tomcat's {threads} threads",
          "threads and pool": "its pool of {pool} and Tomcat's {threads} threads"}
DECIDES = {"pool": "the connection pool", "CPU": "CPU per request", "threads": "Tomcat's request threads",
           MIXED: "no one limit"}


def front_rows(plan: dict, pools: list[int], latencies: list, defaults: list[str], group: dict, plain: dict,
               caps_of: dict, rises: dict) -> tuple[list[Regime], list[str]]:
    """The front page's rows: the default pool at the highest latency, the largest pool at the lowest; and the
    answer's sentence where the pool decided the first."""
    threads = plan.get("tomcat_max_threads", "?")
    regimes = []
    for pool, lat in dict.fromkeys(((pools[0], latencies[-1]), (pools[-1], latencies[0]))):
        if not plain[pool, lat]:
            continue
        held = {n: table.dominant([cap_name(classify(c)) for c in group[n, pool, lat]]) for n in defaults}
        bound = {n: BOUNDS[cap].format(pool=pool, threads=threads) for n, cap in held.items() if cap in BOUNDS}
        names = caps_of[pool, lat]
        cap = decisive(names)
        decides = (f"{DECIDES.get(cap, cap)}, in {names.count(cap)} of {len(names)} searches" if cap != MIXED
                   else f"no one limit held more than half of the {len(names)} searches")
        setting = ("`DB_POOL_SIZE`" + (f" ({pools[-1]} raised the MST of {len(rises)} of {len(defaults)} ports)"
                                       if rises and pool == pools[0] else "")) if cap == "pool" else "defaults"
        regimes.append(Regime(f"Database {lat:g} ms away per round trip, pool of {pool}", decides, plain[pool, lat],
                              "req/s", bound=bound, setting=setting,
                              kind={"pool": BOUND, "CPU": CPU, "threads": BOUND}.get(cap, "")))
    pool, lat = pools[0], latencies[-1]
    answer = []
    if decisive(caps_of[pool, lat]) == "pool" and (ratios := [r for r in rises.values() if r]):
        answer.append(f"With a slow database the connection pool decides, whatever the model: at {lat:g} ms per round "
                      f"trip a pool of {pool} held {caps_of[pool, lat].count('pool')} of {len(caps_of[pool, lat])} "
                      f"searches, and a pool of {pools[-1]} raised the MST {min(ratios):.0f}–{max(ratios):.0f}× for "
                      f"{len(ratios)} of {len(defaults)} ports.")
    return regimes, answer


def appendix(by: dict[str, list[dict]], group: dict[tuple, list[dict]], cost: dict) -> list[str]:
    out = ["## Slow database: every step", "",
           "Per port, pool and iteration (a fresh JVM each), the latencies in the order run. Latency in ms from each "
           "request's intended send time; `busy` is app + DB + generator + proxy cores.", "",
           "At the MST (median over iterations): app CPU per request, the proxy's CPU, RSS and threads.", ""]
    out += table.markdown(["port", "pool", "+ms", "app µs/req", "proxy µs/req", "proxy cores", "RSS peak (MiB)",
                           "threads peak"],
                          [[name, pool, lat, *(cell((a.get(k) for a in at), fmt) for k, fmt in AT_MST.items())]
                           for (name, pool, lat), cs in group.items() if (at := [c.get("at_mst") or {} for c in cs])])
    out += ["Toxiproxy's own cost (sequential `SELECT 1` on one connection):", ""]
    out += table.markdown(["+ms", "round trip p50 / p99 (ms)", "added vs direct (ms)", "the proxy's own (ms)",
                           "proxy CPU µs/query"],
                          [[row["latency_ms"], f"{row['p50_ms']:.3f} / {row['p99_ms']:.3f}", f"{row['added_ms']:.3f}",
                            f"{row['overhead_ms']:+.3f}", row["proxy_cpu_us_per_query"]]
                           for row in cost["through_proxy"]], text_columns=0)
    for name, recs in by.items():
        for r in recs:     # by pool, then iteration (runset.select's order)
            out += [f"### slow-db: {name}, pool {runset.pool_of(r)}, iteration {r['iteration']} ({r.get('status')})",
                    "", f"Warm-up {warmup_text(r.get('warmup'))}; a request alone {r.get('sequential_ms_at_0')} ms "
                    "at 0 ms.", ""]
            for c in r["cells"]:
                m = Mst.from_json(c.get("mst"))
                limits = ", ".join(f"{k} {v:,}/s" for k, v in c["limits_rps"].items() if v) or "–"
                out += [f"+{latency_of(c)} ms (SLO p99 ≤ {c['slo_ms']:g} ms; {c.get('round_trips')} round trip(s) "
                        f"of {c.get('round_trip_ms')} ms; limits {limits}): MST {m.text() if m else '–'}; cap "
                        f"{caps.text(c.get('utilisation') or {}, classify(c))}.", ""]
                out += table.step_table(steps_of(c), ("slo", "busy", "proxy cores", "threads"))
    return out


# a variant run set's section: its title, its anchor (the key it is published under) and its method text
HIKARI = ("Slow database: HikariCP 7.1.0 against Boot's managed 7.0.2", "slow-db-hikari", "slow_db-variants-method")
ORM = ("Slow database: Spring MVC without JPA", "slow-db-jdbc", "slow_db-jdbc-method")


def render_variants(rs: runset.RunSet, words: tuple[str, str, str] = HIKARI) -> Section | None:
    """Each variant port (ports.toml variant_of) behind the slow database with the port it repeats, in one run set:
    where requests wait for a pooled connection, what the variant changes (its MST, its pool's utilisation and the
    app's CPU per request at the MST)."""
    by = rs.by_label if rs else {}
    if not (duo := port_facts.variant_pairs(by)):
        return None
    pools, latencies = pools_and_latencies(rs)
    group = cells_by(by, pools, latencies)
    keys = list(itertools.product(pools, latencies))
    rows, verdict = [], []
    for name, (pool, lat) in itertools.product(by, keys):
        if cs := group[name, pool, lat]:
            at = [c.get("at_mst") or {} for c in cs]
            rows.append([name, pool, lat, table.mst_cell([Mst.from_json(c.get("mst")) for c in cs]),
                         cell(((c.get("utilisation") or {}).get("pool") for c in cs), lambda v: f"{v:.2f}"), cap_text(cs),
                         cell((a.get("app_cpu_us_per_request") for a in at), num),
                         cell((a.get("app_threads_peak") for a in at), num)])
    for (a, b), (pool, lat) in itertools.product(duo, keys):
        ma, mb = (table.mst_spread([Mst.from_json(c.get("mst")) for c in group[n, pool, lat]]) for n in (a, b))
        ca, cb = (spans.spread((c.get("at_mst") or {}).get("app_cpu_us_per_request") for c in group[n, pool, lat])
                  for n in (a, b))
        if ma and mb:
            verdict.append(f"At +{lat} ms per database round trip with a pool of {pool}, {a} ({port_facts.PORTS[a].stack}) "
                           f"holds {span(ma)} req/s, {spans.relation(ma, mb)} {b}'s {span(mb)}"
                           + (f"; at the MST its app CPU per request is {span(ca)} µs against {span(cb)} µs "
                              f"({spans.relation(ca, cb)})" if ca and cb else "") + ".")
    title, anchor, method = words
    body = [text(method).format(runs=", ".join(rs.run_ids), iterations=rs.iterations), "",
            *table.markdown(["port", "pool", "+ms", "MST (req/s)", "pool utilisation at the MST", "what held it",
                             "app µs/req at the MST", "threads peak"], rows)]
    return Section(title, anchor, body, verdict=verdict, warnings=list(rs.warnings))


def render_orm(rs: runset.RunSet) -> Section | None:
    """spring-virtual on JdbcTemplate (no JPA) beside Spring Data JPA behind the slow database: the ORM's share."""
    return render_variants(rs, ORM)

"""queries: `GET /?queries=N` (N lookups of the token's user one after another inside the request, README "The
contract") for N = 1, 5, 20, on loopback and behind a database latency proxy (harness/proxy.py, 5 ms per
round trip). Per port, latency and N: p99 and app CPU per request at a common rate (the same number of
queries per second for every N: common_queries_per_s / N requests per second), then the MST from a short
search. Each latency is a fresh JVM per port: warm-up, then N ascending.

The SLO grows with the database waits: p99 <= [load] slo_p99_ms + 2 x N x latency (at 5 ms and N = 20 a request
waits 100 ms for the database whatever the model, and twice that where a lookup takes two round trips:
r2dbc-mysql's COM_PING on release, HikariCP's ping of a connection idle over 500 ms; the same rule as slow-db). With the default pool of 16 connections,
the pool caps every port at pool / (N x latency): 160 req/s at N = 20 and 5 ms.

`SCENARIO=queries just bench NAME|all`; settings in bench.toml [queries].
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import requests

from .. import bench, proxy as proxy_mod, report, tokens
from ..errors import Fatal
from . import common, section
from .common import slo_ms

NAME = "queries"
DEFAULTS = {
    "iterations": 1,
    "queries": [1, 5, 20],
    # 0 = loopback (the port talks to the database directly); otherwise through the latency proxy.
    "latencies_ms": [0, 5],
    # The common rate for N is common_queries_per_s / N requests per second: the same database work for every
    # N, and below the pool's limit at every latency here (1,000/s at N = 1 ... 50/s at N = 20).
    "common_queries_per_s": 1000,
    "step_seconds": 4,
    # Before the first N, per JVM: this long at WARMUP_FRACTION of the port's expected capacity at N = 1.
    "warmup_seconds": 10,
    # The MST search (bench.search_mst) from a first guess (see first_guess), shorter than the baseline's.
    "mst_growth": 1.2,
    "mst_precision": 0.1,
    "mst_max_probes": 3,
    # Between steps: time for a backlog to drain; after a failed step or the warm-up (a backlog is likely): drain_seconds.
    "pause_seconds": 0.5,
    "drain_seconds": 2,
    # SLO = [load] slo_p99_ms + slo_round_trips x N x latency (0: [load] slo_p99_ms alone).
    "slo_round_trips": 2,
}
UNKNOWN_GUESS_QPS = 2000  # first guess of a port's capacity in queries/s when nothing is known about it
WARMUP_FRACTION = 0.3     # warm-up rate: this share of the first guess at N = 1


@dataclasses.dataclass(frozen=True)
class Config:
    iterations: int
    queries: list[int]
    latencies_ms: list[float]
    common_queries_per_s: int
    step_seconds: float
    warmup_seconds: float
    mst_growth: float
    mst_precision: float
    mst_max_probes: int
    pause_seconds: float
    drain_seconds: float
    slo_round_trips: int

    @classmethod
    def from_settings(cls, settings: dict) -> "Config":
        cfg = cls(**section.load(settings, NAME, DEFAULTS))
        if not cfg.queries or not all(1 <= n <= 20 for n in cfg.queries):
            raise Fatal(f"bench.toml [{NAME}] queries = {cfg.queries}: the contract serves 1 <= N <= 20")
        if not cfg.latencies_ms or min(cfg.latencies_ms) < 0 or cfg.iterations < 1:
            raise Fatal(f"bench.toml [{NAME}]: latencies_ms must be >= 0 (0 = loopback), iterations >= 1")
        return dataclasses.replace(cfg, queries=sorted(set(cfg.queries)),
                                   latencies_ms=sorted(set(float(x) for x in cfg.latencies_ms)))


# --- pure logic (unit-tested) --------------------------------------------------------------------------------

def common_rate(n: int, queries_per_s: int) -> int:
    return bench.round_rate(queries_per_s / n)


def pool_limit(n: int, latency_ms: float, pool: int, trips: int = 1) -> float | None:
    """Requests per second the pool allows when every query holds a connection for `trips` round trips of
    `latency_ms` (spring-webflux: 2, r2dbc-mysql's COM_PING on release)."""
    return pool * 1000.0 / (n * trips * latency_ms) if latency_ms > 0 else None


def scale(known: dict[int, float], n: int) -> float:
    """Capacity at N from capacities measured at other Ns, with a request costing a + b x N: from two or more
    points a least-squares line through 1/capacity; from one point, a request's fixed part taken equal to
    one query's (a = b)."""
    points = sorted((k, v) for k, v in known.items() if v > 0)
    if len(points) >= 2:
        xs, ys = [k for k, _ in points], [1.0 / v for _, v in points]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        a = my - b * mx
        if b > 0 and a + b * n > 0:
            return 1.0 / (a + b * n)
    n0, v0 = min(points, key=lambda p: abs(p[0] - n))
    return v0 * (1 + n0) / (1 + n)


def first_guess(n: int, latency_ms: float, pool: int, found: dict[tuple[float, int], int],
                baseline_mst: int | None, trips: int = 1) -> float:
    """Where the MST search starts: the same N on loopback when measured (a latency only lowers it), else the
    Ns measured at this latency scaled to N, else the baseline's MST (N = 1) scaled; never above 90 % of the
    pool's limit."""
    same_latency = {k: v for (lat, k), v in found.items() if lat == latency_ms and v}
    if latency_ms and found.get((0.0, n)):
        guess = float(found[(0.0, n)])
    elif same_latency:
        guess = scale(same_latency, n)
    elif baseline_mst:
        guess = scale({1: baseline_mst}, n)
    else:
        guess = scale({1: UNKNOWN_GUESS_QPS}, n)
    limit = pool_limit(n, latency_ms, pool, trips)
    return min(guess, 0.9 * limit) if limit else guess


# --- measuring -----------------------------------------------------------------------------------------------

def check_queries(url: str, token: str) -> None:
    """The port serves ?queries=N (200 with a valid token) before any load is sent at it."""
    r = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    if r.status_code != 200:
        raise Fatal(f"{url} answered {r.status_code} {r.text[:120]!r}: the port must serve ?queries=N "
                    f"(README, \"The contract\"); `just check NAME` tests it")


def measure(target: bench.Target, rate: float, seconds: float, slo: float, proxy) -> dict:
    """One constant-rate step, judged against this scenario's SLO, with the proxy's CPU beside it."""
    cpu_before = proxy.cpu_seconds() if proxy else None
    step = target.rate(rate, seconds)
    step["failure"] = bench.failure(step, slo)
    step["passed"] = step["failure"] is None
    step["slo_p99_ms"] = slo
    if proxy:
        cpu = proxy.cpu_seconds() - cpu_before
        step["proxy_cpu_s"] = round(cpu, 3)
        step["proxy_cpu_us_per_request"] = round(cpu / max(step["requests"], 1) * 1e6, 1)
    return step


def run(ctx: common.Context, selected) -> None:
    cfg = Config.from_settings(ctx.settings)
    baseline = common.baseline_msts()
    print(f"{ctx.scenario}: N = {', '.join(map(str, cfg.queries))} at "
          f"{', '.join('loopback' if not x else f'{x:g} ms' for x in cfg.latencies_ms)}", flush=True)
    for iteration in range(1, cfg.iterations + 1):
        for port in section.rotation(list(selected), iteration):
            run_port(ctx, cfg, port, iteration, baseline.get(port.name))


def run_port(ctx: common.Context, cfg: Config, port, iteration: int, baseline_mst: int | None) -> None:
    load = ctx.settings["load"]
    pool = int(ctx.settings["db"]["pool_size"])
    path = ctx.path(port, f"-{iteration}")
    record = ctx.new_record(port, iteration=iteration, config=dataclasses.asdict(cfg), pool_size=pool,
                            base_slo_p99_ms=load["slo_p99_ms"], baseline_mst=baseline_mst, latencies=[])
    found: dict[tuple[float, int], int] = {}
    token = tokens.load()[0]
    say = lambda text: print(f"[{ctx.scenario} {port.name} #{iteration}] {text}", flush=True)  # noqa: E731
    try:
        for latency in cfg.latencies_ms:
            proxied = proxy_mod.latency_proxy(latency, ctx.settings["cpus"]["db"]) if latency else contextlib.nullcontext()
            with proxied as proxy, ctx.port(port, extra_env=proxy.env() if proxy else None) as (running, target):
                entry = {"latency_ms": latency, "proxy": proxy and {"tool": f"toxiproxy {proxy_mod.version()}",
                                                                    "latency_ms": proxy.latency_ms},
                         "startup_s": running.startup_seconds and round(running.startup_seconds, 2),
                         "idle_rss_mb": running.idle_rss_mb and round(running.idle_rss_mb, 1), "queries": []}
                record["latencies"].append(entry)
                where = "loopback" if not latency else f"{latency:g} ms"
                # a cold JVM, warmed up with the proxy at 0 ms (as slow-db does: the pool's limit at the latency
                # would turn a cold JVM's slow first seconds into a backlog), well below its expected capacity
                if proxy:
                    proxy.set_latency(0)
                warm_rate = max(bench.MIN_RATE, bench.round_rate(WARMUP_FRACTION * first_guess(1, 0.0, pool, found, baseline_mst)))
                warm = measure(target, warm_rate, cfg.warmup_seconds, load["slo_p99_ms"], proxy)
                warm.pop("histogram", None)
                entry["warmup"] = warm
                ctx.save(record, path)
                time.sleep(cfg.drain_seconds)
                trips = 1
                if proxy:
                    # database round trips per query, measured (they set the pool's limit): one request alone at
                    # 0 ms and at the latency, in this JVM
                    entry["sequential_ms_at_0"] = common.sequential_ms(target.url, token)
                    proxy.set_latency(latency)
                    entry["sequential_ms"] = common.sequential_ms(target.url, token)
                    trips = common.round_trips(entry["sequential_ms"], entry["sequential_ms_at_0"], latency)
                entry["db_round_trips_per_query"] = trips
                say(f"{where}: up in {entry['startup_s']} s; warm-up {warm_rate}/s for {cfg.warmup_seconds:g} s, "
                    f"p99 {warm['latency_ms'].get('p99', 0):.2f} ms"
                    + (f"; one request alone {entry['sequential_ms_at_0']} ms at 0 ms, {entry['sequential_ms']} ms at "
                       f"{latency:g} ms: {trips} round trip(s) per query" if proxy else ""))
                for n in cfg.queries:
                    url = f"{target.url}?queries={n}"
                    check_queries(url, token)
                    t = dataclasses.replace(target, url=url)
                    slo = slo_ms(load["slo_p99_ms"], n, latency, cfg.slo_round_trips)
                    time.sleep(cfg.pause_seconds)
                    rate = common_rate(n, cfg.common_queries_per_s)
                    step = measure(t, rate, cfg.step_seconds, slo, proxy)
                    cell = {"n": n, "slo_p99_ms": slo, "pool_limit_rps": pool_limit(n, latency, pool, trips),
                            "common": step, "probes": []}
                    entry["queries"].append(cell)
                    ctx.save(record, path)
                    say(f"{where} N={n}: {rate}/s p50 {step['latency_ms'].get('p50', 0):.2f} / p99 "
                        f"{step['latency_ms'].get('p99', 0):.2f} ms, {step.get('app_cpu_us_per_request') or 0:.0f} "
                        f"µs CPU/req")

                    def probe(r: int) -> bool:
                        failed_before = cell["probes"] and not cell["probes"][-1]["passed"]
                        time.sleep(cfg.drain_seconds if failed_before else cfg.pause_seconds)
                        s = measure(t, r, cfg.step_seconds, slo, proxy)
                        s.pop("histogram", None)
                        cell["probes"].append(s)
                        ctx.save(record, path)
                        say(f"{where} N={n}: {r}/s p99 {s['latency_ms'].get('p99', 0):.2f} ms -> "
                            f"{'pass' if s['passed'] else 'FAIL (' + s['failure'] + ')'}")
                        return s["passed"]

                    estimate = first_guess(n, latency, pool, found, baseline_mst, trips)
                    search = bench.search_mst(estimate, probe, cfg.mst_growth, cfg.mst_precision, cfg.mst_max_probes)
                    cell["mst"] = {"rps": search.mst if search.mst >= bench.MIN_RATE else 0, "bounded": search.bounded,
                                   "first_failing_rps": search.first_failing, "estimate_rps": bench.round_rate(estimate),
                                   "probes": search.probes}
                    found[(latency, n)] = cell["mst"]["rps"]
                    ctx.save(record, path)
                    say(f"{where} N={n}: MST {'' if search.bounded else '>= '}{cell['mst']['rps']}/s at p99 <= {slo:g} ms")
        record["status"] = "complete"
    finally:
        ctx.save(record, path)


# --- RESULTS.md ------------------------------------------------------------------------------------------------

def _cell(record: dict, latency: float, n: int) -> dict | None:
    for entry in record.get("latencies", []):
        if entry["latency_ms"] == latency:
            return next((c for c in entry["queries"] if c["n"] == n), None)
    return None


def _trips(entry: dict) -> int:
    """Round trips per query at one latency, counted from what was recorded (so the table follows round_trips)."""
    if entry.get("sequential_ms") is not None and entry.get("latency_ms"):
        return common.round_trips(entry["sequential_ms"], entry.get("sequential_ms_at_0") or 0.0, entry["latency_ms"])
    return entry.get("db_round_trips_per_query") or 1


def _where(latency: float) -> str:
    return "loopback" if not latency else f"{latency:g} ms"


def render(results: Path) -> list[str]:
    runs, _ = report.run_set(common.load_runs(results))
    if not runs:
        return []
    first = next(iter(runs.values())).records[0]
    cfg, env = first["config"], first["environment"]
    columns = sorted({(e["latency_ms"], c["n"]) for p in runs.values() for r in p.records
                      for e in r.get("latencies", []) for c in e["queries"]})
    if not columns:
        return []
    iterations = max(len(p.records) for p in runs.values())
    pool = first["pool_size"]
    proxies = sorted({e["proxy"]["tool"] for p in runs.values() for r in p.records for e in r.get("latencies", [])
                      if e.get("proxy")})
    head = " | ".join(f"{_where(lat)}, N={n}" for lat, n in columns)
    rule = "|---|" + "---:|" * len(columns)

    def table(title: str, value, fmt, lower_bound=lambda c: False) -> list[str]:
        lines = [title, "", f"| port | {head} |", rule]
        for name, p in runs.items():
            cells = []
            for lat, n in columns:
                found = [c for r in p.records if (c := _cell(r, lat, n))]
                values = [value(c) for c in found]
                if any(v is not None and v < 0 for v in values):   # an MST bounded from above only: each run's
                    cells.append("; ".join(fmt(v) for v in values))
                else:
                    text = section.cell(values, fmt)
                    cells.append(("≥ " if any(lower_bound(c) for c in found) else "") + text)
            lines.append(f"| {name} | {' | '.join(cells)} |")
        return lines

    out = ["## N sequential queries per request", "",
           f"`SCENARIO=queries just bench all`: `GET /?queries=N` runs N lookups of the token's user one after "
           f"another inside the request (a loop of blocking calls, a chain of reactive steps), on loopback and with "
           f"a database latency added to every round trip by a proxy ({', '.join(proxies) or 'none'}). Per port "
           f"and latency a fresh JVM, {cfg['warmup_seconds']:g} s of warm-up, then for each N a "
           f"{cfg['step_seconds']:g}-s step at the common rate ({cfg['common_queries_per_s']:,} queries/s = "
           f"{cfg['common_queries_per_s']:,} / N requests/s) and an MST search of at most {cfg['mst_max_probes']} "
           f"{cfg['step_seconds']:g}-s steps (to {cfg['mst_precision']:.0%}, not confirmed: shorter and coarser "
           f"than the baseline's). SLO: p99 ≤ {first['base_slo_p99_ms']:g} ms"
           + (f" + {cfg['slo_round_trips']} × N × latency (the database waits: one round trip per lookup for "
              "every model, two at p99 for an idle port whose driver or pool pings, as in Slow database)"
              if cfg.get("slo_round_trips") else "") + ". "
           + (f"Median of {iterations} runs, min–max in brackets. " if iterations > 1 else "One run. ")
           + f"Pool: {pool} connections for every port.", ""]
    if env.get("quick"):
        out += ["> **QUICK=1 smoke run: these numbers are not results.**", ""]

    def mst_cell(c):
        m = c.get("mst", {})
        if m.get("rps") != 0:
            return m.get("rps")
        # no probe passed: the common-rate step, judged by the same SLO, is the MST's lower bound when it passed;
        # else the MST lies below the lowest rate that failed (the search stops at bench.MIN_RATE)
        common_step = c.get("common") or {}
        if common_step.get("passed"):
            return common_step.get("target_rps")
        return -(m.get("first_failing_rps") or bench.MIN_RATE)

    def mst_text(value) -> str:
        return f"< {report.num(-value)}" if value is not None and value < 0 else report.num(value)

    def unbounded(c) -> bool:      # every probe passed: the MST is at least this
        m = c.get("mst", {})
        return bool(m.get("rps")) and m.get("bounded") is False

    out += table("**MST (req/s)** at the SLO (≥ X: every probe passed, in at least one run; < X: every probe "
                 "failed, down to X req/s)", mst_cell, mst_text, unbounded)
    limits = []
    for lat, n in columns:
        limit = pool_limit(n, lat, pool)
        limits.append(report.num(limit) if limit else "–")
    out += [f"| *pool limit {pool} / (N × latency)* | {' | '.join(limits)} |", ""]
    doubled = sorted({name for name, p in runs.items() for r in p.records for e in r.get("latencies", [])
                      if _trips(e) > 1})
    if doubled:
        out += [f"Measured (one request alone at 0 ms and at the latency, in the same JVM), {', '.join(doubled)} takes more than one "
                "round trip per lookup: its pool limit is that row divided by them (JSON: `db_round_trips_per_query`).", ""]
    rates = ", ".join(f"N={n}: {common_rate(n, cfg['common_queries_per_s']):,}/s" for n in sorted({n for _, n in columns}))
    out += table(f"**p99 (ms) at the common rate** ({rates})", lambda c: c["common"]["latency_ms"].get("p99"), report.ms)
    out += [""]
    out += table("**App CPU per request (µs) at the common rate** (50–1,000 req/s in a young JVM: the JIT's own work "
                 "is a large part of it; compare ports at the same N, not Ns)",
                 lambda c: c["common"].get("app_cpu_us_per_request"), report.num)
    proxy_cpu = [c["common"].get("proxy_cpu_us_per_request") for p in runs.values() for r in p.records
                 for lat, n in columns if lat and (c := _cell(r, lat, n))]
    proxy_cpu = [x for x in proxy_cpu if x is not None]
    slowest = max(columns, key=lambda c: (c[0], c[1]))
    out += ["", (f"With a latency the pool, not the concurrency model, caps every port at {pool} / (N × latency) "
                 f"requests/s (the italic row): at N = {slowest[1]} and {_where(slowest[0])}, "
                 f"{report.num(pool_limit(slowest[1], slowest[0], pool))} req/s. " if slowest[0] else "")
            + (f"The proxy's own CPU at the common rate: {section.cell(proxy_cpu)} µs per request (all ports, all N). "
               if proxy_cpu else "")
            + f"Raw: `{results.parent.name}/{results.name}/{', '.join(sorted({r['run_id'] for p in runs.values() for r in p.records}))}/`.", ""]
    return out

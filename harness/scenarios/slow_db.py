"""slow-db: a known round-trip latency (1, 5, 20, 50 ms) between every port and the database, through Toxiproxy
(harness/proxy.py; this kernel has no netem), with the default pool and with a large one.

Per port, pool and latency: the MST at the SLO, p50/p99 at a rate every port sustains at that latency, app CPU
per request, RSS, threads, and what capped it (`classify_cap`: CPU, threads, pool or the generator).

What to expect: with the default pool the pool is the cap as soon as the latency matters. A connection is held
for a round trip per query, so a pool of 16 serves at most 16 / RTT requests per second: 800 req/s at 20 ms,
320 at 50 ms, whatever the concurrency model. The large pool (above Tomcat's 200 threads) removes that cap, so
that threads (spring-platform: one Tomcat thread per request in flight), carriers, event loops or the CPU are
the limit instead. A port that needs two round trips per request (spring-webflux: a COM_PING on every release,
README "What each 200 costs") holds its connection twice as long: measured here per JVM from sequential
requests, not assumed.

To fit 6 ports x 4 latencies x 2 pools into ~20 minutes on 2 cores: one JVM per (port, pool) serves every
latency (the proxy's toxic changes live, the pool's connections stay open), warmed up once on the proxy at 0 ms,
then the latencies from the highest down (low rates first while the JIT finishes, the CPU-bound 1 ms last);
5-s steps; an MST search of at most 3 probes from a first guess near the expected cap; no confirmation step
(`iterations` repeats the whole thing: figures then show the median and min-max).
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import threading
import time
from pathlib import Path

from .. import bench, proxy as proxy_mod, tokens
from ..errors import Fatal
from ..ports import Port, PORTS
from ..report import num, ms, span, spread
from ..sampling import tree
from . import common
from .common import round_trips, sequential_ms, slo_ms

SECTION = "slow_db"
# Ports whose request holds an OS thread for its whole duration, and the size of that pool: Tomcat's
# server.tomcat.threads.max default (spring/mvc application-platform.properties reads TOMCAT_MAX_THREADS).
THREAD_POOLS = {"spring-platform": int(os.environ.get("TOMCAT_MAX_THREADS", "200"))}
NEAR = 0.75          # a failure at >= 75 % of a computed cap is that cap (queueing eats the rest at p99 <= SLO)
# The CPU set is the cap when everything on it (app, DB, generator, proxy) used >= 80 % of it: measured here, the
# generator (which keeps 22,000 req/s on schedule in the baseline) falls behind from about 1.6 busy cores of 2.
CPU_BUSY = 0.8


# --- settings -------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Plan:
    latencies_ms: list[int]        # in run order: highest first
    pool_sizes: list[int]          # run order: the default pool first
    default_pool: int
    iterations: int
    step_seconds: float
    warmup_seconds: float
    settle_seconds: float
    drain_seconds: float
    connections: int
    mst_first_guess: float
    mst_growth: float
    mst_precision: float
    mst_max_probes: int
    default_pool_probes: int       # the default pool's cap is known (pool / RTT): 2 probes bracket it
    common_rate_fraction: float
    common_rate_round_trips: int
    common_rate_max: int
    cpu_guess_factor: float
    fallback_mst_rps: int
    proxy_cost_seconds: float
    slo_round_trips: int           # SLO = [load] slo_p99_ms + slo_round_trips x latency


def plan(settings: dict) -> Plan:
    section = dict(settings.get(SECTION) or {})   # with [slow_db.quick] over it under QUICK=1 (settings.load)
    if not section.get("latencies_ms") or not section.get("pool_sizes"):
        raise Fatal("bench.toml [slow_db] needs latencies_ms and pool_sizes (e.g. BENCH_SLOW_DB_LATENCIES_MS=\"5,20\")")
    latencies = sorted({proxy_mod.whole_ms(x) for x in section["latencies_ms"]}, reverse=True)
    if 0 in latencies:
        raise Fatal("[slow_db] latencies_ms: 0 ms is the baseline run (`just bench`); give added latencies >= 1")
    default_pool = int(settings["db"]["pool_size"])
    pools = sorted({int(x) for x in section["pool_sizes"]}, key=lambda p: (p != default_pool, p))
    if any(p < 1 for p in pools):
        raise Fatal("[slow_db] pool_sizes must be >= 1")
    return Plan(latencies, pools, default_pool, int(section["iterations"]), float(section["step_seconds"]),
                float(section["warmup_seconds"]), float(section["settle_seconds"]), float(section["drain_seconds"]), int(section["connections"]),
                float(section["mst_first_guess"]), float(section["mst_growth"]), float(section["mst_precision"]),
                int(section["mst_max_probes"]), int(section["default_pool_probes"]), float(section["common_rate_fraction"]),
                int(section["common_rate_round_trips"]), int(section["common_rate_max"]), float(section["cpu_guess_factor"]),
                int(section["fallback_mst_rps"]), float(section["proxy_cost_seconds"]), int(section["slo_round_trips"]))


def cpu_guess(baseline_mst: float, proxy_us_per_query: float, cores: int, factor: float) -> float:
    """The first MST guess where the CPU is the limit: the baseline MST with the proxy's own CPU per round trip
    added to what each request costs the shared CPU set (the proxy runs there too), times `factor`."""
    return factor / (1 / baseline_mst + proxy_us_per_query * 1e-6 / cores)


def common_rate(p: Plan, latency_ms: float, base_rtt_ms: float) -> int:
    """One rate every port sustains at this latency: a fraction of what the default pool allows a port that
    needs `common_rate_round_trips` round trips per request, at most common_rate_max (the CPU's share)."""
    cap = p.default_pool / (p.common_rate_round_trips * (latency_ms + base_rtt_ms) / 1000)
    return max(bench.MIN_RATE, bench.round_rate(min(p.common_rate_max, p.common_rate_fraction * cap)))


# --- what capped a port: a pure function, unit-tested ----------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CapInputs:
    mst_rps: int
    bounded: bool                  # the search found a failing rate above the MST
    generator_behind: bool         # ... and at that rate the generator could not keep its schedule
    busy_cores: float | None       # app + DB + generator + proxy CPU at that rate
    cpu_set_cores: int             # CPUs those roles share
    pool_cap_rps: float            # pool_size / (round trips per request x round-trip time)
    thread_cap_rps: float | None   # thread-per-request ports: threads / (round trips x RTT); None otherwise
    generator_cap_rps: float       # the generator's connections / (round trips x RTT)
    failing_rps: int | None = None # the lowest rate that failed (the limit lies between it and the MST)


def classify_cap(c: CapInputs) -> str:
    """What held the MST down, checked in this order: 'generator' (its connections / round-trip time), 'pool' (the
    failing rate is near pool_size / round-trip time), 'threads' (near Tomcat's threads / round-trip time), 'CPU'
    (the shared CPU set was busy: a generator behind its schedule there was starved, not the limit), 'generator'
    (behind its schedule with CPU to spare), 'not reached' (no failing rate found), or 'other' (the SLO broke with
    nothing saturated). The limit lies between the MST and the first failing rate (a short search leaves that
    bracket up to 25 % wide), so a computed cap explains the failure when the failing rate came near it."""
    if not c.bounded:
        return "not reached"
    broke_at = max(c.mst_rps, c.failing_rps or 0)
    if broke_at >= NEAR * c.generator_cap_rps:
        return "generator"
    if broke_at >= NEAR * c.pool_cap_rps:
        return "pool"
    if c.thread_cap_rps is not None and broke_at >= NEAR * c.thread_cap_rps:
        return "threads"
    if c.busy_cores is not None and c.busy_cores >= CPU_BUSY * c.cpu_set_cores:
        return "CPU"
    if c.generator_behind:
        return "generator"
    return "other"


def cpu_list_size(spec: str) -> set[int]:
    """The CPUs of a taskset list such as '0-3,6'."""
    cpus: set[int] = set()
    for part in filter(None, (s.strip() for s in spec.split(","))):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


# --- measuring ----------------------------------------------------------------------------------------------------

class ThreadWatch:
    """The app's peak OS thread count while a step runs (psutil num_threads, 4 times a second)."""

    def __init__(self, pid: int | None):
        self.procs, self.peak = tree(pid), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _count(self) -> int:
        total = 0
        for p in self.procs:
            try:
                total += p.num_threads()
            except Exception:  # noqa: BLE001 - a process gone mid-sample counts as 0
                pass
        return total

    def _loop(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._count())
            self._stop.wait(0.25)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measured_step(target: bench.Target, px: proxy_mod.Proxy, rate: float, seconds: float, phase: str,
                  keep_histogram: bool = False) -> dict:
    """One constant-rate step as the baseline measures it, plus the app's peak threads and the proxy's CPU."""
    cpu0, began = px.cpu_seconds(), time.monotonic()
    with ThreadWatch(target.app_pid) as threads:
        step = target.rate(rate, seconds)
    proxy_cpu, wall = px.cpu_seconds() - cpu0, time.monotonic() - began
    if not keep_histogram:
        step.pop("histogram", None)
    step["phase"] = phase
    step["app_threads_peak"] = threads.peak
    step["proxy_cpu_cores"] = round(proxy_cpu / wall, 3)
    step["proxy_cpu_us_per_request"] = round(proxy_cpu / max(step["requests"], 1) * 1e6, 1)
    step["busy_cores"] = round(sum(step.get(k) or 0 for k in ("app_cpu_cores", "db_cpu_cores", "generator_cpu_cores",
                                                              "proxy_cpu_cores")), 3)
    return step


def say(tag: str, text: str) -> None:
    print(f"[{tag}] {text}", flush=True)


def run_jvm(ctx: common.Context, port: Port, pool: int, iteration: int, p: Plan, px: proxy_mod.Proxy,
            base_rtt_ms: float, cpu_guess_rps: float, record: dict, path: Path) -> None:
    """One fresh JVM of `port` with `pool` connections through the proxy: warm-up at 0 ms, then every latency."""
    load = ctx.settings["load"]
    tag = f"{port.name} pool {pool} #{iteration}"
    settings = dict(ctx.settings, load=dict(load, connections=p.connections))
    cpu_set = cpu_list_size(",".join(ctx.settings["cpus"].values()))
    px.set_latency(0)
    jvm = {"pool_size": pool, "iteration": iteration, "status": "partial", "latencies": []}
    record["runs"].append(jvm)
    with ctx.port(port, extra_env={**px.env(), "DB_POOL_SIZE": str(pool)}) as (running, target):
        target = dataclasses.replace(target, settings=settings)
        token = tokens.load()[0]
        jvm.update(startup_s=round(running.startup_seconds, 2), idle_rss_mb=round(running.idle_rss_mb, 1),
                   proxy_connections=px.client_connections())
        say(tag, f"up in {jvm['startup_s']} s through the proxy ({jvm['proxy_connections']} DB connections open)")
        warm_rate = bench.round_rate(max(bench.MIN_RATE, 0.5 * cpu_guess_rps))
        warm = measured_step(target, px, warm_rate, p.warmup_seconds, "warmup")
        jvm["warmup"] = warm
        jvm["sequential_ms_at_0"] = sequential_ms(target.url, token)
        ctx.save(record, path)
        say(tag, f"warm-up {warm_rate}/s at 0 ms: p99 {ms(warm['latency_ms'].get('p99'))} ms"
                 f"{'' if warm['passed'] else ' (' + warm['failure'] + ')'}; one request alone {jvm['sequential_ms_at_0']} ms")
        trips = 1
        for latency in p.latencies_ms:
            px.set_latency(latency)
            rtt = latency + base_rtt_ms
            slo = slo_ms(load["slo_p99_ms"], 1, latency, p.slo_round_trips)
            target = dataclasses.replace(target, settings=dict(settings, load=dict(settings["load"], slo_p99_ms=slo)))
            entry = {"latency_ms": latency, "round_trip_ms": round(rtt, 3), "slo_p99_ms": slo,
                     "sequential_ms": sequential_ms(target.url, token)}
            if latency >= 5 or latency == p.latencies_ms[0]:   # below 5 ms app time blurs the count: keep the last
                trips = round_trips(entry["sequential_ms"], jvm["sequential_ms_at_0"], latency)
            entry["db_round_trips_per_request"] = trips
            jvm["latencies"].append(entry)
            hold_s = trips * rtt / 1000
            caps = {"pool": pool / hold_s, "threads": THREAD_POOLS[port.name] / hold_s if port.name in THREAD_POOLS else None,
                    "generator": p.connections / hold_s}
            entry["caps_rps"] = {k: v and round(v) for k, v in caps.items()}
            if pool == p.default_pool:
                rate = common_rate(p, latency, base_rtt_ms)
                step = measured_step(target, px, rate, p.step_seconds, "common", keep_histogram=True)
                entry["common"] = step
                ctx.save(record, path)
                say(tag, f"{latency} ms: common {rate}/s p50 {ms(step['latency_ms'].get('p50'))} / p99 "
                         f"{ms(step['latency_ms'].get('p99'))} ms{'' if step['passed'] else ' FAIL (' + step['failure'] + ')'}")
            estimate = min(cpu_guess_rps, *(p.mst_first_guess * c for c in (caps["pool"], caps["threads"]) if c))
            if latency == p.latencies_ms[0] and p.settle_seconds:
                # Lazy pools (the Vert.x ones) grow on demand: open what the highest latency needs before measuring,
                # so no probe pays for connection handshakes (the others' pools are full from the start).
                settle = measured_step(target, px, bench.round_rate(estimate), p.settle_seconds, "settle")
                entry["settle"] = settle
                jvm["proxy_connections_after_settle"] = px.client_connections()
                say(tag, f"{latency} ms: settle {settle['target_rps']}/s, {jvm['proxy_connections_after_settle']} DB "
                         "connections open through the proxy")
                time.sleep(p.drain_seconds)
            probes: list[dict] = []

            def measure(rate: int) -> bool:
                step = measured_step(target, px, rate, p.step_seconds, "mst")
                probes.append(step)
                entry["probes"] = probes
                ctx.save(record, path)
                say(tag, f"{latency} ms: {rate}/s achieved {step['achieved_rps']:.0f}/s p99 "
                         f"{ms(step['latency_ms'].get('p99'))} ms, {step['app_threads_peak']} threads, busy "
                         f"{step['busy_cores']:.2f} cores -> {'pass' if step['passed'] else 'FAIL (' + step['failure'] + ')'}")
                if not step["passed"]:
                    time.sleep(p.drain_seconds)  # let queued requests drain before the next probe
                return step["passed"]

            search = bench.search_mst(estimate, measure, p.mst_growth, p.mst_precision,
                                      p.default_pool_probes if pool == p.default_pool else p.mst_max_probes)
            failing = next((s for s in reversed(probes) if s["target_rps"] == search.first_failing), None)
            at_mst = next((s for s in reversed(probes) if s["target_rps"] == search.mst and s["passed"]), None)
            inputs = CapInputs(search.mst, search.bounded, bool(failing and failing.get("generator_behind")),
                               failing and failing["busy_cores"], len(cpu_set), caps["pool"], caps["threads"],
                               caps["generator"], search.first_failing)
            entry["mst"] = {"rps": search.mst, "bounded": search.bounded, "first_failing_rps": search.first_failing,
                            "estimate_rps": bench.round_rate(estimate), "slo_p99_ms": slo, "probes": search.probes,
                            "app_cpu_us_per_request": at_mst and at_mst.get("app_cpu_us_per_request"),
                            "app_rss_mb_peak": at_mst and at_mst.get("app_rss_mb_peak"),
                            "app_threads_peak": at_mst and at_mst["app_threads_peak"]}
            entry["cap"] = classify_cap(inputs)
            entry["cap_inputs"] = dataclasses.asdict(inputs)
            ctx.save(record, path)
            say(tag, f"{latency} ms: MST {'' if search.bounded else '>= '}{search.mst}/s, capped by {entry['cap']} "
                     f"(pool cap {caps['pool']:.0f}/s at {trips} round trip(s) of {rtt:.2f} ms)")
        jvm["status"] = "complete"


def run(ctx: common.Context, selected: list[Port]) -> None:
    p = plan(ctx.settings)
    baseline = common.baseline_msts()
    settings_used = {k: v for k, v in dataclasses.asdict(p).items()}
    records = {port.name: ctx.new_record(port, settings=settings_used, runs=[]) for port in selected}
    with proxy_mod.latency_proxy(0, cpus=ctx.settings["cpus"]["db"]) as px:
        say("slow-db", f"proxy up (toxiproxy {proxy_mod.version()}) on {px.host}:{px.port} -> {px.upstream}; "
                       "measuring its own cost")
        cost = proxy_mod.measure_cost(px, p.latencies_ms, seconds_each=p.proxy_cost_seconds)
        base_rtt_ms = cost["through_proxy"][0]["p50_ms"]
        proxy_us = cost["through_proxy"][0]["proxy_cpu_us_per_query"]
        cores = len(cpu_list_size(",".join(ctx.settings["cpus"].values())))
        for row in cost["through_proxy"]:
            say("slow-db", f"proxy at {row['latency_ms']} ms: a round trip {row['p50_ms']} ms (direct "
                           f"{cost['direct']['p50_ms']} ms), {row['proxy_cpu_us_per_query']} µs proxy CPU/query")
        for record in records.values():
            record["proxy_cost"] = cost
        for iteration in range(1, p.iterations + 1):
            shift = (iteration - 1) % len(selected)
            for port in selected[shift:] + selected[:shift]:
                record, path = records[port.name], ctx.path(port)
                guess = cpu_guess(baseline.get(port.name, p.fallback_mst_rps), proxy_us, cores, p.cpu_guess_factor)
                for pool in p.pool_sizes:
                    run_jvm(ctx, port, pool, iteration, p, px, base_rtt_ms, guess, record, path)
                    ctx.save(record, path)
                if all(j["status"] == "complete" for j in record["runs"]) and iteration == p.iterations:
                    record["status"] = "complete"
                ctx.save(record, path)


# --- report -------------------------------------------------------------------------------------------------------

def _newest(results: Path) -> dict[str, dict]:
    """Per port, its newest record."""
    chosen: dict[str, dict] = {}
    for r in common.load_runs(results):
        if r.get("scenario") == "slow-db" and r["run_id"] >= chosen.get(r["port"], {}).get("run_id", ""):
            chosen[r["port"]] = r
    order = list(PORTS)
    return {k: chosen[k] for k in sorted(chosen, key=lambda n: order.index(n) if n in order else 99)}


def _entries(record: dict, pool: int, latency: int) -> list[dict]:
    return [e for j in record["runs"] if j["pool_size"] == pool for e in j["latencies"] if e["latency_ms"] == latency]


def _caps(entries: list[dict]) -> str:
    """What capped it, with the computed limit where there is one: 'pool (≤ 779)'."""
    caps = []
    for e in entries:
        cap = cap_of(e)
        if cap:
            limit = e.get("caps_rps", {}).get(cap) if cap in ("pool", "threads") else None
            caps.append(f"{cap} (≤ {limit:,})" if limit else cap)
    return "; ".join(dict.fromkeys(caps)) or "–"


def cap_of(entry: dict) -> str | None:
    """What capped one latency's MST, classified from what was recorded (so the table follows classify_cap)."""
    if not entry.get("cap_inputs"):
        return entry.get("cap")
    inputs = dict(entry["cap_inputs"])
    if inputs.get("failing_rps") is None:   # records made before CapInputs had it
        inputs["failing_rps"] = (entry.get("mst") or {}).get("first_failing_rps")
    return classify_cap(CapInputs(**inputs))


def _mst(entries: list[dict]) -> str:
    done = [e for e in entries if e.get("mst")]
    s = spread([e["mst"]["rps"] for e in done])
    if s is None:
        return "–"
    text = span(s)
    failing = spread([e["mst"].get("first_failing_rps") for e in done])
    if failing is not None:
        text += f" ✗ {num(failing.median)}"   # the first failing rate (median): the limit lies between the two
    return text if all(e["mst"]["bounded"] for e in done) else "≥ " + text


def render(results: Path) -> list[str]:
    records = _newest(results)
    if not records:
        return []
    first = next(iter(records.values()))
    settings, env, cost = first.get("settings", {}), first["environment"], first.get("proxy_cost")
    latencies = sorted({e["latency_ms"] for r in records.values() for j in r["runs"] for e in j["latencies"]})
    default_pool = settings.get("default_pool", env.get("pool_size"))
    large = [x for x in settings.get("pool_sizes", []) if x != default_pool]
    big = large[0] if large else None
    big_label = f"pool {big}" if big else "large pool"
    out = ["## Slow database", "",
           f"Every port behind [Toxiproxy](https://github.com/Shopify/toxiproxy) ({cost and cost['toxiproxy']}), "
           "which adds a fixed latency to every database round trip (`SCENARIO=slow-db just bench all`; "
           "[harness/scenarios/slow_db.py](harness/scenarios/slow_db.py)), with the default pool "
           f"({default_pool} connections) and a large one ({big or 'not run'}).", "",
           f"- **MST** at p99 ≤ {env['settings']['slo_p99_ms']} ms + {settings.get('slo_round_trips', 0)} × the added "
           "latency: a request alone takes one round trip, but an idle port already shows two at p99 (HikariCP pings "
           "a connection idle for over 500 ms, r2dbc-mysql pings on release). Each MST is followed by ✗ and the first "
           "rate that failed: the limit lies between the two (a short search, not confirmed).",
           f"- **cap**, what held it down: **pool** (the failing rate came within 75 % of pool size / (round trips × "
           f"round-trip time): {default_pool} connections at 20 ms allow at most {default_pool * 1000 // 20:,} req/s, "
           "whatever the model), **threads** (the same for Tomcat's 200 threads, spring-platform), **CPU** (app, DB, "
           f"generator and proxy together kept ≥ {CPU_BUSY:.0%} of the shared CPU set busy at the failing rate; a "
           "generator behind its schedule there was starved, not the limit), **generator** (its connections, or behind "
           "its schedule with CPU to spare), **other** (the SLO broke with nothing saturated), **not reached** (no rate "
           "failed: the MST is a lower bound, ≥).",
           "- App CPU per request, RSS and threads at the large pool's MST: at the low common rates (100–2,000 req/s, "
           "the first steps after an 8-s warm-up) the JIT's own work still dominates CPU per request.", ""]
    if env.get("quick"):
        out += ["> **QUICK=1 smoke run: these numbers are not results.**", ""]
    if any(r["status"] != "complete" for r in records.values()):
        out += [f"> Partial: {', '.join(n for n, r in records.items() if r['status'] != 'complete')} did not finish.", ""]
    for latency in latencies:
        commons = [e["common"] for r in records.values() for e in _entries(r, default_pool, latency) if e.get("common")]
        rate = commons[0]["target_rps"] if commons else None
        slos = {e.get("slo_p99_ms") for r in records.values() for e in _entries(r, default_pool, latency)} - {None}
        out += [f"### +{latency} ms per database round trip" + (f" (SLO: p99 ≤ {min(slos):g} ms)" if slos else ""), "",
                f"| port | DB round trips / request | MST pool {default_pool} | cap | MST {big_label} | cap | "
                f"p50 / p99 at {num(rate)} req/s (ms) | app CPU µs/req at MST ({big_label}) | RSS MiB at MST ({big_label}) | "
                f"threads at MST ({big_label}) |",
                "|---|---:|---:|---|---:|---|---:|---:|---:|---:|"]
        for name, r in records.items():
            small, large_e = _entries(r, default_pool, latency), _entries(r, big, latency) if big else []
            cs = [e["common"] for e in small if e.get("common")]
            trips = sorted({e["db_round_trips_per_request"] for e in small + large_e})
            p50 = span(spread([c["latency_ms"].get("p50") for c in cs]), ms)
            p99 = span(spread([c["latency_ms"].get("p99") for c in cs]), ms)
            failed = [c for c in cs if not c["passed"]]
            at = [e["mst"] for e in large_e if e.get("mst")]
            out.append(f"| {name} | {'/'.join(map(str, trips)) or '–'} | {_mst(small)} | {_caps(small)} | {_mst(large_e)} | "
                       f"{_caps(large_e)} | {p50} / {p99}{' (failed: ' + failed[0]['failure'] + ')' if failed else ''} | "
                       f"{span(spread([m.get('app_cpu_us_per_request') for m in at]))} | "
                       f"{span(spread([m.get('app_rss_mb_peak') for m in at]))} | "
                       f"{span(spread([m.get('app_threads_peak') for m in at]))} |")
        out.append("")
    if cost:
        loaded = [s.get("proxy_cpu_us_per_request") for r in records.values() for j in r["runs"] for e in j["latencies"]
                  for s in e.get("probes", []) if s.get("passed")]
        peak = max((s.get("proxy_cpu_cores") or 0 for r in records.values() for j in r["runs"] for e in j["latencies"]
                    for s in e.get("probes", [])), default=None)
        out += ["### The proxy's own cost", "",
                f"Sequential `SELECT 1` on one connection (pymysql), directly: p50 {cost['direct']['p50_ms']} ms. "
                f"Through the proxy ({cost['toxic']['type']} toxic on the {cost['toxic']['stream']} stream, jitter 0: "
                "the whole latency on each answer, so each round trip gets it once):", "",
                "| target (ms) | round trip p50 / p99 (ms) | added vs direct (ms) | the proxy's own (ms) | proxy CPU µs/query | proxy cores |",
                "|---:|---:|---:|---:|---:|---:|"]
        for row in cost["through_proxy"]:
            out.append(f"| {row['latency_ms']} | {row['p50_ms']:.3f} / {row['p99_ms']:.3f} | {row['added_ms']:.3f} | "
                       f"{row['overhead_ms']:+.3f} | {row['proxy_cpu_us_per_query']} | {row.get('proxy_cpu_cores', '–')} |")
        out += ["", "(CPU time is counted in 10-ms ticks: the per-query figure is precise at 0 ms, with thousands of "
                    "queries; at higher latencies the few queries leave mostly the Go runtime's idle wake-ups.)"]
        if loaded:
            out += ["", f"Under load the proxy used {statistics.median(loaded):.0f} µs of CPU per HTTP request (median over "
                        f"passing MST probes; at most {peak:.2f} cores), on the DB's CPU set ({env['cpus'].get('db')}): "
                        "CPU the ports did not get on this 2-core box, counted in the CPU cap."]
        out.append("")
    out += ["Settings: latencies " + ", ".join(f"{x} ms" for x in latencies) +
            f"; pools {', '.join(map(str, settings.get('pool_sizes', [])))}; one JVM per port and pool serves every "
            f"latency (the toxic changes live), warmed up {settings.get('warmup_seconds', 0):g} s at 0 ms; "
            f"{settings.get('step_seconds', 0):g}-s steps, {settings.get('connections')} generator connections, MST search "
            f"of at most {settings.get('mst_max_probes')} probes from the expected cap (unconfirmed); "
            f"{settings.get('iterations')} iteration(s); JVM `{' '.join(env.get('jvm_options', []))}`; CPU sets "
            f"{', '.join(f'{k} {v}' for k, v in env.get('cpus', {}).items())}; {env.get('cpu_model')}, "
            f"{env.get('cores')} cores; {env.get('generator', '').split(' (')[0]}; run {first['run_id']} "
            f"(commit {env.get('git_commit')}). Raw: `results/slow-db/`.", ""]
    return out

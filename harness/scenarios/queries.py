"""queries: `GET /?queries=N`, N lookups of the token's user one after another inside one request
(docs/contract.md), on loopback and through the latency proxy (harness/proxy.py) at [queries] latency_ms per round trip:
per port, latency and N a step at the common rate (the same lookups per second for every N) and the MST. Expected:
on loopback the CPU caps; at the latency the pool, at pool / (N x round trips per lookup x latency) req/s."""
from __future__ import annotations

import contextlib
import dataclasses

from .. import driver, ports, proxy as proxy_mod, tokens
from ..method.queries import pool_limit, where
from ..method.record import round_rate
from ..session import Context, require
from ..target import correctness_check, round_trips, sequential_ms

MAX_N = 20                  # the contract serves 1 <= N <= 20
NS = ("loopback_queries", "latency_queries")     # the Plan's lists of N
# for estimate_seconds only (what a run takes here, not settings): JVM start with its rows checked (Spring ~4 s,
# Quarkus ~2 s), and each step's fixed cost besides its seconds (the generator's start, samplers, DB counters)
START_S = 6.0
STEP_OVERHEAD_S = 0.8
DRAIN_S = 1.0         # a drain's usual length (harness/target.py), for the estimate


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [queries]."""
    loopback_queries: list[int]      # N on loopback ([] : no loopback JVM)
    latency_ms: float                # the proxy's added latency per round trip for the second JVM
    latency_queries: list[int]       # N at latency_ms ([] : no proxied JVM)
    common_queries_per_s: int


def checked(plan: Plan) -> Plan:
    for key in NS:
        require(all(1 <= n <= MAX_N for n in getattr(plan, key)),
                f"[queries] {key} {getattr(plan, key)}: 1 <= N <= {MAX_N}")
    require(plan.loopback_queries or plan.latency_queries,
            "bench.toml [queries]: loopback_queries, latency_queries both empty")
    if plan.latency_queries:
        proxy_mod.whole_ms(plan.latency_ms)
        require(plan.latency_ms > 0, "bench.toml [queries]: latency_ms > 0")
    require(plan.iterations >= 1 and plan.mst_max_probes >= 1 and plan.mst_floor_rps >= 10,
            "bench.toml [queries]: iterations>=1, mst_max_probes>=1, mst_floor_rps>=10")
    return dataclasses.replace(plan, **{key: sorted(set(getattr(plan, key))) for key in NS})


def jvms(plan: Plan) -> list[tuple[float, list[int]]]:
    """(latency, the Ns measured in that JVM): loopback first."""
    return [(lat, ns) for lat, ns in ((0.0, plan.loopback_queries), (float(plan.latency_ms), plan.latency_queries))
            if ns]


# --- pure logic (unit-tested) --------------------------------------------------------------------------------

def common_rate(n: int, queries_per_s: int) -> int:
    """Requests per second that make queries_per_s lookups per second at N: the same database work for every N."""
    return round_rate(queries_per_s / n)


def url_for(url: str, n: int) -> str:
    return f"{url}{'&' if '?' in url else '?'}queries={n}"


def estimate_seconds(plan: Plan, port_count: int, warmup_s: float) -> float:
    """A run's wall time: per JVM start, cold probe and warm-up; per cell a probe, the common step and the search."""
    per_step = plan.step_seconds + STEP_OVERHEAD_S + (plan.pause_seconds + DRAIN_S) / 2    # a pause or a drain
    per_cell = plan.probe_seconds + STEP_OVERHEAD_S + DRAIN_S + (1 + plan.mst_max_probes + 1) * per_step
    per_jvm = START_S + plan.probe_seconds + STEP_OVERHEAD_S + warmup_s + DRAIN_S
    return plan.iterations * port_count * sum(per_jvm + len(ns) * per_cell for _, ns in jvms(plan))


# --- measuring -----------------------------------------------------------------------------------------------

def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = checked(ctx.plan(Plan))
    low, high = (estimate_seconds(plan, len(selected), k * ctx.warmup.window_seconds) / 60 for k in (2, 8))
    ctx.say("plan", "; ".join(f"{where(lat)}: N = {', '.join(map(str, ns))}" for lat, ns in jvms(plan))
            + f"; {plan.iterations} iteration(s) x {len(selected)} port(s): {low:.0f}-{high:.0f} min")
    driver.run(ctx, Queries(), plan, selected)


class Queries(driver.Scenario):
    """A fresh JVM per latency (the proxied one started at 0 ms, so a cold JVM's slow first seconds do not queue
    behind the pool's limit), warmed up at N = 1; a cell per N."""
    proxy = None                     # this JVM's latency proxy (None on loopback)
    base = None                      # this JVM's target without ?queries

    def jvms(self, plan: Plan, port):
        return [{"latency_ms": lat} for lat, _ in jvms(plan)]

    def cells(self, plan: Plan, jvm):
        return [{"n": n} for n in dict(jvms(plan))[jvm.coords["latency_ms"]]]

    def fields(self, jvm) -> dict:
        settings = jvm.ctx.settings
        return dict(pool_size=int(settings["db"]["pool_size"]), cpus=dict(settings["cpus"]), proxy=None,
                    sequential_ms_at_0=None, sequential_ms=None, round_trips_per_lookup=1)

    @contextlib.contextmanager
    def regime(self, jvm):
        latency = jvm.coords["latency_ms"]
        with proxy_mod.latency_proxy(0, jvm.ctx.settings["cpus"]["db"]) if latency else contextlib.nullcontext() as px:
            self.proxy = px
            yield {"extra_env": px.env()} if px else {}

    def started(self, jvm) -> None:
        """Every N answers its rows before any load is sent; the JVM's probes and warm-up run at N = 1."""
        self.base = jvm.target
        if self.proxy:
            self.base = dataclasses.replace(jvm.target, sides={"proxy": self.proxy.cpu_seconds})
            jvm.record["proxy"] = {"tool": f"toxiproxy {proxy_mod.version()}", "latency_ms": jvm.coords["latency_ms"]}
        jvm.say(f"up in {jvm.record['startup_s']} s, RSS {jvm.record['idle_rss_mb']} MiB")
        pool = tokens.load()
        for cell in self.cells(jvm.plan, jvm):
            correctness_check(url_for(self.base.url, cell["n"]), pool, jvm.ctx.settings["load"]["check_tokens"])
        jvm.target = dataclasses.replace(self.base, url=url_for(self.base.url, 1))

    def warmed(self, jvm) -> None:
        """Round trips per lookup, measured in this JVM (they set the pool's limit): one request alone at 0 ms, then
        at the latency, where the cells are measured."""
        if not self.proxy:
            return
        r, latency, token = jvm.record, jvm.coords["latency_ms"], tokens.load()[0]
        r["sequential_ms_at_0"] = sequential_ms(jvm.target.url, token)
        self.proxy.set_latency(latency)
        r["sequential_ms"] = sequential_ms(jvm.target.url, token)
        r["round_trips_per_lookup"] = round_trips(r["sequential_ms"], r["sequential_ms_at_0"], latency)
        jvm.save()
        jvm.say(f"one request alone: {r['sequential_ms_at_0']} ms at 0 ms, {r['sequential_ms']} ms at {latency:g} ms: "
                f"{r['round_trips_per_lookup']} round trip(s) per lookup")

    @contextlib.contextmanager
    def cell_regime(self, jvm, cell):
        n, latency, trips = cell["coords"]["n"], jvm.coords["latency_ms"], jvm.record["round_trips_per_lookup"]
        limit = pool_limit(n, latency, jvm.record["pool_size"], trips)
        cell.update(pool_limit_rps=limit and round(limit, 1),
                    round_trips_per_lookup=trips, common_rps=common_rate(n, jvm.plan.common_queries_per_s),
                    floor_rps=jvm.plan.mst_floor_rps, capacity=None)
        jvm.target = dataclasses.replace(self.base, url=url_for(self.base.url, n))
        yield

    def added_latency_ms(self, jvm, cell) -> float:
        return cell["coords"]["n"] * jvm.coords["latency_ms"]          # N lookups in sequence

    def common_rate(self, jvm, cell) -> float:
        return cell["common_rps"]

    def estimate(self, jvm, cell) -> float:
        """mst_first_guess x the cell's closed-loop probe."""
        return jvm.plan.mst_first_guess * cell["capacity"]["achieved_rps"]

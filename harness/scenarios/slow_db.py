"""slow-db: a known latency (bench.toml [slow-db] latencies_ms) added to every database round trip through
Toxiproxy (harness/proxy.py; this kernel has no netem), with the default pool and a large one (docs/scenarios.md, "slow-db"):
per port, pool and latency the MST, searched from this JVM's own limits, and the utilisations there (what held it);
with the default pool also a step at a rate every port sustains."""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
from typing import Iterator

from .. import driver, port_facts, ports, proxy as proxy_mod, tokens
from ..errors import Fatal
from ..method import caps
from ..method.record import MIN_RATE, Mst, at_mst, round_rate
from ..method.slow_db import AT_MST, LIMITS, classify, latency_of
from ..session import Context, framework_overrides
from ..target import round_trips, sequential_ms

LOOKUPS = 1                      # the endpoint's database lookups per request (one SELECT by email)
TOMCAT_OVERRIDE = "SERVER_TOMCAT_THREADS_MAX"   # Spring's own env name for server.tomcat.threads.max


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [slow-db]."""
    latencies_ms: list[float]        # whole ms (Toxiproxy); floats so that BENCH_..=0.5 is refused in one line
    pool_sizes: list[int]
    tomcat_max_threads: int
    connections: int
    common_rate_fraction: float
    common_rate_round_trips: int
    common_rate_max: int
    proxy_cost_seconds: float


def load_plan(ctx: Context) -> Plan:
    plan = ctx.plan(Plan)
    latencies = sorted({proxy_mod.whole_ms(x) for x in plan.latencies_ms}, reverse=True)
    if not latencies or 0 in latencies:
        raise Fatal("bench.toml [slow-db]: latencies_ms>=1 (0 ms: baseline)")
    if not plan.pool_sizes or any(p < 1 for p in plan.pool_sizes):
        raise Fatal("bench.toml [slow-db]: pool_sizes>=1")
    default = ctx.settings["db"]["pool_size"]
    pools = sorted(set(plan.pool_sizes), key=lambda p: (p != default, p))
    return dataclasses.replace(plan, latencies_ms=latencies, pool_sizes=pools)


# --- pure pieces (unit-tested) ----------------------------------------------------------------------------------

def common_rate(plan: Plan, default_pool: int, latency_ms: float, base_rtt_ms: float) -> int:
    """A rate every port sustains here: a share of what the default pool allows `common_rate_round_trips`."""
    limit = default_pool / (plan.common_rate_round_trips * (latency_ms + base_rtt_ms) / 1000)
    return max(MIN_RATE, round_rate(min(plan.common_rate_max, plan.common_rate_fraction * limit)))


def limits_rps(pool: int, threads: int | None, connections: int, trips: int, rtt_ms: float,
               cpu_rps: float | None) -> dict[str, float | None]:
    """Req/s each limit allows: a connection (thread) is held trips x the round-trip time per request; the CPU's is
    this JVM's warm closed loop at 0 ms (the estimate only: at the MST its utilisation is measured)."""
    hold_s = trips * rtt_ms / 1000
    return {"CPU": cpu_rps or None, "pool": pool / hold_s, "threads": threads / hold_s if threads else None,
            "generator connections": connections / hold_s}


def utilisation(mst_rps: int, busy_cores: float | None, cores: int, limits: dict) -> dict[str, float | None]:
    """Each limit's utilisation at the MST: CPU busy / cores measured there, the others MST / computed limit."""
    if not mst_rps:
        return {}
    return {"CPU": None if busy_cores is None else round(busy_cores / cores, 3),
            **{key: round(mst_rps / limits[key], 3) if limits.get(key) else None for key in LIMITS[1:]}}


# --- measuring ------------------------------------------------------------------------------------------------

def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = load_plan(ctx)
    with proxy_mod.latency_proxy(0, cpus=ctx.settings["cpus"]["db"]) as px:
        ctx.say("proxy", f"toxiproxy {proxy_mod.version()} on {px.host}:{px.port} -> {px.upstream}; cost:")
        cost = proxy_mod.measure_cost(px, plan.latencies_ms, seconds_each=plan.proxy_cost_seconds)
        for row in cost["through_proxy"]:
            ctx.say("proxy", f"+{row['latency_ms']} ms: a round trip {row['p50_ms']} ms (direct "
                             f"{cost['direct']['p50_ms']} ms), {row['proxy_cpu_us_per_query']} µs proxy CPU/query")
        driver.run(ctx, SlowDb(px, cost, ctx.settings), plan, selected)


class SlowDb(driver.Scenario):
    """Per pool a fresh JVM through the proxy, warmed up at 0 ms; per latency (set on the proxy) a cell."""

    def __init__(self, px: proxy_mod.Proxy, cost: dict, settings: dict):
        self.px, self.cost = px, cost
        self.default_pool = settings["db"]["pool_size"]
        self.cores = len(caps.cpu_set(",".join(settings["cpus"].values())))
        self.base_rtt = cost["through_proxy"][0]["p50_ms"]

    def jvms(self, plan: Plan, port: ports.Port) -> list[dict]:
        return [{"pool_size": pool} for pool in plan.pool_sizes]

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [{"latency_ms": latency} for latency in plan.latencies_ms]

    def path(self, jvm: driver.Jvm) -> str:
        return f"-pool{jvm.coords['pool_size']}-{jvm.iteration}"

    def fields(self, jvm: driver.Jvm) -> dict:
        threads = (int(framework_overrides().get(TOMCAT_OVERRIDE, jvm.plan.tomcat_max_threads))
                   if jvm.port.name in port_facts.thread_ports() else None)
        return {"tomcat_threads": threads, "cores": self.cores, "proxy_cost": self.cost, "sequential_ms_at_0": None}

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm) -> Iterator[dict]:
        """The JVM starts and stops with the proxy at 0 ms; its pool (and Tomcat's threads) set by environment."""
        facts = port_facts.PORTS[jvm.port.name]
        threads = ({facts.request_threads_setting: str(jvm.plan.tomcat_max_threads)} if facts.request_threads else {})
        self.px.set_latency(0)
        try:
            yield {"extra_env": {**self.px.env(), "DB_POOL_SIZE": str(jvm.coords["pool_size"]), **threads}}
        finally:
            self.px.set_latency(0)

    def started(self, jvm: driver.Jvm) -> None:     # the proxy's CPU counts in every step's
        jvm.target = dataclasses.replace(jvm.target, sides={"proxy": self.px.cpu_seconds})
        jvm.record["proxy_connections"] = self.px.client_connections()
        jvm.say(f"up in {jvm.record['startup_s']} s, {jvm.record['proxy_connections']} DB connections")

    def warmup_kwargs(self, jvm: driver.Jvm) -> dict:
        return {"slo_ms": jvm.ctx.rule.slo_ms(0), "connections": jvm.plan.connections}

    def ready(self, jvm: driver.Jvm) -> None:
        jvm.record["sequential_ms_at_0"] = sequential_ms(jvm.target.url, tokens.load()[0])
        jvm.say(f"alone at 0 ms: {jvm.record['sequential_ms_at_0']} ms")

    @contextlib.contextmanager
    def cell_regime(self, jvm: driver.Jvm, cell: dict) -> Iterator[None]:
        latency = latency_of(cell)
        self.px.set_latency(latency)
        cell.update(round_trip_ms=round(latency + self.base_rtt, 3), sequential_ms=sequential_ms(jvm.target.url, tokens.load()[0]))
        # below 5 ms app time blurs the count: such a latency keeps the last one (the first always counts)
        cell["round_trips"] = (round_trips(cell["sequential_ms"], jvm.record["sequential_ms_at_0"], latency)
                               if latency >= 5 or latency == jvm.plan.latencies_ms[0]
                               else jvm.record["cells"][-2]["round_trips"])
        cell["limits_rps"] = {k: v and round(v) for k, v in self.limits(jvm, cell, cell["round_trips"]).items()}
        yield

    def limits(self, jvm: driver.Jvm, cell: dict, trips: int) -> dict[str, float | None]:
        """From this JVM's measurements, unrounded (the record keeps them rounded)."""
        return limits_rps(jvm.coords["pool_size"], jvm.record["tomcat_threads"], jvm.plan.connections, trips,
                          latency_of(cell) + self.base_rtt, jvm.capacity("warm"))

    def added_latency_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return LOOKUPS * latency_of(cell)

    def step_kwargs(self, jvm: driver.Jvm, cell: dict) -> dict:
        return {"connections": jvm.plan.connections}

    def common_rate(self, jvm: driver.Jvm, cell: dict) -> int | None:
        """Only with the default pool: the rate the ports are compared at side by side."""
        return (common_rate(jvm.plan, self.default_pool, latency_of(cell), self.base_rtt)
                if jvm.coords["pool_size"] == self.default_pool else None)

    def estimate(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.plan.mst_first_guess * min(v for v in self.limits(jvm, cell, cell["round_trips"]).values() if v)

    def settle_rate(self, jvm: driver.Jvm, cell: dict) -> int | None:
        """At the first latency only: lazy pools (the Vert.x ones) grow on demand: open what the highest needs."""
        return round_rate(self.estimate(jvm, cell)) if latency_of(cell) == jvm.plan.latencies_ms[0] else None

    def settled(self, jvm: driver.Jvm, cell: dict) -> None:
        cell["proxy_connections_after_settle"] = self.px.client_connections()

    def searched(self, jvm: driver.Jvm, cell: dict) -> None:
        """The utilisations at the MST and what held it."""
        mst = Mst.from_json(cell["mst"])
        at = at_mst(cell["steps"], mst)
        busy = statistics.median(s["busy_cores"] for s in at) if at else None
        limits = self.limits(jvm, cell, cell["round_trips"])
        # a request alone can take a round trip a loaded pool does not (HikariCP pings a connection idle over
        # 500 ms): the limits again with what the database counted per request at the MST
        loaded = [k["db_questions_per_request"] + k.get("db_com_admin_commands_per_request", 0)
                  for k in (s["kernel"] for s in at) if "db_questions_per_request" in k]
        if loaded:
            cell["round_trips_under_load"] = max(1, round(statistics.median(loaded) / LOOKUPS))
            limits = self.limits(jvm, cell, cell["round_trips_under_load"])
        cell["utilisation"] = utilisation(mst.rps, busy, self.cores, limits)
        cell["at_mst"] = {k: statistics.median(v) if (v := [s[k] for s in at if s.get(k) is not None]) else None
                          for k in AT_MST}
        cell["cap"] = classify(cell)
        jvm.say(f"+{latency_of(cell)} ms: cap {caps.text(cell['utilisation'], cell['cap'])}")

"""downstream: thousands of requests waiting on slow downstream HTTP services, K calls fanned out in parallel.

`GET /feed?calls=K` (docs/contract.md): after the JWT check and the user lookup, each port makes K
downstream GETs to nginx (harness/downstream.py: echo_sleep, a timer, no thread) in parallel, the way its
framework's docs show, and `&mode=sequential` one after another. Per cell (downstream latency L, K, mode): the MST
at the one rule with the downstream latency added (parallel: L once; sequential: K x L), p50/p99 at a common rate,
CPU per request of the port and of nginx (per downstream call), RSS, threads, the most downstream connections the
port held, and what capped it (the CPU set, Tomcat's threads, the client's pool).

Time budget: one JVM per port and iteration serves every cell (nginx restarts at each latency, the port
reconnects); about 4 min per port and iteration with the default cells, so `all` at 3 iterations in about 75 min.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import urllib.parse

import psutil

from .. import compose, downstream as downstream_mod, driver, port_facts, ports, sampling
from ..method import caps
from ..method.record import Mst, Step, round_rate
from ..session import Context
from ..target import Target

@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [downstream]."""
    cells: list[list]            # [latency_ms, calls, mode] in run order; mode "parallel" or "sequential"
    common_rate: int             # p50/p99 side by side at this rate in every cell
    warmup_calls: int            # the probes' and the warm-up's K, at 0 ms downstream latency
    connections: int             # generator connections: rate x wait in flight must fit


@dataclasses.dataclass(frozen=True)
class Cell:
    latency_ms: float
    calls: int
    mode: str

    @property
    def waits_ms(self) -> float:
        """The downstream latency a request cannot avoid: once in parallel, K times in sequence."""
        return self.latency_ms * (self.calls if self.mode == "sequential" else 1)

    def path(self) -> str:
        return f"feed?calls={self.calls}" + ("&mode=sequential" if self.mode == "sequential" else "")


def thread_cap(port: str, cell: Cell, env=os.environ) -> float | None:
    """Requests per second a fixed thread pool allows: threads / the time each request holds one."""
    threads = port_facts.request_threads(port, env)
    if not threads or not cell.waits_ms:
        return None
    return threads / (cell.waits_ms / 1000)


def client_pool(port: str, env=os.environ, mode: str = "parallel") -> int | None:
    """The port's downstream pool (connections or threads) in this run: its default, or the override given.
    spring-platform's executor runs the parallel calls only: sequential ones run on the request's Tomcat thread."""
    if port == "spring-virtual" and env.get("SPRING_HTTP_CLIENTS_IMPERATIVE_FACTORY") == "http-components":
        # the remedy's Apache HttpClient 5: its pool per route (spring/mvc DownstreamClient.java; 5 by default)
        return int(env.get("BENCH_DOWNSTREAM_POOL_SIZE") or 0) or 5
    pools = port_facts.client_pools()
    if port not in pools or (port == "spring-platform" and mode == "sequential"):
        return None
    default, variable = pools[port]
    return int(env.get(variable, default)) if variable else default


def pool_cap(pool: int | None, cell: Cell) -> float | None:
    """Requests per second a pool of `pool` connections (or threads) allows: each request holds K of them for L
    (parallel) or one of them for K x L (sequential): K x L connection-seconds either way."""
    if not pool or not cell.latency_ms:
        return None
    return pool / (cell.calls * cell.latency_ms / 1000)


def gauges(port: str, app_pid: int | None, downstream_port: int, http_port: int) -> dict:
    """What each bound on GET /feed's path is read by, from outside the JVM: the port's connections open to the
    downstream, and Tomcat's request threads alive by name where the port runs that fixed pool. Both are high-water
    marks (pools keep idle connections open; Tomcat adds a thread only when none is idle and keeps it 60 s). The
    connections also read spring-platform's executor: each busy executor thread holds one call's connection (its
    threads alive cannot: a ThreadPoolExecutor starts a core thread for every task until it has them all)."""
    if app_pid is None:
        return {}
    facts = port_facts.PORTS.get(port)
    out = {"downstream connections": lambda: sampling.connections_to(app_pid, downstream_port)}
    if facts and facts.request_threads_name:
        name = facts.request_threads_name.format(port=http_port)
        out["request threads"] = lambda: sampling.threads_named(app_pid, name)
    return out


def downstream_connections(app_pid: int | None, downstream_port: int) -> int | None:
    """The port's established TCP connections to the downstream (its HTTP client's open pool)."""
    if app_pid is None:
        return None
    try:
        procs = [psutil.Process(app_pid), *psutil.Process(app_pid).children(recursive=True)]
        return sum(1 for p in procs for c in p.net_connections(kind="tcp")
                   if c.raddr and c.raddr.port == downstream_port and c.status == psutil.CONN_ESTABLISHED)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


# --- measuring ----------------------------------------------------------------------------------------------

def run(ctx: Context, selected: list[ports.Port]) -> None:
    driver.run(ctx, Downstream(), ctx.plan(Plan), selected)


@dataclasses.dataclass
class Feed(Target):
    """/feed at a cell's K and mode, nginx's CPU beside the app's. Each step also counts the downstream calls per
    request (nginx's own count), nginx's CPU per call and the connections the port holds to it; a failed one is
    drained, so that its queue (e.g. Spring's unbounded executor queue) does not fail the next step."""
    nginx: object = None
    held: list = dataclasses.field(default_factory=list)     # the connections held at the end of each step
    gauges: dict = dataclasses.field(default_factory=dict)   # name -> how to read it (downstream.gauges)

    def rate(self, rate: float, seconds: float, phase: str = "step", **kwargs) -> Step:
        served_before = self.nginx.requests_served()
        with sampling.Gauges(self.gauges) as peaks:
            s = super().rate(rate, seconds, phase, **kwargs)
        if self.gauges:
            s.extra["gauges_peak"] = peaks.peaks
        calls = self.nginx.requests_served() - served_before
        s.extra["downstream_calls_per_request"] = round(calls / max(s.requests, 1), 2)
        s.extra["downstream_cpu_us_per_call"] = round(s.extra["nginx_cpu_us_per_request"] * s.requests
                                                      / max(calls, 1), 1)
        conns = downstream_connections(self.app_pid, self.nginx.port)
        if conns is not None:
            self.held.append(conns)
            s.extra["downstream_connections_end"] = conns
        if not s.passed:
            s.extra["drained_after_s"] = self.drain(kwargs.get("slo_ms"))
        return s


def feed(target: Target, cell: Cell, kind: type = Target, **fields) -> Target:
    """`target` (the port at its root) at GET /feed of `cell`, as a `kind`."""
    values = {f.name: getattr(target, f.name) for f in dataclasses.fields(Target)}
    return kind(**{**values, "url": target.url.rstrip("/") + "/" + cell.path(), **fields})


class Downstream(driver.Scenario):
    """nginx up at 0 ms around each JVM, restarted at each cell's latency (the port's client reconnects in the
    settle step); the probes and the warm-up load /feed at K=warmup_calls."""
    downstream = root = None          # the nginx around the JVM (downstream.AroundJvm), the port's root
    bounds: tuple = ()                # the cell's Tomcat thread cap and client pool cap (req/s), None if none

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [dataclasses.asdict(Cell(float(c[0]), int(c[1]), str(c[2]))) for c in plan.cells]

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm):
        self.downstream = downstream_mod.AroundJvm(compose.bridge_address() if compose.enabled() else None)
        with self.downstream.around() as env:
            yield {"extra_env": env}

    def started(self, jvm: driver.Jvm) -> None:
        super().started(jvm)
        self.root, jvm.target = jvm.target, feed(jvm.target, Cell(0.0, jvm.plan.warmup_calls, "parallel"))

    @contextlib.contextmanager
    def cell_regime(self, jvm: driver.Jvm, cell: dict):
        c = Cell(**cell["coords"])
        nginx = self.downstream.at(c.latency_ms)
        jvm.target = feed(self.root, c, Feed, nginx=nginx, sides={"nginx": nginx.cpu_seconds},
                          gauges=gauges(jvm.port.name, self.root.app_pid, nginx.port,
                                        urllib.parse.urlsplit(self.root.url).port))
        cell["client_pool"] = client_pool(jvm.port.name, mode=c.mode)
        cell["bounds"] = bounds(jvm.port.name, c)
        self.bounds = thread_cap(jvm.port.name, c), pool_cap(cell["client_pool"], c)
        yield

    def added_latency_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return Cell(**cell["coords"]).waits_ms

    def step_kwargs(self, jvm: driver.Jvm, cell: dict) -> dict:
        return {"connections": jvm.plan.connections}

    def estimate(self, jvm: driver.Jvm, cell: dict) -> float:
        """mst_first_guess x the lowest bound (the warm probe at 0 ms: CPU; Tomcat's threads; the client's pool),
        and at most the rate at which the CPU set would be full at the cell's own cost per request (the settle
        step's utilisation, scaled to its rate): a client's CPU per request grows with the wait (spring-virtual's
        JDK client: about 5x from 0 to 50 ms), and a first probe several times above the limit can exhaust a heap
        that no pool bounds, leaving the search nothing."""
        guess = jvm.plan.mst_first_guess * min(x for x in (jvm.capacity("warm"), *self.bounds) if x)
        settle = Step.from_json(cell["settle"]) if cell.get("settle") else None
        full = settle and settle.passed and caps.cpu_utilisation(settle, jvm.ctx.settings["cpus"])
        return min(guess, settle.achieved_rps / full) if full else guess

    def settle_rate(self, jvm: driver.Jvm, cell: dict) -> int:
        """Below the estimate, so that it leaves no queue behind."""
        plan = jvm.plan
        return max(plan.mst_floor_rps, min(plan.common_rate // 4, round_rate(self.estimate(jvm, cell))))

    def common_rate(self, jvm: driver.Jvm, cell: dict) -> int | None:
        """Only below the first rate this port failed: far above it, an unbounded queue (Spring's task executor at
        its 8 threads) fills with minutes of work that outlives the step and the client's timeout, and would be
        measured by every later step in this JVM."""
        failing = Mst.from_json(cell["mst"]).first_failing_rps
        if failing is None or jvm.plan.common_rate < failing:
            return jvm.plan.common_rate
        cell["common_skipped"] = failing
        jvm.say(f"common {jvm.plan.common_rate}/s not run: above the first failing rate {failing}/s")
        return None

    def measure_cell(self, jvm: driver.Jvm, cell: dict) -> None:
        """The declared phases, then the most connections held and what capped the MST."""
        super().measure_cell(jvm, cell)
        cell["downstream_connections_peak"] = max(jvm.target.held, default=None)
        cell["cap"], cell["utilisation"] = cap_of(jvm.ctx, cell, *self.bounds)
        jvm.say(f"{cell['coords']}: capped by {caps.text(cell['utilisation'], cell['cap'])}")


def bounds(port: str, cell: Cell, env=os.environ) -> dict[str, int]:
    """The size of each bound on the path whose gauge downstream.gauges reads, in this run: the client's pool
    (connections, or the executor's threads), Tomcat's request threads. Sequential calls use no executor."""
    out = {}
    if (pool := client_pool(port, env, cell.mode)) is not None:
        out["downstream connections"] = pool
    if threads := port_facts.request_threads(port, env):
        out["request threads"] = threads
    return out


# a gauge's bound, by the name cap_of gives its utilisation
GAUGE_CAPS = {"downstream connections": "client pool", "request threads": "threads"}


def cap_of(ctx: Context, entry: dict, threads: float | None, pool: float | None) -> tuple[str, dict]:
    """Utilisation of each limit at the MST: the CPU set, Tomcat's threads (spring-platform), the client's pool.
    Where the steps read the bounds' gauges, a bound's utilisation is its reading at the MST (caps.gauge_reading)
    over its size; otherwise (older records) the MST over the rate the bound allows."""
    mst = Mst.from_json(entry["mst"])
    at = [Step.from_json(s) for s in entry["steps"] if s.get("target_rps") == mst.rps and s.get("passed")]
    utilisation: dict[str, float | None] = {}
    if at:
        utilisation["CPU"] = caps.cpu_utilisation(at[-1], ctx.settings["cpus"])
    at_json = [s for s in entry["steps"] if s.get("target_rps") == mst.rps and s.get("passed")]
    if at_json and at_json[-1].get("gauges_peak") is not None:
        for gauge, size in (entry.get("bounds") or {}).items():
            reading = caps.gauge_reading(entry["steps"], at_json[-1], gauge, caps.per_request(gauge, entry["coords"]))
            if size and reading is not None:
                utilisation[GAUGE_CAPS[gauge]] = round(reading / size, 2)
        return caps.cap_at(mst, utilisation), utilisation
    if threads and mst.rps:
        utilisation["threads"] = round(mst.rps / threads, 2)
    if pool and mst.rps:
        utilisation["client pool"] = round(mst.rps / pool, 2)
    return caps.cap_at(mst, utilisation), utilisation


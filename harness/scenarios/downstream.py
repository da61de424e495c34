"""downstream: thousands of requests waiting on slow downstream HTTP services, K calls fanned out in parallel.

`GET /feed?calls=K` (README, "The contract"): after the JWT check and the user lookup, each port makes K
downstream GETs to nginx (harness/downstream.py: echo_sleep, a timer, no thread) in parallel, the way its
framework's docs show, and `&mode=sequential` one after another. Per cell (downstream latency L, K, mode): the MST
at the one rule with the downstream latency added (parallel: L once; sequential: K x L), p50/p99 at a common rate,
CPU per request of the port and of nginx (per downstream call), RSS, threads, the most downstream connections the
port held, and what capped it.

What to expect: the pool of the database no longer decides (one lookup per request, no added DB latency). A port
whose request holds a platform thread for the whole wait is capped at threads / (L [x K sequential]): Tomcat's 200
threads give 1,000 req/s at 200 ms. Virtual threads and event loops hold no OS thread while waiting: the CPU and
the HTTP client's connection pool (its default size, shown per port in docs/configuration.md) cap them.

Time budget: one JVM per port and iteration serves every cell (nginx restarts at each latency, the port
reconnects); about 4 min per port and iteration with the default cells, so `all` at 3 iterations in about 75 min.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
from pathlib import Path

import psutil

from .. import compose, downstream as downstream_mod, driver, port_facts, ports
from ..method import caps, runset, spans
from ..method.record import Mst, Step, at_mst, round_rate
from ..method.runset import RunSet
from ..method.spans import cell, ms, num
from ..session import Context
from ..target import Target
from ..report import charts, table
from ..report.section import Decision, Section

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


def thread_cap(port: str, cell: Cell) -> float | None:
    """Requests per second a fixed thread pool allows: threads / the time each request holds one."""
    threads = port_facts.PORTS[port].request_threads if port in port_facts.PORTS else None
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

    def rate(self, rate: float, seconds: float, phase: str = "step", **kwargs) -> Step:
        served_before = self.nginx.requests_served()
        s = super().rate(rate, seconds, phase, **kwargs)
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
    also_on = nginx = root = None     # Docker's bridge (BENCH_ENV=compose), the nginx running, the port's root
    bounds: tuple = ()                # the cell's Tomcat thread cap and client pool cap (req/s), None if none

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [dataclasses.asdict(Cell(float(c[0]), int(c[1]), str(c[2]))) for c in plan.cells]

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm):
        self.also_on = compose.bridge_address() if compose.enabled() else None
        self.nginx = downstream_mod.up(0, also_on=self.also_on)
        try:
            yield {"extra_env": self.nginx.env()}
        finally:
            downstream_mod.down(self.nginx.port)

    def started(self, jvm: driver.Jvm) -> None:
        super().started(jvm)
        self.root, jvm.target = jvm.target, feed(jvm.target, Cell(0.0, jvm.plan.warmup_calls, "parallel"))

    @contextlib.contextmanager
    def cell_regime(self, jvm: driver.Jvm, cell: dict):
        c = Cell(**cell["coords"])
        self.nginx = downstream_mod.up(c.latency_ms, also_on=self.also_on)
        jvm.target = feed(self.root, c, Feed, nginx=self.nginx, sides={"nginx": self.nginx.cpu_seconds})
        cell.update(slo_ms=self.slo_ms(jvm, cell), client_pool=client_pool(jvm.port.name, mode=c.mode))
        self.bounds = thread_cap(jvm.port.name, c), pool_cap(cell["client_pool"], c)
        yield

    def slo_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.ctx.rule.slo_ms(Cell(**cell["coords"]).waits_ms)

    def step_kwargs(self, jvm: driver.Jvm, cell: dict) -> dict:
        return {"slo_ms": cell["slo_ms"], "connections": jvm.plan.connections}

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


def cap_of(ctx: Context, entry: dict, threads: float | None, pool: float | None) -> tuple[str, dict]:
    """Utilisation of each limit at the MST: the CPU set, Tomcat's threads (spring-platform), the client's pool."""
    mst = Mst.from_json(entry["mst"])
    at = [Step.from_json(s) for s in entry["steps"] if s.get("target_rps") == mst.rps and s.get("passed")]
    utilisation: dict[str, float | None] = {}
    if at:
        utilisation["CPU"] = caps.cpu_utilisation(at[-1], ctx.settings["cpus"])
    if threads and mst.rps:
        utilisation["threads"] = round(mst.rps / threads, 2)
    if pool and mst.rps:
        utilisation["client pool"] = round(mst.rps / pool, 2)
    return caps.cap_at(mst, utilisation), utilisation


# --- the report ---------------------------------------------------------------------------------------------

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
    head = "| port | " + " | ".join(_cell_name(k) for k in keys) + " |"
    body += ["MST (req/s) ✗ first failing rate; cap (utilisation at the MST):", "", head, "|---|" + "---:|" * len(keys)]
    for label, cells in by.items():
        row = []
        for k in keys:
            entries = cells.get(k, [])
            capped = table.cap_cell([e["cap"] for e in entries if e.get("cap")],
                                    [e.get("utilisation") for e in entries if e.get("cap")])
            row.append(f"{table.mst_cell(_msts(entries))}; {capped}" if entries else "–")
        body.append(f"| {label} | " + " | ".join(row) + " |")
    died = _died_list(rs)
    if died:
        body += ["", *died]
    body += ["", "At the common rate: p99 (ms) and app CPU µs per request; nginx's CPU µs per downstream call; the most "
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
             "and, × K, downstream calls in flight:", "",
             "| port | " + " | ".join(_cell_name(k) for k in keys) + " |", "|---|" + "---:|" * len(keys)]
    for label, cells in by.items():
        body.append(f"| {label} | " + " | ".join(_in_flight(cells.get(k, []), k) for k in keys) + " |")
    body.append("")
    for calls in sorted({k[1] for k in keys if k[2] == "parallel"}):
        series = {label: [(k[0], _mst(cells.get(k, []))) for k in keys if k[1] == calls and k[2] == "parallel"]
                  for label, cells in by.items()}
        body += charts.link(f"MST against downstream latency, K={calls}", charts.lines(
            chart_dir / f"downstream-k{calls}.png", f"MST against downstream latency, K={calls} parallel calls",
            "downstream latency (ms, log)", "MST (req/s, log)", series, logx=True, logy=True))
    decisions, verdict, sized = judge(by, keys, died_cells(rs))
    verdict += deaths(rs)
    return Section("Slow downstream services (parallel fan-out)", rs.scenario, body, appendix=appendix(by),
                   decisions=decisions, verdict=verdict, findings=sized, warnings=rs.warnings)


def _died_list(rs: RunSet) -> list[str]:
    """The body's line on the iterations whose JVM died, each with its log line; [] when none did."""
    died = [f"{label} #{r.get('iteration')}: {r['died']}" for label, records in rs.by_label.items() for r in records
            if r.get("status") == "died"]
    return ["Died during the run (the cells after it are missing from that iteration): " + "; ".join(died) + "."] \
        if died else []


def judge(by: dict[str, dict], keys: list[tuple], died: dict | None = None) \
        -> tuple[list[Decision], list[str], list[str]]:
    """A decision row and a verdict sentence per cell, from the ports at their defaults (and, where a remedy run
    exists, a row and the section's sentence with the bounds sized: each remedy in its port's place, the row's
    settings the settings the remedies sized, the defaults' row pointing to it). The row's choice is among the
    ports with a figure only (a partial one, from the runs that survived a death in the cell, is in no comparison).
    A port whose searches passed no rate there is the verdict's (_failed_clause: below the ports that passed its
    lowest rate in every run), as is a port that died (`died`, from died_cells: the runs of its cell count the dead
    ones; render adds the deaths sentences). The row names; the figures and exclusions are the verdict's."""
    died = died or {}
    defaults, remedied = runset.split_remedies(by)
    decisions, verdict, sized_verdict = [], [], []     # the defaults' sentences in the verdict, the sized ones
    for k in keys:
        msts, failed = _figures(defaults, k, died)
        if not msts and not failed and not any(k in d for d in died.values()):
            continue
        counted = _caps_counted(defaults.values(), k)
        sized_names = dict.fromkeys(f"`{name}`" for label, cells in remedied.items() if cells.get(k)
                                    for name in runset.settings_of(label))
        remedied_ports = {runset.port_of(r) for r in remedied}
        pools = port_facts.client_pools()
        untried = sorted({f"`{pools[label][1]}`" for label, cells in defaults.items()
                          if pools.get(label, (0, None))[1] and label not in remedied_ports
                          and any("client pool" in (e.get("cap") or "") for e in cells.get(k, []))})
        sized_setting = f"the bounds sized: {', '.join(sized_names)}"
        what = (f"{k[1]} calls of {k[0]:g} ms one after another" if k[2] == "sequential"
                else f"{k[1]} calls of {k[0]:g} ms in parallel")
        # each port with its client's bound sized where a remedy run exists (the remedy's row instead of the
        # defaults'): where the model decides once the pools do not
        sized, sized_failed = dict(msts), dict(failed)
        remedy_msts, remedy_failed = _figures(remedied, k, died)
        for r in remedied:
            if r in remedy_msts or r in remedy_failed:
                sized.pop(runset.port_of(r), None)
                sized_failed.pop(runset.port_of(r), None)
                if r in remedy_msts:
                    sized[r] = remedy_msts[r]
                else:
                    sized_failed[r] = remedy_failed[r]
        remedy_here = sized != msts or sized_failed != failed
        # the settings: the bounds sized, named in their own row where it follows (here both lists would pass 220
        # characters), and the client pools that capped a port at its defaults with no remedy run
        settings = ["the bounds sized: the next row" if remedy_here else sized_setting] if sized_names else []
        settings += [f"size the client pool: {', '.join(untried)} (not run)"] if untried else []
        # the row orders every port (issue 34): by MST where a bound decides (the client pools, at the defaults),
        # then those that passed no rate, died in the cell or were not measured; the figures are the verdict's
        decisions.append(Decision(f"Slow downstream services: {what} per request",
                                  f"caps: {counted}" if counted else "unclear",
                                  _ranked(msts, failed, died, k, list(defaults)), "; ".join(settings) or "defaults"))
        if remedy_here:         # a row of its own (in the defaults' row one cell would pass 220 characters)
            replaced = {runset.port_of(r) for r in remedied if r in remedy_msts or r in remedy_failed}
            labels = [lab for lab in defaults if lab not in replaced] + [r for r in remedied if r in remedy_msts
                                                                         or r in remedy_failed]
            sized_counted = _caps_counted([({**defaults, **remedied})[lab] for lab in labels], k)
            decisions.append(Decision(f"Slow downstream services: {what} per request, the client bounds sized",
                                      f"caps: {sized_counted}" if sized_counted else "unclear",
                                      _ranked(sized, sized_failed, died, k, labels, _short), sized_setting))
        verdict.append(f"With {what} per request, at each port's defaults, the confirmed MST runs "
                       f"{_range(msts)}{_failed_clause(failed, msts)}.")
        if remedy_here:
            sized_verdict.append(f"With {what} per request and each client's bound sized where a remedy was run, it "
                                 f"runs {_range(sized)}{_failed_clause(sized_failed, sized)}.")
    return decisions, verdict, sized_verdict


def _caps_counted(cells_of_ports, k: tuple) -> str:
    """"client pool (4 ports), CPU": each port's dominant cap in cell k, counted."""
    named = [dominant for cells in cells_of_ports
             if (dominant := table.dominant([e["cap"] for e in cells.get(k, []) if e.get("cap")]))]
    return ", ".join(f"{name} ({named.count(name)} ports)" if named.count(name) > 1 else name
                     for name in dict.fromkeys(named))


def _short(by_label: dict) -> dict:
    """A remedy run as "port (sized)": the settings cell names the settings (full labels where one port has two)."""
    short = {(f"{runset.port_of(label)} (sized)" if runset.port_of(label) != label else label): v
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


def _ranked(figures: dict[str, spans.Spread], failed: dict[str, tuple], died: dict, k: tuple, labels: list[str],
            names=lambda by_label: by_label) -> str:
    """table.ranked over `labels` in cell k: by MST (`>` only where the whole ranges, and the searches' brackets, lie
    apart); below them the ports whose searches passed no rate down to a rate every figure lies at or above; not
    compared: the other ports that passed none, those whose JVM died in this cell in every run or in an earlier
    one (not measured here). `names` shortens the labels (_short)."""
    shown = {label: s for label, s in figures.items() if label in labels}
    firm = table.complete(shown)
    below, apart = {}, {}
    for label in labels:
        if label in figures:
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
    return table.ranked(names(shown), names(below), names(apart))


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

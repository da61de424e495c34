"""One driver for every scenario that measures JVMs: rounds x ports x JVM groups x cells, with the one JVM lifecycle.

    start (the group's regime: its environment, JDK variant, side service) -> [cold probe] -> warm-up -> [drain]
    -> [warm probe] -> per cell (the cell's regime): its declared phases (settle, common, search, closed, ...)

A scenario declares in bench.toml what varies (its JVM groups and cells, the knobs of `Lifecycle` below) and, in
its module, only what is its own: a regime (a context manager that sets up a side service or limit per JVM and per
cell) and the few hooks `Scenario` lists. Every record has the one schema (method/schema.py), rewritten after every
step, so an interrupted run keeps what finished."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from pathlib import Path
from typing import Iterator

from . import ports, tokens
from .method import schema
from .method.record import MIN_RATE, Step, Warmup
from .method.rule import GENERATOR
from .method.search import find_mst
from .errors import Fatal
from .session import Context, baseline_msts, rotation, rounds
from .target import AppExited


@dataclasses.dataclass(frozen=True, kw_only=True)
class Lifecycle:
    """The driver's part of a scenario's bench.toml section (the scenario's Plan inherits it)."""
    iterations: int
    probe_seconds: float                 # the closed-loop capacity probes, at [load] connections
    warmup_fraction: float               # the warm-up's rate: this x the cold probe ...
    warmup_baseline_fraction: float      # ... or this x the port's MST in the newest baseline run set, the higher
    mst_first_guess: float               # the search starts at this x the estimate (the warm probe by default)
    step_seconds: float
    cold_probe: bool                     # the JVM's phases, in this order when on
    drain_after_warmup: bool
    warm_probe: bool
    cell_phases: list[str]               # per cell, in order: "settle", "pause", "probe", "drain", "ladder",
                                         # "common", "search", "closed", "idle"
    between_probes: str                  # before each search step: "rewarm", "drain-after-failure",
                                         # "pause-or-drain" (drained to the cell's SLO after a failed step), "none"
    rewarm_seconds: float = 0.0
    pause_seconds: float = 0.0           # the "pause" cell phase and "pause-or-drain"'s pause
    mst_max_probes: int | None = None    # None: [search] max_probes
    mst_confirm_probes: int | None = None
    settle_seconds: float = 0.0          # the "settle" cell phase's step (Scenario.settle_rate)
    histogram_phases: list[str] | None = None    # the steps that keep their latency histogram (None: every step)
    mst_floor_rps: int | None = None     # None: the method's MIN_RATE
    ladder_rates: list[int] | None = None    # the "ladder" cell phase: a step at each rate, lowest first, each
    ladder_seconds: float = 0.0              # max(ladder_seconds, ladder_min_requests / rate) long; the first
    ladder_min_requests: int = 0             # failed rung is drained and ends the ladder (the rest lie above it)
    ladder_arrivals: list[str] | None = None # the ladder once per arrival process named (e.g. ["even", "poisson"]),
                                             # reversed on even iterations, each rung saying its process (paired
                                             # within one JVM); empty: once, at `arrivals`
    arrivals: str | None = None              # this scenario's arrival process for its open-model steps (read by
                                             # settings.arrivals); None: [load] arrivals
    probe_phases: dict | None = None     # the probes' step phases by probe, e.g. {cold = "capacity"} (capacity-<probe>)
    warmup_max_seconds: float | None = None  # the warm-up's cap: the lower of this and [warmup] max_seconds (None: that)
    drain_after_failed_step: bool = False    # every failed step of a cell (common, search, idle) drained at once, to
                                             # the SLO it was judged by (its slo_ms, else the rule's)
    idle_rate: int = 0                       # the "idle" cell phase: a step at idle_rate for idle_seconds beside
    idle_seconds: float = 0.0                # idle_connections idle keep-alive connections (opened
    idle_connections: int = 0                # idle_connect_concurrency at a time), kept in the cell's steps and
    idle_connect_concurrency: int = 0        # summed up as cell["idle"]
    start_failure: str = "raise"             # the JVM does not start: "raise" (the run stops), "record" (the record
                                             # says start_failure with the error, status "not-started"; the run goes on)
    drain_after_settle: bool = True      # False: the settle step's target drains itself after a failure
    app_exit: str = "raise"              # the app exits during the run: "raise" (the run stops), "died" (the record
                                         # says so with the log's last line, the run goes on)
    start: str = "ready"                 # "ready": up, its first 200 timed, rows checked, a Target; "at-once": the
                                         # process started without waiting (no check, no Target), for a scenario
                                         # that times the start itself
    warmup: bool = True                  # False: no warm-up (a JVM measured cold)
    jvm_order: str = "declared"          # a port's JVMs per iteration: "declared", or "rotate" (as the ports are);
                                         # "round": a round is Scenario.round's JVMs across ports, rotated over JVMs


@dataclasses.dataclass
class Jvm:
    """One fresh JVM of one port: its record, its target and the phases the lifecycle runs on it."""
    ctx: Context
    plan: Lifecycle
    port: ports.Port
    iteration: int
    coords: dict
    path: Path
    record: dict
    running: object = None
    target: object = None
    warm: Warmup | None = None
    previous_mst: int | None = None      # the port's MST in the newest baseline run set
    scenario: "Scenario | None" = None   # its hooks around each step (Scenario.stepped)

    def say(self, text: str) -> None:
        tag = " ".join([self.port.name, *(str(v) for v in self.coords.values()), f"#{self.iteration}"])
        self.ctx.say(tag, text)

    def save(self) -> None:
        self.ctx.save(self.record, self.path)

    def probe(self, phase: str) -> float:
        """A closed-loop probe at [load] connections, kept as record["capacity"][phase]: its rate."""
        return self.ctx.capacity(self.target, self.record, self.path, phase, self.plan.probe_seconds, self.say,
                                 step_phase=(self.plan.probe_phases or {}).get(phase))

    def capacity(self, phase: str) -> float | None:
        step = self.record["capacity"].get(phase)
        return step and step["achieved_rps"]

    def warm_up(self, rate: float, **rate_kwargs) -> Warmup:
        plan = self.ctx.warmup
        if self.plan.warmup_max_seconds is not None:
            plan = dataclasses.replace(plan, max_seconds=min(plan.max_seconds, float(self.plan.warmup_max_seconds)))
        self.warm = self.target.warm_up(rate, plan, self.say, **rate_kwargs)
        self.record["warmup"] = self.warm.to_json()
        self.save()
        return self.warm

    def step(self, cell: dict, rate: float, phase: str, histogram: bool | None = None, seconds: float | None = None,
             **rate_kwargs) -> Step:
        """One constant-rate step of `cell` (step_seconds unless `seconds`), kept in its steps (its histogram where
        histogram_phases says, the scenario's fields from Scenario.stepped), drained after a failure where
        drain_after_failed_step says."""
        began = time.monotonic()
        result = self.target.rate(rate, seconds or self.plan.step_seconds, phase, **rate_kwargs)
        line = self.scenario.stepped(self, cell, result, began) if self.scenario else ""
        if histogram is None:
            histogram = self.plan.histogram_phases is None or phase in self.plan.histogram_phases
        cell["steps"].append(result.to_json(histogram=histogram))
        self.save()
        self.say(result.line() + line)
        if self.plan.drain_after_failed_step and not result.passed:
            self.target.drain(rate_kwargs.get("slo_ms"))       # the queue a failed step may leave
        return result


class Scenario:
    """What a scenario module may define beyond its declaration; every hook has the default shown."""

    def jvms(self, plan, port: ports.Port) -> list[dict]:
        """The coordinates of each fresh JVM of `port` (in order)."""
        return [{}]

    def skip(self, plan, port: ports.Port, coords: dict, done: list[dict]) -> str | None:
        """Why the JVM at `coords` is not run, given the records of the port's JVMs before it in this iteration
        (`done`); its record then says so (`skipped`, status "skipped"). None: it runs."""
        return None

    def round(self, plan, selected: list[ports.Port]) -> list[tuple[ports.Port, dict]]:
        """One iteration's JVMs across ports, (port, coordinates) in order (read where jvm_order is "round")."""
        return [(port, coords) for port in selected for coords in self.jvms(plan, port)]

    def cells(self, plan, jvm: Jvm) -> list[dict]:
        """The coordinates of each cell measured on `jvm` (in order)."""
        return [{}]

    def path(self, jvm: Jvm) -> str:
        """The record's file name suffix."""
        return "".join(f"-{v}" for v in jvm.coords.values()) + f"-{jvm.iteration}"

    @contextlib.contextmanager
    def regime(self, jvm: Jvm) -> Iterator[dict]:
        """Around the JVM: yields ctx.port's keyword arguments (extra_env, variant)."""
        yield {}

    @contextlib.contextmanager
    def cell_regime(self, jvm: Jvm, cell: dict) -> Iterator[None]:
        yield

    def fields(self, jvm: Jvm) -> dict:
        """What the scenario adds to the record, set before the JVM starts."""
        return {}

    def started(self, jvm: Jvm) -> None:
        """Once the JVM is up (its startup time and idle RSS in the record), before its first phase."""
        jvm.say(f"up in {jvm.record['startup_s']} s, RSS {jvm.record['idle_rss_mb']} MiB; rows checked")

    def warmed(self, jvm: Jvm) -> None:
        """After the warm-up (and its drain), before the warm probe and the cells."""

    def added_latency_ms(self, jvm: Jvm, cell: dict) -> float | None:
        """What the cell's regime adds to each request's waits in total (e.g. N lookups x the database's latency),
        from its coordinates: the driver judges every step, drain and search of the cell at the rule's SLO with that
        added, kept as cell["slo_ms"]. None: nothing added (the rule's own SLO)."""
        return None

    def step_kwargs(self, jvm: Jvm, cell: dict) -> dict:
        """Keyword arguments of target.rate for each of a cell's steps besides the SLO (e.g. connections)."""
        return {}

    def measure_cell(self, jvm: Jvm, cell: dict) -> None:
        """A cell's measurements: its declared phases ([section] cell_phases), or what a scenario does instead."""
        run_cell(jvm, self, cell)

    def warmup_rate(self, jvm: Jvm) -> float:
        return max(jvm.plan.warmup_fraction * (jvm.capacity("cold") or 0),
                   jvm.plan.warmup_baseline_fraction * (jvm.previous_mst or 0))

    def estimate(self, jvm: Jvm, cell: dict) -> float:
        """Where the MST search starts: mst_first_guess x the warm probe."""
        return jvm.plan.mst_first_guess * jvm.capacity("warm")

    def common_rate(self, jvm: Jvm, cell: dict) -> float | None:
        """The "common" phase's rate (None: no common step in this cell)."""
        return jvm.plan.common_rate

    def common_step(self, jvm: Jvm, cell: dict, rate: float, **rate_kwargs) -> Step:
        """The "common" phase's step, kept in the cell's steps (a scenario may wrap it, e.g. in a recording)."""
        return jvm.step(cell, rate, "common", **rate_kwargs)

    def warmup_kwargs(self, jvm: Jvm) -> dict:
        """Target.rate's keyword arguments for the warm-up's steps (slo_ms, connections); its drains wait for
        that slo_ms, as a cell's drains wait for its SLO."""
        return {}

    def ready(self, jvm: Jvm) -> None:
        """After the warm probe, before the first cell."""

    def finished(self, jvm: Jvm) -> None:
        """After the last cell, the JVM still up, before its record is complete."""

    def settle_rate(self, jvm: Jvm, cell: dict) -> float | None:
        """The "settle" phase's rate: settle_seconds there, kept as cell["settle"], then drained (None: none)."""
        return None

    def settled(self, jvm: Jvm, cell: dict) -> None:
        """Right after the settle step, before its drain."""

    def stepped(self, jvm: Jvm, cell: dict, result: Step, began: float) -> str:
        """Right after each step of a cell (begun at time.monotonic() `began`), before it is kept: the scenario's
        fields in result.extra; returns what the step's line adds."""
        return ""

    def after_phase(self, jvm: Jvm, cell: dict, phase: str) -> None:
        """After each of a cell's declared phases."""

    def searched(self, jvm: Jvm, cell: dict) -> None:
        """After a cell's search (cell["mst"] set): what the scenario reads at the MST (cell["cap"], margins)."""

    def closed(self, jvm: Jvm, cell: dict) -> None:
        """The closed-loop steps after a cell's search (the seed article's replication)."""
        for connections in jvm.plan.closed_connections:
            result = jvm.target.closed(connections, jvm.plan.closed_seconds)
            cell.setdefault("closed", []).append(result.to_json(histogram=False))
            jvm.save()
            jvm.say(result.line())


def run(ctx: Context, scenario: Scenario, plan: Lifecycle, selected: list[ports.Port]) -> None:
    """Every iteration over the ports (rotated: no port always first), each port's JVMs in their declared order
    (jvm_order "round": over Scenario.round's JVMs across ports, rotated: no JVM always first)."""
    previous = baseline_msts(ctx.results)        # read before this run writes its first record
    done: dict = {}                              # (iteration, port): the records of its JVMs so far (Scenario.skip)
    if plan.jvm_order == "round":                # each iteration starts one JVM later (not one port)
        for iteration, (port, coords) in rounds(scenario.round(plan, selected), plan.iterations):
            run_or_skip(ctx, scenario, plan, port, iteration, coords, previous.get(port.name),
                        done.setdefault((iteration, port.name), []))
        return
    for iteration, port in rounds(selected, plan.iterations):
        groups = scenario.jvms(plan, port)
        for coords in rotation(groups, iteration) if plan.jvm_order == "rotate" else groups:
            run_or_skip(ctx, scenario, plan, port, iteration, coords, previous.get(port.name),
                        done.setdefault((iteration, port.name), []))


def run_or_skip(ctx: Context, scenario: Scenario, plan: Lifecycle, port: ports.Port, iteration: int, coords: dict,
                previous_mst: int | None, done: list[dict]) -> None:
    """The JVM at `coords`, or a record saying why it was not run (Scenario.skip); its record joins `done`."""
    reason = scenario.skip(plan, port, coords, done)
    done.append(skip_jvm(ctx, scenario, plan, port, iteration, coords, reason) if reason is not None
                else run_jvm(ctx, scenario, plan, port, iteration, coords, previous_mst))


def skip_jvm(ctx: Context, scenario: Scenario, plan: Lifecycle, port: ports.Port, iteration: int, coords: dict,
             reason: str) -> dict:
    jvm = Jvm(ctx, plan, port, iteration, dict(coords), Path(), {}, scenario=scenario)
    jvm.path = ctx.path(port, scenario.path(jvm))
    jvm.record = schema.new(ctx.new_record(port, iteration), coords, status="skipped", skipped=reason)
    jvm.save()
    jvm.say(reason)
    return jvm.record


def run_jvm(ctx: Context, scenario: Scenario, plan: Lifecycle, port: ports.Port, iteration: int, coords: dict,
            previous_mst: int | None = None) -> dict:
    jvm = Jvm(ctx, plan, port, iteration, dict(coords), Path(), {}, previous_mst=previous_mst, scenario=scenario)
    jvm.path = ctx.path(port, scenario.path(jvm))
    jvm.record = schema.new(ctx.new_record(port, iteration), coords, **scenario.fields(jvm))
    try:
        with scenario.regime(jvm) as start, started(ctx, plan, port, start) as (jvm.running, jvm.target):
            running = jvm.running
            jvm.record.update(startup_s=running.startup_seconds and round(running.startup_seconds, 2),
                              idle_rss_mb=running.idle_rss_mb and round(running.idle_rss_mb, 1))
            scenario.started(jvm)
            if plan.cold_probe:
                jvm.probe("cold")
            if plan.warmup:
                warmup_kwargs = scenario.warmup_kwargs(jvm)
                jvm.warm_up(scenario.warmup_rate(jvm), **warmup_kwargs)
                if plan.drain_after_warmup:
                    jvm.target.drain(warmup_kwargs.get("slo_ms"))
            scenario.warmed(jvm)
            if plan.warm_probe:
                jvm.probe("warm")
            scenario.ready(jvm)
            for cell_coords in scenario.cells(plan, jvm):
                cell = schema.cell(cell_coords)
                if (added := scenario.added_latency_ms(jvm, cell)) is not None:
                    cell["slo_ms"] = jvm.ctx.rule.slo_ms(added)
                jvm.record["cells"].append(cell)
                with scenario.cell_regime(jvm, cell):
                    scenario.measure_cell(jvm, cell)
                cell["status"] = "complete"
            scenario.finished(jvm)
            jvm.record["status"] = "complete"
    except AppExited as e:       # e.g. an OutOfMemoryError under overload: this iteration's result (app_exit "died")
        if plan.app_exit != "died":
            raise
        jvm.record.update(status="died", died=str(e))
        jvm.say(f"DIED: {e}")
    except Fatal as e:           # it did not start (start_failure "record": this iteration's result)
        if plan.start_failure != "record" or jvm.running is not None:
            raise
        jvm.record.update(status="not-started", start_failure=str(e))
        jvm.say(f"did not start: {e}")
    finally:
        jvm.save()
    return jvm.record


def started(ctx: Context, plan: Lifecycle, port: ports.Port, kwargs: dict):
    """The JVM as plan.start says: ctx.port's (up, rows checked, a Target), or started at once (running, None)."""
    return ctx.port(port, **kwargs) if plan.start == "ready" else started_at_once(ctx, port, **kwargs)


@contextlib.contextmanager
def started_at_once(ctx: Context, port: ports.Port, extra_env: dict | None = None,
                    variant: ports.Variant | None = None) -> Iterator[tuple[object, None]]:
    running = ports.start(port, ctx.settings, tokens.load()[0], extra_env=extra_env, variant=variant, wait=False)
    try:
        yield running, None
    finally:
        running.stop()


def run_cell(jvm: Jvm, scenario: Scenario, cell: dict) -> None:
    plan = jvm.plan
    slo, kwargs = cell_slo(jvm, scenario, cell)
    for phase in plan.cell_phases:
        if phase == "pause":
            time.sleep(plan.pause_seconds)
        elif phase == "probe":          # a closed-loop probe at [load] connections, kept as cell["capacity"]
            result = jvm.target.closed(jvm.ctx.settings["load"]["connections"], plan.probe_seconds, "capacity")
            cell["capacity"] = result.to_json(histogram=False)
            jvm.save()
            jvm.say(f"capacity (closed loop) {result.achieved_rps:,.0f}/s; SLO p99 <= {slo:g} ms")
        elif phase == "drain":          # a queue the previous phase may have left, until answered within the SLO
            jvm.target.drain(slo)
        elif phase == "ladder":
            run_ladder(jvm, cell, slo, **kwargs)
        elif phase == "common":
            if (rate := scenario.common_rate(jvm, cell)) is not None:
                scenario.common_step(jvm, cell, rate, **kwargs)
        elif phase == "settle":         # a step of settle_seconds, kept apart from the cell's steps, then drained
            if (rate := scenario.settle_rate(jvm, cell)) is not None and plan.settle_seconds:
                result = jvm.target.rate(rate, plan.settle_seconds, "settle", **kwargs)
                cell["settle"] = result.to_json(histogram=False)
                scenario.settled(jvm, cell)
                if plan.drain_after_settle:
                    jvm.target.drain(slo)
        elif phase == "search":
            search = jvm.ctx.search
            if plan.mst_max_probes is not None:
                search = dataclasses.replace(search, max_probes=plan.mst_max_probes)
            if plan.mst_confirm_probes is not None:
                search = dataclasses.replace(search, confirm_probes=plan.mst_confirm_probes)
            mst = find_mst(lambda rate, phase_: probe(jvm, cell, rate, phase_, slo, **kwargs),
                           scenario.estimate(jvm, cell), search, slo, floor=plan.mst_floor_rps or MIN_RATE,
                           grid=jvm.ctx.grid)
            cell["mst"] = mst.to_json()
            scenario.searched(jvm, cell)
            jvm.save()
            jvm.say(f"MST {mst.text()}" + (f"; cap {cell['cap']}" if cell.get("cap") else ""))
        elif phase == "closed":
            scenario.closed(jvm, cell)
        elif phase == "idle":           # a step at idle_rate beside idle_connections idle keep-alive connections
            idle = ("--idle-connections", str(plan.idle_connections),
                    "--connect-concurrency", str(plan.idle_connect_concurrency))
            result = jvm.step(cell, plan.idle_rate, "idle", seconds=plan.idle_seconds,
                              **{**kwargs, "extra": (*kwargs.get("extra", ()), *idle)})
            cell["idle"] = {"passed": result.passed, "opened": result.extra.get("idle_connections_opened"),
                            "open_at_end": result.extra.get("idle_connections_open_at_end"),
                            "rss_mb": result.app_rss_mb_peak}
        else:
            raise ValueError(f"unknown cell phase {phase!r}")
        scenario.after_phase(jvm, cell, phase)


def run_ladder(jvm: Jvm, cell: dict, slo: float, **rate_kwargs) -> None:
    """The same fixed rates for every port, lowest first, each long enough for its quantiles and CPU per request;
    a rung the generator alone failed is measured once more; nothing above a failed rung is run (it would only
    queue), and that rung's queue is drained. With ladder_arrivals, the whole ladder once per arrival process, the
    order reversed on even iterations so that neither process always meets the JVM first."""
    plan = jvm.plan
    processes = list(plan.ladder_arrivals or [None])
    for arrivals in processes[::-1] if jvm.iteration % 2 == 0 else processes:
        kwargs = {**rate_kwargs, "arrivals": arrivals} if arrivals else rate_kwargs
        for rate in sorted(plan.ladder_rates or []):
            seconds = max(plan.ladder_seconds, math.ceil(plan.ladder_min_requests / rate * 10) / 10)
            result = jvm.step(cell, rate, "ladder", seconds=seconds, **kwargs)
            if result.failure == GENERATOR:         # says nothing of the port (as in the search): once more
                result = jvm.step(cell, rate, "ladder", seconds=seconds, **kwargs)
            if not result.passed:
                jvm.target.drain(slo)
                break


def cell_slo(jvm: Jvm, scenario: Scenario, cell: dict) -> tuple[float, dict]:
    """The SLO every step, drain and search of the cell is judged by, and its steps' keyword arguments with it."""
    kwargs = scenario.step_kwargs(jvm, cell)
    if "slo_ms" not in cell:
        return jvm.ctx.rule.slo_ms(), kwargs
    return cell["slo_ms"], {**kwargs, "slo_ms": cell["slo_ms"]}


def probe(jvm: Jvm, cell: dict, rate: int, phase: str, slo: float | None = None, **rate_kwargs) -> str | None:
    """One step of a search, after what the declaration puts between them."""
    if jvm.plan.between_probes == "rewarm" and jvm.plan.rewarm_seconds:
        # same steady state, backlog drained; judged as the step it precedes (its slo_ms)
        jvm.target.rate(jvm.warm.rate, jvm.plan.rewarm_seconds, "rewarm", **rate_kwargs)
    elif jvm.plan.between_probes == "pause-or-drain":     # a failed step may have left a queue
        if cell["steps"] and cell["steps"][-1]["passed"]:
            time.sleep(jvm.plan.pause_seconds)
        else:
            jvm.target.drain(slo)
    seconds = jvm.ctx.search.confirm_seconds(rate, jvm.plan.step_seconds) if phase == "confirm" else None
    result = jvm.step(cell, rate, phase, seconds=seconds, **rate_kwargs)
    if jvm.plan.between_probes == "drain-after-failure" and not result.passed:
        jvm.target.drain(slo)       # until a request is answered in time: the queue is gone
    return result.failure

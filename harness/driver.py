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
import time
from pathlib import Path
from typing import Callable, Iterator

from . import ports
from .method import schema
from .method.record import MIN_RATE, Step, Warmup
from .method.search import find_mst
from .session import Context, baseline_msts, rounds


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
    cell_phases: list[str]               # per cell, in order: "settle", "common", "search", "closed"
    between_probes: str                  # before each search step: "rewarm", "drain-after-failure", "none"
    rewarm_seconds: float = 0.0
    mst_max_probes: int | None = None    # None: [search] max_probes
    mst_confirm_probes: int | None = None


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

    def say(self, text: str) -> None:
        tag = " ".join([self.port.name, *(str(v) for v in self.coords.values()), f"#{self.iteration}"])
        self.ctx.say(tag, text)

    def save(self) -> None:
        self.ctx.save(self.record, self.path)

    def probe(self, phase: str) -> float:
        """A closed-loop probe at [load] connections, kept as record["capacity"][phase]: its rate."""
        return self.ctx.capacity(self.target, self.record, self.path, phase, self.plan.probe_seconds, self.say)

    def capacity(self, phase: str) -> float | None:
        step = self.record["capacity"].get(phase)
        return step and step["achieved_rps"]

    def warm_up(self, rate: float, **rate_kwargs) -> Warmup:
        self.warm = self.target.warm_up(rate, self.ctx.warmup, self.say, **rate_kwargs)
        self.record["warmup"] = self.warm.to_json()
        self.save()
        return self.warm

    def step(self, cell: dict, rate: float, phase: str, histogram: bool = True, **rate_kwargs) -> Step:
        """One constant-rate step of `cell`, kept in its steps."""
        result = self.target.rate(rate, self.plan.step_seconds, phase, **rate_kwargs)
        cell["steps"].append(result.to_json(histogram=histogram))
        self.save()
        self.say(result.line())
        return result


class Scenario:
    """What a scenario module may define beyond its declaration; every hook has the default shown."""

    def jvms(self, plan, port: ports.Port) -> list[dict]:
        """The coordinates of each fresh JVM of `port` (in order)."""
        return [{}]

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

    def warmup_rate(self, jvm: Jvm) -> float:
        return max(jvm.plan.warmup_fraction * (jvm.capacity("cold") or 0),
                   jvm.plan.warmup_baseline_fraction * (jvm.previous_mst or 0))

    def estimate(self, jvm: Jvm, cell: dict) -> float:
        """Where the MST search starts: mst_first_guess x the warm probe."""
        return jvm.plan.mst_first_guess * jvm.capacity("warm")

    def common_rate(self, jvm: Jvm, cell: dict) -> float:
        return jvm.plan.common_rate

    def slo_ms(self, jvm: Jvm, cell: dict) -> float:
        return jvm.ctx.rule.slo_ms()

    def closed(self, jvm: Jvm, cell: dict) -> None:
        """The closed-loop steps after a cell's search (the seed article's replication)."""
        for connections in jvm.plan.closed_connections:
            result = jvm.target.closed(connections, jvm.plan.closed_seconds)
            cell.setdefault("closed", []).append(result.to_json(histogram=False))
            jvm.save()
            jvm.say(result.line())


def run(ctx: Context, scenario: Scenario, plan: Lifecycle, selected: list[ports.Port]) -> None:
    """Every iteration over the ports (rotated: no port always first), each port's JVMs in their declared order."""
    previous = baseline_msts(ctx.results)        # read before this run writes its first record
    for iteration, port in rounds(selected, plan.iterations):
        for coords in scenario.jvms(plan, port):
            run_jvm(ctx, scenario, plan, port, iteration, coords, previous.get(port.name))


def run_jvm(ctx: Context, scenario: Scenario, plan: Lifecycle, port: ports.Port, iteration: int, coords: dict,
            previous_mst: int | None = None) -> dict:
    jvm = Jvm(ctx, plan, port, iteration, dict(coords), Path(), {}, previous_mst=previous_mst)
    jvm.path = ctx.path(port, scenario.path(jvm))
    jvm.record = schema.new(ctx.new_record(port, iteration), coords)
    try:
        with scenario.regime(jvm) as start, ctx.port(port, **start) as (jvm.running, jvm.target):
            running = jvm.running
            jvm.record.update(startup_s=running.startup_seconds and round(running.startup_seconds, 2),
                              idle_rss_mb=running.idle_rss_mb and round(running.idle_rss_mb, 1))
            jvm.say(f"up in {jvm.record['startup_s']} s, RSS {jvm.record['idle_rss_mb']} MiB; rows checked")
            if plan.cold_probe:
                jvm.probe("cold")
            jvm.warm_up(scenario.warmup_rate(jvm))
            if plan.drain_after_warmup:
                jvm.target.drain()
            if plan.warm_probe:
                jvm.probe("warm")
            for cell_coords in scenario.cells(plan, jvm):
                cell = schema.cell(cell_coords)
                jvm.record["cells"].append(cell)
                with scenario.cell_regime(jvm, cell):
                    run_cell(jvm, scenario, cell)
                cell["status"] = "complete"
            jvm.record["status"] = "complete"
    finally:
        jvm.save()
    return jvm.record


def run_cell(jvm: Jvm, scenario: Scenario, cell: dict) -> None:
    plan = jvm.plan
    slo = scenario.slo_ms(jvm, cell)
    for phase in plan.cell_phases:
        if phase == "common":
            jvm.step(cell, scenario.common_rate(jvm, cell), "common")
        elif phase == "search":
            search = jvm.ctx.search
            if plan.mst_max_probes is not None:
                search = dataclasses.replace(search, max_probes=plan.mst_max_probes)
            if plan.mst_confirm_probes is not None:
                search = dataclasses.replace(search, confirm_probes=plan.mst_confirm_probes)
            mst = find_mst(lambda rate, phase_: probe(jvm, cell, rate, phase_), scenario.estimate(jvm, cell), search,
                           slo)
            cell["mst"] = mst.to_json()
            jvm.save()
            jvm.say(f"MST {mst.text()}")
        elif phase == "closed":
            scenario.closed(jvm, cell)
        else:
            raise ValueError(f"unknown cell phase {phase!r}")


def probe(jvm: Jvm, cell: dict, rate: int, phase: str) -> str | None:
    """One step of a search, after what the declaration puts between them."""
    if jvm.plan.between_probes == "rewarm" and jvm.plan.rewarm_seconds:
        jvm.target.rate(jvm.warm.rate, jvm.plan.rewarm_seconds, "rewarm")   # same steady state, backlog drained
    result = jvm.step(cell, rate, phase)
    if jvm.plan.between_probes == "drain-after-failure" and not result.passed:
        jvm.target.drain()
    return result.failure

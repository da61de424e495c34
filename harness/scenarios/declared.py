"""A scenario declared in bench.toml alone: a section with a `summary`, the `path` requested, one `axis` (a name in
AXES: what the driver sets for each cell) with its `values`, and the lifecycle's knobs (driver.Lifecycle). The
registry (scenarios/__init__.py) lists every such section beside the scenario modules. Each cell runs its declared
phases (a common step at common_rate, an MST search from the warm probe).

A regime whose side service or limit is not in AXES still needs code: an entry here, or a module of its own (as
in-flight)."""
from __future__ import annotations

import contextlib
import dataclasses

from .. import downstream as downstream_mod, driver, ports
from ..errors import Fatal
from ..session import Context


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """A declared section: what it measures and the driver's knobs."""
    summary: str                    # one line, for help and the report's heading
    path: str                       # requested on the port, e.g. "/feed?calls=1"
    axis: str                       # a key of AXES
    values: list[float]             # the axis's value per cell, in order
    common_rate: int | None = None  # the "common" phase's rate


class Downstream:
    """downstream_latency_ms: the downstream nginx answering each call after the cell's value (the JVM starts with it
    at 0 ms and is warmed up there); each step judged with that wait added to the rule's p99."""

    def __init__(self):
        self.downstream = downstream_mod.AroundJvm()

    @contextlib.contextmanager
    def around_jvm(self, jvm: driver.Jvm):
        with self.downstream.around() as env:
            yield {"extra_env": env}

    def set(self, jvm: driver.Jvm, value: float) -> None:
        nginx = self.downstream.at(value)
        jvm.target = dataclasses.replace(jvm.target, sides={"nginx": nginx.cpu_seconds})

    def added_ms(self, value: float) -> float:
        """What the cell's value adds to each request's waits."""
        return value


AXES = {"downstream_latency_ms": Downstream}


class Declared(driver.Scenario):
    def __init__(self, plan: Plan):
        self.axis = AXES[plan.axis]()

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [{plan.axis: value} for value in plan.values]

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm):
        with self.axis.around_jvm(jvm) as kwargs:
            yield kwargs

    def started(self, jvm: driver.Jvm) -> None:
        super().started(jvm)
        jvm.target = dataclasses.replace(jvm.target, url=jvm.target.url.rstrip("/") + jvm.plan.path)

    @contextlib.contextmanager
    def cell_regime(self, jvm: driver.Jvm, cell: dict):
        self.axis.set(jvm, cell["coords"][jvm.plan.axis])
        yield

    def added_latency_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return self.axis.added_ms(cell["coords"][jvm.plan.axis])


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = ctx.plan(Plan)
    if plan.axis not in AXES:
        raise Fatal(f"bench.toml [{ctx.scenario}] axis '{plan.axis}': choose one of {', '.join(AXES)}")
    driver.run(ctx, Declared(plan), plan, selected)


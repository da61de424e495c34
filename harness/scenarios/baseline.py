"""baseline: the seed article's endpoint on loopback (the database answers in microseconds), every port at the
same constant rates.

Per port and iteration, on a fresh JVM: start -> correctness check -> cold capacity probe (closed loop) ->
warm-up until steady -> warm capacity probe -> a step at the common rate -> MST search from this iteration's own
warm capacity, confirmed -> closed loop (the seed article's replication). Iterations go over the ports in a
rotated order (interleaved), and each searches from its own measurement: they are independent.
"""
from __future__ import annotations

import dataclasses

from .. import driver, ports
from ..session import Context


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):        # bench.toml [baseline]
    common_rate: int
    closed_connections: list[int]
    closed_seconds: float


def run(ctx: Context, selected: list[ports.Port]) -> None:
    driver.run(ctx, driver.Scenario(), ctx.plan(Plan), selected)

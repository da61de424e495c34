"""One cap classifier: what held a port at its MST.

Each candidate limit comes with its utilisation at the MST (busy cores / cores of the CPU set, connections in
use / pool, busy threads / thread limit, MST / a computed limit such as pool / round-trip time). A limit is named
only when it alone explains the result: it is at or above NEAR and every other is below CLEAR. Two limits near
their end are named together ("CPU and pool"); none, or one in the grey zone between CLEAR and NEAR beside
another: "unclear". A step the generator could not keep on schedule is the generator's cap, never the port's."""
from __future__ import annotations

from .rule import GENERATOR

NEAR = 0.8     # at >= 80 % of a limit, queueing at p99 <= SLO eats the rest
CLEAR = 0.6    # below 60 % a limit is clearly not reached


def classify(utilisation: dict[str, float | None], generator_failed: bool = False) -> str:
    if generator_failed:
        return "generator"
    known = {k: v for k, v in utilisation.items() if v is not None}
    near = [k for k, v in known.items() if v >= NEAR]
    grey = [k for k, v in known.items() if CLEAR <= v < NEAR]
    if len(near) == 1 and not grey:
        return near[0]
    if len(near) > 1:
        return " and ".join(sorted(near, key=lambda k: -known[k]))
    return "unclear"


def explain(utilisation: dict[str, float | None]) -> str:
    """The margins behind a classification: "CPU 0.97, pool 0.41"."""
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(utilisation.items(), key=lambda kv: -(kv[1] or 0))
                     if v is not None)


def generator_cap(failure: str | None) -> bool:
    return failure == GENERATOR

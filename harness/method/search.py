"""One MST search for every scenario: bracket from this iteration's own estimate, bisect, then confirm.

A confirmed MST is a rate that passed twice. When the confirmation fails, the search steps down by the precision
and a rate must again pass twice; the value kept is the first that does. The lowest failing rate above it is kept
beside it (no failing rate found: the MST is a lower bound, shown as ≥). A step the generator could not keep on
schedule says nothing about the port: it is measured once more (on the shared cores the generator's lateness comes
and goes), and when it falls behind again the search keeps below it (bisecting between the last pass and it);
when no rate the port itself failed is found, the MST is a lower bound."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from .record import FINE, MIN_RATE, Mst, grid_step, round_rate
from .rule import GENERATOR


@dataclasses.dataclass(frozen=True)
class SearchPlan:
    growth: float          # bracketing factor (grows each time the outcome repeats)
    precision: float       # bisect until the bracket is within this share; also the step-down on a failed confirmation
    max_probes: int        # bracketing measurements (more while nothing has passed)
    bisect_probes: int     # bisection measurements at most, spent only until the bracket is within `precision`
    confirm_probes: int    # measurements spent confirming (and stepping down) at most
    # a confirmation step lasts max(confirm_min_seconds, confirm_min_requests / rate), at most confirm_max_seconds:
    # its p99 then rests on >= 1,000 requests beyond it wherever the cap does not bind (0: the scenario's step)
    confirm_min_seconds: float = 0.0
    confirm_min_requests: int = 0
    confirm_max_seconds: float = 0.0

    def confirm_seconds(self, rate: float, step_seconds: float) -> float:
        """How long a confirmation step at `rate` lasts (never shorter than the scenario's own step)."""
        wanted = max(self.confirm_min_seconds, self.confirm_min_requests / rate if rate else 0.0)
        if self.confirm_max_seconds:
            wanted = min(wanted, self.confirm_max_seconds)
        return max(step_seconds, math.ceil(wanted * 10) / 10)


# measure(rate, phase) -> None when the step passed, else the rule's failure reason
Measure = Callable[[float, str], "str | None"]


def find_mst(measure: Measure, estimate: float, plan: SearchPlan, slo_ms: float, floor: int = MIN_RATE,
             grid: str = FINE) -> Mst:
    """The MST, its rates tried on `grid` (record.GRIDS)."""
    probes: list[list] = []

    def on_grid(rate: float) -> float:
        return round_rate(rate, grid)

    def probe(rate: float, phase: str) -> str | None:
        for _ in range(2):          # a step the generator alone failed is measured once more
            failure = measure(rate, phase)
            probes.append([rate, failure is None, phase, failure])
            if failure != GENERATOR:
                break
        return failure

    # above: the lowest rate that failed at all (a generator that fell behind says nothing of the port there, but
    # nothing higher can be measured either, so the search stays below it)
    lo, above = 0, None
    rate, factor = max(floor, on_grid(estimate)), plan.growth
    searched = 0
    # the budget bounds bracketing and bisection; while nothing has passed yet the search keeps going down (each
    # step larger than the last, so it reaches the floor in a few): a first guess far too high is no "none passed"
    while searched < plan.max_probes or (not lo and above is not None):
        searched += 1
        failure = probe(rate, "mst")
        if failure is None:
            lo = rate
            if above is not None:
                break
            rate = max(on_grid(rate * factor), on_grid(rate + grid_step(rate, grid)))  # never the same
        else:
            above = rate
            if lo:
                break
            rate = on_grid(rate / factor)
            if rate < floor or rate == above:
                break
        factor *= plan.growth
    # bisection has its own budget: a scenario that brackets in few probes still reaches the stated precision
    bisected = 0
    while above is not None and lo and bisected < plan.bisect_probes \
            and above - lo > max(plan.precision * above, grid_step(above, grid)):
        mid = on_grid((lo + above) / 2)
        if mid <= lo or mid >= above:
            break
        bisected += 1
        failure = probe(mid, "mst")
        if failure is None:
            lo = mid
        else:
            above = mid
    failing = [r for r, ok, _, f in probes if not ok and f != GENERATOR]
    limit = generator_limit(probes, failing)
    candidate, passes, confirmed, reason = lo, 1 if lo else 0, False, None
    spent = 0
    while candidate >= floor and spent < plan.confirm_probes:
        spent += 1
        failure = probe(candidate, "confirm")
        if failure is None:
            passes += 1
            if passes >= 2:
                confirmed = True
                break
            continue
        if failure == GENERATOR:
            limit, reason = GENERATOR, "the generator fell behind during the confirmation"
            break
        failing.append(candidate)
        candidate, passes = on_grid(candidate * (1 - plan.precision)), 0
    if not confirmed and reason is None:
        reason = "no rate passed" if not lo else "no rate passed twice within the confirmation budget"
    rps = candidate if confirmed else highest_unrefuted(probes, failing)      # shown: the confirmed rate, else that
    first_failing = min((f for f in failing if f > rps), default=None)
    if first_failing is None and confirmed:
        reason = unbounded_reason(limit)
    return Mst(rps=rps if rps >= floor else 0, confirmed=confirmed, bounded=first_failing is not None,
               first_failing_rps=first_failing, slo_ms=slo_ms, estimate_rps=on_grid(estimate), probes=probes,
               reason=None if confirmed and first_failing is not None else reason, limit=limit, grid=grid)


def highest_unrefuted(probes: list[list], failing: list[float]) -> float:
    """The highest rate that passed once and lies below every failing rate."""
    return max((r for r, ok, _, _ in probes if ok and all(f > r for f in failing)), default=0)


def generator_limit(probes: list[list], failing: list[float]) -> str | None:
    """GENERATOR when the generator, not the port, bounded the search: the port itself failed at no rate."""
    return GENERATOR if not failing and any(f == GENERATOR for *_, f in probes) else None


def unbounded_reason(limit: str | None) -> str:
    """Why a confirmed MST has no failing rate above it."""
    return "never failed: the limit lies higher" if limit is None else "the generator, not the port, stopped the search"


def rejudge(cell: dict, rule) -> None:
    """A cell (its `steps` and `mst`, JSON) measured under the earlier rule, which blamed the generator for any step
    it fell behind in, judged again by `rule` (failures blamed on what failed): each failed constant-rate step's
    reason, then the MST's probes, first failing rate, bound and limit. The measurements do not change and a pass
    stays a pass, so a confirmed MST keeps its rate; an unconfirmed one keeps the highest rate no failure refutes.
    A cell whose search steps do not line up with its probes is left as it is."""
    steps = cell.get("steps") or []
    for step in steps:
        if step.get("failure") == GENERATOR and step.get("slo_ms") is not None and step.get("target_rps"):
            step["failure"] = rule.judge(step)
    mst = cell.get("mst")
    if not mst or not mst.get("probes"):
        return
    searched = [s for s in steps if s.get("phase") in ("mst", "confirm")]
    probes = mst["probes"]
    if len(searched) != len(probes) or any(s.get("target_rps") != p[0] for s, p in zip(searched, probes)):
        return
    if not any(p[3] == GENERATOR and s["failure"] != GENERATOR for s, p in zip(searched, probes)):
        return
    for s, p in zip(searched, probes):
        p[3] = s["failure"]
    failing = [r for r, ok, _, f in probes if not ok and f != GENERATOR]
    if not mst.get("confirmed"):
        mst["rps"] = highest_unrefuted(probes, failing)
    first = min((f for f in failing if f > mst["rps"]), default=None)
    limit = generator_limit(probes, failing)
    mst.update(first_failing_rps=first, bounded=first is not None, limit=limit)
    if mst.get("confirmed"):
        mst["reason"] = None if first is not None else unbounded_reason(limit)
    elif mst.get("reason") == "the generator fell behind during the confirmation":
        mst["reason"] = "the confirmation failed and, judged under the earlier rule, the search stopped there"

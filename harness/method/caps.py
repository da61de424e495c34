"""One cap classifier: what held a port at its MST.

Each candidate limit comes with its utilisation (busy cores / cores of the CPU set, connections in use / pool, MST /
a computed limit such as pool / round-trip time, ...). A limit is named only when it alone explains the result: at
or above NEAR while every other is below CLEAR; two near their end are named together ("CPU and pool"); else
"unclear". At an MST (mst=True) a limit above EXCEEDED is never named: its model does not describe the run. At a
failed step a utilisation above 1 is what explains the failure. A step the generator could not keep is the
generator's cap, never the port's."""
from __future__ import annotations

from .record import Mst, Step
from .constants import CLEAR, EXCEEDED, NEAR  # noqa: F401 (why each: method/constants.py)
from .rule import GENERATOR

UNCLEAR = "unclear"
NOT_CONFIRMED = "not confirmed"   # a search whose MST passed once only: no cap is read at a figure not shown


def classify(utilisation: dict[str, float | None], generator_failed: bool = False, mst: bool = False) -> str:
    """The cap named by `utilisation`; `mst`: at an MST ("unclear: pool model exceeded")."""
    if generator_failed:
        return "generator"
    known = {k: v for k, v in utilisation.items() if v is not None}
    if mst and (over := exceeded(known)):
        return f"{UNCLEAR}: {' and '.join(over)} model{'s' if len(over) > 1 else ''} exceeded"
    near = [k for k, v in known.items() if v >= NEAR]
    grey = [k for k, v in known.items() if CLEAR <= v < NEAR]
    if len(near) == 1 and not grey:
        return near[0]
    if len(near) > 1:
        return " and ".join(sorted(near, key=lambda k: -known[k]))
    return UNCLEAR


def exceeded(utilisation: dict[str, float | None]) -> list[str]:
    """The limits whose model the MST exceeds (utilisation above EXCEEDED), the furthest first."""
    over = {k: v for k, v in utilisation.items() if v is not None and v > EXCEEDED}
    return sorted(over, key=lambda k: -over[k])


def cap_at(mst: Mst | None, utilisation: dict[str, float | None]) -> str:
    """What held one search's MST: the generator when it stopped the search (confirmed, or before any rate passed);
    no limit when no rate passed, none was confirmed or none failed; else classify() at the MST."""
    if mst is None:
        return "not measured"       # the run stopped during this search
    if not mst.passed_once:
        return "generator" if mst.limit == GENERATOR else "none passed"
    if not mst.confirmed:         # also where the generator fell behind during the confirmation
        return NOT_CONFIRMED
    if mst.limit == GENERATOR:
        return "generator"
    if not mst.bounded:
        return "not reached"
    return classify(utilisation, mst=True)


def explain(utilisation: dict[str, float | None]) -> str:
    """The margins behind a classification: "CPU 0.97, pool 0.41"; three digits where two would round across a
    threshold ("pool 0.797", not "pool 0.80" beside a cap that is not the pool)."""
    return ", ".join(f"{k} {_margin(v)}" for k, v in sorted(utilisation.items(), key=lambda kv: -(kv[1] or 0))
                     if v is not None)


def _margin(v: float) -> str:
    shown = f"{v:.2f}"
    return f"{v:.3f}" if any((v < x) != (float(shown) < x) for x in (CLEAR, NEAR, EXCEEDED)) else shown


def text(utilisation: dict[str, float | None], name: str | None = None, mst: bool = False) -> str:
    """The cap (`name`, else classify()'s) with its margins: "pinned carriers (pinned carriers 0.90, CPU 0.41)"."""
    return f"{classify(utilisation, mst=mst) if name is None else name} ({explain(utilisation)})"


def generator_cap(failure: str | None) -> bool:
    return failure == GENERATOR


def cpu_set(spec) -> set[int]:
    """The CPUs of taskset lists such as "0-1" or "0,2-3" (several joined with "," count each CPU once)."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in str(spec or "").split(","))):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpu_utilisation(step: Step, cpus: dict) -> float | None:
    """The CPU set as a limit: per set in bench.toml [cpus], the cores of the roles pinned inside it over its size;
    the fullest set. Side processes (latency proxy, downstream server) run on the database's CPUs."""
    if step.app_cpu_cores is None or not cpus:
        return None
    busy = {"app": step.app_cpu_cores, "db": (step.db_cpu_cores or 0) + step.side_cores,
            "generator": step.generator_cpu_cores}
    sets = {role: cpu_set(cpus.get(role)) for role in busy}
    shares = [sum(busy[r] or 0 for r, s in sets.items() if s and s <= whole) / len(whole)
              for whole in {frozenset(s) for s in sets.values() if s}]
    return round(max(shares), 3) if shares else None


def per_request(gauge: str, coords: dict) -> int:
    """The units of a downstream bound one request holds (coords: a downstream cell's): a connection (or executor
    thread) per call in flight, K in parallel, one at a time in sequence; one request thread."""
    return coords["calls"] if gauge == "downstream connections" and coords["mode"] == "parallel" else 1


def gauge_reading(steps: list[dict], step: dict, gauge: str, per_request: float) -> float | None:
    """A bound's occupancy in `step` (JSON, one of `steps`, a cell's steps in run order), from its gauge's peak
    (`gauges_peak`). The gauges are high-water marks: a pool keeps its idle connections (Reactor Netty's hands them
    out in turn, so none idles out), Tomcat its idle threads for 60 s; a failed probe whose queue filled the pool
    leaves it full for the steps after. So a peak no higher than an earlier step's is that step's mark, not this
    one's: then the step's own mean occupancy stands in, by Little's law (achieved rate x mean latency, x the units
    each request holds). A peak that rose in this step is its own, at most what its requests can have held: never
    more in flight than the rate x the longest latency (paced arrivals). None: no gauge read."""
    peak = (step.get("gauges_peak") or {}).get(gauge)
    if peak is None:
        return None
    latency, rate = step.get("latency_ms") or {}, step.get("achieved_rps", 0)
    before = [(s.get("gauges_peak") or {}).get(gauge) for s in steps[:next((i for i, s in enumerate(steps)
                                                                           if s is step), len(steps))]]
    if any(b is not None and b >= peak for b in before):
        return round(rate * (latency.get("mean") or 0) / 1000 * per_request, 1)
    return min(peak, round(rate * (latency.get("max") or 0) / 1000 * per_request + 1, 1))

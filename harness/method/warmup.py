"""One warm-up for every scenario: first the hot path at full load (closed-loop windows at the generator's connections
until `closed_windows` in a row agree on rate and app CPU per request: the JIT has compiled what the measurement will
run; two were not enough, a plateau while C2 still compiled ended one at 28 % of its MST), then constant load
at `rate_fraction` of that rate (or the caller's rate, the higher) in windows until the port is in a steady state.
A JVM warmed at a few percent of its capacity was measured cold (baseline warm-ups at 5-7 % of the MSTs).

Steady: two consecutive passing windows at the same rate agree on app CPU per request and p50 within the
tolerance (p50 within 0.05 ms when it is tiny: a 0.30 ms p50 moves by more than 5 % on scheduling noise alone),
and in both the JIT compiler threads used at most `jit_share` of the app's CPU: CPU per request alone does not
show compilation that has not finished (two windows agreed at 2.6 ms per request in a JVM that later ran at
0.56-0.70 ms).
A window that fails lowers the rate by 30 % and the comparison starts again; a port that never settles within
max_seconds is reported so."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

from .constants import BACK_OFF, DRAIN_S, P50_FLOOR_MS  # noqa: F401 (why each: method/constants.py)
from .record import MIN_RATE, Step, Warmup, round_rate



@dataclasses.dataclass(frozen=True)
class WarmupPlan:
    window_seconds: float
    tolerance: float
    max_seconds: float
    closed_max_seconds: float      # the closed-loop stage's cap (within max_seconds)
    rate_fraction: float           # the constant-rate stage at this x the closed loop's settled rate, at least
    closed_windows: int = 3        # consecutive closed-loop windows that must agree
    jit_share: float | None = None  # steady windows' most JIT compiler CPU / the app's (None: not checked)


def closed_steady(previous: Step, current: Step, tolerance: float) -> bool:
    """Two closed-loop windows agree on their rate and app CPU per request."""
    pairs = [(previous.achieved_rps, current.achieved_rps),
             (previous.app_cpu_us_per_request, current.app_cpu_us_per_request)]
    return all(a and b is not None and abs(b - a) <= tolerance * a for a, b in pairs)


def jit_busy(step: Step, jit_share: float | None) -> bool:
    """The JIT compiler threads took more than `jit_share` of the app's CPU in the step (unknown: not busy)."""
    share = step.kernel.get("app_jit_share")
    return jit_share is not None and share is not None and share > jit_share


def steady(previous: Step, current: Step, tolerance: float, jit_share: float | None = None) -> bool:
    cpu_a, cpu_b = previous.app_cpu_us_per_request, current.app_cpu_us_per_request
    p50_a, p50_b = previous.latency_ms.get("p50"), current.latency_ms.get("p50")
    if None in (cpu_a, cpu_b, p50_a, p50_b) or jit_busy(previous, jit_share) or jit_busy(current, jit_share):
        return False
    return abs(cpu_b - cpu_a) <= tolerance * cpu_a and abs(p50_b - p50_a) <= max(tolerance * p50_a, P50_FLOOR_MS)


def until_steady(measure: Callable[[int, float], Step], rate: float, plan: WarmupPlan, say=lambda _: None,
                 floor: int = MIN_RATE, drain: Callable[[], object] = lambda: time.sleep(DRAIN_S),
                 closed: Callable[[float], Step] | None = None) -> Warmup:
    """`closed(seconds)` runs one closed-loop window (None: no closed-loop stage); `measure(rate, seconds)` one
    constant-rate window; a failing window lowers the rate, never below `floor`, after `drain()` (the target's:
    until the queue the window left is gone)."""
    windows: list[Step] = []
    settled, began = False, time.monotonic()
    closed_rate = None
    if closed is not None:
        loops: list[Step] = []
        while time.monotonic() - began < min(plan.closed_max_seconds, plan.max_seconds):
            loops.append(closed(plan.window_seconds))
            say(f"warm-up closed loop: {loops[-1].achieved_rps:,.0f}/s, "
                f"{loops[-1].app_cpu_us_per_request or 0:.0f} µs CPU/req")
            tail = loops[-plan.closed_windows:]
            if len(tail) == max(2, plan.closed_windows) and all(
                    closed_steady(a, b, plan.tolerance) for a, b in zip(tail, tail[1:])):
                break
        windows += loops
        closed_rate = loops[-1].achieved_rps if loops else None
        drain()
        rate = max(rate, plan.rate_fraction * (closed_rate or 0))
    rate = round_rate(rate)
    while time.monotonic() - began < plan.max_seconds:
        w = measure(rate, plan.window_seconds)
        w.phase = "warmup"
        windows.append(w)
        jit = w.kernel.get("app_jit_share")
        say(f"warm-up {rate}/s: p50 {w.latency_ms.get('p50', 0):.2f} ms, "
            f"{w.app_cpu_us_per_request or 0:.0f} µs CPU/req" + (f", JIT {jit:.0%} of it" if jit is not None else "")
            + ("" if w.passed else f" ({w.failure})"))
        if not w.passed:
            rate = max(min(floor, rate), round_rate(rate * BACK_OFF))
            drain()
            continue
        if len(windows) >= 2 and windows[-2].passed and windows[-2].target_rps == rate \
                and steady(windows[-2], w, plan.tolerance, plan.jit_share):
            settled = True
            break
    return Warmup(rate=rate, settled=settled, seconds=round(time.monotonic() - began, 1), tolerance=plan.tolerance,
                  windows=[w.to_json(histogram=False) for w in windows], closed_rps=closed_rate)

"""One warm-up for every scenario: constant load in windows until the port is in a steady state.

Steady: two consecutive passing windows at the same rate agree on app CPU per request and p50 within the
tolerance (p50 within 0.05 ms when it is tiny: a 0.30 ms p50 moves by more than 5 % on scheduling noise alone).
A window that fails lowers the rate by 30 % and the comparison starts again; a port that never settles within
max_seconds is reported so."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable

from .record import MIN_RATE, Step, Warmup, round_rate

P50_FLOOR_MS = 0.05
BACK_OFF = 0.7
DRAIN_S = 2.0


@dataclasses.dataclass(frozen=True)
class WarmupPlan:
    window_seconds: float
    tolerance: float
    max_seconds: float


def steady(previous: Step, current: Step, tolerance: float) -> bool:
    cpu_a, cpu_b = previous.app_cpu_us_per_request, current.app_cpu_us_per_request
    p50_a, p50_b = previous.latency_ms.get("p50"), current.latency_ms.get("p50")
    if None in (cpu_a, cpu_b, p50_a, p50_b):
        return False
    return abs(cpu_b - cpu_a) <= tolerance * cpu_a and abs(p50_b - p50_a) <= max(tolerance * p50_a, P50_FLOOR_MS)


def until_steady(measure: Callable[[int, float], Step], rate: float, plan: WarmupPlan, say=lambda _: None,
                 floor: int = MIN_RATE, drain: Callable[[], object] = lambda: time.sleep(DRAIN_S)) -> Warmup:
    """`measure(rate, seconds)` runs one window; a failing window lowers the rate, never below `floor`, after
    `drain()` (the target's: until the queue the window left is gone)."""
    windows: list[Step] = []
    settled, began = False, time.monotonic()
    rate = round_rate(rate)
    while time.monotonic() - began < plan.max_seconds:
        w = measure(rate, plan.window_seconds)
        w.phase = "warmup"
        windows.append(w)
        say(f"warm-up {rate}/s: p50 {w.latency_ms.get('p50', 0):.2f} ms, "
            f"{w.app_cpu_us_per_request or 0:.0f} µs CPU/req{'' if w.passed else ' (' + str(w.failure) + ')'}")
        if not w.passed:
            rate = max(min(floor, rate), round_rate(rate * BACK_OFF))
            drain()
            continue
        if len(windows) >= 2 and windows[-2].passed and windows[-2].target_rps == rate \
                and steady(windows[-2], w, plan.tolerance):
            settled = True
            break
    return Warmup(rate=rate, settled=settled, seconds=round(time.monotonic() - began, 1), tolerance=plan.tolerance,
                  windows=[w.to_json(histogram=False) for w in windows])

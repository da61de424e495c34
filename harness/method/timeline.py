"""The one rule on short windows of one long step (openloop's --report-interval): for a scenario that follows a
port through time (faults: a fault and its recovery; startup: a cold JVM until it is steady) instead of judging
one step as a whole."""
from __future__ import annotations

from .rule import Rule


def judge_windows(intervals: list[dict], rate: float | None, interval_s: float, rule: Rule, slo_ms: float,
                  until_s: float) -> list[dict]:
    """The schedule's windows (t_s <= until_s; later ones only drain), each with the rule's `failure` (None: it
    passed): the window's completions / its length is its achieved rate, errors and non-2xx answers are errors.
    `rate` None: no rate is expected, only answers, no errors and p99 (faults' fresh probe: a few dozen completions
    a window, counted by completion time, cannot be held to 99 % of a rate)."""
    def judged(w: dict) -> dict:
        completed = w.get("completed", 0)
        return {**w, "failure": rule.failure(target_rps=rate or 0, achieved_rps=completed / interval_s,
                                             errors=w.get("errors", 0) + w.get("non_2xx", 0), generator_behind=False,
                                             p99_ms=w.get("p99_ms") if completed else None, slo_ms=slo_ms)}
    return [judged(w) for w in intervals if w["t_s"] <= until_s + 1e-6]


def recovery_s(judged: list[dict], from_s: float, interval_s: float) -> float | None:
    """Seconds from `from_s` (schedule time) to the start of the run's passing tail: from that window on, every
    window passes the rule. 0 when nothing after `from_s` failed; None when the run ends in a failing window."""
    after = [w for w in judged if w["t_s"] > from_s]
    if not after or after[-1]["failure"] is not None:
        return None
    failed = [i for i, w in enumerate(after) if w["failure"] is not None]
    first = after[failed[-1] + 1 if failed else 0]
    return round(max(0.0, first["t_s"] - interval_s - from_s), 1)


def failed_windows(judged: list[dict], from_s: float = 0.0) -> tuple[int, int]:
    """(windows that failed the rule, windows) among those ending after `from_s`."""
    after = [w for w in judged if w["t_s"] > from_s]
    return sum(w["failure"] is not None for w in after), len(after)

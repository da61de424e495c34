"""What a faults record holds: its cases' names, how it judged recovery, and the pure logic that fills a case's
summary from openloop's counts (unit-tested, without a port)."""
from __future__ import annotations

import re

DB_CASES = ("restart", "freeze")
# the summary's "recovery_judged_on": what recovery was judged on (older records have none)
JUDGED_ON_FRESH = "fresh requests: a probe sent only after the fault ended, on its own connections"
JUDGED_ON_LOW = "the 0.5x run: requests sent after the overload ended (the 2x run sent nothing after its schedule)"


def valid_rate(rate: float, share: float, seconds: float) -> float:
    """The valid requests' rate the rule expects when openloop replaces each request by a hostile line with
    probability 1 - share: their count is binomial, so it is taken 3 standard deviations low (at 1,000 req/s and a
    10 % mix a 1-s window holds 900 ± 9.5: expecting 900, a third of the windows would fail by chance)."""
    n = rate * seconds
    return round((share * n - 3 * (share * (1 - share) * n) ** 0.5) / seconds, 1)


def errors_split(intervals: list[dict], split_s: float, interval_s: float) -> tuple[int, int]:
    """Failed requests (errors + non-2xx answers) up to and including the window that holds `split_s` (the
    moment the fault ended), and in the windows after it."""
    failed = lambda w: w.get("errors", 0) + w.get("non_2xx", 0)  # noqa: E731
    during = sum(failed(w) for w in intervals if w["t_s"] - interval_s < split_s)
    return during, sum(failed(w) for w in intervals) - during


def errors_by_kind(step: dict) -> dict:
    """Non-2xx answers by status and failures without an answer by kind; zeros left out."""
    return {**{f"HTTP {code}": n for code, n in step.get("statuses", {}).items() if not str(code).startswith("2")},
            **{k: n for k, n in step.get("errors", {}).items() if k != "non_2xx" and n}}


def hostile_outcome(expected: list[tuple[str, str, int]], mix: dict) -> dict:
    """The hostile lines' statuses against what each must get (openloop counts them per line)."""
    lines = list(zip(expected, mix.get("statuses_by_line", [])))
    unexpected = sum(n for (_, _, want), got in lines for code, n in got.items() if int(code) != want)
    failed, completed = sum(mix.get("errors", {}).values()), mix.get("completed", 0)
    return {"hostile_sent": completed + failed, "hostile_as_expected": completed - unexpected,
            "hostile_unexpected": unexpected,
            "hostile_5xx": sum(n for _, got in lines for code, n in got.items() if str(code).startswith("5")),
            "hostile_failed": failed, "hostile_p99_ms": (mix.get("latency_ms") or {}).get("p99"),
            "by_case": {case: got for (case, _, _), got in lines}}


LOG_ERRORS_KEPT = 5  # distinct exception lines of the app log kept per case (what failed, in the driver's words)
EXCEPTION = re.compile(r"\b(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error)\b(?::[^\n]{0,160})?")
SQLSTATE = re.compile(r"(?i:SQL ?State)\W{0,3}([0-9A-Z]{5})\b")
STACK_FRAME = re.compile(r"^\s+(?:at |\.\.\. \d+ more)")


def log_errors(text: str) -> dict:
    """What an app log says failed: its distinct exception lines (class and message, first seen first, at most
    LOG_ERRORS_KEPT; numbers masked so one error repeated counts once) and every SQLSTATE it names."""
    seen: dict[str, str] = {}
    for line in text.splitlines():
        if STACK_FRAME.match(line):          # a frame names classes, not what failed
            continue
        for match in EXCEPTION.finditer(line):
            # numbers and hex ids masked (a connection id, an error id per request): one error repeated counts once
            seen.setdefault(re.sub(r"[0-9a-f]*\d[0-9a-f]*", "N", match.group(0)), match.group(0).strip())
    return {"exceptions": list(seen.values())[:LOG_ERRORS_KEPT], "distinct_exceptions": len(seen),
            "sqlstates": sorted(set(SQLSTATE.findall(text)))}

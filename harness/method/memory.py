"""What a memory record says of its JVM: its one cell, whether it passed the common rate, whether a smaller limit
is worth running (the scenario's skip) and counted as failed (the report's headline)."""
from __future__ import annotations


def cell_of(record: dict) -> dict:
    """A record's one cell ({} where the JVM did not start or was not run)."""
    return (record.get("cells") or [{}])[0]


def common_passed(record: dict) -> bool:
    return any(s.get("phase") == "common" and s.get("passed") for s in cell_of(record).get("steps", []))


def fatal_to_jvm(record: dict) -> bool:
    """The JVM did not start, or died before it passed the common rate: a smaller limit cannot do better. A JVM
    that passed the common rate and died later (above it, or under the idle connections) leaves the smaller limits
    worth running: the common rate may still pass there."""
    if record.get("start_failure"):
        return True
    return bool(record.get("died") or record.get("oom_kills")) and not common_passed(record)

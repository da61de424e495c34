"""The one record schema: one record per JVM a scenario ran (a port, an iteration, the JVM's coordinates), the same
top level for every scenario, its measurements in cells.

    {"schema": 2, "run_id", "scenario", "port", "iteration", "status", "environment", "calibration",
     "framework_overrides", "jvm": {axis: value, ...},          # the coordinates that needed this fresh JVM
     "startup_s", "idle_rss_mb", "warmup": Warmup | None, "capacity": {"cold": Step | None, "warm": Step | None},
     "cells": [{"coords": {axis: value, ...}, "status", "steps": [Step], "mst": Mst | None, "cap": str | None,
                ...what the scenario adds to a cell}],
     ...what the scenario adds to the JVM}

The records written before the schema (nine shapes, one per scenario) were moved into this layout once, without
changing a number (git log of results/ says when)."""
from __future__ import annotations

from .rule import Rule
from .search import rejudge

VERSION = 2


def new(base: dict, jvm: dict | None = None, **fields) -> dict:
    """A record of the schema: `base` (the session's run id, scenario, port, iteration, environment, ...)."""
    return {"schema": VERSION, **base, "jvm": dict(jvm or {}), "startup_s": None, "idle_rss_mb": None,
            "warmup": None, "capacity": {"cold": None, "warm": None}, **fields, "cells": []}


def cell(coords: dict | None = None, **fields) -> dict:
    return {"coords": dict(coords or {}), "status": "partial", "steps": [], "mst": None, "cap": None, **fields}


def normalize(record: dict) -> list[dict]:
    """`record`, judged, when it is in the one schema; [] when not (a record of another shape is not read)."""
    return [judged(record)] if record.get("schema") == VERSION else []


def judged(record: dict) -> dict:
    """Each cell judged by today's rule (method/search.py rejudge: a failure blamed on what failed), with the rule's
    values the run was measured under."""
    values = ((record.get("environment") or {}).get("settings") or {}).get("rule")
    if values:
        rule = Rule(**values)
        for cell in record.get("cells") or []:
            rejudge(cell, rule)
    return record

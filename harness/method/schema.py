"""The one record schema: one record per JVM a scenario ran (a port, an iteration, the JVM's coordinates), the same
top level for every scenario, its measurements in cells.

    {"schema": 2, "run_id", "scenario", "port", "iteration", "status", "environment", "calibration",
     "framework_overrides", "jvm": {axis: value, ...},          # the coordinates that needed this fresh JVM
     "startup_s", "idle_rss_mb", "warmup": Warmup | None, "capacity": {"cold": Step | None, "warm": Step | None},
     "cells": [{"coords": {axis: value, ...}, "status", "steps": [Step], "mst": Mst | None, "cap": str | None,
                ...what the scenario adds to a cell}],
     ...what the scenario adds to the JVM}

Records written before the schema (nine shapes, one per scenario) are read through `normalize`, which moves their
fields into this layout without changing a number; the files on disk stay as they were measured."""
from __future__ import annotations

from ..settings import identifier
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
    """`record` in the one schema: itself when it is, else its scenario's old shape moved over (a list: the old
    queries record held one JVM per latency, each a record now)."""
    settings = (record.get("environment") or {}).get("settings") or {}
    scenario = record.get("scenario") or "baseline"
    if scenario not in settings and identifier(scenario) in settings:      # bench.toml's sections were [slow_db]
        settings[scenario] = settings[identifier(scenario)]
    if record.get("schema") == VERSION:
        return [judged(record)]
    convert = OLD.get(record.get("scenario") or "baseline")
    return [judged(r) for r in convert(dict(record))] if convert else [record]


def judged(record: dict) -> dict:
    """Each cell judged by today's rule (method/search.py rejudge: a failure blamed on what failed), with the rule's
    values the run was measured under."""
    values = ((record.get("environment") or {}).get("settings") or {}).get("rule")
    if values:
        rule = Rule(**values)
        for cell in record.get("cells") or []:
            rejudge(cell, rule)
    return record


def _capacity(cold=None, warm=None) -> dict:
    return {"cold": cold, "warm": warm}


def _top(r: dict, jvm: dict, cells: list[dict], capacity: dict | None = None) -> dict:
    r.update(schema=VERSION, jvm=jvm, cells=cells)
    r.setdefault("startup_s", None)
    r.setdefault("idle_rss_mb", None)
    r.setdefault("warmup", None)
    cap = r.get("capacity")
    r["capacity"] = capacity if capacity is not None else (
        _capacity(**cap) if isinstance(cap, dict) and set(cap) <= {"cold", "warm"} else _capacity())
    return r


def _one_cell(r: dict) -> list[dict]:
    """baseline, pinning, memory: one cell, the JVM's steps and MST (baseline's closed loops, memory's idle step
    go with them)."""
    fields = {k: r.pop(k) for k in ("closed", "idle", "skipped") if k in r}
    c = {"coords": {}, "status": r.get("status", "partial"), "steps": r.pop("steps", []), "mst": r.pop("mst", None),
         "cap": r.pop("cap", None), **fields}
    jvm = {k: r[k] for k in ("latency_ms", "limit_mb") if k in r}
    if "runtime" in r:
        jvm["runtime"] = r["runtime"]["name"]
    return [_top(r, jvm, [c])]


def _slow_db(r: dict) -> list[dict]:
    """A record per JVM already (a pool); its cells' latencies and its pool become coordinates."""
    cells = [{"coords": {"latency_ms": c.pop("latency_ms")}, "status": "complete" if "mst" in c else "partial",
              "steps": [], "mst": None, "cap": None, **c} for c in map(dict, r.pop("cells", None) or [])]
    return [_top(r, {"pool_size": r.pop("pool_size", None)}, cells)]


def _queries(r: dict) -> list[dict]:
    out = []
    for jvm in r.pop("jvms", []):
        one = {**r, **{k: v for k, v in jvm.items() if k not in ("cells", "capacity_cold")}}
        cells = [{"coords": {"n": c["n"]}, "status": "complete" if c.get("mst") else "partial", "cap": None, **c}
                 for c in jvm.get("cells", [])]
        out.append(_top(one, {"latency_ms": jvm["latency_ms"]}, cells, _capacity(cold=jvm.get("capacity_cold"))))
    return out


def _downstream(r: dict) -> list[dict]:
    capacity = _capacity(cold=r.pop("capacity", None), warm=r.pop("capacity_warm", None))
    cells = [{"coords": {k: c.pop(k) for k in ("latency_ms", "calls", "mode")}, "status": "complete" if "mst" in c
              else "partial", "cap": c.get("cap"), **c} for c in map(dict, r.pop("cells", []))]
    return [_top(r, {}, cells, capacity)]


def _many_users(r: dict) -> list[dict]:
    cells = [{"coords": {"connections": s.get("connections")}, "status": "complete", "steps": [s], "mst": None,
              "cap": None} for s in r.pop("steps", [])]
    return [_top(r, {}, cells)]


def _faults(r: dict) -> list[dict]:
    probe = r.pop("probe", None)
    cells = [{"coords": {"case": name}, "status": "complete", "steps": [], "mst": None, "cap": None, **case}
             for name, case in r.pop("cases", {}).items()]
    return [_top(r, {}, cells, _capacity(cold=probe))]


def _startup(r: dict) -> list[dict]:
    fields = {k: r.pop(k) for k in ("windows",) if k in r}
    step = r.pop("step", None)
    c = {"coords": {}, "status": r.get("status", "partial"), "steps": [step] if step else [], "mst": None,
         "cap": None, **fields}
    return [_top(r, {"variant": r.pop("variant", None)}, [c])]


def _pinning(r: dict) -> list[dict]:
    """One cell (_one_cell) whose steps begin with the common step, which the JFR count (the cell's "jfr") is of."""
    common, jfr = r.pop("common", None), r.pop("jfr", None)
    [out] = _one_cell(r)
    one = out["cells"][0]
    one.update(steps=([common] if isinstance(common, dict) else []) + one["steps"], jfr=jfr)
    return [out]


def _memory(r: dict) -> list[dict]:
    """One cell (_one_cell: the steps, the MST, the idle step) where the JVM started; the limit a coordinate only; a
    JVM not run or not started has no cell. How the JVM ended is its status, as the driver writes it ("skipped",
    "not-started", "died"; these records said "complete" for every end); `skipped` stays on the record."""
    skipped = r.pop("skipped", None)
    ended = ("skipped" if skipped else "not-started" if r.get("start_failure") else "died" if r.get("died")
             else r.get("status"))
    [out] = _one_cell(r)
    out.pop("limit_mb", None)
    if skipped or out.get("start_failure"):
        out["cells"] = []
    if skipped:
        out["skipped"] = skipped
    if out.get("status") == "complete":
        out["status"] = ended
    return [out]


# the scenarios whose readers use the one schema (the others read their records as written, until they move over)
OLD = {
    "baseline": _one_cell,
    "pinning": _pinning,
    "memory": _memory,
    "slow-db": _slow_db,
    "queries": _queries,
    "downstream": _downstream,
    "many-users": _many_users,
    "faults": _faults,
    "startup": _startup,
}

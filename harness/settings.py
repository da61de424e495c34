"""Run settings: bench.toml, then each section's [section.quick] table when QUICK=1, then BENCH_<SECTION>_<KEY>
environment overrides. The only settings loader: a scenario reads its section through harness.method.plan."""
from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

from .paths import SETTINGS


def _coerce(raw: str, like):
    """Parses an environment override into the type of the value it replaces."""
    if isinstance(like, bool):
        return raw.lower() in ("1", "true", "yes")
    if isinstance(like, int):
        return int(raw)
    if isinstance(like, float):
        return float(raw)
    if isinstance(like, list) and raw.lstrip().startswith("["):
        return json.loads(raw)          # a list of lists, e.g. BENCH_DOWNSTREAM_CELLS='[[200, 3, "parallel"]]'
    if isinstance(like, list):
        items = [s.strip() for s in raw.replace(",", " ").split()]
        kind = type(like[0]) if like else str
        return [kind(s) for s in items if s]
    return raw


def arrivals(settings: dict, scenario: str) -> str:
    """The arrival process of a scenario's open-model steps: its own section's `arrivals` (the baseline's: Poisson),
    else [load]'s; settings from before either existed (an older record's) ran even arrivals."""
    return (settings.get(scenario) or {}).get("arrivals") or (settings.get("load") or {}).get("arrivals") or "even"


def identifier(*parts: str) -> str:
    """An environment variable's (or a module's) spelling of names that may hold '-' ("slow-db" -> "slow_db")."""
    return re.sub(r"\W", "_", "_".join(parts))


def load(path: Path = SETTINGS, env: dict | None = None) -> dict:
    env = os.environ if env is None else env
    with open(path, "rb") as f:
        data = tomllib.load(f)
    data["quick"] = env.get("QUICK", "") not in ("", "0")
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        # QUICK=1 lays [name.quick] over [name] (environment overrides still win)
        section_quick = values.pop("quick", None)
        if isinstance(section_quick, dict) and data["quick"]:
            values.update(section_quick)
        for key, value in values.items():
            override = env.get(identifier("BENCH", section, key).upper())
            if override is not None:
                values[key] = _coerce(override, value)
    return data

"""A scenario's settings: its bench.toml section as a typed plan, with no defaults in code.

bench.toml is the only place a value lives. A plan dataclass per scenario is the schema of its section: a key
missing from bench.toml, or one the plan does not know, is an error that names the section and the keys."""
from __future__ import annotations

import dataclasses
import typing

from ..errors import Fatal


def section(settings: dict, name: str, plan_type: type, **derived):
    """`settings[name]` (bench.toml, with [name.quick] and BENCH_<NAME>_<KEY> laid over it by settings.load) as
    a `plan_type`; `derived` fills fields that are computed rather than configured (e.g. the rule)."""
    values = dict(settings.get(name) or {})
    fields = {f.name: f for f in dataclasses.fields(plan_type)}
    unknown = sorted(set(values) - set(fields))
    missing = sorted(set(fields) - set(values) - set(derived))
    if unknown:
        raise Fatal(f"bench.toml [{name}] has unknown key(s) {', '.join(unknown)}: the plan knows {', '.join(fields)}")
    if missing:
        raise Fatal(f"bench.toml [{name}] lacks {', '.join(missing)}: restore the section from git")
    hints = typing.get_type_hints(plan_type)
    typed = {k: _coerce(v, hints.get(k)) for k, v in values.items()}
    return plan_type(**typed, **derived)


def _coerce(value, hint):
    """TOML gives 5 for 5.0: a float field gets a float, a list of floats a list of floats."""
    if hint is float and isinstance(value, int):
        return float(value)
    if typing.get_origin(hint) in (list, tuple) and typing.get_args(hint) and typing.get_args(hint)[0] is float:
        return [float(v) for v in value]
    return value

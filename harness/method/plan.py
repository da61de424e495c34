"""A scenario's settings: its bench.toml section as a typed plan dataclass, the schema of that section. bench.toml
is the only place a value lives: a key missing from it, or one the plan does not know, is an error."""
from __future__ import annotations

import dataclasses
import typing

from ..errors import Fatal


def section(settings: dict, name: str, plan_type: type, **derived):
    """`settings[name]` (bench.toml with its overrides, settings.load) as a `plan_type`; `derived` fills fields that
    are computed rather than configured (e.g. the rule)."""
    values = dict(settings.get(name) or {})
    fields = [f.name for f in dataclasses.fields(plan_type)]
    if unknown := sorted(set(values) - set(fields)):
        raise Fatal(f"bench.toml [{name}] has unknown key(s) {', '.join(unknown)}: the plan knows {', '.join(fields)}")
    optional = {f.name for f in dataclasses.fields(plan_type)
                if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    if missing := sorted(set(fields) - set(values) - set(derived) - optional):
        raise Fatal(f"bench.toml [{name}] lacks {', '.join(missing)}: restore the section from git")
    hints = typing.get_type_hints(plan_type)
    return plan_type(**{k: _coerce(v, hints.get(k)) for k, v in values.items()}, **derived)


def _coerce(value, hint):
    """TOML gives 5 for 5.0: a float field gets a float, a list of floats a list of floats."""
    if hint is float and isinstance(value, int):
        return float(value)
    if typing.get_origin(hint) in (list, tuple) and typing.get_args(hint)[:1] == (float,):
        return [float(v) for v in value]
    return value

"""Small helpers shared by the many-users and queries scenarios: their bench.toml section (with its QUICK=1
table laid over it), the interleaved port order of an iteration, and "median (min–max)" table cells."""
from __future__ import annotations


from .. import report
from ..errors import Fatal


def load(settings: dict, name: str, defaults: dict) -> dict:
    """bench.toml's [name] over `defaults` (settings.load has laid [name.quick] over [name] with QUICK=1, and
    the environment overrides over both)."""
    values = {**defaults, **settings.get(name, {})}
    unknown = set(values) - set(defaults)
    if unknown:
        raise Fatal(f"bench.toml [{name}] has unknown key(s) {', '.join(sorted(unknown))}: "
                    f"use {', '.join(sorted(defaults))}")
    return values


def rotation(items: list, iteration: int) -> list:
    """Iteration i starts one item later than iteration i-1 (no port always runs first or last)."""
    if not items:
        return []
    shift = (iteration - 1) % len(items)
    return items[shift:] + items[:shift]


def cell(values, fmt=report.num) -> str:
    """One table cell from the iterations' values: the value, or "median (min–max)" when they differ."""
    return report.span(report.spread(values), fmt)

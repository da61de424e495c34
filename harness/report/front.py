"""The front page of RESULTS.md: the answer in plain words, the port × regime matrix (a table and its heatmap) and
the decision table, all from the sections' regimes (section.Regime) and answer sentences, so that a reader can act
on it in two minutes and every word of it comes from the records."""
from __future__ import annotations

import textwrap
from pathlib import Path

from .. import port_facts
from ..method.spans import Spread, num, span
from . import charts, table
from .section import BOUND, BOX, CPU, Regime, Section

MAX_SENTENCES = 8
MAX_CELL = 160
# what a regime's deciding figure does on a machine with more cores than this 2-core VM
TRANSFER = {
    BOUND: "a bound (a pool, threads, connections, a limit): it does not change with cores, so the row holds as it is",
    CPU: "CPU: the relative figures (÷ the reference port, the model pairs) transfer; absolute rates scale with the "
         "cores the app gets, and the wake-up cost of this VM (see The machine) shrinks on bare metal",
    BOX: "this box: JIT compiler threads compete with the app for 2 cores while it warms up; with more cores a cold "
         "JVM reaches steady sooner, and the gaps between ports narrow"}


def figure(regime: Regime, s: Spread) -> str:
    text = span(s, lambda v: num(v, regime.digits))
    return f"{text} {regime.unit}".rstrip() if regime.unit and not s.partial else text


def ports_of(regimes: list[Regime]) -> list[str]:
    seen = {n for r in regimes for n in (*r.figures, *r.notes)}
    return [n for n in port_facts.order() if n in seen] + sorted(seen - set(port_facts.order()))


def scores(regime: Regime) -> dict[str, float | None]:
    """Each port's colour in its row: 0 (the row's worst) to 1 (its best) by the median, a note's own score, None
    for a figure not every run gave."""
    firm = {n: s.median for n, s in regime.figures.items() if not s.partial}
    out: dict[str, float | None] = {n: None for n in regime.figures}
    if firm:
        low, high = min(firm.values()), max(firm.values())
        for n, v in firm.items():
            share = 1.0 if high == low else (v - low) / (high - low)
            out[n] = share if regime.higher_is_better else 1 - share
    out.update({n: score for n, (_, score) in regime.notes.items()})
    return out


def cell_text(regime: Regime, name: str) -> str:
    if name in regime.figures:
        return (figure(regime, regime.figures[name])
                + (f", limited by {regime.bound[name]}" if name in regime.bound else "")
                + (f"; {regime.remarks[name]}" if name in regime.remarks else ""))
    if name in regime.notes:
        return regime.notes[name][0]
    return "–"


def choose(regime: Regime) -> str:
    """The ports in order within each framework family (the choice a team on that framework makes), every ">"
    pairwise; a port with a partial figure or none is left to the matrix."""
    firm = {n: s for n, s in regime.figures.items() if not s.partial and n not in regime.bound}
    bounds: dict[str, list[str]] = {}
    for n, why in regime.bound.items():
        bounds.setdefault(why, []).append(n)
    limited = "; ".join(f"limited by {why}: {', '.join(names)}" for why, names in bounds.items())
    families: dict[str, dict[str, Spread]] = {}
    for n, s in firm.items():
        family = port_facts.PORTS[n].family if n in port_facts.PORTS else "other"
        families.setdefault(family, {})[port_facts.labelled(n)] = s
    parts = []
    for family, items in families.items():
        unplaced = table.unplaceable(items, regime.higher_is_better)
        placed = {n: s for n, s in items.items() if n not in unplaced}
        text = table.groups(placed, regime.higher_is_better) if placed else ""
        text += "".join(f"; {n} between" for n in unplaced)
        parts.append(f"{family.capitalize()}: {text}")
    if limited and not parts:
        return limited if len(limited) <= MAX_CELL else "each limited by " + " or ".join(bounds)
    text = "; ".join(parts + ([limited] if limited else [])) or "no port has a figure every run gave"
    if len(text) > MAX_CELL and limited:     # the bounds by count, which bound is the matrix's
        text = "; ".join(parts + [f"{len(regime.bound)} ports limited by a bound of theirs (the matrix names it)"])
    if len(text) > MAX_CELL:                 # the best of each family, the full order in the section
        text = "; ".join([f"{family.capitalize()}: best {top(items, regime.higher_is_better)}"
                          for family, items in families.items()]
                         + ([f"{len(regime.bound)} limited by a bound"] if regime.bound else []))
    return text


def top(items: dict[str, Spread], higher_is_better: bool) -> str:
    return " ≈ ".join(table.below_none(items, higher_is_better))


def answer(sections: list[Section]) -> list[str]:
    sentences = [s for section in sections for s in section.answer][:MAX_SENTENCES]
    if not sentences:
        return []
    return ["## The answer", "", " ".join(sentences), ""]


def matrix(sections: list[Section], chart_dir: Path) -> list[str]:
    regimes = [(r, s) for s in sections for r in s.regimes]
    if not regimes:
        return []
    names = ports_of([r for r, _ in regimes])
    rows = [[regime.name + (" *(another machine)*" if section.other_machine else ""),
             *(cell_text(regime, n) for n in names), regime.setting] for regime, section in regimes]
    out = ["## Every port in every regime", "",
           "One figure per port and regime (median (min–max) of the runs; the row says what it is); a port without one "
           "says why. Colours in the chart compare within a row only: green the row's best, red its worst, grey a "
           "figure not every run gave. *(another machine)*: measured on a machine other than the baseline's.", "",
           *table.markdown(["regime", *names, "the setting that matters"], rows, text_columns=1)]
    path = charts.heatmap(chart_dir / "matrix.png", "Every port in every regime (colour: within its row)",
                          [textwrap.shorten(r.name, 44) for r, _ in regimes], names,
                          [[textwrap.fill(cell_text(r, n), 18) for n in names] for r, _ in regimes],
                          [[scores(r).get(n) for n in names] for r, _ in regimes])
    return out + charts.link("every port in every regime", path)


def decisions(sections: list[Section]) -> list[str]:
    rows = [[regime.name + (" *(another machine)*" if section.other_machine else ""), regime.decides,
             choose(regime), regime.setting, f"[{(regime.evidence or section.anchor).lstrip('#')}]"
             f"(#{(regime.evidence or section.anchor).lstrip('#')})"] for section in sections for regime in section.regimes]
    if not rows:
        return []
    return ["## Which model, when", "",
            "Per regime: what decides it, the ports in order within each framework (`>`: the whole range lies above, "
            "for every pair across it; `≈`: the ranges overlap) and the one setting that matters. The figures behind "
            "each row are in the matrix above and in the linked section; every regime measured, in full, is in "
            "[Every regime in detail](#every-regime-in-detail).", "",
            *table.markdown(["regime", "what decides it", "choose", "the setting that matters", "evidence"], rows, 5),
            *bigger_machine(sections)]


def bigger_machine(sections: list[Section]) -> list[str]:
    """Per kind of deciding figure, the regimes of that kind and what a bigger machine does to them."""
    kinds: dict[str, list[str]] = {}
    for section in sections:
        for regime in section.regimes:
            if regime.kind in TRANSFER:
                kinds.setdefault(regime.kind, []).append(regime.name)
    if not kinds:
        return []
    measured = [f"- Measured: {line} ([{section.title}](#{section.anchor}))." for section in sections
                for line in section.transfer]
    return ["On a bigger machine, by what decides each row:", "",
            *(f"- {'; '.join(names)}: {TRANSFER[kind]}." for kind, names in kinds.items()), *measured, ""]

"""Figures over iterations: "median (min–max)", lower bounds kept as ≥, and pairwise comparison.

"A > B" only when A's whole range lies above B's (for MSTs: above every rate at which a run of B failed), else they
tie, pairwise (A = B and B = C never make A = C). A lower bound enters no ratio and no tie; a partial figure (fewer
runs gave a value than were measured) shows its count ("3,000 (1 of 3 runs)") and enters no comparison at all."""
from __future__ import annotations

import dataclasses
import statistics


@dataclasses.dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    n: int
    at_least: bool = False          # some iteration never found the limit: the true value is higher
    of: int = 0                     # runs measured, where fewer than all gave a value (0: all did)
    ceiling: float | None = None    # an MST's: the highest of its runs' first failing rates (each run's limit lies
                                    # below it); None: not a search's figure, or no failing rate known

    @property
    def partial(self) -> bool:
        return self.n < self.of


def spread(values, at_least: bool = False, of: int = 0, ceiling: float | None = None) -> Spread | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values), len(values), at_least, of, ceiling)


def num(value, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def rate(value) -> str:
    """A rate in req/s: as num(), with the tenth a search's grid has below 40 req/s (record.TENTHS) where there is one."""
    fractional = value is not None and value < 40 and round(value, 1) != round(value)
    return num(value, 1 if fractional else 0)


def ms(value) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def span(s: Spread | None, fmt=num) -> str:
    """"1,200 (1,100–1,300)", "≥ 2,300 (2,000–2,600)", "3,000 (1 of 3 runs)", "5,000 (4,400–5,600; 2 of 3 runs)"."""
    if s is None:
        return "–"
    bound = "≥ " if s.at_least else ""
    runs = [f"{s.n} of {s.of} runs"] if s.partial else []
    if s.n > 1 and s.low != s.high:
        runs.insert(0, f"{fmt(s.low)}–{fmt(s.high)}")
    return f"{bound}{fmt(s.median)}" + (f" ({'; '.join(runs)})" if runs else "")


def cell(values, fmt=num, at_least: bool = False) -> str:
    return span(spread(values, at_least), fmt)


def apart(a: Spread, b: Spread) -> bool:
    """a's whole range lies above b's, and, for MSTs, above every rate at which a run of b failed: a search knows its
    limit only to within its bracket (the MST passed, the first failing rate did not), so MSTs closer than that are
    a tie however their ranges lie."""
    return a.low > b.high and not b.at_least and (b.ceiling is None or a.low >= b.ceiling)


def compare(a: Spread, b: Spread, higher_is_better: bool = True) -> str:
    """'>' (a better), '<' (b better), '=' (a tie: the ranges overlap, or MSTs closer than their searches' brackets)
    or '?' (a partial figure is involved, or a bound and the ranges do not settle it)."""
    if a.partial or b.partial:
        return "?"
    if not higher_is_better:
        return compare(Spread(-a.median, -a.high, -a.low, a.n, a.at_least),
                       Spread(-b.median, -b.high, -b.low, b.n, b.at_least))
    if apart(a, b):
        return ">"
    if apart(b, a):
        return "<"
    if a.at_least or b.at_least:
        return "?"
    return "="


def relation(a: Spread, b: Spread) -> str:
    """compare() in words."""
    return {">": "above", "<": "below", "=": "overlapping", "?": "not settled against"}[compare(a, b)]


def ratio(a: Spread | None, b: Spread | None) -> float | None:
    """a / b of the medians; None when either is a lower bound, partial or missing (neither is a result)."""
    if a is None or b is None or a.at_least or b.at_least or a.partial or b.partial or not b.median:
        return None
    return a.median / b.median


def beaten(name: str, items: dict[str, Spread], higher_is_better: bool = True, comparable=None) -> list[str]:
    """The others whose range lies wholly below (worse than) `name`'s; `comparable(a, b)`: whether two entries'
    figures may be compared at all (None: every pair)."""
    return [other for other, s in items.items() if other != name and (comparable is None or comparable(name, other))
            and compare(items[name], s, higher_is_better) == ">"]


def ranking(items: dict[str, Spread], higher_is_better: bool = True, fmt=num, comparable=None) -> list[str]:
    """One line per entry, best median first: its figure and whom it beats (pairwise, never chained);
    `comparable`: see beaten (a pair that may not be compared is neither above nor tied)."""
    order = sorted(items, key=lambda n: items[n].median, reverse=higher_is_better)
    lines = []
    for name in order:
        wins = beaten(name, items, higher_is_better, comparable)
        ties = [o for o in order if o != name and (comparable is None or comparable(name, o))
                and compare(items[name], items[o], higher_is_better) == "="]
        lines.append(f"**{name}** {span(items[name], fmt)}"
                     + (": not compared (not every run gave a value)" if items[name].partial else "")
                     + (f": above {', '.join(wins)}" if wins else "")
                     + (f"{';' if wins else ':'} tied with {', '.join(ties)}" if ties else ""))
    return lines

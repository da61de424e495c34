"""One formatter for what every scenario shows: Markdown tables, the appendix's step table, and the cells and
sentences built on MSTs. Every comparison goes through spans (pairwise, ranges, bounds kept)."""
from __future__ import annotations

import statistics

from ..method import caps, spans
from ..method.rule import GENERATOR
from ..method.record import GRIDS, Mst, Step, confirmed, grid_step, mst_spread  # noqa: F401 (table.mst_spread: the sections)
from ..method.spans import Spread, cell, ms, num, rate, span, spread

RESULT = "result"


def markdown(header: list[str], rows: list[list], text_columns: int = 1) -> list[str]:
    """A Markdown table: the first `text_columns` columns left-aligned (names), the rest right-aligned (figures);
    a header starting with '<' is left-aligned too (the '<' is dropped)."""
    left = [i < text_columns or h.startswith("<") for i, h in enumerate(header)]
    out = ["| " + " | ".join(h.lstrip("<") for h in header) + " |",
           "|" + "|".join("---" if lft else "---:" for lft in left) + "|"]
    return out + ["| " + " | ".join("–" if c is None else str(c) for c in row) + " |" for row in rows] + [""]


# --- the step table ---------------------------------------------------------------------------------------------

def _side(name: str, what: str, digits: int):
    return lambda s: num(s.extra.get(f"{name}_cpu_{what}"), digits)


STEP_COLUMNS = {
    "phase": ("<phase", lambda s: s.phase),
    "target": ("target/s", lambda s: rate(s.target_rps)),
    "achieved": ("achieved/s", lambda s: rate(s.achieved_rps)),
    **{k: (k, (lambda key: lambda s: ms(s.latency_ms.get(key)))(k)) for k in ("p50", "p90", "p99", "p99.9", "max")},
    "slo": ("SLO", lambda s: ms(s.slo_ms)),
    "lag": ("lag p99", lambda s: ms((s.send_lag_ms or {}).get("p99"))),
    "errors": ("errors", lambda s: s.error_count),
    "app cores": ("app cores", lambda s: num(s.app_cpu_cores, 2)),
    "db cores": ("DB cores", lambda s: num(s.db_cpu_cores, 2)),
    "gen cores": ("gen cores", lambda s: num(s.generator_cpu_cores, 2)),
    "busy": ("busy cores", lambda s: num(s.busy_cores, 2)),
    "app us": ("app µs/req", lambda s: num(s.app_cpu_us_per_request)),
    "db us": ("DB µs/req", lambda s: num(s.db_cpu_us_per_request)),
    "proxy cores": ("proxy cores", _side("proxy", "cores", 2)),
    "proxy us": ("proxy µs/req", _side("proxy", "us_per_request", 0)),
    "nginx us": ("nginx µs/req", _side("nginx", "us_per_request", 0)),
    "threads": ("threads", lambda s: num(s.app_threads_peak)),
    RESULT: ("<result", lambda s: "pass" if s.passed else f"**{s.failure}**"),
}
STEPS = ("phase", "target", "achieved", "p50", "p99", "max", "lag", "errors", "app cores", "db cores", "gen cores",
         "app us")


def step_table(steps: list[Step], extra: tuple = ()) -> list[str]:
    """Every step, in the order run: STEPS, `extra` (keys of STEP_COLUMNS or (header, Step -> text)), the verdict."""
    columns = [STEP_COLUMNS[k] if isinstance(k, str) else k for k in (*STEPS, *extra, RESULT)]
    return markdown([h for h, _ in columns], [[get(s) for _, get in columns] for s in steps])


def per_record(title: str, intro: str, scenario: str, by: dict[str, list[dict]], caption, rows) -> list[str]:
    """A section's appendix: its title and intro, then per label a heading and per record "**Iteration i**
    (status): " with its caption and its rows (both from the record)."""
    out = [f"## {title}", "", intro, ""]
    for label, records in by.items():
        out += [f"### {scenario}: {label}", ""]
        for r in records:
            out += [f"**Iteration {r.get('iteration', 1)}** ({r.get('status')}): {caption(r)}", "", *rows(r)]
    return out


# --- MSTs over iterations -------------------------------------------------------------------------------------

def precision_reached(msts, precision: float) -> str | None:
    """How close the confirmed searches came to their first failing rate, for a section to state: "41 of 45
    confirmed searches ended within 5 % (or one step of the rate grid) of their first failing rate; the others
    7–24 % below it" (None: no confirmed search met a failing rate), each judged on the grid it searched on.
    Closer MSTs tie (spans.apart)."""
    ended = [m for m in msts if m and m.confirmed and m.rps and m.first_failing_rps]
    if not ended:
        return None
    wide = [(m.first_failing_rps - m.rps) / m.first_failing_rps for m in ended
            if m.first_failing_rps - m.rps > max(precision * m.first_failing_rps,
                                                 grid_step(m.first_failing_rps, m.grid))]
    grids = "; ".join(GRIDS[g] for g in sorted({m.grid for m in ended}))
    return (f"Search precision: {len(ended) - len(wide)} of {len(ended)} confirmed searches ended within "
            f"{precision:.0%} (or one step of the rate grid: {grids}) of their first failing "
            "rate" + (f"; the other {_pct(wide[0])} below it" if len(wide) == 1 else
                      f"; the others {_pct(min(wide))} below it" if wide and _pct(min(wide)) == _pct(max(wide))
                      else f"; the others {_pct(min(wide))}–{_pct(max(wide))} below it" if wide else "")
            + ". An MST is known only to within its search's bracket: MSTs closer than that are a tie (≈).")


def non_monotonic(m: Mst) -> bool:
    """A search in which some rate failed at or below a rate that passed in the same JVM (the generator's own
    lateness aside): the machine's noise, not the port's limit, drew the line there."""
    passed = [p[0] for p in m.probes if p[1]]
    return bool(passed) and any(not p[1] and p[3] != GENERATOR and p[0] <= max(passed) for p in m.probes)


def search_noise(msts, spread_of: dict[str, Spread] | None = None) -> str | None:
    """How many of a section's searches were confirmed and how many non-monotonic; and the ports whose MST spread
    (max ÷ min − 1) passed 15 % (None: no search)."""
    msts = [m for m in msts if m]
    if not msts:
        return None
    confirmed = sum(1 for m in msts if m.confirmed)
    noisy = sum(1 for m in msts if non_monotonic(m))
    wide = {n: s.high / s.low - 1 for n, s in (spread_of or {}).items() if s.low and s.high / s.low - 1 > WIDE}
    return (f"Search noise: {confirmed} of {len(msts)} searches confirmed their MST; {noisy} of {len(msts)} were "
            "non-monotonic (a rate failed at or below one that passed in the same JVM: this shared 2-core VM's "
            "noise)" + (f"; MSTs spread over more than {WIDE:.0%} across runs: "
                        + ", ".join(f"{n} {v:.0%}" for n, v in wide.items()) if wide else "") + ".")


WIDE = 0.15      # an MST spread above this (max ÷ min − 1) is said in words


def _pct(share: float) -> str:
    """"31%", and one decimal below 10 % ("5.2%"): a gap just over the precision must not read as the precision."""
    return f"{share:.0%}" if share >= 0.1 else f"{share:.1%}"


def lowest_tried(m: Mst) -> int | None:
    return min((p[0] for p in m.probes), default=None)


def mst_cell(msts) -> str:
    """"290 (280–300) ✗ 330": the confirmed MSTs and, beside them, the median first failing rate; then the
    iterations without one: "none passed ≥ 20/s in 1/3" (no rate passed, down to the lowest tried), "1/3 not
    confirmed" (a rate passed once only: its confirmation failed, whether or not a rate is recorded)."""
    msts = [m for m in msts if m]
    found = confirmed(msts)
    parts = []
    if found:
        failing = [m.first_failing_rps for m in found if m.first_failing_rps]
        parts.append(span(mst_spread(found), rate) + (f" ✗ {cell(failing, rate)}" if failing else ""))
    none = [m for m in msts if not m.passed_once]
    if none:
        lowest = max((x for m in none if (x := lowest_tried(m))), default=None)
        parts.append("none passed" + (f" ≥ {lowest:,}/s" if lowest else "")
                     + ("" if len(none) == len(msts) else f" in {len(none)}/{len(msts)}"))
    unconfirmed = len(msts) - len(found) - len(none)
    if unconfirmed:
        parts.append(f"{unconfirmed}/{len(msts)} not confirmed")
    return "; ".join(parts) or "–"


def cap_cell(names: list[str], utilisations: list[dict]) -> str:
    """Each iteration's cap, counted, with the median utilisations as margins: "pool 3/3 (pool 0.93, CPU 0.41)"."""
    if not names:
        return "–"
    counted = ", ".join(f"{n} {names.count(n)}/{len(names)}" for n in dict.fromkeys(names))
    keys = {k for u in utilisations for k, v in (u or {}).items() if v is not None}
    medians = {k: statistics.median(v) for k in keys
               if (v := [u[k] for u in utilisations if (u or {}).get(k) is not None])}
    return f"{counted} ({caps.explain(medians)})" if medians else counted


def dominant(names: list[str]) -> str | None:
    """The cap named most often (the first of equals)."""
    return max(dict.fromkeys(names), key=names.count) if names else None


# --- who is above whom -----------------------------------------------------------------------------------------

def complete(items: dict[str, Spread]) -> dict[str, Spread]:
    """The entries every run gave a value for: only they are compared."""
    return {n: s for n, s in items.items() if not s.partial}


def not_compared(entries: list[str]) -> str:
    """"; not compared: a (1 of 3 runs), b (≥: its limit was not found)", else ""."""
    return f"; not compared: {', '.join(entries)}" if entries else ""


def above_all(items: dict[str, Spread], higher_is_better: bool = True) -> list[str]:
    """The entries whose range lies above (better than) every other's (pairwise); none when there is only one."""
    return [n for n in items if len(items) > 1 and len(spans.beaten(n, items, higher_is_better)) == len(items) - 1]


def leaders(items: dict[str, Spread], higher_is_better: bool = True) -> list[str]:
    """The first group of order(): the fewest best-first entries that each lie above (better than) every entry after
    them (ties among themselves allowed); none where no such group leaves anyone behind."""
    ranked = sorted(items, key=lambda n: items[n].median, reverse=higher_is_better)
    return next((ranked[:k] for k in range(1, len(ranked))
                 if all(spans.compare(items[a], items[b], higher_is_better) == ">" for a in ranked[:k]
                        for b in ranked[k:])), [])


def below_none(items: dict[str, Spread], higher_is_better: bool = True) -> list[str]:
    """The entries no other lies above (is better than)."""
    return [n for n in items
            if all(spans.compare(items[o], items[n], higher_is_better) != ">" for o in items if o != n)]


def _end(items: dict[str, Spread], median: float, fmt=num) -> tuple[str, str]:
    """The entries with exactly this median: their common span (else the median) and their names, each with its
    own span where one is a bound or partial: ("1,200", "a: 1,200 (1,100–1,300); b: ≥ 1,200")."""
    tied = [n for n in items if items[n].median == median]
    shown = {span(items[n], fmt) for n in tied}
    if len(shown) == 1:
        return shown.pop(), ", ".join(tied)
    if any(items[n].at_least or items[n].partial for n in tied):
        return fmt(median), "; ".join(f"{n}: {span(items[n], fmt)}" for n in tied)
    return fmt(median), ", ".join(tied)


def extremes(items: dict[str, Spread], unit: str, fmt=num) -> str:
    """"from 1.20 ms (a) to 9.00 ms (b, c)": the lowest and the highest median, naming every entry with exactly that
    median; "1.20 ms (a, b)" when every median is the same; "–" when there is none."""
    return _from_to(items, items, unit, fmt, f" {unit}")


def _from_to(items: dict[str, Spread], low_items: dict[str, Spread], unit: str, fmt, low_unit: str) -> str:
    """From the lowest median of `low_items` to the highest of `items`."""
    if not items:
        return "–"
    lowest, highest = min(s.median for s in low_items.values()), max(s.median for s in items.values())
    high, highs = _end(items, highest, fmt)
    if lowest == highest:
        return f"{high} {unit} ({highs})"
    low, lows = _end(low_items, lowest, fmt)
    return f"from {low}{low_unit} ({lows}) to {high} {unit} ({highs})"


def choice(cells: list[dict[str, Spread]], where: list[str] | None = None, reasons: bool = True) -> str:
    """Over several cells (latencies, N): the ports above every other in each, else those below none in any, else
    (with `where`, one name per cell) the ports below none, cell by cell. A lower bound (≥) is named only when it
    lies above every other; else it is listed as not compared, beside the partial figures and (but cell by cell)
    the ports with no figure in some cell; why, unless `reasons` is False (the decision table: names only)."""
    left = {n: [f"{s.n} of {s.of} runs"] for c in cells for n, s in c.items() if s.partial}
    wheres = where or [""] * len(cells)
    named = [(w, c) for w, c in zip(wheres, map(complete, cells)) if c]
    # a port with a figure in some cell and none at all in another (a partial figure is already listed above)
    absent = {n: [w for w, c in zip(wheres, cells) if n not in c] for _, c in named for n in c}
    absent = {n: f"no figure {'at ' + ' and '.join(ws) if all(ws) else 'in every cell'}"
              for n, ws in absent.items() if ws}
    text, notes = _choice(named, where, absent) if named else ("–", {})
    for n, why in notes.items():        # one entry a port: "a (1 of 3 runs; ≥: its limit was not found)"
        left.setdefault(n, []).append(why)
    if left and text.endswith(" (above every other)"):      # not above those listed as not compared
        text = text[:-1] + " compared here)"
    return text + not_compared([f"{n} ({'; '.join(why)})" if reasons else n for n, why in left.items()])


def _bound(at: str) -> str:
    return f"≥{' at ' + at if at else ''}: its limit was not found"


def _choice(named: list[tuple[str, dict[str, Spread]]], where: list[str] | None,
            absent: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The choice, and why the ports it leaves unnamed are not compared. Nothing is ever above a bound (its true
    value may be higher), so every bound is below none: it is named only when its range lies above every other's."""
    cells = [c for _, c in named]
    names = [n for n in cells[0] if all(n in c for c in cells)]
    bounds = list(dict.fromkeys(n for c in cells for n, s in c.items() if s.at_least))
    # the bounds left out for being bounds: below none wherever they are measured
    unsettled = {n: _bound("") for n in bounds if all(n in below_none(c) for c in cells if n in c)}

    def apart(chosen=()):
        notes = {n: w for n, w in unsettled.items() if n not in chosen}
        for n, why in absent.items():
            notes[n] = f"{notes[n]}; {why}" if n in notes else why
        return notes

    if len(names) == 1:
        return f"{names[0]} (the only port with a comparable MST{' in every cell' if absent else ' here'})", \
            apart(names)
    top = [n for n in names if all(n in above_all(c) for c in cells)]
    if top:
        return ", ".join(top) + " (above every other)", apart(top)
    unbeaten = [n for n in names if n not in bounds and all(n in below_none(c) for c in cells)]
    compared = [{m: sp for m, sp in c.items() if m not in unsettled} for c in cells]
    if len(unbeaten) == 1 and all(unbeaten[0] in above_all(c) for c in compared):
        return f"{unbeaten[0]} (above every other)", apart()      # every other but the bounds noted apart
    if unbeaten:
        return ", ".join(unbeaten) + (" (not below any other; ranges overlap)" if len(unbeaten) > 1
                                      else " (not below any other)"), apart()
    if where:
        per_cell = [[n for n in below_none(c) if not c[n].at_least] for c in cells]
        return "depends: " + "; ".join(f"{w}: {', '.join(p) or 'not settled (only lower bounds)'}"
                                       for (w, _), p in zip(named, per_cell)) + " (not below any other)", \
            {n: _bound(" and ".join(w for w, c in named if n in c and c[n].at_least)) for n in bounds}
    if not names:
        return "not settled: no port has a comparable figure in every cell", apart()
    if all(s.at_least for c in cells for s in c.values()):
        return "not settled: every figure here is a lower bound", apart()
    if all(n in bounds for n in names):
        return "not settled: every port is a lower bound in some cell here", apart()
    if not any(n in below_none(c) for c in cells for n in names if n not in bounds):
        return "not settled: only lower bounds are below no other here", apart()
    return "no port is above the others everywhere here", apart()


def from_to(items: dict[str, Spread], unit: str = "req/s") -> str:
    """"from 620 (a) to 1,200 req/s (b, c)": the lowest and the highest median, every entry with exactly that
    median named; "1,200 req/s (a, b)" when every median is the same; "–" when there is none. The low end is a
    figure that was found: a lower bound (≥) below it is not placed (unplaced_note names it)."""
    return _from_to(items, {n: s for n, s in items.items() if not s.at_least} or items, unit, rate, "")


def unplaced_note(items: dict[str, Spread]) -> str:
    """"; not compared: a (1 of 3 runs), b (≥ 550 (550–610): its limit was not found)": the partial entries and the
    lower bounds from_to leaves out of its low end (a ≥ below the lowest figure found says nothing of where it lies)."""
    firm = [s.median for s in items.values() if not s.at_least and not s.partial]
    bounds = [f"{n} ({span(s, rate)}: its limit was not found)" for n, s in items.items()
              if s.at_least and not s.partial and firm and s.median < min(firm)]
    return not_compared([f"{n} ({s.n} of {s.of} runs)" for n, s in items.items() if s.partial] + bounds)


def order(items: dict[str, Spread], higher_is_better: bool = True) -> str:
    """"a > b ≈ c > d": every entry, best median first, in groups whose every pair overlaps (≈); a ">" stands only
    where every entry before it lies wholly above (better than) every entry after it, so each ">" holds pairwise
    across it. An entry whose range overlaps two entries that lie apart fits no such order: it is named after it,
    "a > c; not placed: b (overlaps both a and c, which lie apart)"."""
    unplaced = unplaceable(items, higher_is_better)
    text = groups({n: s for n, s in items.items() if n not in unplaced}, higher_is_better)
    if len(unplaced) > 1:        # the pairs are in the ranges beside the order; naming each would fill the cell
        return text + f"; not placed (each overlaps two that lie apart): {', '.join(unplaced)}"
    return text + (f"; not placed: {', '.join(f'{n} ({why})' for n, why in unplaced.items())}" if unplaced else "")


def groups(items: dict[str, Spread], higher_is_better: bool = True) -> str:
    """order() of entries none of which overlaps two entries that lie apart."""
    ranked = sorted(items, key=lambda n: items[n].median, reverse=higher_is_better)
    out = ranked[:1]
    for i, name in enumerate(ranked[1:], 1):
        apart = all(spans.compare(items[a], items[b], higher_is_better) == ">" for a in ranked[:i] for b in ranked[i:])
        out += [">" if apart else "≈", name]
    return " ".join(out)


def unplaceable(items: dict[str, Spread], higher_is_better: bool = True) -> dict[str, str]:
    """The entries whose range overlaps two others' that lie apart from each other, each with why: a "≈" chain
    through one of them would join two entries that do not overlap."""
    def apart(a: str, b: str) -> bool:
        return spans.compare(items[a], items[b], higher_is_better) in (">", "<")
    best_first = sorted(items, key=lambda n: items[n].median, reverse=higher_is_better)
    out = {}
    for name in best_first:
        near = [m for m in best_first if m != name and not apart(name, m)]
        pair = next(((a, b) for i, a in enumerate(near) for b in near[i + 1:] if apart(a, b)), None)
        if pair:
            out[name] = f"overlaps both {pair[0]} and {pair[1]}, which lie apart"
    return out


def ranked(items: dict[str, Spread], below: dict[str, str] | None = None, apart: dict[str, str] | None = None,
           higher_is_better: bool = True) -> str:
    """Every port in one line (a decision row): order() of the ports with a comparable figure; then
    `below`, the ports without one that lie below every one of them, grouped by why ("d ≈ e (none passed)");
    then, not compared, `apart` and the partial figures: "a > b ≈ c > d ≈ e (none passed); not compared: f (died
    here), g (2 of 3 runs)". A lower bound (≥) is placed only at or above the highest figure found: below it, its
    true value may lie anywhere above it, so it is not compared (in the chain it would turn every ">" before it
    into "≈")."""
    firm = complete(items)
    found = [s.median for s in firm.values() if not s.at_least]
    unplaced = {n: f"{span(s, rate)}: its limit was not found" for n, s in firm.items()
                if s.at_least and found and s.median < max(found)}
    firm = {n: s for n, s in firm.items() if n not in unplaced}
    unplaced |= {n: "overlaps two that lie apart" for n in unplaceable(firm, higher_is_better)}
    firm = {n: s for n, s in firm.items() if n not in unplaced}
    without: dict[str, list[str]] = {}
    for name, why in (below or {}).items():
        without.setdefault(why, []).append(name)
    parts = ([groups(firm, higher_is_better)] if firm else []) + [f"{' ≈ '.join(names)} ({why})"
                                                                  for why, names in without.items()]
    left = {**{n: f"{s.n} of {s.of} runs" for n, s in items.items() if s.partial}, **unplaced, **(apart or {})}
    return (" > ".join(parts) or "none") + not_compared([f"{n} ({why})" for n, why in left.items()])


def range_sentence(items: dict[str, Spread], unit: str = "req/s", comparable=None) -> str:
    """"from 2,100 (a) to 8,600 (8,400–8,800) req/s (b); b is above a, c": the lowest and highest median (every
    entry with exactly that median named; an entry only some runs confirmed keeps those runs' figure, with its count,
    but enters no comparison) and every pairwise "above" (`comparable`: see spans.beaten)."""
    firm = complete(items)
    left = unplaced_note(firm)
    partial = [n for n, s in items.items() if s.partial]
    left += (f"; {', '.join(partial)}: from the runs that confirmed one, in no comparison" if partial else "")
    order = sorted(firm, key=lambda n: -firm[n].median)
    if len(items) <= 1:
        name = next(iter(items), None)
        return (f"{span(items[name], rate)} {unit} ({name})" if name else "–") + left
    wins = [f"{n} is above {', '.join(beats)}" for n in order if (beats := spans.beaten(n, firm, True, comparable))]
    return from_to(items, unit) + "; " + ("; ".join(wins) if wins else "no range lies above another") + left

"""The pinning scenario's part of the report: MST, cap and pinned events per port, runtime and database latency."""
from __future__ import annotations

import collections
import dataclasses
import functools
from pathlib import Path

from ...method import caps, spans
from ...method.constants import SETTLED_HOT
from ...method.pinning import NEW, OLD, OLD_DRIVER, OLD_JDK, REFERENCE, RUNTIMES, SCENARIO_PORTS, VIRTUAL
from ...method.record import dig, mst_of, settled_hot, steps_of, warmup_text
from ...method.runset import RunSet
from ...method.spans import cell, ms, num, span, spread
from .. import charts, table
from ..section import Decision, Section, text

PINNED = "pinned carriers"                    # the cap's name in caps.classify
one_digit = functools.partial(num, digits=1)


def measured(record: dict) -> dict:
    """A record's one cell (its JFR count as "jfr") with its common step as "common" (None where not run)."""
    one = (record.get("cells") or [{}])[0]
    return {**one, "common": next((s for s in one.get("steps") or [] if s.get("phase") == "common"), None)}


def utilisation(record: dict) -> dict[str, float | None]:
    """The candidate limits at this record's confirmed MST, as the report's note under the table describes them."""
    m = mst_of(record)
    if not m or not m.confirmed or not m.bounded or not m.rps:    # a lower bound reached no limit: none to name
        return {}
    at = [s for s in steps_of(record) if s.target_rps == m.rps and s.passed and s.phase in ("mst", "confirm")]
    pinned_us, carriers = dig(measured(record), "jfr", "pinned_us_per_request"), record.get("carriers")
    out = {PINNED: round(pinned_us * m.rps / 1e6 / carriers, 3) if pinned_us is not None and carriers else None}
    if at and (cores := record.get("cpu_set_cores")):
        out["CPU"] = round(max(s.busy_cores or 0 for s in at) / cores, 3)
    latency, pool = record["jvm"].get("latency_ms") or 0, record.get("pool_size")
    questions = [q for s in at if (q := s.kernel.get("db_questions_per_request")) is not None]
    if latency and pool and questions:
        out["pool"] = round(m.rps * max(questions) * latency / 1000 / pool, 3)
    return out


@dataclasses.dataclass
class Cell:
    """One port x runtime x latency over its iterations, and what the report reads of it."""
    port: str
    runtime: str
    latency_ms: float
    records: list[dict]

    def __post_init__(self):
        self.msts = [m for r in self.records if (m := mst_of(r))]
        self.mst = table.mst_spread(self.msts)
        self.pins = pins_of([self])
        runtime = self.records[-1]["runtime"]
        self.label = f"JDK {runtime['java']}, Connector/J {runtime.get('connector_j') or '?'}"
        self.tag = f"{self.port} {self.runtime} {self.latency_ms:g} ms"
        self.db_latency = f"{self.latency_ms:g} ms" if self.latency_ms else "loopback"
        per = [u for r in self.records if (u := utilisation(r))]      # each limit's median utilisation at MST
        self.medians = {k: s.median for k in sorted(set().union(*per)) if (s := spread(u.get(k) for u in per))}
        # the cap named at MST, where the pinned carriers' utilisation is known (else None: not known)
        self.known_cap = caps.classify(self.medians, mst=True) if PINNED in self.medians else None
        self.pinned_cap = None if self.known_cap is None else self.known_cap == PINNED     # None: not known
        frames: collections.Counter = collections.Counter()        # the top frames over the iterations
        for r in self.records:
            frames.update(dict(dig(measured(r), "jfr", "top_frames") or []))
        top = frames.most_common(1)
        self.top_frame = f"`{top[0][0]}` ({top[0][1] / sum(frames.values()):.0%})" if top else "–"

    def figures(self, *keys: str) -> list:
        """The iterations' measured(record)[k1][k2]... (None where a record has none: an interrupted cell)."""
        return [dig(measured(r), *keys) for r in self.records]


def pins_of(cells_) -> spans.Spread | None:
    """Pinned events per 1,000 requests over the cells' iterations."""
    return spread(v for c in cells_ for v in c.figures("jfr", "events_per_1000_requests"))


def cells(rs: RunSet) -> list[Cell]:
    """The run set's cells, in the order port, latency, runtime (each cell's records in iteration order)."""
    grouped: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rs.records:
        grouped[r["port"], r["jvm"]["runtime"], float(r["jvm"]["latency_ms"])].append(r)
    keys = sorted(grouped, key=lambda k: (SCENARIO_PORTS.index(k[0]), k[2], [rt.name for rt in RUNTIMES].index(k[1])))
    return [Cell(*k, grouped[k]) for k in keys]


def runtimes_text(grid: list[Cell]) -> str:
    """The runtimes a run set measured, and whether the JDK's share and the driver's can be told apart."""
    ran = {c.runtime for c in grid}
    if {OLD_JDK.name, OLD_DRIVER.name} <= ran:
        return ("JDK 21 and JDK 25, each with Connector/J 8.0 and with 9 (one change at a time and both: the JDK's "
                "share and the driver's are apart)")
    return ("JDK 21 + Connector/J 8.0 and on JDK 25 + Connector/J 9 (both changed together: the data cannot tell "
            "them apart)")


def where(latency: float) -> str:
    return "on loopback" if not latency else f"at {latency:g} ms database latency"


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    grid = cells(rs)
    by_key = {(c.port, c.runtime, c.latency_ms): c for c in grid}
    iterations = sorted({len(c.records) for c in grid})
    first = {c.latency_ms: c.records[0] for c in grid}       # per latency, the first record of its last cell
    body = [text("pinning-method").format(
        iterations="–".join(map(str, iterations)), runs=", ".join(rs.run_ids), runtimes=runtimes_text(grid),
        slos=", ".join(f"{ms(r.get('slo_ms', r.get('slo_p99_ms')))} ms {where(lat)}" for lat, r in first.items()),
        rates=", ".join(f"{num(r.get('common_rate'))} req/s {where(lat)}" for lat, r in first.items())), ""]
    body += table.markdown(
        ["port", "runtime", "DB latency", "MST (req/s) ✗ first failing", "<cap at MST (utilisation)",
         "p99 at the common rate (ms)", "app µs/req", "pinned events / 1,000 req", "pinned µs / req",
         "<top pinned frame (outside the JDK)"],
        [[c.port, c.label, c.db_latency, table.mst_cell(c.msts), caps.text(c.medians, mst=True) if c.medians else "–",
          cell(c.figures("common", "latency_ms", "p99"), ms), cell(c.figures("common", "app_cpu_us_per_request")),
          span(c.pins, one_digit), cell(c.figures("jfr", "pinned_us_per_request"), one_digit), c.top_frame]
         for c in grid], text_columns=3)
    why: dict = collections.defaultdict(lambda: collections.defaultdict(list))     # reason -> cell -> iterations
    for c in grid:
        for r in c.records:
            if (m := mst_of(r)) and not m.confirmed:
                why[m.reason or "unconfirmed"][c.tag].append(f"#{r['iteration']}")
    notes = [f"- Not in the MST column (unconfirmed), {reason}: "
             + "; ".join(f"{tag} {', '.join(runs)}" for tag, runs in cells_.items()) + "."
             for reason, cells_ in why.items()]
    incomplete = [f"{c.tag} #{r['iteration']}" for c in grid for r in c.records if r.get("status") != "complete"]
    if incomplete:
        notes.append(f"- Incomplete (interrupted): {', '.join(incomplete)}.")
    if hot := [f"{c.tag} #{r['iteration']} ({ratio:.1f}x)" for c in grid for r in c.records
               if (ratio := settled_hot(r)) and ratio > SETTLED_HOT]:
        notes.append(f"- Warm-up declared settled at more than {SETTLED_HOT:g}x the JVM's own lowest CPU per request "
                     f"in its search, so the step at the common rate after it was not taken warm: {', '.join(hot)}.")
    body += [text("pinning-cap"), "", *notes, *([""] if notes else [])]
    body += charts.link("JDK 21 vs 25: MST per port and runtime", mst_chart(chart_dir / "pinning-mst.png", grid))
    pairs, control = compare_runtimes(by_key, VIRTUAL), compare_runtimes(by_key, (REFERENCE,))
    # the verdict: platform against virtual threads per runtime, and the gains; each cell's pair in the section
    verdict = reference_sentences(grid, by_key) + gains_sentence(pairs, control, by_key) + split_sentences(by_key)
    findings = [sentence(old, new) for old, new in pairs]
    findings += [sentence(old, new, "; platform threads, nothing to pin: the runtime's and the driver's own "
                          "difference") for old, new in control]
    return Section("Virtual-thread pinning: JDK 21 + Connector/J 8.0 against JDK 25 + 9", rs.scenario, body,
                   appendix=appendix(grid), decisions=decisions(pairs, by_key), verdict=verdict,
                   findings=findings, warnings=rs.warnings)


def mst_chart(path: Path, grid: list[Cell]) -> Path | None:
    """MST against the database latency: one line per port and runtime (JDK 21 + 8.0 dashed), log scale."""
    short = {rt.name: rt.short for rt in RUNTIMES}
    series: dict[str, list] = {}
    for c in grid:
        series.setdefault(f"{c.port} {short[c.runtime]}", []).append((c.latency_ms, c.mst))
    dashes = {OLD.name: "--", OLD_JDK.name: ":", OLD_DRIVER.name: "-."}
    styles = {f"{c.port} {short[c.runtime]}": dashes[c.runtime] for c in grid if c.runtime in dashes}
    return charts.lines(path, "JDK 21 vs 25: confirmed MST per port and runtime (solid: JDK 25 + Connector/J 9)",
                        "database latency added (ms)", "MST (req/s, log)", series, logy=True, styles=styles)


def compare_runtimes(by_key: dict, which: tuple) -> list[tuple[Cell, Cell]]:
    """(JDK 21 cell, JDK 25 cell) of the `which` ports wherever both runtimes have a confirmed MST."""
    pairs = [(old, by_key.get((old.port, NEW.name, old.latency_ms))) for old in by_key.values()
             if old.port in which and old.runtime == OLD.name]
    return [(old, new) for old, new in pairs if new and old.mst and new.mst]


RELATION = {">": "JDK 25 + 9 above", "<": "JDK 21 + 8.0 above", "=": "the ranges overlap",
            "?": "not settled: a bound or a partial figure"}
UNKNOWN = "a bound, an unconfirmed MST or no JFR count: no utilisation recorded"


def gain(old: Cell, new: Cell) -> tuple[str, str]:
    """spans.compare of JDK 25 + 9's MST against JDK 21 + 8.0's, and the ratio of the medians where it lies above."""
    relation, ratio = spans.compare(new.mst, old.mst), spans.ratio(new.mst, old.mst)
    return relation, f"{ratio:.2f}x" if relation == ">" and ratio is not None else ""


def gain_word(old: Cell, new: Cell) -> str:
    relation, ratio = gain(old, new)
    return ratio or ("not settled" if relation == "?" else RELATION[relation])


def sentence(old: Cell, new: Cell, note: str = "") -> str:
    relation, ratio = gain(old, new)
    pins = (f"; pinned events per 1,000 requests {span(old.pins, one_digit)} against "
            f"{span(new.pins, one_digit)}" if old.pins and new.pins else "")
    frame = f", most often under {old.top_frame}" if old.pins and old.pins.median else ""
    return (f"{old.port} {where(old.latency_ms)}: MST {span(old.mst)} req/s on {old.label} against {span(new.mst)} "
            f"on {new.label} ({RELATION[relation]}{', ' + ratio if ratio else ''}){pins}{frame}{note}.")


def reference_sentences(grid: list[Cell], by_key: dict) -> list[str]:
    """spring-platform against the virtual-thread ports on the same runtime and latency (pairwise)."""
    out = []
    for c in grid:
        others = {p: o.mst for p in VIRTUAL if (o := by_key.get((p, c.runtime, c.latency_ms))) and o.mst}
        if c.port == REFERENCE and c.mst and others:
            parts = [f"{spans.relation(c.mst, s)} {p} ({span(s)})" for p, s in others.items()]
            out.append(f"On {c.label} {where(c.latency_ms)}, {REFERENCE} (platform threads, nothing to pin) sustains "
                       f"{span(c.mst)} req/s: {', '.join(parts)}.")
    return out


def reference_gaps(pairs: list[tuple[Cell, Cell]], reference: list[tuple[Cell, Cell]], by_key: dict) -> str:
    """Where the virtual ports were compared but the control was not: "not run" (no cell at that latency on either
    runtime), else "no pair of confirmed MSTs"."""
    missing = sorted({o.latency_ms for o, _ in pairs} - {o.latency_ms for o, _ in reference})
    ran = {lat for lat in missing if any((REFERENCE, rt.name, lat) in by_key for rt in RUNTIMES)}
    parts = [f"{'no pair of confirmed MSTs' if lat in ran else 'not run'} {where(lat)}" for lat in missing]
    return f" ({'; '.join(parts)})" if parts else ""


def gains_sentence(pairs: list[tuple[Cell, Cell]], reference: list[tuple[Cell, Cell]], by_key: dict) -> list[str]:
    """The control's gain from the same change beside the virtual ports' gains, split by whether pinned carriers
    were the cap at MST on JDK 21 + 8.0 (the recorded utilisation beside each), or whether that is not known."""
    if not pairs or not reference:
        return []
    ref = ", ".join(f"{gain_word(o, n)} {where(o.latency_ms)}" for o, n in reference)
    groups: dict[bool | None, list[str]] = {False: [], True: [], None: []}
    for o, n in pairs:
        pinned = "" if o.pinned_cap is None else f" (pinned carriers {o.medians[PINNED]:.2f})"
        groups[o.pinned_cap].append(f"{o.port} {where(o.latency_ms)} {gain_word(o, n)}{pinned}")
    parts = [f"{label}: {', '.join(groups[key])}" for key, label in
             ((False, "where pinned carriers were not the cap on JDK 21 + 8.0"), (True, "where they were"),
              (None, f"where the cap is not known ({UNKNOWN})")) if groups[key]]
    return [f"MST gain from JDK 25 + 9 (medians): {REFERENCE} (nothing to pin) {ref}"
            + reference_gaps(pairs, reference, by_key) + f"; the virtual-thread ports {'; '.join(parts)}."]


def split(by_key: dict, old: Cell) -> tuple[Cell, Cell, Cell] | None:
    """The port's cells at old's latency with one change alone (JDK 21 + 9, JDK 25 + 8.0) and both (JDK 25 + 9),
    where all four have an MST."""
    cells_ = [by_key.get((old.port, rt.name, old.latency_ms)) for rt in (OLD_JDK, OLD_DRIVER, NEW)]
    return tuple(cells_) if old.mst and all(c and c.mst for c in cells_) else None


def split_sentences(by_key: dict) -> list[str]:
    """Per port and latency with all four runtimes: what the driver alone and the JDK alone change in the MST."""
    out = []
    for old in by_key.values():
        if old.runtime == OLD.name and (four := split(by_key, old)):
            driver, jdk, both = four
            out.append(f"{old.port} {where(old.latency_ms)}: Connector/J 9 in place of 8.0 takes the MST from "
                       f"{span(old.mst)} to {span(driver.mst)} req/s on JDK 21 ({spans.relation(driver.mst, old.mst)}) "
                       f"and from {span(jdk.mst)} to {span(both.mst)} on JDK 25 ({spans.relation(both.mst, jdk.mst)}); "
                       f"JDK 25 in place of 21 from {span(old.mst)} to {span(jdk.mst)} with Connector/J 8.0 "
                       f"({spans.relation(jdk.mst, old.mst)}) and from {span(driver.mst)} to {span(both.mst)} with 9 "
                       f"({spans.relation(both.mst, driver.mst)}).")
    return out


def alone(pairs: list[tuple[Cell, Cell]], by_key: dict) -> str:
    """Of the cells where the pair changed together lies above, how many each change alone also lifts above JDK 21 +
    8.0 ("" where no such cell has all four runtimes)."""
    fours = [(o, f) for o, _ in pairs if (f := split(by_key, o))]
    if not fours:
        return ""
    driver, jdk = ([spans.compare(f[k].mst, o.mst) for o, f in fours] for k in (0, 1))
    if len(fours) == 1:
        words = {">": "lifts it", "?": "is not settled against it (an unconfirmed run)"}
        return (f"; in that cell Connector/J 9 alone {words.get(driver[0], 'does not lift it')} and JDK 25 alone "
                f"{words.get(jdk[0], 'does not lift it')}")

    def lifts(relations: list[str]) -> str:        # a partial figure is not settled, which is not "does not lift"
        unsettled = relations.count("?")
        return f"{relations.count('>')}" + (f" ({unsettled} not settled: an unconfirmed run)" if unsettled else "")
    return f"; of those {len(fours)} cells, Connector/J 9 alone lifts {lifts(driver)} and JDK 25 alone {lifts(jdk)}"


def capped_by_latency(olds: list[Cell]) -> str:
    """Where pinned carriers were the cap at MST on JDK 21 + 8.0, where not, and where that is not known (no
    utilisation recorded), by latency; the ports by name where they differ at one latency."""
    groups: dict[bool | None, list[str]] = {True: [], False: [], None: []}
    for lat in sorted({o.latency_ms for o in olds}):
        here = [o for o in olds if o.latency_ms == lat]
        for key, places in groups.items():
            names = [o.port for o in here if o.pinned_cap is key]
            if names:
                places.append(where(lat) + ("" if len(names) == len(here) else f" for {', '.join(names)}"))
    heads = {True: "the cap at MST", False: "not" if groups[True] else "not the cap at MST", None: "not known"}
    return ", ".join(f"{heads[key]} {' and '.join(places)}" for key, places in groups.items() if places)


def named(pairs: list[tuple[Cell, Cell]]) -> str:
    return ", ".join(f"{o.port} {where(o.latency_ms)}" for o, _ in pairs)


def decisions(pairs: list[tuple[Cell, Cell]], by_key: dict | None = None) -> list[Decision]:
    if not pairs:
        return []
    by = {rel: [(o, n) for o, n in pairs if spans.compare(n.mst, o.mst) == rel] for rel in RELATION}  # JDK 25 vs 21
    olds = [old for old, _ in pairs]
    old_pins = pins_of(olds)
    pinned = any(o.pinned_cap for o in olds) or (old_pins and old_pins.median)
    decided = f"pinned carriers on JDK 21 + 8.0: {capped_by_latency(olds)}" if pinned else "no pinned carriers recorded"
    above, below, settings = by[">"], by["<"], "defaults"
    of = f"of {len(pairs)} (port, latency) cells"
    if above and not below:
        choice = f"JDK 25 + Connector/J 9 (changed together): above JDK 21 + 8.0 in {len(above)} {of}"
        settings = (f"{' or '.join(dict.fromkeys(n.label for _, n in above))} together"
                    + (alone(above, by_key or {}) or ", the pair measured; either alone (JDK ≥ 24, Connector/J ≥ "
                       "9.0.0) is not measured here"))
    elif below and not above:
        choice = f"JDK 21 + Connector/J 8.0 above JDK 25 + 9 in {len(below)} {of}: no reason to move for pinning"
    elif above:
        choice = f"no one runtime: JDK 25 + 9 above for {named(above)}; JDK 21 + 8.0 above for {named(below)}"
    else:
        choice = "no runtime above the other"
    choice += "".join(f"; {label}: {named(by[rel])}" for rel, label in
                      (("=", "ranges overlap"), ("?", "not settled (a bound or a partial figure)")) if by[rel])
    return [Decision("virtual threads on JDK 21 with synchronized drivers (Connector/J 8.0)", decided, choice, settings,
                     "")]


def appendix(grid: list[Cell]) -> list[str]:
    out = ["## Virtual-thread pinning: every step", "",
           "Per cell and iteration, in the order run. Latency in ms from each request's intended send time; "
           "`lag p99` is the generator's own send lateness; `proxy µs/req` the latency proxy's CPU.", ""]
    for c in grid:
        out += [f"### pinning: {c.port}, {c.label}, {c.db_latency}", ""]
        for r in c.records:
            m, u = mst_of(r), utilisation(r)
            capacity = ", ".join(f"{p} {num(dig(r, 'capacity', p, 'achieved_rps'))}/s" for p in ("cold", "warm"))
            out += [f"**Iteration {r['iteration']}** ({r.get('status')}): capacity {capacity}; warm-up "
                    f"{warmup_text(r.get('warmup'))}; MST {m.text() if m else '–'}"
                    f"{f', cap {caps.text(u, mst=True)}' if u else ''}.", ""]
            out += table.step_table(steps_of(r), ("slo", "proxy us"))
    return out

"""faults' part of the report: per port how it recovered from a database freeze and restart and from 2x overload,
the errors beside, hostile tokens and the idle flood; the decision rows, the verdict, the timelines, every case."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ...method import spans
from ...method.faults import DB_CASES
from ...method.record import dig
from ...method.rule import GENERATOR
from ...method.runset import RunSet, port_of, split_remedies
from ...method.spans import Spread, cell, ms, num, span, spread
from .. import charts, table
from ..section import Decision, Regime, Section, text

# Documented remedies for a pool that does not recover from a database restart, by port (the framework's guide).
REMEDIES = {"quarkus-virtual": "`QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true` "
                               "(https://quarkus.io/guides/datasource)"}


# --- reading the records --------------------------------------------------------------------------------------

def cases_of(record: dict) -> dict[str, dict]:
    """A record's cases by name, in the order run: its cells."""
    return {c["coords"]["case"]: c for c in record.get("cells") or []}


def generator_alone(step: dict | None) -> bool | None:
    """Whether the generator alone failed the step: behind its schedule while the port's own criteria held (the
    rule's GENERATOR label). A port that failed its rate, errors or p99 at 2x failed there itself, whatever the
    generator did (on a box the generator shares, saturating the cores is the port's failure). None where
    the step has no label."""
    if not step or "failure" not in step:
        return None
    return step["failure"] == GENERATOR


def summaries(records: list[dict], case: str) -> list[dict]:
    """The case's summary per iteration that ran it; overload's with "behind_2x": the generator alone failed the
    2x step (older records without the step's label: its flag, else the summary's, which ORs the 0.5x step in)."""
    found = [c for r in records if (c := cases_of(r).get(case)) and "summary" in c]   # a case cut short has none
    if case != "overload":
        return [{**c["summary"], "offered": offered(c.get("step"))} for c in found]

    def behind(c: dict) -> bool:
        alone = generator_alone(c.get("high"))
        flag = dig(c, "high", "generator_behind") if alone is None else alone
        return bool(c["summary"].get("generator_behind") if flag is None else flag)
    return [{**c["summary"], "behind_2x": behind(c)} for c in found]


def recoveries(s: list[dict]) -> list[float]:
    """The recovery times of the iterations that recovered."""
    return [x["recovery_s"] for x in s if x.get("recovery_s") is not None]


def secs(value: float) -> str:
    return f"{value:.1f}"


def recovery_cell(s: list[dict]) -> str:
    """Recovery time over the iterations; runs that never recovered are counted beside."""
    times = recoveries(s)
    never = len(s) - len(times)
    if not times:
        return f"not recovered ({never}/{len(s)})" if s else "–"
    return cell(times, secs) + (f"; not recovered in {never}/{len(s)}" if never else "")


def errors_of(summary: dict) -> int | None:
    """The case's errors over the whole case (the step's own count), never a sum of its 1-s windows: the windows end
    with the schedule, so a sum of them drops the errors of the requests still in flight then."""
    if "errors" in summary:
        return summary["errors"]
    return summary["errors_during"] + summary.get("errors_after", 0) if "errors_during" in summary else None


def offered(step: dict | None) -> int | None:
    """Requests the case's run offered: its rate x its schedule."""
    return round(step["target_rps"] * step["seconds"]) if step and step.get("target_rps") and step.get("seconds") \
        else None


def errors_per_fault_second(summary: dict) -> float | None:
    """The case's errors per second of the fault (its `fault_s`): how fast a port fails while the database is away
    (a restart fails the requests in flight when it strikes, set by the pools more than by each port's own rate)."""
    errors, fault_s = errors_of(summary), summary.get("fault_s")
    return errors / fault_s if errors is not None and fault_s else None


def error_share(summary: dict) -> float | None:
    """The case's errors as a share of the requests offered: ports run their cases at different rates (half their
    own MST), so raw counts compare rates, not ports."""
    errors, n = errors_of(summary), summary.get("offered")
    return errors / n if errors is not None and n else None


def port_errors_2x(summary: dict) -> int | None:
    """The port's own errors at 2x: the step's errors less the requests the generator never sent (held in its own
    queue when the schedule ended: never the port's)."""
    errors = summary.get("errors_high")
    return None if errors is None else errors - (summary.get("unsent_high") or 0)


def served_2x(s: list[dict]) -> Spread | None:
    """Requests served per second at 2x: ≥ when the generator fell behind at 2x in any iteration (it could not offer
    the load: the generator's failure, never the port's)."""
    return spread((x.get("achieved_high_rps") for x in s), at_least=any(x["behind_2x"] for x in s))


def served_range(s: list[dict]) -> Spread | None:
    """What a port can serve at 2x, for comparisons: from the lowest served up to the rate offered where the
    generator fell behind (what was served then is at least that, never more than what was offered)."""
    served = spread(x.get("achieved_high_rps") for x in s)
    offered = [x.get("rate_high") or float("inf") for x in s
               if x["behind_2x"] and x.get("achieved_high_rps") is not None]
    return dataclasses.replace(served, high=max([served.high, *offered])) if served else None


def behind_count(s: list[dict]) -> str:
    """'the generator fell behind its schedule at 2x in 12 of 21 runs' (empty when it never did)."""
    n = sum(x["behind_2x"] for x in s)
    return f"the generator fell behind its schedule at 2x in {n} of {len(s)} runs" if n else ""


def share_cell(s: list[dict]) -> str:
    """Failed windows / windows, per iteration."""
    return ", ".join(f"{x['failed_windows']}/{x['windows']}" for x in s if x.get("windows")) or "–"


def share(s: list[dict]) -> Spread | None:
    return spread(x["failed_windows"] / x["windows"] for x in s if x.get("windows"))


def yes(values: list) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    n = sum(bool(v) for v in values)
    return "yes" if n == len(values) else ("**no**" if not n else f"{n} of {len(values)}")


def _pct(fraction) -> str:
    return "?" if fraction is None else f"{fraction * 100:.0f} %"


def _share(fraction) -> str:
    """A share of requests in percent, to two significant figures: 16 errors in 28,500 requests are 0.056."""
    return "?" if fraction is None else f"{fraction * 100:.2g}"


# --- the report ---------------------------------------------------------------------------------------------

def render(rs: RunSet, chart_dir: Path) -> Section | None:
    by = {label: records for label, records in rs.by_label.items() if any(r.get("cells") for r in records)}
    if not by:
        return None
    plan = rs.plan
    slo = next((s.get("slo_ms") for rs_ in by.values() for s in summaries(rs_, "normal") if s.get("slo_ms")), None)
    fresh = any(s.get("recovery_judged_on") for rs_ in by.values() for s in summaries(rs_, "freeze"))
    body = [text("faults-method").format(
        runs=", ".join(rs.run_ids), iterations=rs.iterations, hostile=_pct(plan.get("hostile_fraction")),
        idle=num(plan.get("idle_connections")), freeze=num(plan.get("freeze_seconds")),
        overload=num(plan.get("overload_factor"), 1), overload_s=num(plan.get("overload_seconds")),
        recover=num(plan.get("recover_factor"), 1), normal=_pct(plan.get("normal_fraction")), slo=num(slo, 0),
        recovered=text("faults-recovered-fresh" if fresh else "faults-recovered-all")), ""]
    body += table.markdown(
        ["port", "rate (req/s)", "freeze: recovered after (s)", "freeze: errors", "restart: recovered after (s)",
         "restart: errors", "2x: achieved (req/s)", "2x: the port's errors", "2x: never sent", "0.5x: recovered after (s)",
         "<hostile: failed windows (normal)", "hostile: unexpected statuses", "flood: p99 (ms)",
         "<same JVM answers at end"], [summary_row(label, records) for label, records in by.items()])
    body += [text("faults-hostile"), ""]
    body += charts.link("p99 per 1-s window through the freeze (solid) and the restart (dashed)",
                        timeline_chart(chart_dir / "faults-db-timeline.png", by, ("freeze", "restart"), slo,
                                       f"database frozen or killed at {num(plan.get('fault_at_seconds'))} s"))
    body += charts.link("p99 per 1-s window through 2x overload and 0.5x after it",
                        timeline_chart(chart_dir / "faults-overload-timeline.png", by, ("overload",), slo,
                                       f"{num(plan.get('overload_factor'), 1)}x MST for "
                                       f"{num(plan.get('overload_seconds'))} s, then "
                                       f"{num(plan.get('recover_factor'), 1)}x"))
    headline, findings = verdict(by)
    regimes, answer = front_rows(by)
    return Section("Faults and overload", rs.scenario, body, appendix=appendix(by),
                   decisions=decisions(by), verdict=headline, findings=findings, warnings=rs.warnings,
                   regimes=regimes, answer=answer)


def front_rows(by: dict[str, list[dict]]) -> tuple[list[Regime], list[str]]:
    """The front page's row: the time to recover from a database restart, per port at its defaults (recovery decides
    first); a port that did not recover in every run says so, and a remedy run that then recovered is its setting."""
    defaults, remedies = split_remedies(by)
    restart = {lab: summaries(by[lab], "restart") for lab in defaults}
    restart = {lab: s for lab, s in restart.items() if s}
    if not restart:
        return [], []
    figures = {lab: sp for lab, s in restart.items() if len(recoveries(s)) == len(s) and (sp := spread(recoveries(s)))}
    notes = {lab: (f"did not recover in {len(s) - len(recoveries(s))} of {len(s)} runs", 0.0)
             for lab, s in restart.items() if lab not in figures}
    fixed = [lab for lab in remedies if port_of(lab) in notes and (s := summaries(by[lab], "restart"))
             and len(recoveries(s)) == len(s)]
    setting = "; ".join(f"{port_of(lab)}: {REMEDIES.get(port_of(lab), lab.split(' + ', 1)[1]).split(' (')[0]} "
                        "(run: then it recovered)" for lab in fixed) or "defaults"
    regime = Regime("Database restarted under load", "seconds until the rule holds again after the restart", figures,
                    "s", higher_is_better=False, digits=1, notes=notes, setting=setting)
    answer = []
    if figures:
        low = min(s.low for s in figures.values())
        high = max(s.high for s in figures.values())
        answer.append(f"After a database restart {len(figures)} of {len(restart)} ports recovered on their own within "
                      f"{secs(low)}–{secs(high)} s" + (f"; {', '.join(notes)} did not until given "
                      + ", ".join(lab.split(' + ', 1)[1] for lab in fixed)
                      if fixed else f"; {', '.join(notes)} did not" if notes else "") + ".")
    return [regime], answer


def summary_row(label: str, records: list[dict]) -> list[str]:
    fr, rt, ov, ho, no, fl = (summaries(records, c) for c in ("freeze", "restart", "overload", "hostile", "normal",
                                                               "flood"))
    return [label, cell(r.get("rate") for r in records), recovery_cell(fr), cell(map(errors_of, fr)),
            recovery_cell(rt), cell(map(errors_of, rt)), span(served_2x(ov)),
            cell(map(port_errors_2x, ov)), cell(x.get("unsent_high") for x in ov), recovery_cell(ov), f"{share_cell(ho)} ({share_cell(no)})",
            cell(x.get("hostile_unexpected") for x in ho), cell((x.get("p99_ms") for x in fl), ms),
            yes([r.get("same_jvm_at_end") and r.get("answers_at_end") for r in records
                 if r.get("status") == "complete"])]


def windows_of(record: dict, case: str) -> list[tuple[float, float]]:
    """(t, p99) of the case's windows with answers; overload: the 0.5x windows after the 2x ones."""
    shift = dig(cases_of(record), case, "high", "seconds") or 0
    steps = (("high", 0), ("low", shift)) if case == "overload" else (("step", 0),)
    return [(w["t_s"] + at, w["p99_ms"]) for step, at in steps
            for w in dig(cases_of(record), case, step, "intervals") or [] if w.get("completed") and w.get("p99_ms")]


def timeline_chart(path: Path, by: dict[str, list[dict]], cases: tuple[str, ...], slo: float | None,
                   shown: str) -> Path | None:
    series, styles = {}, {}
    for label, records in by.items():
        for case in cases:
            at: dict[float, list[float]] = {}
            for r in records:
                for t, p99 in windows_of(r, case):
                    at.setdefault(t, []).append(p99)
            name = label if len(cases) == 1 else f"{label} ({case})"
            series[name] = [(t, spread(v)) for t, v in at.items()]
            styles[name] = "-" if case != "restart" else "--"
    title = f"p99 per 1-s window: {shown} (median over iterations, bars min–max)"
    return charts.lines(path, title, "seconds into the run (schedule time)", "p99 (ms, log)", series,
                        hline=(slo, f"SLO p99 {slo:g} ms") if slo else None, logy=True, styles=styles)


def decisions(by: dict[str, list[dict]]) -> list[Decision]:
    # database restarts / freezes: one row for the defaults, one per run with a framework setting (a remedy)
    defaults, remedies = split_remedies(by)
    groups = [("", defaults)] + [(lab.split(" + ", 1)[1], [lab]) for lab in remedies]
    out = [db_decision(setting, db_faults(by, labels)) for setting, labels in groups]
    return [d for d in out + [overload_decision(by)] if d]


def db_faults(by: dict[str, list[dict]], labels) -> dict[str, dict[str, list[dict]]]:
    """Per label that ran either, its restart and its freeze apart: each case has its own recovery and errors."""
    return {lab: f for lab in labels if any((f := {case: summaries(by[lab], case) for case in DB_CASES}).values())}


def recovered_all(faults_: dict[str, dict[str, list[dict]]]) -> list[str]:
    """The labels that recovered from every freeze and every restart (a case never run is no recovery)."""
    return [lab for lab, f in faults_.items() if all(s and len(recoveries(s)) == len(s) for s in f.values())]


def recovery_spreads(faults_: dict[str, dict[str, list[dict]]], case: str) -> dict[str, Spread]:
    """One case's recovery times among recovered_all: what decides first."""
    return {lab: sp for lab in recovered_all(faults_) if (sp := spread(recoveries(faults_[lab][case])))}


def error_spreads(faults_: dict[str, dict[str, list[dict]]], case: str, among: list[str] | None = None) \
        -> dict[str, Spread]:
    """One case's errors per second of fault, among recovered_all (or `among` of them); empty with fewer than two
    ports (nothing to compare)."""
    errs = {lab: sp for lab in recovered_all(faults_) if among is None or lab in among
            if (sp := spread(map(errors_per_fault_second, faults_[lab][case])))}
    return errs if len(errs) > 1 else {}


def errors_compared(faults_: dict[str, dict[str, list[dict]]], case: str) -> str:
    """One case's errors per second of fault among recovered_all, compared pairwise (fewer is better; above / below
    only where a whole range is): 'a fewest (below every other), b, c the most (no other's range above theirs)', 'none in any
    run', 'counts overlap'; empty with fewer than two ports."""
    if not (errs := error_spreads(faults_, case)):
        return ""
    if all(sp.high == 0 for sp in errs.values()):
        return "none in any run"
    fewest, top = table.above_all(errs, higher_is_better=False), table.above_all(errs)
    most = top or [lab for lab in table.below_none(errs) if spans.beaten(lab, errs)]
    parts = [f"{', '.join(fewest)} fewest (below every other)"] if fewest else []
    if most and not (fewest and len(errs) == 2):
        parts.append(f"{', '.join(most)} the most ("
                     + ("above every other)" if top else "no other's range above theirs)"))
    return ", ".join(parts) or "counts overlap"


def db_decision(setting: str, faults_: dict[str, dict[str, list[dict]]]) -> Decision | None:
    """Who recovered from every freeze and restart (with `setting`: a remedy run), with the fewest errors, who not."""
    if not faults_:
        return None
    ok = recovered_all(faults_)
    not_ok = [lab for lab, f in faults_.items() if any(len(recoveries(s)) < len(s) for s in f.values())]
    choice = (f"all but {', '.join(not_ok)} always recovered" if ok and not_ok and len(ok) > 2
              else f"{', '.join(ok)} always recovered" if ok else "no port always recovered")
    for case in DB_CASES:        # recovery time first; errors per second of fault only among the first back
        times = recovery_spreads(faults_, case)
        first = sorted(table.leaders(times, higher_is_better=False))
        choice += f"; back first after a {case}: {', '.join(first)}" if first else ""
        if fewest := table.above_all(error_spreads(faults_, case, first or None), higher_is_better=False):
            choice += f"; fewest {case} errors a second{' among them' if first else ''}: {', '.join(fewest)}"
    choice += f"; not always recovered: {', '.join(not_ok)}" if not_ok and not choice.startswith("all but") else ""
    choice += "".join(f"; {case} not run: {', '.join(labs)}" for case in DB_CASES
                      if (labs := [lab for lab, f in faults_.items() if not f[case]]))
    remedies = [f"{lab}: {REMEDIES[port_of(lab)]}" for lab in not_ok if port_of(lab) in REMEDIES and not setting]
    return Decision("database restarts / freezes" + (f", with {setting}" if setting else ""),
                    "time until the rule holds again after the fault, then errors per second of fault (pairwise)",
                    choice,
                    (setting or "defaults") + ("; documented remedy " + "; ".join(remedies) if remedies else ""))


def overload_decision(by: dict[str, list[dict]]) -> Decision | None:
    """Who serves the most at 2x the MST (on served_range) among the ports at their defaults that always recovered."""
    over = {lab: s for lab, rs in by.items() if lab == port_of(lab) and (s := summaries(rs, "overload"))}
    if not over:
        return None
    ok = [lab for lab, s in over.items() if len(recoveries(s)) == len(s)]
    ranges = {lab: r for lab in ok if (r := served_range(over[lab]))}
    choice = "none recovered at 0.5x within the run"
    if ok:
        top = table.above_all(ranges)
        chosen = top or table.below_none(ranges)
        found = "serves the most at 2x (above every other)" if top else "below no other at 2x"
        choice = (f"{served_names(chosen, ranges)} {found}, always recovered" if chosen else "–") \
            + table.not_compared([f"{lab} (no figure at 2x)" for lab in ok if lab not in ranges])
    if behind_count([x for s in over.values() for x in s]):
        choice += "; generator behind in some runs: served rate a bound (≥) there, compared up to the rate offered"
    not_ok = [lab for lab in over if lab not in ok]
    choice += f"; not always recovered: {', '.join(not_ok)}" if not_ok else ""
    return Decision("overload 2x, then 0.5x",
                    "served at 2x each port's own MST (largely repeats the MST ranking); recovery at 0.5x under "
                    "the one rule", choice, "defaults (no remedy measured)")


def served_names(labels: list[str], ranges: dict[str, Spread]) -> str:
    """'a (above b, c), d': most served first, whom each lies above unless all."""
    beaten = {lab: spans.beaten(lab, ranges) for lab in labels}
    return ", ".join(lab + (f" (above {', '.join(beaten[lab])})" if 0 < len(beaten[lab]) < len(ranges) - 1 else "")
                     for lab in sorted(labels, key=lambda lab: -ranges[lab].median))


def fault_phrase(label: str, s: list[dict]) -> str:
    """'X recovered in every run after 1.0 s (0.5–2.0) with 12 (9–16) errors' or 'did not recover in n of m runs'."""
    errs, times = cell(map(errors_of, s)) + " errors", recoveries(s)
    if (shares := spread(map(error_share, s))) and shares.high:
        med, low, high = (_share(x) for x in (shares.median, shares.low, shares.high))
        errs += f" ({med}{'' if low == high else f' ({low}–{high})'} % of the requests"
        # over the runs that recovered: a port still failing keeps counting errors after the fault has ended
        errs += (f", {span(rate, lambda v: num(v, 1 if v < 100 else 0))} a second of fault)"
                 if (rate := spread((errors_per_fault_second(x) for x in s if x.get("recovery_s") is not None),
                                    of=len(s))) else ")")
    if len(times) == len(s):
        return f"{label} recovered after {cell(times, secs)} s with {errs}"
    watched = spread(x.get("observed_after_s") for x in s)       # how long a port that did not recover was watched
    within = f", watched {span(watched, secs)} s after the fault ended" if watched else ""
    if not times:
        return f"{label} did not recover in any of {len(s)} run(s) ({errs}{within})"
    return f"{label} recovered in {len(times)} of {len(s)} runs (after {cell(times, secs)} s) with {errs}{within}"


def hostile_phrase(label: str, records: list[dict]) -> str | None:
    """The share of the valid requests' windows that failed with hostile tokens mixed in, and without them."""
    h = summaries(records, "hostile")
    if (failed := share(h)) is None:
        return None
    unexpected = sum(x.get("hostile_unexpected") or 0 for x in h)
    return (f"{label} {span(failed, _pct)} of windows failed (without them "
            f"{span(share(summaries(records, 'normal')), _pct)})"
            + (f", {unexpected} hostile requests answered unexpectedly" if unexpected else ""))


def overload_phrase(label: str, s: list[dict]) -> str:
    times, n = recoveries(s), sum(x["behind_2x"] for x in s)
    rec = (f"recovered at 0.5x after {cell(times, secs)} s" if len(times) == len(s) else
           f"recovered at 0.5x in {len(times)} of {len(s)} runs")
    if not any(x.get("recovery_judged_on") for x in s):     # older records: the 2x run went on sending its backlog
        rec += " (with the 2x run's backlog still sent, up to the generator's 10-s timeout: not the port's own time)"
    return (f"{label} served {span(served_2x(s))} req/s at 2x "
            f"({f'generator behind in {n} of {len(s)} runs; ' if n else ''}"
            f"{cell(map(port_errors_2x, s))} errors of its own"
            + (f"; {cell(unsent)} requests never sent, held in the generator's queue at the end (not the port's)"
               if any(unsent := [x.get("unsent_high") for x in s if x.get("unsent_high") is not None]) else "")
            + f") and {rec} "
            f"({cell(x.get('errors_low') for x in s)} errors)")


def verdict(by: dict[str, list[dict]]) -> tuple[list[str], list[str]]:
    """The verdict's sentences (restart, overload: where the ports differ) and the section's (freeze, hostile)."""
    faults_ = db_faults(by, split_remedies(by)[0])
    ok = recovered_all(faults_)
    among = f"all but {', '.join(lab for lab in faults_ if lab not in ok)}" if len(ok) < len(faults_) else "all"
    note = behind_count([s for rs in by.values() for s in summaries(rs, "overload")])
    sentences = [(f"After a database {what}, under the one rule: ",
                  [fault_phrase(lab, s) if (s := summaries(rs, case)) else f"{lab}: not run" for lab, rs in by.items()],
                  (f" Time until the rule held again, at the defaults, among the ports that recovered from every "
                   f"freeze and restart ({among}), lower first: {table.order(times, higher_is_better=False)}."
                   if len(times := recovery_spreads(faults_, case)) > 1 else "")
                  + (f" Errors per second of fault among them: {comp}." if (comp := errors_compared(faults_, case))
                     else ""))
                 for case, what in (("restart", "restart (SIGKILL + start)"), ("freeze", "freeze"))]
    sentences += [
        ("With hostile tokens mixed into the load, the valid requests' 1-s windows failing the rule: ",
         [p for lab, rs in by.items() if (p := hostile_phrase(lab, rs))], ""),
        ("Overload (2x each port's own MST, so what is served there largely repeats the MST ranking"
         + (f"; {note}, and what was served then is a lower bound, ≥" if note else "") + "): ",
         [overload_phrase(lab, s) for lab, rs in by.items() if (s := summaries(rs, "overload"))], "")]
    text = [opening + "; ".join(parts) + "." + after if parts else None for opening, parts, after in sentences]
    restart, freeze, hostile, overload = text
    return [x for x in (restart, overload) if x], [x for x in (freeze, hostile) if x]


def appendix(by: dict[str, list[dict]]) -> list[str]:
    return table.per_record(
        "Faults and overload: every case", "Per port and iteration, the cases in the order run; `failed windows` are "
        "the 1-s windows that failed the rule (after the fault's end for freeze and restart).", "faults", by,
        lambda r: (f"rate {num(r.get('rate'))}/s from MST {num(r.get('mst'))} ({r.get('mst_source', '?')}); warm-up "
                   f"{num(dig(r, 'warmup', 'seconds'))} s, "
                   f"{'settled' if dig(r, 'warmup', 'settled') else '**not settled**'}."), lambda r: table.markdown(
        ["case", "rate", "p99 (ms)", "errors", "<errors by kind", "failed windows", "recovered after (s)", "<result"],
        [case_row(case, c.get("summary") or {}) for case, c in cases_of(r).items()]))


def case_row(case: str, s: dict) -> list[str]:
    """One case of one iteration in the appendix (overload: its 2x run, errors at 2x / at 0.5x)."""
    kinds = dict(s.get("errors_by_kind") or s.get("errors_high_by_kind") or {})
    if case == "overload" and (unsent := s.get("unsent_high")) and kinds.get("timeout", 0) >= unsent:
        # the generator counts the requests it never sent as timeouts: apart, as never the port's
        kinds = {**{k: v for k, v in kinds.items() if k != "timeout" or v > unsent},
                 **({"timeout": kinds["timeout"] - unsent} if kinds["timeout"] > unsent else {}),
                 "never sent (the generator's queue)": unsent}
    errors = f"{num(port_errors_2x(s))} / {num(s.get('errors_low'))}" if case == "overload" else num(errors_of(s))
    recovery = "–" if "recovery_s" not in s else "not recovered" if s["recovery_s"] is None else s["recovery_s"]
    return [case, num(s.get("rate") or s.get("rate_high")), ms(s.get("p99_ms") or s.get("p99_high_ms")), errors,
            ", ".join(f"{k} {v:,}" for k, v in kinds.items()) or "none",
            f"{s.get('failed_windows', '–')}/{s.get('windows', '–')}", recovery,
            s.get("failure") or ("pass" if "failure" in s else "–")]


def render_watched(rs: RunSet) -> Section | None:
    """A database restart watched for minutes (a run of its own, the restart case with a long after_seconds): whether
    a port that had not recovered in the main runs' window recovers at all, and what its app log says failed (the
    exception and its SQLSTATE)."""
    rows, verdict = [], []
    for lab, records in rs.by_label.items():
        s = summaries(records, "restart")
        if not s:
            continue
        logs = [x.get("app_log") or {} for x in s]
        states = sorted({code for log in logs for code in log.get("sqlstates", [])})
        first = next((e for log in logs for e in log.get("exceptions", [])), None)
        watched = spread(x.get("observed_after_s") for x in s)
        answered = f"{sum(bool(x.get('answers_after')) for x in s)} of {len(s)}"   # a request once the load stopped
        rows.append([lab, span(watched, secs) if watched else "–", recovery_cell(s), cell(map(errors_of, s)), answered,
                     ", ".join(states) or "none logged", f"`{first[:150]}`" if first else "none logged"])
        verdict.append(f"Watched for minutes, {fault_phrase(lab, s)}"
                       + (f"; its log names SQLSTATE {', '.join(states)}" if states else "; its log names no SQLSTATE")
                       + (f" ({first.split(':')[0]})" if first else "")
                       + f"; a request sent once the load had stopped was answered in {answered} runs.")
    if not rows:
        return None
    body = [text("faults-watched-method").format(runs=", ".join(rs.run_ids), seconds=num(rs.plan.get("after_seconds"))),
            "", *table.markdown(["port", "watched after the restart (s)", "recovered after (s)", "errors",
                                 "answered once the load stopped",
                                 "SQLSTATEs in the app log", "first exception in the app log"], rows)]
    return Section("A database restart watched for minutes", "faults-watched", body, verdict=verdict,
                   warnings=rs.warnings)

"""The startup scenario's part of the report: per port and variant, the times from process creation to listening, to
the first correct answer, to meeting the rule and to a steady CPU per request; every second in the appendix."""
from __future__ import annotations

from pathlib import Path

from ...method import spans
from ...method.runset import RunSet
from ...method.spans import cell, ms, num, span, spread
from .. import charts, table
from ..section import BOX, Decision, Regime, Section, text


def time_to_rule(record: dict) -> float | None:
    """Seconds from process creation to the start of the stretch of seconds that all met the rule up to the end (the
    end of the last failing second); None when the last second failed it (a port can settle on a steady CPU per
    request while still behind)."""
    windows = windows_of(record)
    if not windows or windows[-1].get("failure") or record.get("listen_s") is None:
        return None
    first = len(windows)
    while first > 0 and not windows[first - 1].get("failure"):
        first -= 1
    return round(record["listen_s"] + (windows[first - 1]["t_s"] if first else 0.0), 1)


def windows_of(record: dict) -> list[dict]:
    """A record's seconds under load: its one cell's windows."""
    return next((c.get("windows") or [] for c in record.get("cells") or []), [])


def step_of(record: dict) -> dict:
    """The load's one step (the whole run), {} when none was measured."""
    return next((c["steps"][0] for c in record.get("cells") or [] if c.get("steps")), {})


def _by_variant(rs: RunSet) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for label, records in rs.by_label.items():
        for r in records:
            if r.get("status") == "complete":
                aot = (r["jvm"].get("variant") or "plain") != "plain"
                out.setdefault(f"{label} (AOT)" if aot else label, []).append(r)
    return out


def _cpu_us(w: dict) -> float | None:
    """A second's app CPU µs per request (None without requests or without a CPU figure)."""
    return w["app_cpu_s"] / w["completed"] * 1e6 if w.get("completed") and w.get("app_cpu_s") is not None else None


def _timeline(records: list[dict], value) -> list[tuple[float, spans.Spread | None]]:
    seconds: dict[float, list] = {}
    for r in records:
        for w in windows_of(r):
            seconds.setdefault(round(r["listen_s"] + w["t_s"]), []).append(value(w))
    return [(t, spread(v)) for t, v in sorted(seconds.items())]


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    by = _by_variant(rs)
    if not by:
        return None
    first = next(iter(by.values()))[0]
    iterations = sorted({len(r) for r in by.values()})
    rule_slo = first.get("slo_ms")
    body = [text("startup-method").format(
        iterations="–".join(map(str, iterations)), runs=", ".join(rs.run_ids), rate=num(first.get("rate")),
        basis=f", set by {first['rate_basis']}," if first.get("rate_basis") else "", seconds=num(first.get("seconds")),
        slo=num(rule_slo), smooth=num(first.get("smooth_seconds", 5)), tolerance=100 * first.get("tolerance", 0.1),
        tail=num(first.get("tail_seconds", 15))), ""]
    header = ["port", "listening (s)", "first correct 200 (s)", "meets the rule from (s)", "time to steady (s)",
              "steady CPU µs/req", "served over the run (req/s)", "seconds failing", "missed requests",
              "RSS at the end (MiB)", "AOT training (s)", "AOT cache (MiB)"]
    to_rule = {label: [time_to_rule(r) for r in records] for label, records in by.items()}
    saturated = [label for label, reached in to_rule.items() if all(v is None for v in reached)]
    rows = [[label, cell((r["listen_s"] for r in records), ms), cell((r["first_200_s"] for r in records), ms),
             "never (failing at the end)" if label in saturated else _missing(to_rule[label], "failing at the end"),
             _missing([r.get("time_to_steady_s") for r in records], "not steady"), _steady_cpu_cell(records),
             cell(step_of(r).get("achieved_rps") for r in records),
             cell(r.get("failed_windows") for r in records), cell(r.get("missed_requests") for r in records),
             cell((windows_of(r)[-1].get("app_rss_mb") if windows_of(r) else None) for r in records),
             cell((r.get("aot") or {}).get("training_s") for r in records),
             cell((r.get("aot") or {}).get("cache_mb") for r in records)] for label, records in by.items()]
    body += table.markdown(header, rows) + [""]
    if saturated:     # their "steady" CPU is a saturated JVM's, still compiling under a backlog (docs/findings.md)
        body += [text("startup-saturated").format(ports=", ".join(saturated)), ""]
    styles = {label: "--" for label in by if label.endswith("(AOT)")}
    body += charts.link("CPU per request in the first seconds, per port (dashed: AOT cache)", charts.lines(
        chart_dir / "startup-cpu.png", "app CPU per request after process start", "seconds since process start",
        "app CPU µs per request (log)",
        {label: _timeline(records, _cpu_us) for label, records in by.items()},
        logy=True, styles=styles))
    body += charts.link("p99 in the first seconds, per port (dashed: AOT cache)", charts.lines(
        chart_dir / "startup-p99.png", "p99 per second after process start", "seconds since process start",
        "p99 (ms, log)", {label: _timeline(records, lambda w: w.get("p99_ms") if w.get("completed") else None)
                          for label, records in by.items()},
        hline=(rule_slo, f"SLO p99 {rule_slo:g} ms") if rule_slo else None, logy=True, styles=styles))
    first_200 = {label: s for label, records in by.items() if (s := spread(r["first_200_s"] for r in records))}
    meets = {label: spread(times) for label, times in to_rule.items() if times and None not in times}
    never = [label for label, records in by.items() if label not in meets]
    steady = {label: s for label, records in by.items() if label in meets
              and all(r.get("time_to_steady_s") is not None for r in records)
              and (s := spread(r["time_to_steady_s"] for r in records))}
    decisions, verdict, findings = [], [], []
    if meets:
        fastest = table.above_all(meets, higher_is_better=False) if len(meets) > 1 else list(meets)
        unbeaten = table.below_none(meets, higher_is_better=False)
        choice = (f"{', '.join(fastest)} (meets the rule sooner than every other)" if fastest
                  else f"{', '.join(unbeaten)} (none meets the rule sooner; ranges overlap)")
        aot = [n for n in meets if n.endswith("(AOT)")]
        decisions.append(Decision("Scale-to-zero and frequent restarts (time until a cold instance meets the rule "
                                  f"at {num(first.get('rate'))} req/s)", "class loading, JIT warm-up", choice,
                                  "the AOT cache (`-XX:AOTCache`)" if any(n in unbeaten for n in aot) else "defaults",
                                  ""))
    if first_200:
        verdict.append(f"From process start to the first correct answer: {table.extremes(first_200, 's', ms)}.")
    if meets or never:
        verdict.append(f"Offered {num(first.get('rate'))} req/s from the moment it listens, "
                       + (f"a cold instance met the rule {table.extremes(meets, 's')} after process start"
                          if meets else "")
                       + ("; " if meets and never else "")
                       + "; ".join(f"{', '.join(labels)} still failed it at the end of the "
                                   f"{num(first.get('seconds'))} s in {failed} of {runs} iterations"
                                   + (" each" if len(labels) > 1 else "")
                                   for (failed, runs), labels in still_failing(never, to_rule).items())
                       + ".")
    if steady:
        findings.append(f"A cold instance's CPU per request became steady {table.extremes(steady, 's')} after "
                        "process start, where every run met the rule at the end and became steady"
                        + left_out({label: records for label, records in by.items() if label not in steady}) + ".")
    plain = {label: sp for label, sp in meets.items() if not label.endswith("(AOT)")}
    notes = {label: ("did not meet the rule in every run", 0.0) for label in never if not label.endswith("(AOT)")}
    remarks = {label: f"with the AOT cache {span(meets[aot], secs)} s" for label in plain
               if (aot := f"{label} (AOT)") in meets}
    regimes = [Regime(f"Cold start: time until the rule holds at {num(first.get('rate'))} req/s",
                      "class loading and JIT warm-up", plain, "s", higher_is_better=False, digits=1, notes=notes,
                      remarks=remarks, setting="the AOT cache (`-XX:AOTCache`), as run", kind=BOX)] if plain or notes else []
    return Section("Start-up and time to steady (plain JVM and AOT cache)", rs.scenario, body, appendix=appendix(by),
                   decisions=decisions, verdict=verdict, findings=findings, warnings=rs.warnings, regimes=regimes)


def secs(value: float) -> str:
    return f"{value:.1f}"


def still_failing(never: list[str], to_rule: dict[str, list]) -> dict[tuple[int, int], list[str]]:
    """The ports that failed the rule at the end, grouped by (runs failing at the end, runs): one clause a group."""
    groups: dict[tuple[int, int], list[str]] = {}
    for label in never:
        groups.setdefault((to_rule[label].count(None), len(to_rule[label])), []).append(label)
    return groups


def left_out(by: dict[str, list[dict]]) -> str:
    """"; left out: a, b (failing the rule at the end in 3 of 3 runs); c (not steady in 1 of 3 runs)": the ports a
    time to steady over every run cannot be given for, and why (failing the rule first: a saturated JVM's steady CPU
    is not the warm cost), else ""."""
    why: dict[str, list[str]] = {}
    for label, records in by.items():
        failing = sum(1 for r in records if time_to_rule(r) is None)
        unsteady = sum(1 for r in records if r.get("time_to_steady_s") is None)
        reason = (f"failing the rule at the end in {failing} of {len(records)} runs" if failing
                  else f"not steady in {unsteady} of {len(records)} runs")
        why.setdefault(reason, []).append(label)
    return ("; left out: " + "; ".join(f"{', '.join(labels)} ({reason})" for reason, labels in why.items())
            if why else "")


def _steady_cpu_cell(records: list[dict]) -> str:
    """The steady CPU per request of the runs that became steady, their count shown when not every run did: a
    run that never became steady has no steady figure ("–" when none did)."""
    values = [r.get("steady_cpu_us_per_request") for r in records if r.get("time_to_steady_s") is not None]
    return span(spread(values, of=len(records)))


def _missing(values: list[float | None], what: str) -> str:
    """The runs' figures, and how many runs have none and why: "62 (60–66); 1/3 not steady"."""
    missing = values.count(None)
    return cell(values) + (f"; {missing}/{len(values)} {what}" if missing else "")


def appendix(by: dict[str, list[dict]]) -> list[str]:
    out = ["## Start-up: every second", ""]
    for label, records in by.items():
        for r in records:
            out += [f"### startup: {label}, iteration {r.get('iteration')}", "",
                    "| s after listening | achieved (req/s) | p99 (ms) | errors | app µs/req | RSS (MiB) | rule |",
                    "|---:|---:|---:|---:|---:|---:|---|"]
            for w in windows_of(r):
                out.append(f"| {num(w['t_s'])} | {num(w.get('completed'))} | {ms(w.get('p99_ms'))} | "
                           f"{num(w.get('errors', 0) + w.get('non_2xx', 0))} | {num(_cpu_us(w))} | "
                           f"{num(w.get('app_rss_mb'))} | {w.get('failure') or 'pass'} |")
            out.append("")
    return out

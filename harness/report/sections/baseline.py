"""The baseline's part of RESULTS.md: MST and cost per request of every port on loopback, the verdict that CPU decides
there, its charts and step tables; and the same ports through Compose beside the host run (render_compose)."""
from __future__ import annotations

import functools
import statistics
from pathlib import Path

from ... import port_facts
from ...method import spans
from ...method.record import Step, at_mst, mst_of, raw_steps, steps_of, warmup_text
from ...method.runset import RunSet
from ...method.spans import cell, ms, num, span, spread
from .. import charts, ladder, table
from ..ladder import total_cpu
from ..section import CPU, Decision, Regime, Section, text


# --- the common step's figures ---------------------------------------------------------------------------------

def steps(records: list[dict], phase: str | None = None) -> list[Step]:
    return [s for r in records for s in steps_of(r, phase)]


def common(records: list[dict]) -> list[Step]:
    return [s for s in steps(records, "common") if s.passed]


def at_common(values, records: list[dict], fmt=num) -> str:
    """A figure over the common steps that passed: "478 (468–488; 2 of 3 runs)" when one failed."""
    return span(common_spread(values, records), fmt)


def common_spread(values, records: list[dict]) -> spans.Spread | None:
    """spread() of values from common(records), partial when some common step failed (a passed step that lacks the
    value is no missing run)."""
    values = [v for v in values if v is not None]
    failed = sum(1 for s in steps(records, "common") if not s.passed)
    return spread(values, of=len(values) + failed)


def failed_common(records: list[dict]) -> list[str]:
    """Each iteration whose common step failed, and why: "#2 failed: p99 over the SLO, p99 62.1 ms"."""
    return [f"#{r.get('iteration', 1)} failed: {s.failure}" + (f", p99 {ms(s.p99)} ms" if s.p99 is not None else "")
            for r in records for s in steps_of(r, "common") if not s.passed]


def common_note(by: dict[str, list[dict]]) -> list[str]:
    which = [f"{name} {len(common(records))} of {len(steps(records, 'common'))} ({'; '.join(failed)})"
             for name, records in by.items() if (failed := failed_common(records))]
    return [f"- Common-rate figures from the runs whose common step passed: {', '.join(which)}."] if which else []


# --- the report ---------------------------------------------------------------------------------------------

COLUMNS = ["MST (req/s) ✗ first failing", "MST from CPU (req/s)", "p50 (ms)", "p99 (ms)", "app µs/req", "DB µs/req", "app cs/req (vol+invol)",
           "DB cs/req (vol+invol)", "DB stmts/req", "RSS (MiB)", "warm-up (s)", "startup (s)"]
COMPOSE_COLUMNS = [COLUMNS[0], *COLUMNS[2:6], "docker-proxy µs/req", "app cs/req (vol+invol)", "startup (s)", "idle RSS (MiB)"]
TWO = functools.partial(num, digits=2)


def _cells(records: list[dict], cores: int | None = None) -> dict[str, str]:
    """A port's row by column header (`cores`: the machine's, for the MST its CPU per request predicts)."""
    ok = common(records)
    kern = [s.kernel for s in ok]
    warm = [r["warmup"] for r in records if r.get("warmup")]
    settled = sum(1 for w in warm if w.get("settled"))
    at = functools.partial(at_common, records=records)      # the count of runs shown when some common step failed
    predicted = predicted_msts({"": records}, cores).get("")
    return {"MST (req/s) ✗ first failing": table.mst_cell(map(mst_of, records)),
            "MST from CPU (req/s)": span(predicted),
            "p50 (ms)": at((s.latency_ms.get("p50") for s in ok), fmt=ms),
            "p99 (ms)": at((s.p99 for s in ok), fmt=ms),
            "app µs/req": at(s.app_cpu_us_per_request for s in ok),
            "DB µs/req": at(s.db_cpu_us_per_request for s in ok),
            "docker-proxy µs/req": at(s.extra.get("docker_proxy_cpu_us_per_request") for s in ok),
            "app cs/req (vol+invol)": _switches(kern, "app", at),
            "DB cs/req (vol+invol)": _switches(kern, "db", at),
            "DB stmts/req": at((k.get("db_questions_per_request") for k in kern), fmt=TWO),
            "RSS (MiB)": at(s.app_rss_mb_mean for s in ok),
            "warm-up (s)": f"{cell(w['seconds'] for w in warm)} ({settled}/{len(warm)} settled)",
            "startup (s)": cell((r.get("startup_s") for r in records), "{:.1f}".format),
            "idle RSS (MiB)": cell(r.get("idle_rss_mb") for r in records)}


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    rate = rs.plan.get("common_rate")
    by = rs.by_label
    lad = ladder.main(by)          # a JVM may hold the ladder under a second arrival process: the main one decides
    mst = {name: s for name, records in by.items() if (s := table.mst_spread(map(mst_of, records)))}
    body = [text("baseline-method").format(iterations=rs.iterations, runs=", ".join(rs.run_ids), rate=num(rate)), ""]
    body += table.markdown(["port", *COLUMNS], [[name, *map(_cells(records, rs.environment.get("cores")).get, COLUMNS)]
                                                for name, records in by.items()])
    notes = {"Not in the MST column (unconfirmed)": [f"{r['port']} #{r.get('iteration', 1)} ({m.reason})"
                                                     for r in rs.records if (m := mst_of(r)) and not m.confirmed],
             "**Partial** (interrupted; the finished steps are kept)": [
                 f"{r['port']} #{r.get('iteration', 1)}" for r in rs.records if r.get("status") != "complete"]}
    fall_lines, fall_sentence = cost_fall_note(by, rate)
    body += [*(f"- {what}: {', '.join(which)}." for what, which in notes.items() if which), *common_note(by),
             *fall_lines, "",
             "Ranking by MST (a port is above another only when its whole range is):", "",
             *[f"- {line}" for line in spans.ranking(mst, comparable=rs.same_state)], *apart_note(rs), ""]
    # partial where some common step failed: the chart draws its median, the verdict shows its count
    cost = {n: common_spread((s.app_cpu_us_per_request for s in common(r)), r) for n, r in by.items()}
    body += charts.link("MST per port", charts.bars(chart_dir / "baseline-mst.png",
                                                    "MST (req/s): median, bars min–max", "req/s", mst))
    body += charts.link("app CPU per request", charts.bars(
        chart_dir / "baseline-cpu.png", f"app CPU µs per request at {num(rate)} req/s (lower is better)", "µs", cost))
    body += closed_table(by)
    body += ladder.section_lines(lad, chart_dir, rate)
    # CPU decides on loopback: every role shares the cores, so the rate goes as the inverse of the CPU per request,
    # the figure that is stable across iterations and machines (the MST follows the search's path and the warm-up);
    # over the ladder, relative to the reference port, where the records have one (one rate cannot stand for the curve)
    decisions = [ladder_decision(lad) or common_decision(by, rate)]
    verdict = ladder.verdict(lad)
    decided = common_cpu(by)
    if decided and not verdict:
        verdict.append(f"On loopback CPU decides: by app CPU per request at {num(rate)} req/s (the runs whose common "
                       f"step passed) the ports order {table.order(decided, higher_is_better=False)}; a > holds for "
                       "every pair across it, ≈ where ranges overlap.")
    if mst:
        verdict.append(f"On loopback the MST runs {table.range_sentence(mst, comparable=rs.same_state)}.")
        cost = {n: c for n, c in cost.items() if c}
        if cost:
            verdict.append(f"App CPU per request at {num(rate)} req/s: {table.extremes(cost, 'µs')}.")
    if predicted := predicted_msts(by, rs.environment.get("cores")):
        verdict.append(f"{rs.environment.get('cores')} cores ÷ the total CPU per request (app + database + generator) "
                       f"at {num(rate)} req/s predict MSTs {table.extremes(predicted, 'req/s')}, beside the measured "
                       "ones in the table.")
    verdict += [fall_sentence] if fall_sentence else []
    statements = {n: sp for n, r in by.items()
                  if (sp := spread(s.kernel.get("db_questions_per_request") for s in common(r)))}
    rel = ladder.over_ladder(lad)
    regimes = [Regime("Database on loopback (answers in µs)", f"app CPU per request ÷ {ladder.reference(lad)}'s, over "
                      "the ladder's rates", rel, higher_is_better=False, digits=2, kind=CPU)] if rel else \
        [Regime("Database on loopback (answers in µs)", f"app CPU per request at {num(rate)} req/s (records without a "
                "ladder)", common_cpu(by), "µs", higher_is_better=False, kind=CPU)] if common_cpu(by) else []
    return Section("Baseline: loopback database", rs.scenario, body, appendix=appendix(by), decisions=decisions,
                   verdict=verdict, warnings=rs.warnings, regimes=regimes, answer=ladder.answer(lad, statements))


def apart_note(rs: RunSet) -> list[str]:
    """Which ports' MSTs the ranking does not compare: those measured in runs that read different machine states."""
    labels = list(rs.by_label)
    pairs = [f"{a} and {b}" for i, a in enumerate(labels) for b in labels[i + 1:] if not rs.same_state(a, b)]
    return ["", f"Not compared: {len(pairs)} pairs of ports measured in runs whose calibrations differ (the warning "
            "above): rates and µs from two machine states are not one table's; the ladder's ratios are, each to the "
            "reference in its own run."] if pairs else []


def common_cpu(by: dict[str, list[dict]]) -> dict[str, spans.Spread]:
    """App CPU per request at the common rate, per port with two or more passed common steps."""
    decided = {n: spread(s.app_cpu_us_per_request for s in common(r)) for n, r in by.items()}
    return {n: c for n, c in decided.items() if c and c.n >= 2}


def common_decision(by: dict[str, list[dict]], rate) -> Decision:
    """The loopback row from the common step alone (records without a ladder)."""
    decided = common_cpu(by)
    return Decision("CPU-bound: database on loopback, answers in µs",
                    f"app CPU per request at {num(rate)} req/s, lower first (≈: ranges overlap)",
                    table.order(decided, higher_is_better=False) if decided
                    else "not determined: no port passed two common steps (see the baseline table)", "defaults")


def ladder_decision(by: dict[str, list[dict]]) -> Decision | None:
    """The loopback row: app CPU per request relative to the reference port over the ladder's held rungs."""
    rel, rungs = ladder.over_ladder(by), ladder.held(by)
    firm = {n: s for n, s in rel.items() if not s.partial}
    if len(firm) < 2 or not rungs:
        return None
    return Decision("Database on loopback (answers in µs): CPU decides",
                    f"CPU per request vs {ladder.reference(by)}'s at {num(rungs[0])}–{num(rungs[-1])} req/s, lower first",
                    table.order(ladder.named(firm), higher_is_better=False), "defaults")


def at_rates(records: list[dict]) -> list[tuple[Step, list[Step]]]:
    """Per run with a passed common step and a confirmed MST: that step and the steps that passed at the MST."""
    pairs = [(common([r]), at_mst(raw_steps(r), m))
             for r in records if (m := mst_of(r)) and m.confirmed]
    return [(ok[0], list(map(Step.from_json, at))) for ok, at in pairs if ok and at]


def cost_fall(records: list[dict]) -> tuple[spans.Spread, spans.Spread, spans.Spread] | None:
    """How far the total CPU per request fell from the common rate to the MST (in %, per run), and the app's
    voluntary context switches per request at each (their medians over the same runs). None: no such run."""
    pairs = at_rates(records)
    falls = spread((round(100 * (1 - statistics.median(map(total_cpu, at)) / total_cpu(c)))
                    for c, at in pairs if total_cpu(c)), of=len(records))
    vol = lambda ss: statistics.median(s.kernel.get("app_ctx_voluntary_per_request") or 0 for s in ss)  # noqa: E731
    return falls and (falls, spread(vol([c]) for c, _ in pairs), spread(vol(at) for _, at in pairs))


def cost_fall_note(by: dict[str, list[dict]], rate) -> tuple[list[str], str | None]:
    """The body's line per port and the verdict's sentence: CPU per request at the MST against the common rate (why
    the MST from CPU, taken at the common rate, can lie below the measured MST)."""
    falls = {n: f for n, r in by.items() if (f := cost_fall(r))}
    if not falls:
        return [], None
    pct = {n: f for n, (f, _, _) in falls.items()}
    line = (f"- At the MST against {num(rate)} req/s (the runs with a confirmed MST): total CPU per request (app + "
            "database + generator) lower, in %, by " + ", ".join(f"{n} {span(p)}" for n, p in pct.items())
            + "; the app's voluntary context switches per request " + ", ".join(
                f"{n} {num(c.median, 2)} → {num(m.median, 2)}" for n, (_, c, m) in falls.items()) + ".")
    if min(p.median for p in pct.values()) <= 0:         # the sentence below speaks of a fall at every port
        return [line], None
    fewer = [n for n, (_, c, m) in falls.items() if m.median < c.median]
    medians = {n: spread([p.median]) for n, p in pct.items()}
    sentence = (f"Total CPU per request falls as the rate rises: at the MST it was {table.extremes(medians, '%')} "
                f"lower than at {num(rate)} req/s (medians of the runs with a confirmed MST)"
                + (", with fewer voluntary context switches per request in the app for "
                   + (f"all {len(fewer)} ports" if len(fewer) == len(falls) else ", ".join(fewer))
                   + " (each wake-up serves more requests)" if fewer else "")
                + ": the MST from CPU, taken at that rate, can lie below the measured MST.")
    return [line], sentence


def predicted_msts(by: dict[str, list[dict]], cores: int | None) -> dict[str, spans.Spread]:
    """The MST each passed common step predicts: the cores ÷ app + database + generator CPU per request."""
    if not cores:
        return {}
    out = {n: spread((cores * 1e6 / total for s in common(records) if (total := total_cpu(s))),
                     of=len(steps(records, "common")))
           for n, records in by.items()}
    return {n: s for n, s in out.items() if s}


def _switches(kernels: list[dict], prefix: str, at) -> str:
    vol, inv = ([k.get(f"{prefix}_ctx_{kind}_per_request") for k in kernels] for kind in ("voluntary", "involuntary"))
    if all(v is None for v in vol):
        return "–"
    return f"{at(vol, fmt=TWO)} + {at(inv, fmt=TWO)}"


def closed_table(by: dict[str, list[dict]]) -> list[str]:
    rows = []
    for name, records in by.items():
        by_conn: dict[int, list[Step]] = {}
        for step in (Step.from_json(raw) for r in records for raw in (r["cells"][0].get("closed", []) if r.get("cells") else [])):
            by_conn.setdefault(step.connections, []).append(step)
        rows += [[name, conn, cell(c.achieved_rps for c in cs),
                  *(ms(statistics.median(c.latency_ms[k] for c in cs)) for k in ("p50", "p99", "max")),
                  sum(c.error_count for c in cs), cell((c.app_cpu_cores for c in cs), "{:.2f}".format)]
                 for conn, cs in sorted(by_conn.items())]
    if not rows:
        return []
    return ["Closed loop (the seed article's replication: fixed connections, as fast as answers come; latency as "
            "wrk reports it, not corrected for coordinated omission):", "",
            *table.markdown(["port", "connections", "req/s", "p50", "p99", "max", "errors", "app cores"], rows)]


def appendix(by: dict[str, list[dict]]) -> list[str]:
    return table.per_record(
        "Baseline: every step", "Per port and iteration, in the order run. Latency in ms from each request's intended "
        "send time (coordinated-omission corrected); `lag p99` is the generator's own send lateness.", "baseline", by,
        lambda r: f"warm-up {warmup_text(r.get('warmup'))}; MST {m.text() if (m := mst_of(r)) else '–'}.",
        lambda r: table.step_table(steps_of(r), ("db us",)))


# --- the same baseline through Compose ------------------------------------------------------------------------

def render_compose(containers: RunSet, host: RunSet | None) -> Section | None:
    """BENCH_ENV=compose baseline runs beside the host's baseline for the same ports: what the containers cost."""
    if not containers:
        return None
    host_by = host.by_label if host else {}
    info = containers.environment.get("compose") or {}
    rate = containers.plan.get("common_rate")
    body = [text("baseline-compose-method").format(
        ports=",".join(containers.by_label), runs=", ".join(containers.run_ids), iterations=containers.iterations,
        compose=info.get("compose_version", "?"), engine=info.get("engine_version", "?"),
        files=" + ".join(info.get("compose_files", [])), host=", ".join(host.run_ids) if host else "none",
        rate=num(rate)), ""]
    sides = {name: {where: recs for where, recs in (("host", host_by.get(name, [])), ("Compose", records)) if recs}
             for name, records in containers.by_label.items()}
    rows, verdict, lines = [], [], []
    for name, by_where in sides.items():
        mst = {where: table.mst_spread(map(mst_of, recs)) for where, recs in by_where.items()}
        # CPU µs per request at the common rate over the iterations (from the step's flat JSON, where docker-proxy's
        # is an extra field)
        cpu = {where: {part: common_spread((s.to_json().get(f"{part}_cpu_us_per_request") for s in common(recs)), recs)
                       for part in ("app", "db", "generator", "docker_proxy")} for where, recs in by_where.items()}
        rows += [[name, where, *map(_cells(recs).get, COMPOSE_COLUMNS)] for where, recs in by_where.items()]
        inside, outside = mst.get("Compose"), mst.get("host")
        if inside and outside:
            order = spans.compare(inside, outside)
            said = {">": "above", "<": "below", "=": "level with (the ranges overlap)",
                    "?": "not comparable (a bound or a partial figure) with"}[order]
            ratio = spans.ratio(inside, outside)
            sentence = (f"Through Compose {name}'s MST is {span(inside)} req/s, {said} its {span(outside)} on the host"
                        + (f" ({ratio:.2f}x)" if ratio and order in "<>" else ""))
            app_in, app_out, proxy = cpu["Compose"]["app"], cpu["host"]["app"], cpu["Compose"]["docker_proxy"]
            if app_in and app_out and proxy:
                sentence += (f"; at {num(rate)} req/s its own CPU per request was {span(app_in)} µs there against "
                             f"{span(app_out)} µs on the host, and docker-proxy added {span(proxy)} µs per request")
            verdict.append(sentence + ".")
        if line := _cost_line(name, cpu, mst):
            lines.append(line)
    body += table.markdown(["port", "<where", *COMPOSE_COLUMNS], rows, text_columns=2)
    body += common_note({f"{name} ({where})": recs for name, by_where in sides.items()
                         for where, recs in by_where.items()})
    cpus = containers.settings("cpus")
    body += ["", f"The containers get the host's CPU sets (compose.yaml's `cpuset` from bench.toml [cpus]: app "
                 f"{cpus.get('app', '?')}, database {cpus.get('db', '?')}; the generator {cpus.get('generator', '?')} "
                 "on the host), so the cores are the same; what the path through Compose adds is per request:", "",
             *lines, ""]
    return Section("Deployment: the same ports through Compose", "deployment", body, verdict=verdict,
                   warnings=containers.warnings)


def _cost_line(name: str, cpu: dict, mst: dict) -> str | None:
    """Why the MST moves: on shared cores the rate goes as the inverse of all the CPU spent per request."""
    totals = {where: sum(p.median for p in parts.values() if p is not None)
              for where, parts in cpu.items() if all(parts[k] is not None for k in ("app", "db", "generator"))}
    if len(totals) < 2:
        return None
    moved = spans.ratio(mst.get("Compose"), mst.get("host"))
    runs = [f"{'on the host' if where == 'host' else 'through Compose'} from {p.n} of {p.of} runs"
            for where in totals if (p := next((p for p in cpu[where].values() if p is not None and p.partial), None))]
    return (f"- {name}: app + database + generator + docker-proxy CPU per request {num(totals['host'])} µs on the "
            f"host, {num(totals['Compose'])} µs through Compose (medians{''.join('; ' + r for r in runs)}), so the "
            f"same cores allow {totals['host'] / totals['Compose']:.2f}x the host's rate; the MST moved "
            + (f"{moved:.2f}x" if moved else "by a ratio that cannot be given (a bound is involved)") + ".")


# --- beside the baseline: its variant ports, and the arrival process, in a run set of their own ----------------

# a cell's phases, in the text
PHASE_WORDS = {"ladder": "ladder", "common": "common step", "search": "search", "closed": "closed loop"}
VARIANT_COLUMNS = [COLUMNS[0], "p99 (ms)", "app µs/req", "DB µs/req", "DB stmts/req", "RSS (MiB)", "warm-up (s)",
                   "startup (s)", "idle RSS (MiB)"]


# a variants section's words: its title, its anchor (and its chart's name), what its chart sets side by side
VARIANTS = ("Spring MVC without JPA: the ORM's share", "baseline-variants", "with and without the ORM")
HIKARI = ("HikariCP 7.1.0 against Boot's managed 7.0.2", "baseline-hikari", "on HikariCP 7.0.2 and 7.1.0")
VARIANT_SETS = (VARIANTS, HIKARI)


def render_variants(rs: RunSet, chart_dir: Path, words: tuple[str, str, str] = VARIANTS) -> Section | None:
    """Each variant port (ports.toml variant_of) measured with the port it repeats and the reference, in one run
    set: the share of the part of the stack the variant changes, as ratios within that run. `words`: the section's
    title, its anchor (and its chart's name), and what the chart sets side by side."""
    title, anchor, sides = words
    lad = ladder.main(rs.by_label) if rs else {}
    if not (duo := ladder.variant_pairs(lad)):
        return None
    rate, rungs = rs.plan.get("common_rate"), ladder.held(lad)
    where = f"{num(rungs[0])}–{num(rungs[-1])} req/s" if rungs else "no rate"
    phases = ", ".join(PHASE_WORDS.get(p, p) for p in rs.plan.get("cell_phases", ["ladder", "common", "search"]))
    body = [f"Runs {', '.join(rs.run_ids)}: {', '.join(rs.by_label)}, {rs.iterations} iterations, each JVM the "
            f"baseline's (warm-up, {phases}), so every ratio below is between JVMs of one run on one "
            "machine state. " + " ".join(f"{a} is {b} with {port_facts.PORTS[a].stack} in its place." for a, b in duo
                                         if a in port_facts.PORTS) + "", "",
            *table.markdown(["port", *VARIANT_COLUMNS], [[name, *map(_cells(records).get, VARIANT_COLUMNS)]
                                                         for name, records in rs.by_label.items()]),
            f"The app's CPU per request ÷ {ladder.reference(lad)}'s at each rung:", "", *ladder.cpu_table(lad, "app"),
            "App CPU per request and p99 at each rung:", "", *ladder.absolute_table(lad)]
    body += charts.link(f"app CPU per request against the offered rate, {sides}",
                        ladder.cpu_chart(chart_dir / f"{anchor}-cpu-vs-rate.png", lad))
    statements = {n: sp for n, r in lad.items() if (sp := spread(s.kernel.get("db_questions_per_request")
                                                                  for s in common(r)))}
    verdict, answer = [], []
    for (a, b), s in duo.items():
        stack = port_facts.PORTS[a].stack if a in port_facts.PORTS else "its own stack"
        verdict.append(f"{a} ({stack}) ÷ {b}: {span(s, TWO)} app CPU per request over the ladder ({where}): "
                       f"{a} costs {ladder.relation(s)} {b}"
                       + (f", both sending {num(statements[a].median, 1)} database statements per request"
                          if a in statements and b in statements
                          and round(statements[a].median, 1) == round(statements[b].median, 1) else "") + ".")
        said = port_facts.PORTS[a].variant_answer if a in port_facts.PORTS else None
        answer.append((said or f"with {stack} it costs {{relation}} without").format(relation=ladder.relation(s))
                      + f" ({a} ÷ {b}: {span(s, TWO)})")
    if model := ladder.pairs(lad):
        verdict.append("In the same run the model pairs: " + ", ".join(
            f"{a} ÷ {b} {span(s, TWO)}" for (a, b), s in model.items()) + " (app CPU per request over the ladder).")
    return Section(title, anchor, body, verdict=verdict, warnings=list(rs.warnings), answer=answer)


def render_arrivals(rs: RunSet) -> Section | None:
    """The ladder under batched even arrivals and under Poisson ones in the same JVMs: how much of CPU per request,
    of latency and of the relative figure that decides the loopback row depends on the arrival process."""
    by = rs.by_label if rs else {}
    if len(procs := ladder.processes(by)) < 2:
        return None
    main, other = procs[0], procs[1]
    views = {p: {n: ladder.under(records, p) for n, records in by.items()} for p in (main, other)}
    rel = {p: ladder.over_ladder(v) for p, v in views.items()}
    ref = ladder.reference(views[main])
    rows, apart, tails = [], [], {}
    for name, records in by.items():
        cpu, cpu_run = ladder.paired_arrivals(records, main, other, ladder.app_cpu)
        p99, p99_run = ladder.paired_arrivals(records, main, other, lambda s: s.p99)
        if p99_run:
            tails[name] = p99_run
        a, b = rel[main].get(name), rel[other].get(name)
        if name != ref and a and b and (spans.apart(a, b) or spans.apart(b, a)):
            apart.append(name)
        rows.append([name, span(cpu_run, TWO), span(p99_run, TWO),
                     *(f"{span(cpu.get(x), TWO)} / {span(p99.get(x), TWO)}" for x in ladder.rates(views[main])),
                     span(a, TWO) if name != ref else "1", span(b, TWO) if name != ref else "1"])
    n = max((len(records) for records in by.values()), default=0)
    body = [f"Runs {', '.join(rs.run_ids)}: in each JVM the ladder twice, once with {main} arrivals "
            f"({ladder.SPACING[main]}, as every other step) and once with {other} arrivals ({ladder.SPACING[other]}), "
            "the order reversed every other iteration. Ratios are the second ÷ the first in the same JVM (the JIT, "
            f"the heap and the machine's moment shared); per port the median (min–max) over its {n} JVMs. A Poisson step is judged against the rate its "
            "schedule offered (its count is random: ±1 % at 10,000 requests).", "",
            *table.markdown(["port", f"app CPU/req, {other} ÷ {main}, over the ladder", f"p99, {other} ÷ {main}",
                             *(f"{num(x)} req/s: CPU / p99" for x in ladder.rates(views[main])),
                             f"CPU/req ÷ {ref}'s ({main})", f"CPU/req ÷ {ref}'s ({other})"], rows)]
    compared = [n for n in by if n != ref and rel[main].get(n) and rel[other].get(n)]
    verdict = [f"With {other} arrivals in place of {main} ones, the figure that decides the loopback row (app CPU "
               f"per request ÷ {ref}'s over the ladder) "
               + (f"moved beyond its spread for {', '.join(apart)}" if apart
                  else f"stayed within its spread for {len(compared)} of {len(compared)} ports")
               + "; " + "; ".join(f"{name} {span(rel[main][name], TWO)} against {span(rel[other][name], TWO)}"
                                   for name in compared) + "."]
    if tails:
        verdict.append(f"p99 under {other} arrivals ÷ under {main} ones in the same JVM, the median over the ladder's "
                       "rungs: " + ", ".join(f"{n} {span(t, TWO)}" for n, t in tails.items()) + ".")
    return Section(f"Arrival process: {main} against {other}", "baseline-arrivals", body, verdict=verdict,
                   warnings=list(rs.warnings))


# --- beside the baseline: the same ports with the app on a core of its own --------------------------------------

def _wakeups(calibration: dict) -> str:
    """The run's own wake-up costs, across CPUs and on one, from its calibration (nothing where it has none)."""
    cross, same = (calibration.get(k, {}).get("median") for k in ("wakeup_cross_cpu_us", "wakeup_same_cpu_us"))
    return (f": on this machine a wake-up across CPUs costs {num(cross, 1)} µs a round trip against {num(same, 1)} µs "
            f"on one (its calibration)" if cross and same else "")


def render_cores(rs: RunSet, shared: RunSet | None) -> Section | None:
    """The ladder with the roles on separate cores (the app alone on one, the database and the generator on the
    other) beside the baseline's shared cores: how much of the order by relative CPU per request survives when the
    app does not compete with the database and the generator for its core."""
    apart_lad = ladder.main(rs.by_label) if rs else {}
    if not (rel := ladder.over_ladder(apart_lad)):
        return None
    shared_lad = ladder.main(shared.by_label) if shared else {}
    rel_shared, ref = ladder.over_ladder(shared_lad), ladder.reference(apart_lad)
    cpus = rs.settings("cpus")
    rungs = ladder.held(apart_lad)
    where = f"{num(rungs[0])}–{num(rungs[-1])} req/s" if rungs else "no rate"
    top = {n: max((s.target_rps for r in records for s in steps_of(r, ladder.PHASE) if s.passed), default=None)
           for n, records in apart_lad.items()}
    rows = [[n, span(rel.get(n), TWO) if n != ref else "1", span(rel_shared.get(n), TWO) if n != ref else "1",
             num(top.get(n)), at_common((s.p99 for s in common(records)), records, ms)]
            for n, records in apart_lad.items()]
    body = [f"Runs {', '.join(rs.run_ids)}: {', '.join(rs.by_label)}, {rs.iterations} iterations, with the app alone on "
            f"CPU {cpus.get('app', '?')}, the database on CPU {cpus.get('db', '?')} and the generator on CPU "
            f"{cpus.get('generator', '?')} (bench.toml "
            "[cpus], `BENCH_CPUS_APP`, `BENCH_CPUS_DB`, `BENCH_CPUS_GENERATOR`); each JVM the baseline's warm-up, then "
            "the ladder and the common step (no search: the loopback row is decided by the ladder). Every request now "
            "crosses CPUs twice (generator to app, app to database and back)" + _wakeups(rs.calibration or {})
            + ", which the latencies and the app's CPU include. Each "
            f"column is relative to {ref} in its own runs (the shared one: the baseline's, "
            f"{', '.join(shared.run_ids) if shared else 'none'}): the figure that replicated across machine states, "
            "so the two arrangements are compared by their orders, never by absolute figures.", "",
            *table.markdown(["port", f"app CPU/req ÷ {ref}'s, separate cores", f"the same, shared cores (the baseline)",
                             "highest rung held (req/s)", "p99 at the common rate (ms)"], rows),
            f"The app's CPU per request ÷ {ref}'s at each rung, separate cores:", "",
            *ladder.cpu_table(apart_lad, "app"),
            "App CPU per request and p99 at each rung, separate cores:", "", *ladder.absolute_table(apart_lad)]
    firm = {n: s for n, s in rel.items() if not s.partial}
    verdict = [f"With the app on a core of its own, app CPU per request relative to {ref} over the ladder ({where}): "
               + ", ".join(f"{n} {span(s, TWO)}" for n, s in rel.items() if n != ref)
               + f"; lower first: {table.order(ladder.named(firm), higher_is_better=False)}."]
    both = [n for n in firm if n in rel_shared and not rel_shared[n].partial]
    kept, turned, moved = [], [], []          # each pair of ports: the same order (or tie), reversed, tie <-> order
    for i, a in enumerate(both):
        for b in both[i + 1:]:
            now, before = spans.compare(firm[a], firm[b], False), spans.compare(rel_shared[a], rel_shared[b], False)
            (kept if now == before else turned if {now, before} == {"<", ">"} else moved).append(f"{a} and {b}")
    counted, transfer = len(kept) + len(turned) + len(moved), []
    if counted:
        verbs = lambda n, verb: f"{n} {verb}{'s' if n == 1 else ''}"     # noqa: E731
        verdict.append(f"Of the {counted} pairs of ports, {verbs(len(kept), 'stand')} as on the shared cores (the "
                       "same order, or a tie both times)" + (f", {verbs(len(turned), 'reverse')} ({', '.join(turned)})" if turned
                                  else ", none reverses")
                       + (f", and {verbs(len(moved), 'move')} between a tie and an order ({', '.join(moved)})"
                          if moved else "") + ".")
        transfer.append(f"with the app alone on a core, {len(kept)} of {counted} pairs of ports keep their order by "
                        "relative CPU per request from the shared cores"
                        + (f" ({', '.join(turned)} reverse)" if turned else ""))
    if duo := ladder.pairs(apart_lad):
        before = ladder.pairs(shared_lad)
        verdict.append("The model pairs on separate cores (shared in brackets): " + ", ".join(
            f"{a} ÷ {b} {span(s, TWO)} ({span(before.get((a, b)), TWO)})" for (a, b), s in duo.items()) + ".")
    return Section("The app on a core of its own", "baseline-cores", body, verdict=verdict, warnings=list(rs.warnings),
                   transfer=transfer)

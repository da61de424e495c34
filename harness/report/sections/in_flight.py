"""in-flight's part of RESULTS.md: per port and requests in flight, whether the rule held and what each request in
flight cost. The decision: a bound decides (the most requests in flight every run held the rule at), then app CPU per
request among the ports that held the most."""
from __future__ import annotations

from ... import port_facts
from ...method import runset, spans
from ...method.runset import RunSet
from ...method.spans import cell as span_cell, num
from .. import table
from ..section import BOUND, Decision, Regime, Section, text


COLUMNS = ["in flight", "rate (req/s)", "measured in flight", "rule held", "p99 − latency (ms)", "app CPU (µs/req)",
           "RSS KiB / in flight", "heap KiB / in flight", "threads"]


def _common(c: dict) -> dict:
    """A cell's common step ({} where it has none)."""
    return next((s for s in c.get("steps", []) if s.get("phase") == "common"), {})


def measured_in_flight(c: dict) -> float | None:
    """Requests in flight in a cell's common step by Little's law: the achieved rate × the mean latency (the queued
    ones included, where the port fell behind)."""
    step = _common(c)
    mean, rate = (step.get("latency_ms") or {}).get("mean"), step.get("achieved_rps")
    return rate * mean / 1000 if mean and rate else None


def _memory(c: dict) -> tuple[float | None, float | None]:
    """The common step's peak RSS and the used heap after it, in MiB."""
    return _common(c).get("app_rss_mb_peak"), c.get("heap_used_mb")


def slopes(records: list[dict]) -> tuple[spans.Spread | None, spans.Spread | None]:
    """Per run, the RSS and used heap each further request in flight added (KiB), between the fewest and the most
    requests in flight it completed, by the measured counts: what dividing by the count hides (the JVM's fixed
    footprint spread over it), the marginal cost. Over the runs: median (min–max)."""
    rss, heap = [], []
    for r in records:
        cells = sorted((c for c in r.get("cells") or [] if c.get("status") == "complete"),
                       key=lambda c: c["coords"]["in_flight"])
        if len(cells) < 2:
            continue
        (n_lo, (rss_lo, heap_lo)), (n_hi, (rss_hi, heap_hi)) = ((measured_in_flight(c), _memory(c))
                                                                for c in (cells[0], cells[-1]))
        if not n_lo or not n_hi or n_hi <= n_lo:
            continue
        if rss_lo is not None and rss_hi is not None:
            rss.append((rss_hi - rss_lo) * 1024 / (n_hi - n_lo))
        if heap_lo is not None and heap_hi is not None:
            heap.append((heap_hi - heap_lo) * 1024 / (n_hi - n_lo))
    return spans.spread(rss), spans.spread(heap)


def held_everywhere(held_at: dict[int, tuple[int, int]]) -> int:
    """The most requests in flight at which every run held the rule (0: none)."""
    return max((n for n, (held, runs) in held_at.items() if held == runs), default=0)


def died_at(records: list[dict]) -> list[int]:
    """Per run whose JVM died (out of memory, say): the requests in flight of the step it died in."""
    return [min((c["coords"]["in_flight"] for c in r.get("cells") or [] if c.get("status") != "complete"), default=0)
            for r in records if r.get("status") == "died"]


CHEAPER = {">": "lower", "<": "higher", "=": "the ranges overlap", "?": "not compared"}


def death_reason(records: list[dict]) -> str | None:
    """The reason the runs' JVMs died, where they died of one (the app's last log line), else None."""
    reasons = {r.get("died") for r in records if r.get("died")}
    return next(iter(reasons)) if len(reasons) == 1 else None


def remedy_sentence(label: str, held: dict[int, tuple[int, int]], defaults: dict[int, tuple[int, int]],
                    died: dict[str, list[int]], cpu: dict[int, spans.Spread] | None = None,
                    cpu_defaults: dict[int, spans.Spread] | None = None, reason: str | None = None) -> str:
    """A remedy run beside its port's defaults: the most requests in flight each held in every run, where it died,
    and app CPU per request at the most both held (the remedy is no rank of its own: the decision is the
    defaults')."""
    port = runset.port_of(label)

    def held_of(label_: str, by_n: dict) -> str:
        n = held_everywhere(by_n)
        return (f"held {num(n)}" if n else "held none") + (f", died at {num(min(died[label_]))} in "
                                                           f"{len(died[label_])} run(s)" if died.get(label_) else "")
    both = min(held_everywhere(held), held_everywhere(defaults))
    a, b = (cpu or {}).get(both), (cpu_defaults or {}).get(both)
    cost = (f" App CPU per request at {num(both)} in flight: {spans.span(a)} µs against {spans.span(b)} at the "
            f"defaults ({CHEAPER[spans.compare(a, b, higher_is_better=False)]})." if both and a and b else "")
    return (f"- {label} (a remedy row, not ranked): {held_of(label, held)}{f' ({reason})' if reason else ''}; "
            f"{port} at its defaults: {held_of(port, defaults)}.{cost}")


def choice(held_at: dict[str, dict[int, tuple[int, int]]], cpu_at_top: dict[str, spans.Spread],
           died: dict[str, list[int]] | None = None) -> str:
    """The decision: a bound decides (the most requests in flight held in every run), and among the ports that held
    the most, app CPU per request there (pairwise by whole ranges, as everywhere CPU decides). A JVM that died is
    named with where it died: the fewest requests in flight it died at."""
    died = died or {}
    top = max((n for by_n in held_at.values() for n in by_n), default=0)
    best = {label: held_everywhere(by_n) for label, by_n in held_at.items()}
    held_top = {label: cpu_at_top[label] for label, n in best.items() if n == top and label in cpu_at_top}
    parts = [table.order(held_top, higher_is_better=False) + f" (held {num(top)})"] if held_top else []
    rest = sorted({n for label, n in best.items() if label not in held_top}, reverse=True)
    for n in rest:
        group = [label for label, m in best.items() if m == n and label not in held_top]
        parts.append(" ≈ ".join(group) + (f" (held {num(n)}" if n else " (held none")
                     + "".join(f"; {label} died at {num(min(died[label]))}" if len(group) > 1 else
                               f"; died at {num(min(died[label]))}" for label in group if died.get(label)) + ")")
    return " > ".join(parts)


def _died(rs: RunSet) -> dict[str, list[int]]:
    """Per port whose JVM died in some run: the requests in flight of the step it died in, per such run."""
    return {label: at for label, records in rs.by_label.items() if (at := died_at(records))}


def _rows(rs: RunSet, latency) -> tuple[list[list], dict, dict]:
    """The table's rows (per port and requests in flight), and per port and count the runs that held the rule
    (held, runs) and the app's CPU per request."""
    rows, held_at, cpu_at = [], {}, {}
    for label, records in rs.by_label.items():
        cells = [c for r in records for c in r.get("cells") or [] if c.get("status") == "complete"]
        for n in sorted({c["coords"]["in_flight"] for c in cells}):
            at = [c for c in cells if c["coords"]["in_flight"] == n]
            held = sum(1 for c in at if c.get("held"))
            held_at.setdefault(label, {})[n] = (held, len(at))
            cpu = [_common(c).get("app_cpu_us_per_request") for c in at]
            cpu_at.setdefault(label, {})[n] = spans.spread(cpu)
            rows.append([label, num(n), num(n * 1000 / latency) if latency else "–",
                         span_cell(measured_in_flight(c) for c in at), f"{held} of {len(at)}",
                         span_cell(c.get("p99_above_latency_ms") for c in at), span_cell(cpu),
                         span_cell(c.get("rss_kib_per_in_flight") for c in at),
                         span_cell(c.get("heap_kib_per_in_flight") for c in at),
                         span_cell(c.get("threads") for c in at)])
    return rows, held_at, cpu_at


def render(rs: RunSet, chart_dir) -> Section | None:
    if not rs:
        return None
    plan = rs.plan
    latency = plan.get("latency_ms")
    rows, held_at, cpu_at = _rows(rs, latency)
    died = _died(rs)
    # the settings each JVM's client bound was sized by, as its record says
    bounds = ", ".join(dict.fromkeys(f"{runset.port_of(label)} `{k}`" for label, records in rs.by_label.items()
                                     for r in records for k in r.get("client_bound") or {}))
    body = [text("in_flight-method").format(calls=plan.get("calls"), latency=num(latency), runs=", ".join(rs.run_ids),
                                            iterations=rs.iterations, bounds=bounds), "",
            *table.markdown(["port", *COLUMNS], rows)]
    marginal = [f"{label} {spans.span(a)} KiB of RSS, {spans.span(b)} KiB of used heap" for label, records
                in rs.by_label.items() for a, b in [slopes(records)] if a or b]
    if marginal:
        body += ["", "What each further request in flight added, between the fewest and the most requests in flight "
                     "a run completed (by the measured counts; the columns above divide the whole JVM by the nominal "
                     "count, its fixed footprint included): " + "; ".join(marginal) + "."]
    # the decision ranks the ports at their defaults; a remedy run (a label with framework settings) is a sentence
    defaults, remedied = runset.split_remedies(held_at)
    top = max((n for by_n in defaults.values() for n in by_n), default=None)
    decisions = []
    if top:
        cpu_at_top = {label: by_n[top] for label, by_n in cpu_at.items() if by_n.get(top) and label in defaults}
        ranked = choice(defaults, cpu_at_top, died)
        body += ["", f"- The most requests in flight each port held the rule at in every run, and among those that held "
                     f"{num(top)}, app CPU per request there (lower first; `>` only where the ranges do not overlap): "
                     f"{ranked}."]
        for label, at in died.items():     # each port's own reason, where its runs died of one (a remedy's: below)
            if label not in defaults:
                continue
            reason = death_reason(rs.by_label[label])
            body.append(f"- {label}: the JVM died in {len(at)} of {len(rs.by_label[label])} runs, at "
                        f"{', '.join(num(n) for n in sorted(set(at)))} in flight" + (f" ({reason})" if reason else "")
                        + ".")
        body += [remedy_sentence(label, by_n, held_at.get(runset.port_of(label), {}), died, cpu_at.get(label),
                                 cpu_at.get(runset.port_of(label)), death_reason(rs.by_label[label]))
                 for label, by_n in remedied.items()]
        decisions = [Decision(f"Thousands of requests waiting: {num(top)} in flight on a {num(latency)}-ms downstream",
                              "the most requests in flight held (a bound), then app CPU per request", ranked,
                              "; ".join(["each client's bound sized above the requests in flight",
                                         *(f"{label}: the heap (its JVM ran out of it)" for label in died
                                           if label in defaults and any("Java heap space" in (r.get("died") or "")
                                                                        for r in rs.by_label[label]))]))]
    regimes, answer = front_rows(rs, defaults, died, top, latency) if top else ([], [])
    return Section("Requests in flight: thousands waiting on a slow downstream", rs.scenario, body,
                   decisions=decisions, warnings=rs.warnings, regimes=regimes, answer=answer)


def most_held(record: dict) -> int:
    """The most requests in flight one run held the rule at (0: none)."""
    return max((c["coords"]["in_flight"] for c in record.get("cells") or []
                if c.get("status") == "complete" and c.get("held")), default=0)


def front_rows(rs: RunSet, defaults: dict, died: dict[str, list[int]], top: int, latency) \
        -> tuple[list[Regime], list[str]]:
    """The front page's row: per port at its defaults, the most requests in flight each run held; a bound this
    scenario left at its default where it lies below the count (Tomcat's request threads, a client pool with no
    setting) is named and not ranked."""
    figures = {label: s for label in defaults if (s := spans.spread(map(most_held, rs.by_label[label])))}
    bound = {}
    for label in figures:
        facts = port_facts.PORTS.get(label)
        sized = {k for r in rs.by_label[label] for k in r.get("client_bound") or {}}
        if facts and facts.request_threads and facts.request_threads < top:
            bound[label] = f"Tomcat's {facts.request_threads} request threads (not sized here)"
        elif facts and facts.downstream_pool and facts.downstream_pool < top and not sized:
            bound[label] = f"{port_facts.downstream_bound(label)} (no setting)"
    remarks = {label: f"died at {num(min(at))}" + (" (heap)" if any("heap" in (r.get("died") or "")
                                                                    for r in rs.by_label[label]) else "")
               for label, at in died.items() if label in figures}
    regime = Regime(f"{num(top)} requests waiting on a {num(latency)} ms downstream",
                    "the most requests in flight held under the rule, in every run", figures, "in flight",
                    bound=bound, remarks=remarks, setting="each client's connection bound above the count", kind=BOUND)
    free = {n: s for n, s in figures.items() if n not in bound}
    if not free:
        return [regime], []
    best = max(s.median for s in free.values())
    leaders = [n for n, s in free.items() if s.median == best]
    held = f"all {num(top)} in flight" if best == top else f"the most ({num(best)} of {num(top)} in flight)"
    sentence = (f"For thousands of requests waiting on a slow service, {' and '.join(leaders)} held {held}" + "".join(
                    f"; {n} {num(s.median)}" + (f", {remarks[n]}" if n in remarks else "")
                    for n, s in sorted(free.items(), key=lambda x: -x[1].median) if n not in leaders)
                + (f"; {', '.join(bound)} limited by bounds left at their defaults" if bound else "") + ".")
    return [regime], [sentence]


def render_variants(rs: RunSet) -> Section | None:
    """Each variant port (ports.toml variant_of) with the port it repeats, thousands of requests in flight, in one run
    set: whether the part of the stack it changes moves the most requests in flight held, the heap each further one
    adds, or the app's CPU per request."""
    by = rs.by_label if rs else {}
    if not (duo := port_facts.variant_pairs(by)):
        return None
    latency = rs.plan.get("latency_ms")
    rows, held_at, cpu_at = _rows(rs, latency)
    died = _died(rs)
    verdict = []
    for a, b in duo:
        held = {n: held_everywhere(held_at.get(n, {})) for n in (a, b)}
        (_, heap_a), (_, heap_b) = slopes(by[a]), slopes(by[b])
        both = min(held.values())
        ca, cb = cpu_at.get(a, {}).get(both), cpu_at.get(b, {}).get(both)
        said = [f"{n} held {num(held[n])} in flight in every run" if held[n] else f"{n} held none in every run"
                for n in (a, b)]
        said = [x + (f", its JVM died at {num(min(died[n]))} in {len(died[n])} run(s)" if died.get(n) else "")
                for x, n in zip(said, (a, b))]
        verdict.append(f"With {port_facts.PORTS[a].stack}, {said[0]}; {said[1]}"
                       + (f"; each further request in flight added {spans.span(heap_a)} KiB of used heap against "
                          f"{spans.span(heap_b)} ({spans.relation(heap_a, heap_b)})" if heap_a and heap_b else "")
                       + (f"; app CPU per request at {num(both)} in flight {spans.span(ca)} µs against "
                          f"{spans.span(cb)} ({CHEAPER[spans.compare(ca, cb, higher_is_better=False)]})"
                          if both and ca and cb else "") + ".")
    body = [text("in_flight-variants-method").format(runs=", ".join(rs.run_ids), iterations=rs.iterations,
                                                     latency=num(latency)), "",
            *table.markdown(["port", *COLUMNS], rows)]
    return Section("Requests in flight: HikariCP 7.1.0 against Boot's managed 7.0.2", "in-flight-hikari", body,
                   verdict=verdict, warnings=list(rs.warnings))

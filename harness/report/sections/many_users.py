"""many-users' part of RESULTS.md: per port and connection count the achieved rate, p50/p99, pass or fail and what
limited a failure (the server's connection limit, the CPU set, open files), the decision row, the verdict and the
servers' connection defaults. Expect Tomcat (spring-platform, spring-virtual) to fall short above its default limit
of 8,192 connections; Netty and Vert.x set none."""
from __future__ import annotations

import collections
import dataclasses
from pathlib import Path

from ... import port_facts
from ...method import caps
from ...method.many_users import listed
from ...method.record import Step, dig, steps_of, warmup_text, warmups_text
from ...method.rule import GENERATOR, Rule
from ...method.runset import RunSet, port_of, split_remedies
from ...method.spans import Spread, cell, ms, num, span, spread
from .. import charts, table
from ..section import BOUND, Decision, Regime, Section, text

def server_of(name: str) -> str | None:
    """Which HTTP server a port runs on (ports.toml; a label's overrides ignored)."""
    facts = port_facts.PORTS.get(port_of(name))
    return facts.server if facts else None


def server(label: str) -> port_facts.Server:
    """The defaults of the server a label's port runs on ("?" for a port of no known server)."""
    return port_facts.SERVERS.get(server_of(label), port_facts.Server("?", "?", "?", "?"))


def utilisation(step: Step, label: str, nofile: int | None, cpus: dict) -> dict[str, float | None]:
    """Each limit a count can reach, as a share of it: the server's connection limit, the CPU set the app runs on
    (with the roles pinned to the same CPUs: database, generator), the JVM's open files."""
    limit, fds = server(label).max_connections, step.extra.get("app_fds_peak")
    cores = len(caps.cpu_set(cpus.get("app")))
    busy = {"app": step.app_cpu_cores, "db": step.db_cpu_cores, "generator": step.generator_cpu_cores}
    shared = sum(v or 0 for role, v in busy.items() if cpus.get(role) == cpus.get("app"))
    return {"connection limit": step.connections / limit if limit else None,
            "CPU": round(shared / cores, 3) if cores and step.app_cpu_cores is not None else None,
            "open files": round(fds / nofile, 3) if fds and nofile else None}


def counts_of(records: list[dict]) -> list[int]:
    return sorted({n for r in records for c in r["cells"] if (n := c["coords"].get("connections"))})


@dataclasses.dataclass
class Outcome:
    """One port at one count over its iterations."""
    label: str
    steps: list[tuple[dict, Step]]

    def __post_init__(self):
        # judged: the steps that say something of the port (a generator that fell behind says nothing)
        self.judged = [s for _, s in self.steps if s.failure != GENERATOR]
        self.failed = [(r, s) for r, s in self.steps if s.failure not in (None, GENERATOR)]
        self.passed = bool(self.judged) and not self.failed

    def spread(self, value) -> Spread | None:
        return spread(value(s) for _, s in self.steps)

    def cell(self, value, fmt=num) -> str:
        return span(self.spread(value), fmt)

    def caps(self, cpus: dict) -> list[tuple[str, str]]:
        """(the limit named, its margins) per failed step."""
        return [(caps.classify(u), caps.explain(u))
                for u in (utilisation(s, self.label, dig(r, "app_nofile", "soft"), cpus) for r, s in self.failed)]

    def errors(self) -> str:
        kinds = sorted({k for _, s in self.steps for k, v in s.errors.items() if v})
        return "; ".join(f"{k} {self.cell(lambda s: s.errors.get(k, 0))}" for k in kinds) or "0"

    def result(self, cpus: dict) -> str:
        n, passes, generator = len(self.steps), len(self.judged) - len(self.failed), len(self.steps) - len(self.judged)
        if not self.judged:
            return f"no verdict: {GENERATOR} ({n}/{n})"
        if self.passed:
            return f"pass ({passes}/{n})"
        reasons = collections.Counter(str(s.failure) for _, s in self.failed)
        found = self.caps(cpus)
        return (f"**FAIL** ({passes}/{n} passed): " + ", ".join(f"{k} ×{v}" for k, v in reasons.items())
                + f"; limited by {' / '.join(sorted({name for name, _ in found}))} "
                + f"({'; '.join(dict.fromkeys(m for _, m in found))})"
                + (f"; {generator} step(s) with the {GENERATOR}" if generator else ""))


def outcomes(by: dict[str, list[dict]]) -> dict[str, dict[int, Outcome]]:
    return {label: {n: Outcome(label, [(r, s) for r in records for c in r["cells"] if c["coords"]["connections"] == n
                                       for s in steps_of(c)])
                    for n in counts_of(records)} for label, records in by.items()}


def _extra(key: str):
    """A value many-users adds to each step (in Step.extra)."""
    return lambda s: s.extra.get(key)


def warmed_up(records: list[dict], rate) -> str:
    """How the JVMs were warmed up: at the rate, or from it down where a failed window lowered it."""
    warmups = [w for r in records if (w := r.get("warmup")) and w.get("rate") is not None]
    lower = [w["rate"] for w in warmups if rate is not None and w["rate"] < rate]
    # today's warm-up (its record keeps the closed loop's rate) starts with a closed loop; the earlier one at the rate
    if any(w.get("closed_rps") is not None for w in warmups):
        how = ("warmed up until steady ([warmup]: a closed loop on the [load] connections, then windows at the higher "
               "of the rate and half what the closed loop served; a failed window lowers it)")
    else:
        how = ("warmed up on the [load] connections from the rate down (a failed window lowers it)" if lower else
               "warmed up at the rate on the [load] connections")
    return how + (f": {len(lower)} of {len(warmups)} warm-ups ended below the rate, at {cell(lower)} req/s"
                  if lower else "")


def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    cpus, rate, slo, plan = rs.settings("cpus"), rs.first("rate"), rs.first("slo_ms"), rs.first("plan") or {}
    counts = counts_of(rs.records)
    grid = outcomes(rs.by_label)
    rule = Rule.from_settings(rs.environment["settings"]).describe() if rs.settings("rule") else "?"
    body = [f"One fixed rate, **{num(rate)} req/s**, set by {rs.first('rate_basis', '?')}, spread over "
            f"{listed(counts)} keep-alive connections (openloop hands each due request to the connection idle "
            "longest, so every connection is used in turn). Per port and iteration a fresh JVM, "
            f"{warmed_up(rs.records, rate)}, then the counts in ascending order in that JVM, each held max("
            f"{num(plan.get('step_seconds'))} s, {num(plan.get('passes'))} × N / rate). Every count is judged by the "
            f"one rule with nothing added (loopback, so p99 ≤ {num(slo)} ms): {rule}. {rs.iterations} iteration(s) "
            f"per port (run {', '.join(rs.run_ids)}); cells are median (min–max) over the iterations. Latency from "
            "each request's intended send time: a request that waits for a connection, or for the server to accept "
            "one, is charged for it. RSS and threads are peaks during the count.", ""]
    if rs.environment.get("quick"):
        body += ["> **QUICK=1 smoke run: these numbers are not results.**", ""]
    rows = [[label, f"{n:,}", o.cell(lambda s: s.achieved_rps), o.cell(lambda s: s.latency_ms.get("p50"), ms),
             o.cell(lambda s: s.p99, ms), o.result(cpus), o.errors(), o.cell(_extra("connections_opened")),
             o.cell(_extra("app_connections_peak")), o.cell(_extra("accept_queue_peak")),
             o.cell(lambda s: s.app_rss_mb_peak), o.cell(lambda s: s.app_threads_peak),
             o.cell(lambda s: s.app_cpu_us_per_request)]
            for label, by_count in grid.items() for n, o in by_count.items()]
    body += table.markdown(["port", "connections", "achieved (req/s)", "p50 (ms)", "p99 (ms)", "<result",
                            "<errors by kind", "opened (generator)", "held (app, peak)", "accept queue (peak)",
                            "RSS peak (MiB)", "threads (peak)", "app µs/req"], rows)
    warm = [r["warmup"] for r in rs.records if dig(r, "warmup", "windows") is not None]
    if warm:
        body += [f"Warm-up until steady ([warmup]): {warmups_text(warm)} (a failed window lowers its rate).", ""]
    body += [text("many-users-caps"), ""]
    body += charts.link("p99 against the connection count, per port", charts.lines(
        chart_dir / "many-users-p99.png", "p99 at a fixed rate against keep-alive connections",
        "keep-alive connections", "p99 (ms, log)", _series(grid, lambda s: s.p99),
        hline=(slo, f"SLO p99 {slo:g} ms") if slo else None, logy=True, failed=_failed(grid, lambda s: s.p99)))
    body += charts.link("achieved rate against the connection count, per port", charts.lines(
        chart_dir / "many-users-rate.png", "achieved rate against keep-alive connections",
        "keep-alive connections", "achieved (req/s)", _series(grid, lambda s: s.achieved_rps),
        hline=(rate, f"target {rate:,.0f} req/s") if rate else None, failed=_failed(grid, lambda s: s.achieved_rps)))
    decisions, verdict = judge(grid, counts, rate, cpus)
    regimes, answer = front_rows(grid, counts, rate)
    return Section("Many concurrent users", rs.scenario, body, appendix=appendix(rs), decisions=decisions,
                   verdict=verdict, warnings=rs.warnings, regimes=regimes, answer=answer)


def front_rows(grid: dict[str, dict[int, Outcome]], counts: list[int], rate) -> tuple[list[Regime], list[str]]:
    """The front page's row: p99 at the most connections per port at its defaults; a port that failed above its
    server's connection limit is limited by it (a server's setting, not the model)."""
    if not counts:
        return [], []
    top = counts[-1]
    defaults, _ = split_remedies(grid)
    figures = {label: sp for label, by in defaults.items() if top in by and by[top].passed
               and (sp := by[top].spread(lambda s: s.p99))}
    notes, bound, limited = {}, {}, []
    for label, by in defaults.items():
        if top in by and not by[top].passed:
            limit = server(label).max_connections
            if limit and top > limit:
                notes[label] = (f"failed: above {server(label).name}'s limit of {limit:,} connections", 0.0)
                limited.append(label)
            else:
                notes[label] = ("failed", 0.0)
    servers = sorted({server(label).name for label in limited})
    settings = sorted({f"`{server(label).max_connections_setting}`" for label in limited
                       if server(label).max_connections_setting})
    regime = Regime(f"{top:,} keep-alive connections at {num(rate)} req/s", "the server's connection limit, then p99",
                    figures, "ms", higher_is_better=False, digits=2, notes=notes, bound=bound,
                    setting=(f"none run; the limit's setting: {', '.join(settings)}" if settings else "defaults"), kind=BOUND)
    passed = [label for label in figures]
    answer = []
    if limited and passed:
        answer.append(f"With {top:,} keep-alive connections, {' and '.join(servers)} stops accepting at its "
                      f"connection limit whatever the threads ({', '.join(limited)}), while {', '.join(passed)} "
                      "held them all.")
    return [regime], answer


def _series(grid: dict[str, dict[int, Outcome]], value) -> dict[str, list]:
    """The counts each port passed in every run, as a line; the rest are _failed's."""
    return {label: [(n, o.spread(value)) for n, o in by_count.items() if o.passed] for label, by_count in grid.items()}


def _failed(grid: dict[str, dict[int, Outcome]], value) -> dict[str, list[tuple[float, float]]]:
    """Each failed step's value at its count, drawn apart from the lines (a failed step is no point of a curve)."""
    return {label: [(n, v) for n, o in by_count.items() for _, s in o.failed if (v := value(s)) is not None]
            for label, by_count in grid.items()}


def _all_passed(by_count: dict[int, Outcome]) -> bool:
    return bool(by_count) and all(o.passed for o in by_count.values())


def judge(grid: dict[str, dict[int, Outcome]], counts: list[int], rate, cpus) -> tuple[list[Decision], list[str]]:
    """The decision row and the verdict, from which ports passed at each count."""
    if not counts:
        return [], []
    top = counts[-1]
    every = f"at every count up to {top:,}"
    defaults, _ = split_remedies(grid)
    all_pass = [label for label, by in defaults.items() if _all_passed(by)]
    # the lowest count each port failed at (counts ascend)
    failing = {label: fails[0] for label, by in defaults.items() if (fails := [n for n, o in by.items() if o.failed])}
    undecided = [label for label in defaults if label not in all_pass and label not in failing]
    named = {label: sorted({name for o in defaults[label].values() for name, _ in o.caps(cpus)}) for label in failing}
    p99s, rss = ({label: sp for label, by in defaults.items() if top in by and (sp := by[top].spread(value))}
                 for value in (lambda s: s.p99, lambda s: s.app_rss_mb_peak))
    best = table.above_all({label: sp for label, sp in p99s.items() if label in all_pass}, higher_is_better=False)
    choice = (f"{', '.join(all_pass)} (passed at every count in every run)"
              + (f"; lowest p99 at {top:,}: {best[0]} (below every other)" if best else "")
              if all_pass else f"none: no port passed {every}")
    if not failing:
        decided_by = "nothing at these counts: no port reached a limit" if all_pass else "undecided (see the table)"
    elif all(names == ["connection limit"] for names in named.values()):
        limits = sorted({f"{s.name}: {s.max_connections:,}" for s in map(server, failing) if s.max_connections})
        decided_by = f"the server's connection limit ({'; '.join(limits)})"
    else:
        decided_by = "what failed: " + "; ".join(f"{label} ({' / '.join(names) or 'unclear'})"
                                                 for label, names in named.items())
    remedies: dict[str, list[str]] = {}     # a setting -> the ports it is for (none: a remedy run, named)
    for label in failing:
        tried = [other for other, by in grid.items() if other.startswith(label + " + ") and _all_passed(by)]
        if tried:
            remedies[f"{tried[0]} (run: passed at every count)"] = []
        elif "connection limit" in named[label] and (setting := server(label).max_connections_setting):
            remedies.setdefault(f"`{setting}` above {top:,} (not run here)", []).append(label)
    settings = "; ".join(f"{', '.join(labels)}: {what}" if labels else what for what, labels in remedies.items())
    decisions = [Decision(f"Thousands of keep-alive connections ({listed(counts)}) at a fixed {num(rate)} req/s",
                          decided_by, choice, settings or "defaults")]

    who = f"{', '.join(all_pass)} passed" if all_pass else "no port passed"
    parts = [f"At a fixed {num(rate)} req/s on loopback, {who} the rule {every} keep-alive connections"
             + (" in every run" if all_pass else "")]
    for label, n in failing.items():
        o, limit = defaults[label][n], server(label).max_connections
        reasons = sorted({str(s.failure) for _, s in o.failed})
        above = f", above its server's connection limit of {limit:,}" if limit and n > limit else ""
        parts.append(f"{label} failed at {n:,} in {len(o.failed)} of {len(o.steps)} run(s) ({', '.join(reasons)}; "
                     f"achieved {cell(s.achieved_rps for _, s in o.failed)} of {num(rate)} req/s{above})")
    if undecided:
        parts.append(f"{', '.join(undecided)}: no verdict at some count ({GENERATOR})")
    verdict = ["; ".join(parts) + "."]
    if len(p99s) > 1:
        verdict.append(f"p99 at {top:,} connections runs {table.extremes(p99s, 'ms', ms)}"
                       + (f"; peak RSS {table.extremes(rss, 'MiB')}" if len(rss) > 1 else "") + ".")
    return decisions, verdict


def _column(header: str, *keys: str) -> tuple:
    """An appendix column of what many-users adds to each step (Step.extra)."""
    return header, lambda s: num(dig(s.extra, *keys))


STEP_EXTRA = (("connections", lambda s: f"{s.connections:,}"), "p99.9", _column("opened", "connections_opened"),
              _column("held", "app_connections_peak"), _column("accept queue", "accept_queue_peak"), "threads",
              _column("fds", "app_fds_peak"), _column("ListenOverflows", "listen_overflows", "ListenOverflows"))


def appendix(rs: RunSet) -> list[str]:
    system = rs.first("system", {})
    out = table.per_record(
        "Many concurrent users: every step", "Per port and iteration, in the order run. Latency in ms from each "
        "request's intended send time.", "many-users", rs.by_label, lambda r: (
            f"warm-up {warmup_text(r.get('warmup'))}; listen backlog {num(r.get('listen_backlog'))}; open-files "
            f"limit {num(dig(r, 'app_nofile', 'soft'))}."),
        lambda r: table.step_table(steps_of(r), STEP_EXTRA))
    out += [text("many-users-servers").format(somaxconn=system.get("somaxconn")), ""]
    rows = [[label, server(label).name, server(label).limit, server(label).backlog,
             cell(r.get("listen_backlog") for r in recs), server(label).idle_timeout]
            for label, recs in rs.by_label.items()]
    out += table.markdown(["port", "<server", "<connection limit", "<accept queue (listen backlog): default",
                           "measured", "<idle keep-alive timeout"], rows)
    nofile = sorted({dig(r, "app_nofile", "soft") for r in rs.records} - {None})
    overflow = sum(dig(s, "listen_overflows", "ListenOverflows") or 0 for r in rs.records for c in r["cells"]
                   for s in c["steps"])
    out += [text("many-users-refusals").format(
        nofile=", ".join(map(str, nofile)) or "?", generator=dig(system, "generator_nofile", "hard") or "?",
        ports=system.get("ip_local_port_range"), syn=system.get("tcp_max_syn_backlog"), overflow=overflow), ""]
    return out
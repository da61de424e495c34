"""startup: a cold JVM under load from the moment it listens until its CPU per request is steady, the plain JVM
beside the same jar started from JDK 25's AOT cache (JEPs 483, 514, 515), trained on the real endpoint.

Per port, variant and iteration, a fresh process: the harness times the first listening socket and the first
correct 200 (one request at a time, its row checked) from process creation; from the moment the port listens,
openloop offers [startup] rate req/s for `step_seconds` with a report per second. Per second: achieved rate, p99,
failed requests, the one rule's verdict on the window (method/timeline.py) and the app's CPU per request. Time to
steady: from process creation to the end of the first trailing `smooth_seconds` window from which the CPU per request
stays within `tolerance` of its steady value (the median of the last `tail_seconds`); a port still moving inside that
tail is "not steady". Missed: the requests of the windows that failed the rule. The JDK, the jars and the OS page
cache are warm (the build, the training and earlier iterations read them): this is the JVM's cold start, not the
disk's.

The AOT cache (variant "aot"), once per port and run (harness/aot.py): a training run on the real endpoint at
`training_rate` req/s for `training_seconds` writes it; Spring Boot's ports run extracted, as Spring Boot's
reference requires for the cache; Quarkus's run from their fast-jar, as Quarkus 3.27 (the ports' version) documents
it (`quarkus.package.jar.appcds.use-aot`, its cache made at build time from a start-up). Spring Boot trains with
`-Dspring.context.exit=onRefresh` (start-up only) and Quarkus 3.27 with a start at build time; both are replaced by
the same traffic to the real endpoint, so each cache also holds the request path's method profiles (JEP 515; JDK
25's cache holds no compiled code). Quarkus's later aot-jar packaging (puts the application's classes on the class
path, where the JDK's cache can hold them; its fast-jar loads them with its own class loader, which the cache
skips) needs a newer Quarkus than the ports use. The measured runs add -XX:AOTMode=on: a cache the JVM cannot use
stops the run instead of being silently ignored.
"""
from __future__ import annotations

import contextlib
import dataclasses
import statistics
import threading
import time
from contextlib import closing
from pathlib import Path

import requests

from .. import db, driver, ports, tokens
from ..aot import train
from ..errors import Fatal
from ..method import spans
from ..method.runset import RunSet
from ..method.spans import cell, ms, num, span, spread
from ..method.timeline import judge_windows
from ..sampling import Sampler
from ..session import Context, baseline_msts, choose_rate
from ..target import target_url, to_step
from ..report import charts, table
from ..report.section import Decision, Section

POLL_S = 0.02


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [startup] (iterations, step_seconds: the load's, and the lifecycle: driver.Lifecycle)."""
    variants: list[str]          # "plain" and/or "aot"
    rate: int                    # the cap of the load's rate: min(rate, mst_fraction x the lowest baseline MST)
    mst_fraction: float
    tolerance: float
    smooth_seconds: int
    tail_seconds: int
    training_rate: int
    training_seconds: float
    listen_timeout_seconds: float


def checked(plan: Plan) -> Plan:
    if not plan.variants or set(plan.variants) - {"plain", "aot"}:
        raise Fatal('bench.toml [startup]: variants must name "plain" and/or "aot"')
    if plan.step_seconds < plan.tail_seconds + plan.smooth_seconds:
        raise Fatal("bench.toml [startup]: step_seconds must cover tail_seconds + smooth_seconds")
    return plan


# --- pure logic (unit-tested) ------------------------------------------------------------------------------------

def time_to_steady(windows: list[dict], tolerance: float, smooth: int, tail: int) -> tuple[float | None, float | None]:
    """(steady CPU µs per request, seconds after the load began at which it was reached) from per-second windows
    with `t_s` (end of the window), `app_cpu_s` and `completed`. Steady: the median of the last `tail` windows'
    CPU per request; reached at the end of the first trailing `smooth`-window from which every later one stays
    within `tolerance` of it. (None, None) without enough windows; (steady, None) when only the tail is steady."""
    usable = [w for w in windows if w.get("app_cpu_s") is not None]
    if len(usable) < tail + smooth:
        return None, None
    per = [w["app_cpu_s"] / w["completed"] * 1e6 for w in usable[-tail:] if w.get("completed")]
    if not per:
        return None, None
    steady = statistics.median(per)
    rolling = []
    for i in range(smooth - 1, len(usable)):
        part = usable[i - smooth + 1:i + 1]
        done = sum(w.get("completed", 0) for w in part)
        rolling.append((usable[i]["t_s"], sum(w["app_cpu_s"] for w in part) / done * 1e6 if done else None))
    reached = None
    for t, value in rolling:
        if value is None or abs(value - steady) > tolerance * steady:
            reached = None
        elif reached is None:
            reached = t
    if reached is None or reached > usable[-tail]["t_s"]:
        return round(steady, 1), None
    return round(steady, 1), reached


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


def missed_requests(judged: list[dict]) -> int:
    """The requests of the windows that failed the rule: answered late or wrongly, or not at all."""
    return sum(w.get("completed", 0) + w.get("errors", 0) for w in judged if w.get("failure"))


# --- measuring ----------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Startup(driver.Scenario):
    """A JVM per variant (started at once, no warm-up), its one cell: the load from its first listening moment."""
    token: str
    aot: dict[str, tuple[ports.Variant, dict]]      # per port: its AOT cache's variant and training
    rate_basis: str = ""                             # how the rate was chosen (session.choose_rate)
    expected: dict | None = None                     # the token's row, as the first correct 200 must give it

    def jvms(self, plan: Plan, port: ports.Port) -> list[dict]:
        return [{"variant": v} for v in plan.variants]

    def aot_of(self, jvm: driver.Jvm) -> tuple[ports.Variant | None, dict | None]:
        """An "aot" JVM's cache (its variant, its training), else none."""
        return self.aot.get(jvm.port.name, (None, None)) if jvm.coords["variant"] == "aot" else (None, None)

    def fields(self, jvm: driver.Jvm) -> dict:
        plan = jvm.plan
        return dict(aot=self.aot_of(jvm)[1], rate=plan.rate, rate_basis=self.rate_basis, seconds=plan.step_seconds, tolerance=plan.tolerance,
                    smooth_seconds=plan.smooth_seconds, tail_seconds=plan.tail_seconds, slo_ms=jvm.ctx.rule.slo_ms(),
                    listen_s=None, first_200_s=None)

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm):
        with closing(db.connect()) as conn, conn.cursor() as cur:
            self.expected = db.user_row(cur, tokens.email_of(self.token))
        yield {"variant": self.aot_of(jvm)[0]}

    def started(self, jvm: driver.Jvm) -> None:
        """Timed by the cell itself."""

    def measure_cell(self, jvm: driver.Jvm, cell: dict) -> None:
        ctx, plan, running, record = jvm.ctx, jvm.plan, jvm.running, jvm.record
        load = ctx.settings["load"]
        record["listen_s"] = wait_listening(running, "127.0.0.1", int(load["port"]), plan.listen_timeout_seconds)
        url = target_url(running, ctx.settings)
        first = FirstAnswer(url, self.token, self.expected, running.started,
                            plan.listen_timeout_seconds + plan.step_seconds)
        first.start()
        with Sampler(running.pid, db.server_pid()) as sampler:
            result = ctx.gen.run_rate(url, plan.rate, plan.step_seconds, load["connections"],
                                      ctx.settings["cpus"]["generator"], extra=("--report-interval", "1"))
        first.join(timeout=5)
        record["first_200_s"] = first.seconds
        step = to_step(result, sampler, "startup")
        began = result.window[0]
        windows = judge_windows(step.extra.pop("intervals", []), plan.rate, 1.0, ctx.rule, ctx.rule.slo_ms(),
                                plan.step_seconds)
        for w in windows:
            usage = sampler.window(began + w["t_s"] - 1.0, began + w["t_s"])
            w["app_cpu_s"] = round(usage["app_cpu_cores"], 4) if usage["app_cpu_cores"] is not None else None
            w["app_rss_mb"] = usage["app_rss_mb_peak"]
        cell["windows"] = windows
        cell["steps"].append(step.to_json(histogram=False))
        steady, reached = time_to_steady(windows, plan.tolerance, plan.smooth_seconds, plan.tail_seconds)
        record.update(steady_cpu_us_per_request=steady,
                      time_to_steady_s=None if reached is None else round(record["listen_s"] + reached, 1),
                      missed_requests=missed_requests(windows),
                      failed_windows=sum(1 for w in windows if w.get("failure")))
        jvm.say(f"listening after {record['listen_s']} s, first correct 200 after {record['first_200_s']} s, steady "
                f"({steady} µs CPU/req) after {record['time_to_steady_s']} s; {record['failed_windows']} of "
                f"{len(windows)} s failed the rule ({record['missed_requests']:,} requests)")


def run(ctx: Context, selected: list[ports.Port]) -> None:
    from .. import compose
    plan = checked(ctx.plan(Plan))
    if compose.enabled() or ctx.settings["load"]["target_host"] not in ("127.0.0.1", "localhost"):
        raise Fatal("startup times a process the harness starts itself: run it locally (no BENCH_ENV=compose)")
    token = tokens.load()[0]
    aot: dict[str, tuple[ports.Variant, dict]] = {}
    if "aot" in plan.variants:
        for port in selected:
            ctx.say(port.name, f"training the AOT cache: {plan.training_rate}/s for {plan.training_seconds:g} s")
            aot[port.name] = train(port, ctx.settings, ctx.gen, token, plan.training_rate, plan.training_seconds)
            ctx.say(port.name, f"AOT cache {aot[port.name][1]['cache_mb']} MiB after {aot[port.name][1]['training_s']} s")
    rate, basis = choose_rate(plan.rate, plan.mst_fraction, baseline_msts(ctx.results))
    print(f"{ctx.scenario}: {rate:,} req/s from the moment each JVM listens, set by {basis}", flush=True)
    driver.run(ctx, Startup(token, aot, basis), dataclasses.replace(plan, rate=rate), selected)


class FirstAnswer(threading.Thread):
    """One request at a time until the first 200 with the right row: its time from process creation."""

    def __init__(self, url: str, token: str, expected: dict, started: float, limit_s: float):
        super().__init__(daemon=True)
        self.url, self.token, self.expected, self.started, self.limit_s = url, token, expected, started, limit_s
        self.seconds: float | None = None

    def run(self):
        with requests.Session() as http:
            while time.monotonic() - self.started < self.limit_s:
                try:
                    r = http.get(self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=5)
                    if r.status_code == 200 and r.json() == self.expected:
                        self.seconds = round(time.monotonic() - self.started, 3)
                        return
                except (requests.RequestException, ValueError):
                    pass
                time.sleep(POLL_S)


def wait_listening(running, host: str, port: int, timeout: float) -> float:
    """Seconds from process creation to the first accepted TCP connection."""
    while time.monotonic() - running.started < timeout:
        if running.process.poll() is not None:
            raise Fatal(f"{running.port.name} exited at start (code {running.process.returncode}): see {running.log}")
        if ports.port_busy(host, port):
            return round(time.monotonic() - running.started, 3)
        time.sleep(POLL_S / 2)
    raise Fatal(f"{running.port.name} did not listen within {timeout:g} s: see {running.log}")


# --- the report ---------------------------------------------------------------------------------------------------

def _label(label: str, variant: str) -> str:
    return label if variant == "plain" else f"{label} (AOT)"


def _by_variant(rs: RunSet) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for label, records in rs.by_label.items():
        for r in records:
            if r.get("status") == "complete":
                out.setdefault(_label(label, r["jvm"].get("variant") or "plain"), []).append(r)
    return out


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
    body = [f"A fresh JVM per port, variant and iteration ({'–'.join(map(str, iterations))} iteration(s), run "
            f"{', '.join(rs.run_ids)}); from the moment it listens, **{num(first.get('rate'))} req/s**"
            + (f", set by {first['rate_basis']}," if first.get("rate_basis") else "") + " for "
            f"{num(first.get('seconds'))} s, judged per second by the one rule (p99 ≤ {num(rule_slo)} ms). Times are "
            f"from process creation; time to steady is when the app's CPU per request "
            f"({num(first.get('smooth_seconds', 5))}-s trailing) stays within "
            f"{100 * first.get('tolerance', 0.1):g} % of its value over the last {num(first.get('tail_seconds', 15))} s. "
            "Missed: the requests of the seconds that failed the rule. The "
            "JDK, jars and page cache were warm. AOT: JDK 25's cache trained on the real endpoint "
            "(`-XX:AOTCacheOutput`, JEP 514), run with `-XX:AOTCache` and `-XX:AOTMode=on`.", ""]
    header = ["port", "listening (s)", "first correct 200 (s)", "meets the rule from (s)", "time to steady (s)",
              "steady CPU µs/req", "served over the run (req/s)", "seconds failing", "missed requests",
              "RSS at the end (MiB)", "AOT training (s)", "AOT cache (MiB)"]
    to_rule = {label: [time_to_rule(r) for r in records] for label, records in by.items()}
    rows = []
    for label, records in by.items():
        rows.append([label, cell((r["listen_s"] for r in records), ms), cell((r["first_200_s"] for r in records), ms),
                     _rule_cell(to_rule[label]), _steady_cell(records), _steady_cpu_cell(records),
                     cell(step_of(r).get("achieved_rps") for r in records),
                     cell(r.get("failed_windows") for r in records), cell(r.get("missed_requests") for r in records),
                     cell((windows_of(r)[-1].get("app_rss_mb") if windows_of(r) else None) for r in records),
                     cell((r.get("aot") or {}).get("training_s") for r in records),
                     cell((r.get("aot") or {}).get("cache_mb") for r in records)])
    body += table.markdown(header, rows) + [""]
    saturated = [label for label, reached in to_rule.items() if all(v is None for v in reached)]
    if saturated:     # their "steady" CPU is a saturated JVM's, still compiling under a backlog (docs/findings.md)
        body += [f"Still failing the rule at the end: {', '.join(saturated)}. Their steady CPU per request, where they "
                 "became steady, is that of a saturated JVM working through a backlog while it still compiles, not the cost of the request once "
                 "warm (the baseline's); \"Why the numbers look like this\" has the cold profiles.", ""]
    styles = {label: "--" for label in by if label.endswith("(AOT)")}
    body += charts.link("CPU per request in the first seconds, per port (dashed: AOT cache)", charts.lines(
        chart_dir / "startup-cpu.png", "app CPU per request after process start", "seconds since process start",
        "app CPU µs per request (log)",
        {label: _timeline(records, lambda w: w["app_cpu_s"] / w["completed"] * 1e6 if w.get("completed") and
                          w.get("app_cpu_s") is not None else None) for label, records in by.items()},
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
    return Section("Start-up and time to steady (plain JVM and AOT cache)", rs.scenario, body, appendix=appendix(by),
                   decisions=decisions, verdict=verdict, findings=findings, warnings=rs.warnings)


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


def _rule_cell(reached: list[float | None]) -> str:
    missing = sum(1 for v in reached if v is None)
    if missing == len(reached):
        return "never (failing at the end)"
    return cell(reached) + (f"; {missing}/{len(reached)} failing at the end" if missing else "")


def _steady_cell(records: list[dict]) -> str:
    reached = [r.get("time_to_steady_s") for r in records]
    text = cell(reached)
    missing = sum(1 for v in reached if v is None)
    return f"{text}; {missing}/{len(reached)} not steady" if missing else text


def appendix(by: dict[str, list[dict]]) -> list[str]:
    out = ["## Start-up: every second", ""]
    for label, records in by.items():
        for r in records:
            out += [f"### startup: {label}, iteration {r.get('iteration')}", "",
                    "| s after listening | achieved (req/s) | p99 (ms) | errors | app µs/req | RSS (MiB) | rule |",
                    "|---:|---:|---:|---:|---:|---:|---|"]
            for w in windows_of(r):
                per = w["app_cpu_s"] / w["completed"] * 1e6 if w.get("completed") and w.get("app_cpu_s") is not None else None
                out.append(f"| {num(w['t_s'])} | {num(w.get('completed'))} | {ms(w.get('p99_ms'))} | "
                           f"{num(w.get('errors', 0) + w.get('non_2xx', 0))} | {num(per)} | {num(w.get('app_rss_mb'))} | "
                           f"{w.get('failure') or 'pass'} |")
            out.append("")
    return out

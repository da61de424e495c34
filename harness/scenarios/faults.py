"""faults: what each port does when the database freezes or restarts, when traffic doubles, when 10,000 idle
connections are held, and when hostile tokens are mixed into the stream (README.md "### faults").

Per port and iteration, one fresh JVM at normal_fraction x its confirmed baseline MST (without one, probe_fraction
x a closed-loop probe), warmed up, then the cases, the destructive ones last: normal, hostile, flood, freeze
(SIGSTOP of MariaDB), restart (SIGKILL + start), overload (2x the MST, then 0.5x); then the same JVM must still
answer. Each case is one Target step cut into 1-s windows, each judged by the one rule: a port has recovered from
the first moment from which every later window passes, the same bar for every port, the errors shown beside.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests

from .. import db, driver, hostile, ports, tokens
from ..errors import Fatal
from ..method import spans
from ..method.record import MIN_RATE, Step, dig, round_rate
from ..method.rule import GENERATOR
from ..method.runset import RunSet, port_of, split_remedies
from ..method.timeline import failed_windows, judge_windows, recovery_s  # noqa: F401 (faults.* in tests)
from ..method.spans import Spread, cell, ms, num, span, spread
from ..session import Context
from ..target import alive
from ..report import charts, table
from ..report.section import Decision, Section

LEAD_S = 1.0        # from launching openloop to its schedule's start (its connections open in milliseconds)
FRESH_LEAD_S = 0.5  # from the fault's end to the fresh probe's first request (launch and connect in between)
OPEN_LEAD_S = 3.0   # the 0.5x run opens its (many) connections this long before the 2x schedule ends
# Documented remedies for a pool that does not recover from a database restart, by port (the framework's guide).
REMEDIES = {"quarkus-virtual": "`QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true` "
                               "(https://quarkus.io/guides/datasource)"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [faults] (iterations, probe_seconds, pause_seconds and the lifecycle: driver.Lifecycle)."""
    cases: list[str]                 # in the order run, the destructive ones last
    normal_fraction: float
    probe_fraction: float
    normal_seconds: float
    interval_seconds: float
    fault_at_seconds: float
    freeze_seconds: float
    after_seconds: float
    overload_factor: float
    overload_seconds: float
    recover_factor: float
    recover_seconds: float
    overload_connections: int
    fresh_fraction: float
    fresh_connections: int
    idle_connections: int
    idle_connect_concurrency: int
    hostile_fraction: float


# --- the hostile mix (pure, unit-tested) -----------------------------------------------------------------------

def valid_rate(rate: float, share: float, seconds: float) -> float:
    """The valid requests' rate the rule expects when openloop replaces each request by a hostile line with
    probability 1 - share: their count is binomial, so it is taken 3 standard deviations low (at 1,000 req/s and a
    10 % mix a 1-s window holds 900 ± 9.5: expecting 900, a third of the windows would fail by chance)."""
    n = rate * seconds
    return round((share * n - 3 * (share * (1 - share) * n) ** 0.5) / seconds, 1)


def errors_split(intervals: list[dict], split_s: float, interval_s: float) -> tuple[int, int]:
    """Failed requests (errors + non-2xx answers) up to and including the window that holds `split_s` (the
    moment the fault ended), and in the windows after it."""
    failed = lambda w: w.get("errors", 0) + w.get("non_2xx", 0)  # noqa: E731
    during = sum(failed(w) for w in intervals if w["t_s"] - interval_s < split_s)
    return during, sum(failed(w) for w in intervals) - during


def errors_by_kind(step: dict) -> dict:
    """Non-2xx answers by status and failures without an answer by kind; zeros left out."""
    return {**{f"HTTP {code}": n for code, n in step.get("statuses", {}).items() if not str(code).startswith("2")},
            **{k: n for k, n in step.get("errors", {}).items() if k != "non_2xx" and n}}


def hostile_outcome(expected: list[tuple[str, str, int]], mix: dict) -> dict:
    """The hostile lines' statuses against what each must get (openloop counts them per line)."""
    lines = list(zip(expected, mix.get("statuses_by_line", [])))
    unexpected = sum(n for (_, _, want), got in lines for code, n in got.items() if int(code) != want)
    failed, completed = sum(mix.get("errors", {}).values()), mix.get("completed", 0)
    return {"hostile_sent": completed + failed, "hostile_as_expected": completed - unexpected,
            "hostile_unexpected": unexpected,
            "hostile_5xx": sum(n for _, got in lines for code, n in got.items() if str(code).startswith("5")),
            "hostile_failed": failed, "hostile_p99_ms": (mix.get("latency_ms") or {}).get("p99"),
            "by_case": {case: got for (case, _, _), got in lines}}


# --- watching the JVM and injecting faults -------------------------------------------------------------------

class Fault:
    """A fault on a thread (started at once) at monotonic time `at`: freeze the DB (SIGSTOP for `seconds`, SIGCONT
    always) or restart it (SIGKILL, wait until it is gone, start it again with the same data). `finish()` joins it,
    cuts a freeze short if the run ended early, and re-raises what failed in it."""

    def __init__(self, kind: str, at: float, seconds: float = 0.0, db_cpus: str | None = None):
        self.kind, self.at, self.seconds, self.db_cpus = kind, at, seconds, db_cpus
        self.began: float | None = None     # monotonic: SIGSTOP / SIGKILL sent
        self.ended: float | None = None     # monotonic: SIGCONT sent / the DB accepts logins again
        self.error: BaseException | None = None
        self._cut = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            if self._cut.wait(max(0.0, self.at - time.monotonic())):
                return
            pid = db.server_pid()
            if pid is None:
                raise Fatal("the faults scenario signals the local MariaDB: it is not running (or BENCH_DB=external)")
            (self._freeze if self.kind == "freeze" else self._restart)(pid)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread by finish()
            self.error = e

    def _freeze(self, pid: int):
        os.kill(pid, signal.SIGSTOP)
        self.began = time.monotonic()
        try:
            self._cut.wait(self.seconds)
        finally:
            os.kill(pid, signal.SIGCONT)
            self.ended = time.monotonic()

    def _restart(self, pid: int):
        os.kill(pid, signal.SIGKILL)
        self.began = time.monotonic()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and alive(pid):   # gone (or a zombie nobody reaped yet) before it starts
                time.sleep(0.02)
        finally:
            db.up(self.db_cpus)   # one call, also right after a kill (db/local.sh, db.wait_reachable)
            self.ended = time.monotonic()

    def finish(self):
        self._cut.set()
        self._thread.join()
        if self.kind == "freeze" and (pid := db.server_pid()) is not None:
            os.kill(pid, signal.SIGCONT)   # whatever happened above, never leave the DB stopped
        if self.error is not None:
            raise self.error


def answers_after(url: str, token: str, pid: int | None) -> tuple[bool, bool]:
    """(a valid request gets its 200 within 10 s, the JVM is the one started for this iteration)."""
    ok = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not ok:
        try:
            ok = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=5).status_code == 200
        except requests.RequestException:
            time.sleep(0.5)
    return ok, alive(pid)


def open_files(pid: int | None) -> int | None:
    """The JVM's soft RLIMIT_NOFILE (the JVM raises it to the hard limit itself)."""
    try:
        soft = psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE)[0]
        return None if soft == psutil.RLIM_INFINITY else soft
    except (psutil.Error, AttributeError, TypeError, ValueError):
        return None


# --- the cases -----------------------------------------------------------------------------------------------

class Cases:
    """The cases against one port's Target in one iteration: `rate` for the normal-rate cases, `mst` for overload."""

    def __init__(self, ctx: Context, plan: Plan, target, token: str, rate: int, mst: int):
        self.ctx, self.plan, self.target, self.token, self.rate, self.mst = ctx, plan, target, token, rate, mst
        self.slo_ms = ctx.rule.slo_ms()       # loopback: nothing added to any wait

    def run(self, case: str) -> dict:
        """One case: what its cell keeps (its step or steps and its summary)."""
        return self.db_fault(case) if case in DB_CASES else getattr(self, case)()

    def step(self, phase: str, rate: float, seconds: float, connections: int | None = None, extra: tuple = (),
             start_ns: int | None = None, valid_share: float = 1.0) -> tuple[Step, dict]:
        """One Target step with 1-s windows, the step and each window judged by the rule, which expects
        `valid_share` of the rate served (hostile lines replace the rest, counted apart)."""
        extra = ("--report-interval", f"{self.plan.interval_seconds:g}", *extra)
        if start_ns is not None:
            extra += ("--start-at-monotonic-ns", str(start_ns))
        s = self.target.rate(rate, seconds, phase, slo_ms=self.slo_ms, connections=connections, extra=extra)
        window_rate = rate
        if valid_share != 1.0:
            s.extra["valid_target_rps"] = valid = valid_rate(rate, valid_share, seconds)
            window_rate = valid_rate(rate, valid_share, self.plan.interval_seconds)
            s.failure = self.ctx.rule.failure(target_rps=valid, achieved_rps=s.achieved_rps, errors=s.error_count,
                                              p99_ms=s.p99, generator_behind=s.generator_behind, slo_ms=self.slo_ms)
        s.extra["alive"] = alive(self.target.app_pid)
        if "mix" in s.extra:
            s.extra["mix"] = {k: v for k, v in s.extra["mix"].items() if k != "histogram"}
        s.extra["intervals"] = judge_windows(s.extra.get("intervals", []), window_rate, self.plan.interval_seconds,
                                             self.ctx.rule, self.slo_ms, seconds)
        return s, s.to_json(histogram=False)

    def windows_summary(self, s: Step, from_s: float = 0.0) -> dict:
        failed, total = failed_windows(s.extra["intervals"], from_s)
        return {"rate": s.target_rps, "slo_ms": self.slo_ms, "p99_ms": s.p99, "failure": s.failure,
                "errors": s.error_count, "errors_by_kind": errors_by_kind(s.to_json(histogram=False)),
                "failed_windows": failed, "windows": total, "app_rss_mb_peak": s.app_rss_mb_peak,
                "app_threads_peak": s.app_threads_peak}

    def normal(self) -> dict:
        s, data = self.step("normal", self.rate, self.plan.normal_seconds)
        return {"step": data, "summary": self.windows_summary(s)}

    def hostile(self) -> dict:
        lines = hostile.header_lines()
        with tempfile.NamedTemporaryFile("w", prefix="faults-hostile-", suffix=".txt") as f:   # removed on the way out
            f.write("\n".join(line for _, line, _ in lines) + "\n")
            f.flush()
            fraction = self.plan.hostile_fraction
            s, data = self.step("hostile", self.rate, self.plan.normal_seconds, valid_share=1 - fraction,
                                extra=("--mix-authorization", f.name, "--mix-fraction", f"{fraction:g}"))
        return {"step": data, "cases": [c for c, _, _ in lines], "expected_statuses": [w for _, _, w in lines],
                "summary": {**self.windows_summary(s), "fraction": self.plan.hostile_fraction,
                            **hostile_outcome(lines, s.extra.get("mix", {}))}}

    def flood(self) -> dict:
        n = self.plan.idle_connections
        limit = open_files(self.target.app_pid)
        need = n + self.ctx.settings["load"]["connections"] + self.ctx.settings["db"]["pool_size"] + 200
        if limit and limit < need:
            self.ctx.say("flood", f"warning: the JVM may open {limit} files, the flood needs about {need}")
        s, data = self.step("flood", self.rate, self.plan.normal_seconds,
                            extra=("--idle-connections", str(n),
                                   "--connect-concurrency", str(self.plan.idle_connect_concurrency)))
        return {"step": data, "summary": {
            **self.windows_summary(s), "idle_asked": n, "idle_opened": s.extra.get("idle_connections_opened"),
            "idle_open_at_end": s.extra.get("idle_connections_open_at_end"),
            "idle_connect_errors": s.extra.get("idle_connect_errors"), "jvm_open_files_limit": limit,
            "open_files_needed": need}}

    def db_fault(self, kind: str) -> dict:
        plan = self.plan
        seconds = plan.fault_at_seconds + plan.freeze_seconds + plan.after_seconds
        start_ns = time.monotonic_ns() + int(LEAD_S * 1e9)
        start = start_ns / 1e9
        fault = Fault(kind, start + plan.fault_at_seconds, plan.freeze_seconds, self.ctx.settings["cpus"]["db"])
        self.target.count_statements = False      # the DB cannot be asked for its counters while frozen or away
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            probing = pool.submit(self.fresh_probe, kind, fault, start + seconds)
            try:
                s, data = self.step(kind, self.rate, seconds, start_ns=start_ns)
            finally:
                fault.finish()
                self.target.count_statements = True
                self.target.db_pid = db.server_pid()   # a restarted server is a new process
            fresh = probing.result()
        if fault.began is None or fault.ended is None:
            raise Fatal(f"the database {kind} did not happen inside the run (see the lines above)")
        began, ended = fault.began - start, fault.ended - start
        during, after = errors_split(s.extra["intervals"], ended, plan.interval_seconds)
        answers, same_jvm = answers_after(self.target.url, self.token, self.target.app_pid)
        recovered = None
        if fresh and (tail := recovery_s(fresh["windows"], 0.0, plan.interval_seconds)) is not None:
            recovered = round(fresh["after_fault_s"] + tail, 1)
        return {"step": data, "fresh": fresh, "summary": {
            **self.windows_summary(s, ended), "fault_at_s": round(began, 2), "fault_end_s": round(ended, 2),
            "fault_s": round(ended - began, 2), "errors_during": during, "errors_after": after,
            "max_ms": s.latency_ms.get("max"),
            "recovery_judged_on": "fresh requests: a probe sent only after the fault ended, on its own connections",
            "recovery_s": recovered,
            "recovery_all_s": recovery_s(s.extra["intervals"], ended, plan.interval_seconds),
            "fresh_rate": fresh and fresh["rate"], "fresh_p99_ms": fresh and fresh["step"]["latency_ms"].get("p99"),
            "observed_after_s": round(seconds - ended, 1), "answers_after": answers, "same_jvm": same_jvm}}

    def fresh_probe(self, kind: str, fault: Fault, run_end: float) -> dict | None:
        """Requests sent only after the fault ended: fresh_fraction x the rate over fresh_connections of their own
        (enough that none waits in the generator), from FRESH_LEAD_S after the fault's end to the end of the case's
        run, in 1-s windows. The case's own run keeps sending what it held during the fault, so a fresh request
        waits for what the port still owes, never for the generator's queue. None: the fault never ended in time."""
        while fault.ended is None and time.monotonic() < run_end - 2:
            time.sleep(0.02)
        if fault.ended is None:
            return None
        begin = time.monotonic() + FRESH_LEAD_S
        seconds = round(run_end - begin, 1)
        if seconds < 2 * self.plan.interval_seconds:
            return None
        rate = max(MIN_RATE, round_rate(self.plan.fresh_fraction * self.rate))
        probe = dataclasses.replace(self.target, db_pid=None, count_statements=False)   # the DB may be a new one
        s = probe.rate(rate, seconds, f"{kind}-fresh", slo_ms=self.slo_ms, connections=self.plan.fresh_connections,
                       extra=("--report-interval", f"{self.plan.interval_seconds:g}",
                              "--start-at-monotonic-ns", str(int(begin * 1e9))))
        data = s.to_json(histogram=False)
        windows = judge_windows(data.pop("intervals", []), None, self.plan.interval_seconds, self.ctx.rule,
                                self.slo_ms, seconds)   # no rate: a new user's answers, errors and p99
        return {"rate": rate, "after_fault_s": round(begin - fault.ended, 2), "seconds": seconds,
                "step": data, "windows": windows}

    def overload(self) -> dict:
        """overload_factor x MST, then recover_factor x MST starting where the first schedule ends, both over
        overload_connections. Recovery is judged on the second run, every request of which is sent after the
        overload ended: the first run sends nothing after its schedule (--no-sends-after-end), so what it still
        held then (unsent_high) never reaches the port. What the port had accepted, it still owes: that backlog
        is the port's. Before, the first run went on sending its backlog for up to the generator's 10-s timeout,
        and every port "recovered" after 11-12 s, the timeout (issue 34)."""
        plan = self.plan
        high, low = round_rate(self.mst * plan.overload_factor), round_rate(self.mst * plan.recover_factor)
        start_ns = time.monotonic_ns() + int(2 * LEAD_S * 1e9)
        low_start_ns = start_ns + int(plan.overload_seconds * 1e9)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            over = pool.submit(self.step, "overload", high, plan.overload_seconds, plan.overload_connections,
                               extra=("--no-sends-after-end",), start_ns=start_ns)
            time.sleep(max(0.0, low_start_ns / 1e9 - OPEN_LEAD_S - time.monotonic()))
            low_step, low_data = self.step("recover", low, plan.recover_seconds, plan.overload_connections,
                                           start_ns=low_start_ns)
            high_step, high_data = over.result()
        answers, same_jvm = answers_after(self.target.url, self.token, self.target.app_pid)
        failed, total = failed_windows(low_step.extra["intervals"])
        return {"high": high_data, "low": low_data, "summary": {
            "mst": self.mst, "slo_ms": self.slo_ms, "rate_high": high, "rate_low": low,
            "connections": plan.overload_connections, "achieved_high_rps": high_step.achieved_rps,
            "errors_high": high_step.error_count, "errors_high_by_kind": errors_by_kind(high_data),
            "p99_high_ms": high_step.p99, "generator_behind": high_step.generator_behind or low_step.generator_behind,
            "errors_low": low_step.error_count, "p99_low_ms": low_step.p99,
            "unsent_high": high_step.extra.get("unsent_at_end"),
            "recovery_judged_on": "the 0.5x run: requests sent after the overload ended (the 2x run sent nothing "
                                  "after its schedule)",
            "recovery_s": recovery_s(low_step.extra["intervals"], 0.0, plan.interval_seconds),
            "failed_windows": failed, "windows": total, "observed_low_s": plan.recover_seconds,
            **{k: max(filter(None, [getattr(high_step, k), getattr(low_step, k)]), default=None)
               for k in ("app_rss_mb_peak", "app_threads_peak")},
            "answers_after": answers, "same_jvm": same_jvm}}


# --- the run -------------------------------------------------------------------------------------------------

class Faults(driver.Scenario):
    """Per JVM: its rate from the port's baseline MST or a closed-loop probe, then a cell per case (Cases)."""

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [{"case": name} for name in plan.cases]

    def fields(self, jvm: driver.Jvm) -> dict:
        self.began = time.monotonic()
        return dict(baseline_mst=jvm.previous_mst, mst=None, mst_source=None, rate=None, answers_at_end=None,
                    same_jvm_at_end=None)

    def started(self, jvm: driver.Jvm) -> None:
        self.token, plan = tokens.load()[0], jvm.plan
        if jvm.previous_mst:
            mst, source = jvm.previous_mst, "baseline MST (confirmed, median)"
        else:
            mst, source = round_rate(max(MIN_RATE, plan.probe_fraction * jvm.probe("cold"))), "closed-loop probe"
        rate = round_rate(max(MIN_RATE, plan.normal_fraction * mst))
        jvm.record.update(mst=mst, mst_source=source, rate=rate)
        self.cases = Cases(jvm.ctx, plan, jvm.target, self.token, rate, mst)
        self.say(jvm, f"up; MST {mst:,}/s ({source}); rate {rate:,}/s")

    def warmup_rate(self, jvm: driver.Jvm) -> float:
        return jvm.record["rate"]

    def measure_cell(self, jvm: driver.Jvm, cell: dict) -> None:
        driver.run_cell(jvm, self, cell)      # the declared phases: the pause (a backlog drains)
        name = cell["coords"]["case"]
        cell.update(self.cases.run(name))
        jvm.save()
        self.say(jvm, f"{name}: {_line(cell['summary'])}")

    def finished(self, jvm: driver.Jvm) -> None:
        answers, same = answers_after(jvm.target.url, self.token, jvm.target.app_pid)
        jvm.record.update(answers_at_end=answers, same_jvm_at_end=same and jvm.running.process.poll() is None,
                          seconds=round(time.monotonic() - self.began, 1))

    def say(self, jvm: driver.Jvm, text: str) -> None:
        jvm.say(f"{text}  ({time.monotonic() - self.began:.0f} s)")


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = ctx.plan(Plan)
    if db.is_external() or db.server_pid() is None:
        raise Fatal("the faults scenario freezes and restarts the local MariaDB: run it without BENCH_DB=external")
    driver.run(ctx, Faults(), plan, selected)


def _line(summary: dict) -> str:
    keys = ("rate", "p99_ms", "failure", "errors", "failed_windows", "windows", "recovery_s", "errors_during",
            "errors_after", "hostile_unexpected", "idle_open_at_end", "achieved_high_rps", "errors_high", "errors_low",
            "app_threads_peak", "answers_after")
    return ", ".join(f"{k} {summary[k]}" for k in keys if k in summary)


# --- reading the records --------------------------------------------------------------------------------------

def cases_of(record: dict) -> dict[str, dict]:
    """A record's cases by name, in the order run: its cells."""
    return {c["coords"]["case"]: c for c in record.get("cells") or []}


def generator_alone(step: dict | None) -> bool | None:
    """Whether the generator alone failed the step: behind its schedule while the port's own criteria held (the
    rule's GENERATOR label). A port that failed its rate, errors or p99 at 2x failed there itself, whatever the
    generator did (issue 34: on a box the generator shares, saturating the cores is the port's failure). None where
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
    with the schedule, so a sum of them drops the errors of the requests still in flight then (issue 34)."""
    if "errors" in summary:
        return summary["errors"]
    return summary["errors_during"] + summary.get("errors_after", 0) if "errors_during" in summary else None


def offered(step: dict | None) -> int | None:
    """Requests the case's run offered: its rate x its schedule."""
    return round(step["target_rps"] * step["seconds"]) if step and step.get("target_rps") and step.get("seconds") \
        else None


def error_share(summary: dict) -> float | None:
    """The case's errors as a share of the requests offered: ports run their cases at different rates (half their
    own MST), so raw counts compare rates, not ports (issue 34)."""
    errors, n = errors_of(summary), summary.get("offered")
    return errors / n if errors is not None and n else None


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

RECOVERED_FRESH = ("**Recovered** is judged on requests sent after the fault or the overload ended, so a generator's "
                   "backlog is never a port's recovery time: after a freeze or restart, on a probe of fresh requests "
                   "(a tenth of the rate, on connections of its own) from half a second after the database is back, "
                   "recovered from the moment every later probe window passes; after 2x, on the 0.5x run, the 2x run "
                   "having sent nothing after its schedule (what it still held is counted among its errors).")
RECOVERED_ALL = ("**Recovered**: from that moment on every window of the run passes, counted from the end of the fault "
                 "(the database back) or from the start of the 0.5x run. These records judged every window of the "
                 "case's own run, the generator's backlog included.")

def render(rs: RunSet, chart_dir: Path) -> Section | None:
    by = {label: records for label, records in rs.by_label.items() if any(r.get("cells") for r in records)}
    if not by:
        return None
    plan = rs.plan
    slo = next((s.get("slo_ms") for rs_ in by.values() for s in summaries(rs_, "normal") if s.get("slo_ms")), None)
    fresh = any(s.get("recovery_judged_on") for rs_ in by.values() for s in summaries(rs_, "freeze"))
    body = [f"Per port and iteration one warmed-up JVM (run {', '.join(rs.run_ids)}, "
            f"{rs.iterations} iteration(s) per port): a normal run, hostile tokens "
            f"({_pct(plan.get('hostile_fraction'))} of the stream), {num(plan.get('idle_connections'))} idle "
            f"connections, MariaDB frozen (SIGSTOP, {num(plan.get('freeze_seconds'))} s) and restarted (SIGKILL + "
            f"start), then {num(plan.get('overload_factor'), 1)}x the MST for {num(plan.get('overload_seconds'))} s "
            f"and {num(plan.get('recover_factor'), 1)}x after it. Each case runs at a constant rate "
            f"({_pct(plan.get('normal_fraction'))} of the port's confirmed baseline MST) and is cut into 1-s windows, "
            f"each judged by the one rule (p99 ≤ {num(slo, 0)} ms, 0 errors, the rate completed). "
            + (RECOVERED_FRESH if fresh else RECOVERED_ALL) +
            " The same bar for every port. Errors: failed requests (non-2xx or no answer) over the whole case; "
            "ports are compared on their share of the requests offered (each runs at half its own MST). Cells: "
            "median (min–max) over the iterations.", ""]
    body += table.markdown(
        ["port", "rate (req/s)", "freeze: recovered after (s)", "freeze: errors", "restart: recovered after (s)",
         "restart: errors", "2x: achieved (req/s)", "2x: errors", "0.5x: recovered after (s)",
         "<hostile: failed windows (normal)", "hostile: unexpected statuses", "flood: p99 (ms)",
         "<same JVM answers at end"], [summary_row(label, records) for label, records in by.items()])
    body += ["Hostile: windows of the valid requests that failed the rule, per iteration, with hostile tokens mixed "
             "in (in brackets: the normal run just before, without them); 'unexpected' counts hostile requests "
             "answered otherwise than 401 (404 for a well-signed token of an unknown user). 2x achieved with ≥: the "
             "generator fell behind its schedule at 2x in some iteration, so what was served is a lower bound (the "
             "generator's failure, not the port's).", ""]
    body += charts.link("p99 per 1-s window through the freeze (solid) and the restart (dashed)",
                        timeline_chart(chart_dir / "faults-db-timeline.png", by, ("freeze", "restart"), slo,
                                       f"database frozen or killed at {num(plan.get('fault_at_seconds'))} s"))
    body += charts.link("p99 per 1-s window through 2x overload and 0.5x after it",
                        timeline_chart(chart_dir / "faults-overload-timeline.png", by, ("overload",), slo,
                                       f"{num(plan.get('overload_factor'), 1)}x MST for "
                                       f"{num(plan.get('overload_seconds'))} s, then "
                                       f"{num(plan.get('recover_factor'), 1)}x"))
    headline, findings = verdict(by)
    return Section("Faults and overload", rs.scenario, body, appendix=appendix(by),
                   decisions=decisions(by), verdict=headline, findings=findings, warnings=rs.warnings)


def summary_row(label: str, records: list[dict]) -> list[str]:
    fr, rt, ov, ho, no, fl = (summaries(records, c) for c in ("freeze", "restart", "overload", "hostile", "normal",
                                                               "flood"))
    return [label, cell(r.get("rate") for r in records), recovery_cell(fr), cell(map(errors_of, fr)),
            recovery_cell(rt), cell(map(errors_of, rt)), span(served_2x(ov)),
            cell(x.get("errors_high") for x in ov), recovery_cell(ov), f"{share_cell(ho)} ({share_cell(no)})",
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


DB_CASES = ("restart", "freeze")


def db_faults(by: dict[str, list[dict]], labels) -> dict[str, dict[str, list[dict]]]:
    """Per label that ran either, its restart and its freeze apart: each case has its own recovery and errors."""
    return {lab: f for lab in labels if any((f := {case: summaries(by[lab], case) for case in DB_CASES}).values())}


def recovered_all(faults_: dict[str, dict[str, list[dict]]]) -> list[str]:
    """The labels that recovered from every freeze and every restart (a case never run is no recovery)."""
    return [lab for lab, f in faults_.items() if all(s and len(recoveries(s)) == len(s) for s in f.values())]


def error_spreads(faults_: dict[str, dict[str, list[dict]]], case: str) -> dict[str, Spread]:
    """One case's errors as a share of the requests offered, among recovered_all; empty with fewer than two ports
    (nothing to compare)."""
    errs = {lab: sp for lab in recovered_all(faults_) if (sp := spread(map(error_share, faults_[lab][case])))}
    return errs if len(errs) > 1 else {}


def errors_compared(faults_: dict[str, dict[str, list[dict]]], case: str) -> str:
    """One case's error shares among recovered_all, compared pairwise (fewer is better; above / below only where a
    whole range is): 'a fewest (below every other), b, c the most (no other's range above theirs)', 'none in any
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
    choice = f"{', '.join(ok)} always recovered" if ok else "no port always recovered"
    choice += "".join(f"; fewest {case} errors by share among them: {', '.join(fewest)} (below every other)"
                      for case in DB_CASES
                      if (fewest := table.above_all(error_spreads(faults_, case), higher_is_better=False)))
    choice += f"; not always recovered: {', '.join(not_ok)}" if not_ok else ""
    choice += "".join(f"; {case} not run: {', '.join(labs)}" for case in DB_CASES
                      if (labs := [lab for lab, f in faults_.items() if not f[case]]))
    remedies = [f"{lab}: {REMEDIES[port_of(lab)]}" for lab in not_ok if port_of(lab) in REMEDIES and not setting]
    return Decision("database restarts / freezes" + (f", with {setting}" if setting else ""),
                    "recovery under the one rule after the fault, then the errors (pairwise)", choice,
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
        errs += f" ({med}{'' if low == high else f' ({low}–{high})'} % of the requests)"
    if len(times) == len(s):
        return f"{label} recovered after {cell(times, secs)} s with {errs}"
    if not times:
        return f"{label} did not recover in any of {len(s)} run(s) ({errs})"
    return f"{label} recovered in {len(times)} of {len(s)} runs (after {cell(times, secs)} s) with {errs}"


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
    if not any(x.get("recovery_judged_on") for x in s):     # before issue 34: the 2x run went on sending its backlog
        rec += " (with the 2x run's backlog still sent, up to the generator's 10-s timeout: not the port's own time)"
    return (f"{label} served {span(served_2x(s))} req/s at 2x "
            f"({f'generator behind in {n} of {len(s)} runs; ' if n else ''}"
            f"{cell(x.get('errors_high') for x in s)} errors"
            + (f", {cell(unsent)} of them never sent, held by the generator at the end"
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
                  f" Errors as a share of the requests offered, at the defaults, among the ports that recovered from "
                  f"every freeze and restart ({among}): "
                  f"{comp}." if (comp := errors_compared(faults_, case)) else "")
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
    out = ["## Faults and overload: every case", "",
           "Per port and iteration, the cases in the order run; `failed windows` are the 1-s windows that failed the "
           "rule (after the fault's end for freeze and restart).", ""]
    for label, records in by.items():
        out += [f"### faults: {label}", ""]
        for r in records:
            w = r.get("warmup") or {}
            out += [f"**Iteration {r.get('iteration', 1)}** ({r.get('status')}): rate {num(r.get('rate'))}/s from "
                    f"MST {num(r.get('mst'))} ({r.get('mst_source', '?')}); warm-up {num(w.get('seconds'))} s, "
                    f"{'settled' if w.get('settled') else '**not settled**'}.", ""]
            out += table.markdown(["case", "rate", "p99 (ms)", "errors", "<errors by kind", "failed windows",
                                   "recovered after (s)", "<result"],
                                  [case_row(case, c.get("summary") or {}) for case, c in cases_of(r).items()])
    return out


def case_row(case: str, s: dict) -> list[str]:
    """One case of one iteration in the appendix (overload: its 2x run, errors at 2x / at 0.5x)."""
    kinds = s.get("errors_by_kind") or s.get("errors_high_by_kind") or {}
    errors = f"{num(s.get('errors_high'))} / {num(s.get('errors_low'))}" if case == "overload" else num(errors_of(s))
    recovery = "–" if "recovery_s" not in s else "not recovered" if s["recovery_s"] is None else s["recovery_s"]
    return [case, num(s.get("rate") or s.get("rate_high")), ms(s.get("p99_ms") or s.get("p99_high_ms")), errors,
            ", ".join(f"{k} {v:,}" for k, v in kinds.items()) or "none",
            f"{s.get('failed_windows', '–')}/{s.get('windows', '–')}", recovery,
            s.get("failure") or ("pass" if "failure" in s else "–")]

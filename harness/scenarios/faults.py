"""faults: per port, one warmed-up JVM through a normal run, hostile tokens mixed into the stream, a flood of idle
connections, the database frozen (SIGSTOP) and restarted (SIGKILL + start), 2x its MST then 0.5x; then the same JVM
must still answer. Each case is one step cut into 1-s windows, each judged by the one rule (docs/scenarios.md, "faults").
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import signal
import tempfile
import threading
import time

import psutil
import requests

from .. import db, driver, hostile, ports, tokens
from ..errors import Fatal
from ..method.faults import (DB_CASES, JUDGED_ON_FRESH, JUDGED_ON_LOW, errors_by_kind, errors_split,
                             hostile_outcome, log_errors, valid_rate)
from ..method.record import MIN_RATE, Step, round_rate
from ..method.timeline import failed_windows, judge_windows, recovery_s
from ..session import Context
from ..target import alive

LEAD_S = 1.0        # from launching openloop to its schedule's start (its connections open in milliseconds)
FRESH_LEAD_S = 0.5  # from the fault's end to the fresh probe's first request (launch and connect in between)
OPEN_LEAD_S = 3.0   # the 0.5x run opens its (many) connections this long before the 2x schedule ends


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
            if (pid := db.server_pid()) is None:
                raise Fatal("faults: no local MariaDB running")
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
                "failed_windows": failed, "windows": total, "app_rss_mb_peak": s.app_rss_mb_peak, "app_threads_peak": s.app_threads_peak}

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
            self.ctx.say("flood", f"warning: JVM file limit {limit} < {need}")
        s, data = self.step("flood", self.rate, self.plan.normal_seconds,
                            extra=("--idle-connections", str(n),
                                   "--connect-concurrency", str(self.plan.idle_connect_concurrency)))
        return {"step": data, "summary": {
            **self.windows_summary(s), "idle_asked": n, "idle_opened": s.extra.get("idle_connections_opened"),
            "idle_open_at_end": s.extra.get("idle_connections_open_at_end"),
            "idle_connect_errors": s.extra.get("idle_connect_errors"), "jvm_open_files_limit": limit,
            "open_files_needed": need}}

    def db_fault(self, kind: str) -> dict:
        plan, logged_from = self.plan, self.target.log_size()    # what the app logs from here is the case's
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
            raise Fatal(f"database {kind} did not happen (see above)")
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
            "recovery_judged_on": JUDGED_ON_FRESH,
            "recovery_s": recovered,
            "recovery_all_s": recovery_s(s.extra["intervals"], ended, plan.interval_seconds),
            "fresh_rate": fresh and fresh["rate"], "fresh_p99_ms": fresh and fresh["step"]["latency_ms"].get("p99"),
            "observed_after_s": round(seconds - ended, 1), "answers_after": answers, "same_jvm": same_jvm,
            "app_log": log_errors(self.target.log_since(logged_from))}}

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
        is the port's (were the first run to send its backlog, every port would "recover" with the generator's
        10-s timeout)."""
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
            "recovery_judged_on": JUDGED_ON_LOW,
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
        raise Fatal("faults: local MariaDB only, not BENCH_DB=external")
    driver.run(ctx, Faults(), plan, selected)


def _line(summary: dict) -> str:
    keys = ("rate", "p99_ms", "failure", "errors", "failed_windows", "windows", "recovery_s", "errors_during",
            "errors_after", "hostile_unexpected", "idle_open_at_end", "achieved_high_rps", "errors_high", "errors_low",
            "app_threads_peak", "answers_after")
    return ", ".join(f"{k} {summary[k]}" for k in keys if k in summary)

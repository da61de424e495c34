"""Faults and overload (`SCENARIO=faults just bench PORT|all`): what each port does when the database freezes
or restarts, when traffic doubles, when 10,000 idle connections are held, and when hostile tokens are mixed
into the stream.

Per port and iteration, one fresh JVM, warmed up, then the cases, the destructive ones last: a normal run
(the reference of the hostile and flood cases), hostile input, connection flood, DB freeze, DB restart,
overload; then the JVM must still answer, with the same pid. Every case runs at a constant rate with openloop
(open model, latency from the intended send time, 1-s interval lines by completion time); rates scale from
the port's baseline MST (common.baseline_msts(); a port without one gets probe_fraction x a closed-loop
capacity probe). Faults are injected from a thread while openloop runs, at a fixed offset from the schedule's
start (--start-at-monotonic-ns); a frozen DB is always resumed and a killed one always started again.
Every figure the report shows is computed here and stored in the JSON (a case's "summary").
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import os
import signal
import statistics
import tempfile
import threading
import time
import warnings
from pathlib import Path

import psutil
import requests

from .. import bench, db, ports, tokens
from ..errors import Fatal
from ..paths import ROOT, UNKNOWN_TOKENS
from ..sampling import Sampler
from . import common

CONTRACT = ROOT / "tests" / "conformance" / "test_contract.py"
PAUSE_S = 2.0      # between cases: lets a backlog drain
LEAD_S = 1.0       # from launching openloop to its schedule's start (64 connections open in milliseconds)


@dataclasses.dataclass(frozen=True)
class Plan:
    """bench.toml [faults] (with [faults.quick] over it when QUICK=1)."""
    iterations: int
    warmup_seconds: float
    normal_fraction: float
    normal_seconds: float
    interval_seconds: float
    fault_at_seconds: float
    freeze_seconds: float
    after_seconds: float
    recovery_factor: float
    overload_factor: float
    overload_seconds: float
    recover_factor: float
    recover_seconds: float
    overload_connections: int
    idle_connections: int
    idle_connect_concurrency: int
    hostile_fraction: float
    probe_fraction: float

    @classmethod
    def from_settings(cls, settings: dict) -> "Plan":
        section = settings["faults"]   # [faults.quick] already laid over it by settings.load with QUICK=1
        return cls(**{f.name: section[f.name] for f in dataclasses.fields(cls)})


# --- pure figures from interval lines (unit-tested) ----------------------------------------------------------

def recovery_s(intervals: list[dict], from_s: float, threshold_ms: float, expected: float) -> float | None:
    """Seconds from `from_s` (schedule time) to the end of the first window of the run's good tail: from that
    window on, every window has p99 <= threshold_ms, no errors, no non-2xx and at least half the `expected`
    answers (a frozen server completes nothing, which is not a good window). None when the run ends bad."""
    after = [w for w in intervals if w["t_s"] > from_s]
    first_good = None
    for w in after:
        good = (w["completed"] >= 0.5 * expected and w["p99_ms"] <= threshold_ms
                and not w.get("errors") and not w.get("non_2xx"))
        if not good:
            first_good = None
        elif first_good is None:
            first_good = w
    return None if first_good is None else round(max(0.0, first_good["t_s"] - from_s), 1)


def errors_split(intervals: list[dict], split_s: float, interval_s: float) -> tuple[int, int]:
    """Failed requests (errors + non-2xx answers) up to and including the window that holds `split_s` (the
    moment the fault ended), and in the windows after it."""
    failed = lambda w: w.get("errors", 0) + w.get("non_2xx", 0)  # noqa: E731
    during = sum(failed(w) for w in intervals if w["t_s"] - interval_s < split_s)
    return during, sum(failed(w) for w in intervals) - during


def reference_p99(intervals: list[dict], before_s: float) -> float | None:
    """The worst 1-s p99 before the fault: what 'normal' looked like in this very run."""
    before = [w["p99_ms"] for w in intervals if w["t_s"] <= before_s and w["completed"]]
    return max(before) if before else None


def errors_by_kind(step: dict) -> dict:
    """Non-2xx answers by status and failures without an answer by kind; zeros left out."""
    kinds = {f"HTTP {code}": n for code, n in step.get("statuses", {}).items() if not code.startswith("2")}
    kinds.update({k: n for k, n in step["errors"].items() if k != "non_2xx" and n})
    return kinds


# --- watching the JVM and injecting faults -------------------------------------------------------------------

class Watch:
    """The JVM's RSS and OS thread count every 0.5 s (psutil), and whether it is alive, on a thread."""

    def __init__(self, pid: int):
        self.pid = pid
        self.samples: list[tuple[float, float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while True:
            try:
                p = psutil.Process(self.pid)
                self.samples.append((time.monotonic(), p.memory_info().rss / 2**20, p.num_threads()))
            except psutil.Error:
                pass
            if self._stop.wait(0.5):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def peaks(self) -> dict:
        return {"app_rss_mb_peak": round(max((s[1] for s in self.samples), default=0), 1),
                "app_threads_peak": max((s[2] for s in self.samples), default=0)}


class Fault:
    """A fault on a thread at monotonic time `at`: freeze the DB (SIGSTOP for `seconds`, SIGCONT always) or
    restart it (SIGKILL, wait until it is gone, start it again with the same data). `finish()` joins it, cuts a
    freeze short if the run ended early, and re-raises what failed in it."""

    def __init__(self, kind: str, at: float, seconds: float = 0.0, db_cpus: str | None = None):
        self.kind, self.at, self.seconds, self.db_cpus = kind, at, seconds, db_cpus
        self.began: float | None = None     # monotonic: SIGSTOP / SIGKILL sent
        self.ended: float | None = None     # monotonic: SIGCONT sent / the DB accepts logins again
        self.error: BaseException | None = None
        self._cut = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Fault":
        self._thread.start()
        return self

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
        process = psutil.Process(pid)
        os.kill(pid, signal.SIGKILL)
        self.began = time.monotonic()
        try:
            # gone (or a zombie nobody reaped yet) before it is started again: same data directory
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    if process.status() == psutil.STATUS_ZOMBIE:
                        break
                except psutil.NoSuchProcess:
                    break
                time.sleep(0.02)
        finally:
            db.up(self.db_cpus)   # one call, also right after a kill (db/local.sh, db.wait_reachable)
            self.ended = time.monotonic()

    def finish(self):
        self._cut.set()
        self._thread.join()
        if self.kind == "freeze":
            pid = db.server_pid()
            if pid is not None:
                os.kill(pid, signal.SIGCONT)   # whatever happened above, never leave the DB stopped
        if self.error is not None:
            raise self.error


# --- the cases -----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Port:
    """The port under test in one iteration: where to send, its JVM, and the rates."""
    url: str
    pid: int
    token: str
    mst: int
    mst_source: str
    normal_rate: int


class Cases:
    def __init__(self, ctx: common.Context, plan: Plan):
        self.ctx, self.plan = ctx, plan
        self.load = ctx.settings["load"]

    def run(self, p: Port, rate: float, seconds: float, connections: int | None = None, extra: tuple = (),
            start_ns: int | None = None) -> dict:
        """One openloop run with 1-s interval lines, the app's and DB's CPU and RSS, and the JVM's peaks."""
        extra = ("--report-interval", f"{self.plan.interval_seconds:g}", *extra)
        if start_ns is not None:
            extra += ("--start-at-monotonic-ns", str(start_ns))
        with Sampler(p.pid, db.server_pid()) as sampler, Watch(p.pid) as watch:
            result = self.ctx.gen.run_rate(p.url, rate, seconds, connections or self.load["connections"],
                                           self.ctx.settings["cpus"]["generator"], extra=extra)
        step = bench.add_resources(result, sampler)
        step.update(watch.peaks())
        step["alive"] = _alive(p.pid)
        return step

    def normal(self, p: Port) -> dict:
        step = self.run(p, p.normal_rate, self.plan.normal_seconds)
        return {"run": step, "summary": {"rate": p.normal_rate, "p99_ms": step["latency_ms"].get("p99"),
                                         "app_rss_mb_peak": step["app_rss_mb_peak"],
                                         "errors": sum(step["errors"].values())}}

    def hostile(self, p: Port, normal: dict) -> dict:
        lines, expected = hostile_lines()
        with tempfile.NamedTemporaryFile("w", prefix="faults-hostile-", suffix=".txt", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            step = self.run(p, p.normal_rate, self.plan.normal_seconds,
                            extra=("--mix-authorization", f.name, "--mix-fraction", f"{self.plan.hostile_fraction:g}"))
        finally:
            os.unlink(f.name)
        mix = step["mix"]
        unexpected, server_errors = 0, 0
        by_case: dict[str, dict] = {}
        for (case, want), got in zip(expected, mix["statuses_by_line"]):
            unexpected += sum(n for code, n in got.items() if int(code) != want)
            server_errors += sum(n for code, n in got.items() if code.startswith("5"))
            by_case[case] = got
        p99, ref = step["latency_ms"].get("p99"), normal["summary"]["p99_ms"]
        return {"run": step, "cases": [c for c, _ in expected], "expected_statuses": [w for _, w in expected],
                "summary": {"rate": p.normal_rate, "fraction": self.plan.hostile_fraction,
                            "hostile_sent": mix["completed"] + sum(mix["errors"].values()),
                            "hostile_as_expected": mix["completed"] - unexpected,
                            "hostile_unexpected": unexpected, "hostile_5xx": server_errors,
                            "hostile_failed": sum(mix["errors"].values()),
                            "hostile_p99_ms": mix["latency_ms"].get("p99"),
                            "valid_p99_ms": p99, "valid_p99_without_ms": ref,
                            "valid_p99_ratio": round(p99 / ref, 2) if p99 and ref else None,
                            "valid_errors": sum(step["errors"].values()), "by_case": by_case}}

    def flood(self, p: Port, normal: dict) -> dict:
        n = self.plan.idle_connections
        limits = open_files(p.pid)
        need = n + self.load["connections"] + self.ctx.settings["db"]["pool_size"] + 200
        if limits and limits < need:
            print(f"faults: warning: the JVM may open {limits} files, the flood needs about {need}", flush=True)
        step = self.run(p, p.normal_rate, self.plan.normal_seconds,
                        extra=("--idle-connections", str(n),
                               "--connect-concurrency", str(self.plan.idle_connect_concurrency)))
        ref = normal["summary"]
        p99 = step["latency_ms"].get("p99")
        return {"run": step, "summary": {
            "rate": p.normal_rate, "idle_asked": n, "idle_opened": step.get("idle_connections_opened"),
            "idle_open_at_end": step.get("idle_connections_open_at_end"),
            "idle_connect_errors": step.get("idle_connect_errors"),
            "p99_ms": p99, "p99_without_ms": ref["p99_ms"],
            "p99_ratio": round(p99 / ref["p99_ms"], 2) if p99 and ref["p99_ms"] else None,
            "app_rss_mb_peak": step["app_rss_mb_peak"], "app_rss_mb_peak_without": ref["app_rss_mb_peak"],
            "app_threads_peak": step["app_threads_peak"], "errors": errors_by_kind(step),
            "jvm_open_files_limit": limits, "open_files_needed": need,
            "somaxconn": _sysctl("net/core/somaxconn")}}

    def db_fault(self, p: Port, kind: str) -> dict:
        plan = self.plan
        seconds = plan.fault_at_seconds + plan.freeze_seconds + plan.after_seconds
        start_ns = time.monotonic_ns() + int(LEAD_S * 1e9)
        start = start_ns / 1e9
        fault = Fault(kind, start + plan.fault_at_seconds, plan.freeze_seconds, self.ctx.settings["cpus"]["db"]).start()
        try:
            step = self.run(p, p.normal_rate, seconds, start_ns=start_ns)
        finally:
            fault.finish()
        intervals = step["intervals"]
        if fault.began is None or fault.ended is None:
            raise Fatal(f"the database {kind} did not happen inside the run (see the lines above)")
        began, ended = fault.began - start, fault.ended - start
        ref = reference_p99(intervals, began)
        threshold = plan.recovery_factor * ref if ref else None
        during, after = errors_split(intervals, ended, plan.interval_seconds)
        answers, same_pid = answers_after(p)
        summary = {
            "rate": p.normal_rate, "fault_at_s": round(began, 2), "fault_end_s": round(ended, 2),
            "fault_s": round(ended - began, 2), "errors_during": during, "errors_after": after,
            "errors": errors_by_kind(step), "max_ms": step["latency_ms"].get("max"),
            "p99_ms": step["latency_ms"].get("p99"), "reference_p99_ms": ref,
            "recovery_threshold_ms": threshold,
            "recovery_s": recovery_s(intervals, ended, threshold, p.normal_rate * plan.interval_seconds)
            if threshold else None,
            "observed_after_s": round(seconds - ended, 1),
            "alive": step["alive"], "same_pid": same_pid, "answers_after": answers}
        return {"run": step, "summary": summary}

    def overload(self, p: Port) -> dict:
        plan = self.plan
        high, low = int(p.mst * plan.overload_factor), int(p.mst * plan.recover_factor)
        start_ns = time.monotonic_ns() + int(2 * LEAD_S * 1e9)
        low_start_ns = start_ns + int(plan.overload_seconds * 1e9)
        with Watch(p.pid) as watch, concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            over = pool.submit(self.run, p, high, plan.overload_seconds, plan.overload_connections, (), start_ns)
            # the 0.5x run starts where the 2x schedule ends (its connections open 3 s before), while the 2x
            # run's last answers still come back: the backlog is not wiped out between the two
            time.sleep(max(0.0, low_start_ns / 1e9 - 3 - time.monotonic()))
            low_step = self.run(p, low, plan.recover_seconds, plan.overload_connections, (), low_start_ns)
            high_step = over.result()
        slo = self.load["slo_p99_ms"]
        answers, same_pid = answers_after(p)
        return {"high": high_step, "low": low_step, "summary": {
            "mst": p.mst, "rate_high": high, "rate_low": low, "connections": plan.overload_connections,
            "achieved_high_rps": high_step["achieved_rps"], "errors_high": errors_by_kind(high_step),
            "p99_high_ms": high_step["latency_ms"].get("p99"), "max_high_ms": high_step["latency_ms"].get("max"),
            "generator_behind": high_step["generator_behind"] or low_step["generator_behind"],
            "errors_low": errors_by_kind(low_step), "p99_low_ms": low_step["latency_ms"].get("p99"),
            "recovery_s": recovery_s(low_step["intervals"], 0.0, slo, low * plan.interval_seconds),
            "observed_low_s": plan.recover_seconds, "slo_p99_ms": slo,
            **watch.peaks(), "alive": _alive(p.pid), "same_pid": same_pid, "answers_after": answers}}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


def answers_after(p: Port) -> tuple[bool, bool]:
    """(a valid request gets its 200 within 10 s, the JVM is the one started for this iteration)."""
    ok = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not ok:
        try:
            ok = requests.get(p.url, headers={"Authorization": f"Bearer {p.token}"}, timeout=5).status_code == 200
        except requests.RequestException:
            time.sleep(0.5)
    return ok, _alive(p.pid)


def open_files(pid: int) -> int | None:
    """The JVM's soft RLIMIT_NOFILE (the JVM raises it to the hard limit itself)."""
    try:
        soft = psutil.Process(pid).rlimit(psutil.RLIMIT_NOFILE)[0]
        return None if soft == psutil.RLIM_INFINITY else soft
    except (psutil.Error, AttributeError):
        return None


def _sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys", name).read_text().split()[0])
    except (OSError, ValueError):
        return None


def hostile_lines() -> tuple[list[str], list[tuple[str, int]]]:
    """The conformance suite's hostile Authorization values (each must get 401) and a few well-signed tokens
    of unknown users (404), as openloop --mix-authorization lines with (case, expected status) beside."""
    spec = importlib.util.spec_from_file_location("faults_contract", CONTRACT)
    contract = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # PyJWT warns about the short key of the (hostile) HS512 token
        spec.loader.exec_module(contract)
        hostile = contract.hostile_tokens()
    lines, expected = [], []
    for case, value in hostile:
        value = value.strip()
        if value and value not in lines:    # "Bearer " and "Bearer" are one line once trimmed
            lines.append(value)
            expected.append((case, 401))
    for i, token in enumerate(UNKNOWN_TOKENS.read_text().split()[:3]):
        lines.append(f"Bearer {token}")
        expected.append((f"unknown email {i + 1}", 404))
    return lines, expected


# --- the run -------------------------------------------------------------------------------------------------

def run(ctx: common.Context, selected: list[ports.Port]) -> None:
    plan = Plan.from_settings(ctx.settings)
    if db.is_external() or db.server_pid() is None:
        raise Fatal("the faults scenario freezes and restarts the local MariaDB: run it without BENCH_DB=external")
    msts = common.baseline_msts()
    cases = Cases(ctx, plan)
    for iteration in range(1, plan.iterations + 1):
        shift = (iteration - 1) % len(selected)
        for port in selected[shift:] + selected[:shift]:
            one_port(ctx, cases, plan, port, iteration, msts.get(port.name))


def one_port(ctx: common.Context, cases: Cases, plan: Plan, port: ports.Port, iteration: int,
             baseline_mst: int | None) -> dict:
    path = ctx.path(port, f"-{iteration}")
    record = ctx.new_record(port, iteration=iteration, plan=dataclasses.asdict(plan), cases={})
    began = time.monotonic()

    def say(text: str) -> None:
        print(f"[faults {port.name} #{iteration}] {text}  ({time.monotonic() - began:.0f} s)", flush=True)

    with ctx.port(port) as (running, target):
        try:
            token = tokens.load()[0]
            if baseline_mst:
                mst, source = baseline_mst, "baseline"
            else:
                if ctx.closed_gen is None:
                    raise Fatal(f"{port.name} has no baseline MST and the fallback probe needs wrk: `apt-get install wrk`")
                probe = target.closed(ctx.settings["load"]["connections"], ctx.settings["load"]["probe_seconds"])
                mst, source = bench.round_rate(plan.probe_fraction * probe["achieved_rps"]), "probe"
            p = Port(target.url, running.pid, token, mst, source, bench.round_rate(plan.normal_fraction * mst))
            record.update(pid=running.pid, startup_s=running.startup_seconds and round(running.startup_seconds, 2),
                          mst=mst, mst_source=source, normal_rate=p.normal_rate)
            say(f"up; MST {mst}/s ({source}); normal rate {p.normal_rate}/s; warm-up {plan.warmup_seconds:g} s, "
                f"then until steady")
            ctx.gen.run_rate(p.url, p.normal_rate, plan.warmup_seconds, ctx.settings["load"]["connections"],
                             ctx.settings["cpus"]["generator"])
            # then the baseline's warm-up until steady at the normal rate: every case compares with the normal run,
            # and a JVM still compiling (spring-platform after 20 s: p99 3 s) would make that reference meaningless
            if plan.warmup_seconds:
                warm = bench.warm_up(target, p.normal_rate, say)
                record["warmup"] = {k: warm[k] for k in ("rate", "settled", "seconds")}
                say(f"warm-up {'settled' if warm['settled'] else 'did NOT settle'} after {warm['seconds']:.0f} s")

            def case(name: str, fn, *args) -> dict:
                time.sleep(PAUSE_S)
                result = fn(p, *args)
                record["cases"][name] = result
                ctx.save(record, path)
                say(f"{name}: {_line(result['summary'])}")
                return result

            normal = case("normal", cases.normal)
            case("hostile", cases.hostile, normal)
            case("flood", cases.flood, normal)
            case("freeze", cases.db_fault, "freeze")
            case("restart", cases.db_fault, "restart")
            case("overload", cases.overload)
            answers, same = answers_after(p)
            record.update(answers_at_end=answers, same_pid_at_end=same and running.process.poll() is None,
                          seconds=round(time.monotonic() - began, 1), status="complete")
        finally:
            ctx.save(record, path)
    say(f"done in {time.monotonic() - began:.0f} s")
    return record


def _line(summary: dict) -> str:
    keys = ("rate", "errors_during", "errors_after", "max_ms", "recovery_s", "hostile_unexpected", "valid_p99_ratio",
            "idle_open_at_end", "p99_ratio", "achieved_high_rps", "p99_high_ms", "app_rss_mb_peak",
            "app_threads_peak", "alive", "answers_after", "p99_ms")
    return ", ".join(f"{k} {summary[k]}" for k in keys if k in summary)


# --- the report ----------------------------------------------------------------------------------------------

def _fmt(values: list, digits: int = 0) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if isinstance(values[0], bool):
        yes = sum(values)
        return "yes" if yes == len(values) else ("**no**" if not yes else f"{yes} of {len(values)}")
    text = lambda v: f"{v:,.{digits}f}"  # noqa: E731
    mid = statistics.median(values)
    return text(mid) if len(values) == 1 or min(values) == max(values) else f"{text(mid)} ({text(min(values))}–{text(max(values))})"


def _kinds(dicts: list[dict]) -> str:
    """Errors by kind over the iterations: median count per kind (kinds seen in any iteration)."""
    kinds = sorted({k for d in dicts for k in d})
    if not kinds:
        return "none"
    return ", ".join(f"{k} {_fmt([d.get(k, 0) for d in dicts])}" for k in kinds)


def _recovery(values: list, observed: list) -> str:
    """Recovery times; a run that never recovered shows as '> N' (the seconds it was observed)."""
    shown = [v if v is not None else None for v in values]
    if all(v is None for v in shown):
        return f"> {_fmt(observed)} (not recovered)"
    never = sum(v is None for v in shown)
    return _fmt(shown, 1) + (f", {never} run(s) not recovered" if never else "")


def render(results: Path) -> list[str]:
    records = [r for r in common.load_runs(results) if r.get("scenario") == "faults" and r.get("cases")]
    if not records:
        return []
    by_port: dict[str, list[dict]] = {}   # a run with framework overrides (a remedy) is a row of its own
    for r in records:
        by_port.setdefault(common.label(r), []).append(r)
    order = sorted(by_port, key=lambda name: (list(ports.PORTS).index(name.split(" ")[0]), name))
    newest = records[-1]
    plan = newest.get("plan", {})
    env = newest.get("environment", {})
    runs = sorted({r["run_id"] for r in records})
    out = ["## Faults and overload", "",
           f"`SCENARIO=faults just bench all`: {len(runs)} run(s), {len(order)} port(s) "
           f"(run ids {', '.join(runs)}; {env.get('cpu_model', '?')}, {env.get('cores', '?')} cores). Raw: "
           f"`results/faults/`. One fresh JVM per port and run, warmed up {plan.get('warmup_seconds', '?')} s at "
           f"{_pct(plan.get('normal_fraction'))} of its MST and then until steady (as the baseline: CPU per request and "
           "p50 of two 10-s windows within 5 %), then a normal run, hostile input, the flood, the freeze, "
           "the restart and overload, in that order (the same JVM throughout); every case at a constant "
           "rate with openloop (open model, latency from the intended send time), 1-s windows by completion time. "
           "Rates scale from the port's baseline MST (the report's current run set; a port without one: "
           f"{plan.get('probe_fraction', '?')} x a closed-loop probe). Figures: median (min–max) over the runs.", ""]
    if min(len(rs) for rs in by_port.values()) < 2:
        out += ["> Some rows come from a single run: they have no spread yet. Read them as what happened once "
                "(recovered or not, which errors), not as a ranking; `SCENARIO=faults just bench NAME` again adds a "
                "run to the medians.", ""]

    def cases(name: str) -> list[tuple[str, list[dict]]]:
        rows = []
        for port in order:
            got = [with_settled(r, name) for r in by_port[port] if name in r.get("cases", {})]
            if got:
                rows.append((port, got))
        return rows

    def col(rows_of: list[dict], key: str, digits: int = 0) -> str:
        return _fmt([s.get(key) for s in rows_of], digits)

    for name, title in (("freeze", "Database freeze"), ("restart", "Database restart")):
        rows = cases(name)
        if not rows:
            continue
        if name == "freeze":
            how = (f"MariaDB stopped with SIGSTOP for {plan.get('freeze_seconds')} s, "
                   f"{plan.get('fault_at_seconds')} s into a run at {_pct(plan.get('normal_fraction'))} of MST")
        else:
            how = (f"MariaDB killed (SIGKILL) {plan.get('fault_at_seconds')} s into a run at "
                   f"{_pct(plan.get('normal_fraction'))} of MST and started again at once on the same data "
                   "(crash recovery included in 'DB away')")
        out += [f"### {title}", "",
                f"{how}; observed until {plan.get('fault_at_seconds', 0) + plan.get('freeze_seconds', 0) + plan.get('after_seconds', 0)} s. "
                f"Recovered: from that 1-s window on, every window has p99 ≤ {plan.get('recovery_factor', 0):g}x the worst "
                "pre-fault window's p99, no errors, and at least half the expected answers; counted from the moment "
                "the database is back.", "",
                "| port | rate (req/s) | DB away (s) | failed during / after | errors by kind | worst latency (ms) "
                "| pre-fault p99 (ms) | recovered after (s) | same JVM answers after |",
                "|---|---:|---:|---:|---|---:|---:|---:|---|"]
        for port, s in rows:
            out.append(f"| {port} | {col(s, 'rate')} | {col(s, 'fault_s', 1)} | {col(s, 'errors_during')} / "
                       f"{col(s, 'errors_after')} | {_kinds([x['errors'] for x in s])} | {col(s, 'max_ms')} | "
                       f"{col(s, 'reference_p99_ms', 2)} | {_recovery([x.get('recovery_s') for x in s], [x.get('observed_after_s') for x in s])} | "
                       f"{_fmt([x['same_pid'] and x['answers_after'] for x in s])} |")
        out += ["", "How to read it: 'failed' counts requests answered with a non-2xx status or not at all; a port "
                "that only queues shows a worst latency near the time the database was away and no failures; "
                "'same JVM answers after' must be yes: no port may need a restart.", ""]

    rows = cases("overload")
    if rows:
        out += ["### Overload", "",
                f"{plan.get('overload_factor'):g}x the port's MST for {plan.get('overload_seconds')} s, then "
                f"{plan.get('recover_factor'):g}x for {plan.get('recover_seconds')} s (the second schedule starts where "
                f"the first ends), over {plan.get('overload_connections', 0):,} connections each; a request still "
                "unanswered 10 s after it was sent is a timeout, and the 2x run's requests still queued in the "
                "generator are sent or given up within 10 s of its end. Recovered: from that 1-s window of the "
                "low-rate run on, every window has p99 within the SLO, no errors and half the expected answers.", "",
                "| port | 2x rate (req/s) | achieved at 2x (req/s) | errors at 2x by kind | p99 at 2x (ms) "
                "| peak RSS (MiB) | peak threads | alive, answers after | recovered at 0.5x after (s) |",
                "|---|---:|---:|---|---:|---:|---:|---|---:|"]
        for port, s in rows:
            behind = " (generator behind)" if any(x.get("generator_behind") for x in s) else ""
            out.append(f"| {port} | {col(s, 'rate_high')} | {col(s, 'achieved_high_rps')}{behind} | "
                       f"{_kinds([x['errors_high'] for x in s])} | {col(s, 'p99_high_ms')} | {col(s, 'app_rss_mb_peak')} | "
                       f"{col(s, 'app_threads_peak')} | {_fmt([x['alive'] and x['answers_after'] for x in s])} | "
                       f"{_recovery([x.get('recovery_s') for x in s], [x.get('observed_low_s') for x in s])} |")
        out += ["", "How to read it: the achieved rate at 2x is what the port still serves when asked for twice what it "
                "can (a drop below its MST means overload costs it throughput); in an open model every request "
                "beyond capacity waits somewhere (the port's queues, or the generator's once every connection is "
                "busy), so p99 at 2x grows with the run; peak threads and RSS show where a port queues; recovery "
                "shows how long the backlog takes to clear at half the load.", ""]

    rows = cases("flood")
    if rows:
        out += ["### Connection flood", "",
                f"{plan.get('idle_connections', 0):,} idle keep-alive connections opened before and held during "
                f"{plan.get('normal_seconds')} s at {_pct(plan.get('normal_fraction'))} of MST, against the same "
                "run without them (the 'normal' run, just before).", "",
                "| port | rate (req/s) | idle open at end, as the client sees it / asked | idle connects failed | p99 without / with (ms) "
                "| peak RSS without / with (MiB) | peak threads | errors | JVM open-files limit |",
                "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
        for port, s in rows:
            out.append(f"| {port} | {col(s, 'rate')} | {col(s, 'idle_open_at_end')} / {col(s, 'idle_asked')} | "
                       f"{col(s, 'idle_connect_errors')} | {col(s, 'p99_without_ms', 2)} / {col(s, 'p99_ms', 2)} | "
                       f"{col(s, 'app_rss_mb_peak_without')} / {col(s, 'app_rss_mb_peak')} | {col(s, 'app_threads_peak')} | "
                       f"{_kinds([x['errors'] for x in s])} | {col(s, 'jvm_open_files_limit')} |")
        out += ["", "How to read it: an idle connection the server closed shows as 'open at end' below 'asked' (an "
                "idle timeout among the framework's defaults, when the JVM's open-files limit in the last column is "
                "above what the flood needs); the cost of holding them is the RSS and p99 difference. 'Open' is the "
                "client's view: a connection the server never accepts still looks open to a client that sends "
                "nothing (the kernel completed its handshake into the accept queue, or dropped its last ACK). What "
                "each server itself holds is measured in [Many concurrent users](#many-concurrent-users) (the JVM's "
                "file descriptors): past Tomcat's max-connections (8,192) the rest only wait.", ""]

    rows = cases("hostile")
    if rows:
        out += ["### Hostile input under load", "",
                f"{_pct(plan.get('hostile_fraction'))} of a constant-rate stream at {_pct(plan.get('normal_fraction'))} "
                "of MST replaced by the conformance suite's hostile Authorization values (alg none, HS384/HS512, "
                "wrong key, expired, not yet valid, missing or non-string email, forged or stripped signature, "
                "malformed, other schemes: each must get 401) and well-signed tokens of unknown users (404), "
                "counted apart by openloop (`--mix-authorization`), against the same stream without them.", "",
                "| port | rate (req/s) | hostile sent | answered as expected | unexpected (5xx) | valid p99 without / "
                f"with (ms) | ratio | after the first {SETTLE_S} s: worst 1-s p99 without / with (ms) | ratio |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for port, s in rows:
            out.append(f"| {port} | {col(s, 'rate')} | {col(s, 'hostile_sent')} | {col(s, 'hostile_as_expected')} | "
                       f"{col(s, 'hostile_unexpected')} ({col(s, 'hostile_5xx')}) | {col(s, 'valid_p99_without_ms', 2)} / "
                       f"{col(s, 'valid_p99_ms', 2)} | {col(s, 'valid_p99_ratio', 2)} | "
                       f"{col(s, 'settled_p99_without_ms', 1)} / {col(s, 'settled_p99_ms', 1)} | {col(s, 'settled_ratio', 2)} |")
        out += ["", "How to read it: 'unexpected' must be 0 (any other status than 401, or 404 for an unknown user); "
                "a ratio above 1.10 means the hostile tenth slowed the valid requests by more than 10 %. The whole-run "
                "ratio is dominated by the first seconds: in every port the 1-s windows' p99 jumped when the first "
                "hostile tokens arrived (tens to hundreds of ms; not profiled: likely the JVM compiling the rejection "
                "paths it had not run under load) and fell back within a few seconds, hence the last two columns "
                f"(windows after the first {SETTLE_S} s, the same measure for the run without them).", ""]
    return out


SETTLE_S = 5  # the first seconds of a run with hostile tokens pay for compiling their code paths (see render)


def worst_window_p99(case: dict, after_s: float = SETTLE_S) -> float | None:
    """The worst 1-s window's p99 (valid requests) after the run's first `after_s` seconds."""
    windows = [w["p99_ms"] for w in case.get("run", {}).get("intervals") or [] if w["t_s"] > after_s and w["completed"]]
    return max(windows) if windows else None


def with_settled(record: dict, name: str) -> dict:
    """The case's summary; for the hostile case also the valid requests' worst 1-s p99 after the first seconds,
    with and without the hostile tenth (the whole-run p99 is dominated by the first encounter of its code paths)."""
    summary = dict(record["cases"][name]["summary"])
    if name == "hostile" and "normal" in record.get("cases", {}):
        with_, without = worst_window_p99(record["cases"]["hostile"]), worst_window_p99(record["cases"]["normal"])
        summary.update(settled_p99_ms=with_, settled_p99_without_ms=without,
                       settled_ratio=round(with_ / without, 2) if with_ and without else None)
    return summary


def _pct(fraction) -> str:
    return "?" if fraction is None else f"{fraction * 100:g} %"

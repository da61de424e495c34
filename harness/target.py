"""The port under load: one place that runs a step and turns it into a typed Step record, the same for every
scenario. A step carries the generator's result, the app's and the database's CPU and memory inside the
measured window, per-request kernel events of both (context switches, syscalls, threads that ran) and the
database statements per request, judged by the one pass rule."""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import random
import re
import statistics
import time
from contextlib import closing
from pathlib import Path

import psutil
import requests

from . import compose, db, kernel, loadgen, ports, tokens
from .errors import Fatal
from .method.constants import DRAIN_MAX_S, DRAIN_POLL_S  # noqa: F401 (why each: method/constants.py)
from .method.record import MIN_RATE, Step, Warmup
from .method.rule import Rule, all_connections_busy
from .method.warmup import WarmupPlan, until_steady
from .sampling import Sampler


class AppExited(Fatal):
    """The port's process ended while it was measured (killed for memory, an OutOfMemoryError): a step of a dead
    port says nothing; a scenario that expects it (memory) records it."""


def alive(pid: int | None) -> bool:
    """The process runs (not gone, not a zombie nobody reaped yet)."""
    try:
        return pid is not None and psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False


@functools.cache
def _drain_token() -> str:
    return tokens.load()[0]


def correctness_check(url: str, pool: list[str], count: int) -> None:
    """A few random tokens must return exactly their rows before any load is sent."""
    with closing(db.connect()) as conn, conn.cursor() as cur, requests.Session() as http:
        for token in random.sample(pool, count):
            r = http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            expected = db.user_row(cur, tokens.email_of(token))
            if r.status_code != 200 or r.json() != expected:
                raise Fatal(f"{url} answered {r.status_code} {r.text[:200]!r} where the row {expected} was expected")


def target_url(running, settings) -> str:
    """Traffic goes to the configured target host only (loopback by default)."""
    host = settings["load"]["target_host"]
    return re.sub(r"^http://[^/:]+", f"http://{host}", running.url) if running.url.startswith("http://") else running.url


class External:
    """A port someone else started (another host): measured from outside only."""
    pid = None
    startup_seconds = None
    idle_rss_mb = None
    log = None

    def __init__(self, url):
        self.url = url

    def stop(self):
        pass


def start_port(port, settings, token, extra_env=None, variant=None):
    """The port under test: started here (local), by compose, or already running elsewhere (external)."""
    if compose.enabled():
        return compose.start(port, settings, token)
    if os.environ.get("BENCH_APP") == "external":
        return External(f"http://{settings['load']['target_host']}:{settings['load']['port']}/")
    return ports.start(port, settings, token, extra_env=extra_env, variant=variant)


def save(record: dict, path: Path) -> None:
    """Rewritten after every step (atomically), so an interrupted run keeps what finished."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)


def _statements() -> dict | None:
    try:
        return db.statement_counters()
    except Exception:          # a frozen or restarting database (faults): the step is measured without them
        return None


LOG_KEPT_BYTES = 4 << 20   # of an app log read for what failed: its first and last 4 MiB


@dataclasses.dataclass
class Target:
    """Where to send, which processes to sample, the generators, and the rule that judges each step."""
    url: str
    app_pid: int | None
    db_pid: int | None
    gen: loadgen.OpenModel
    closed_gen: loadgen.ClosedLoop | None
    settings: dict
    rule: Rule
    count_statements: bool = True     # off while the database is being frozen or killed
    # processes a scenario adds (the latency proxy, the downstream server): name -> their CPU seconds so far, so
    # each step carries <name>_cpu_cores and <name>_cpu_us_per_request beside the app's
    sides: dict = dataclasses.field(default_factory=dict)
    log: Path | None = None           # the app's log, quoted when it dies

    def _measured(self, run, phase: str, slo_ms: float | None) -> Step:
        app, database = kernel.tree_pids(self.app_pid), kernel.tree_pids(self.db_pid)
        before = (kernel.snapshot(app), kernel.snapshot(database), self.count_statements and _statements())
        sides, began = {name: cpu() for name, cpu in self.sides.items()}, time.monotonic()
        with Sampler(self.app_pid, self.db_pid) as sampler:
            try:
                result = run()
            except Fatal:
                self._check_alive(phase)          # a generator that found no server: the app died
                raise
        self._check_alive(phase)
        after = (kernel.snapshot(app), kernel.snapshot(database), self.count_statements and _statements())
        step = to_step(result, sampler, phase)
        wall = time.monotonic() - began
        for name, cpu in self.sides.items():
            used = cpu() - sides[name]
            step.extra[f"{name}_cpu_cores"] = round(used / wall, 3)
            step.extra[f"{name}_cpu_us_per_request"] = round(used / max(result.requests, 1) * 1e6, 1)
        step.kernel = {**kernel.per_request(before[0], after[0], result.requests, "app"),
                       **kernel.per_request(before[1], after[1], result.requests, "db")}
        if (jit := kernel.jit_share(before[0], after[0])) is not None:
            step.kernel["app_jit_share"] = jit        # the warm-up's steady state needs the JIT quiet
        if before[2] and after[2] and result.requests:
            between = db.statements_between(before[2], after[2])
            step.kernel.update({f"db_{k}_per_request": round(v / result.requests, 3) for k, v in between.items()})
        if result.target_rps is not None:
            step.slo_ms = self.rule.slo_ms() if slo_ms is None else slo_ms
            step.failure = self.rule.failure(target_rps=step.extra.get("offered_rps", result.target_rps),
                                             achieved_rps=step.achieved_rps,
                                             errors=step.error_count, p99_ms=step.p99,
                                             generator_behind=step.generator_behind, slo_ms=step.slo_ms,
                                             connections_busy=all_connections_busy(step.extra.get("max_in_flight"),
                                                                                   step.connections))
        return step

    def rate(self, rate: float, seconds: float, phase: str = "step", slo_ms: float | None = None,
             connections: int | None = None, url: str | None = None, extra: tuple = (),
             arrivals: str | None = None) -> Step:
        """One constant-rate step (open model), judged against `slo_ms` (default: the rule with nothing added);
        `arrivals` names another arrival process than [load]'s for this step (openloop only), kept in the step."""
        load = self.settings["load"]
        conns = connections or load["connections"]
        kwargs = {"extra": extra} if extra else {}
        gen = self.gen
        if arrivals is not None:
            if not hasattr(gen, "arrivals"):
                raise Fatal(f"{arrivals} arrivals come from openloop only: unset LOADGEN")
            gen = dataclasses.replace(gen, arrivals=arrivals)
        step = self._measured(lambda: gen.run_rate(url or self.url, rate, seconds, conns,
                                                   self.settings["cpus"]["generator"], **kwargs), phase, slo_ms)
        if arrivals is not None:
            step.extra["arrivals"] = arrivals
        return step

    def _check_alive(self, phase: str) -> None:
        if self.app_pid is not None and not alive(self.app_pid):
            raise AppExited(f"the app exited during a {phase} step" + (f": {self.log_tail()}" if self.log else ""))

    def log_tail(self) -> str:
        """The app log's last line (e.g. "Terminating due to java.lang.OutOfMemoryError: Java heap space")."""
        try:
            lines = [l for l in Path(self.log).read_text(errors="replace").splitlines() if l.strip()]
        except OSError:
            return "no log"
        return lines[-1][-200:] if lines else "empty log"

    def log_size(self) -> int:
        """The app log's size now: where what it logs next begins (no log: 0)."""
        try:
            return os.path.getsize(self.log) if self.log else 0
        except OSError:
            return 0

    def log_since(self, offset: int, keep: int = LOG_KEPT_BYTES) -> str:
        """What the app logged since `offset`: its first and last `keep` bytes (a port failing every request logs a
        stack trace per request: quarkus-virtual wrote 9.7 GB in 200 s after a restart), or nothing when the log
        cannot be read."""
        try:
            with open(self.log, "rb") as f:
                end = f.seek(0, os.SEEK_END)
                f.seek(offset)
                head = f.read(min(keep, max(0, end - offset)))
                if end - offset > 2 * keep:
                    f.seek(end - keep)
                    head += b"\n" + f.read(keep)
                elif end - offset > keep:
                    head += f.read()
                return head.decode(errors="replace")
        except (OSError, TypeError):
            return ""

    def drain(self, slo_ms: float | None = None, max_seconds: float = DRAIN_MAX_S) -> float:
        """After a failing step: wait until one request is answered within the SLO again (at most max_seconds).
        A step over capacity leaves a queue behind (an unbounded executor queue, a pool's wait queue, requests
        whose client gave up but that the server still runs); a fixed pause let it be measured by the next, lower
        step. A request joins the back of that queue, so its answer in time says the queue is gone. The seconds
        waited are returned."""
        slo_s = (self.rule.slo_ms() if slo_ms is None else slo_ms) / 1000
        token = _drain_token()
        began = time.monotonic()
        with requests.Session() as http:
            while (left := max_seconds - (time.monotonic() - began)) > 0 and (self.app_pid is None or alive(self.app_pid)):
                sent = time.monotonic()
                try:
                    r = http.get(self.url, headers={"Authorization": f"Bearer {token}"}, timeout=max(left, 0.1))
                    if r.status_code == 200 and time.monotonic() - sent <= slo_s:
                        break
                except requests.RequestException:
                    pass
                time.sleep(DRAIN_POLL_S)
        return round(time.monotonic() - began, 1)

    def warm_up(self, rate: float, plan: WarmupPlan, say, floor: int = MIN_RATE, **rate_kwargs) -> Warmup:
        """The one warm-up (method/warmup.py) at `rate` (never below `floor`), each window a step of this target;
        a failing window is drained before the next."""
        hot = self.closed_gen is not None and plan.closed_max_seconds
        warm = until_steady(lambda r, seconds: self.rate(r, seconds, "warmup", **rate_kwargs),
                            max(floor, rate), plan, say, floor=floor,
                            drain=lambda: self.drain(rate_kwargs.get("slo_ms")),
                            closed=(lambda seconds: self.closed(self.settings["load"]["connections"], seconds,
                                                                "warmup-closed")) if hot else None)
        say(f"warm-up {warm.text()}")
        return warm

    def closed(self, connections: int, seconds: float, phase: str = "closed") -> Step:
        if self.closed_gen is None:
            raise Fatal("closed-loop steps need Debian's wrk on PATH: `apt-get install wrk`")
        return self._measured(lambda: self.closed_gen.run(self.url, connections, seconds,
                                                          self.settings["cpus"]["generator"]), phase, None)


def to_step(result: loadgen.RateResult, sampler: Sampler, phase: str) -> Step:
    """A generator's result with the app's and the DB's CPU and memory inside its measured window."""
    usage = sampler.window(*result.window)
    wall = usage.pop("wall_s")
    served = result.achieved_rps * wall
    per_request = lambda cpu_s: round(cpu_s / served * 1e6, 1) if cpu_s is not None and served else None  # noqa: E731
    return Step(
        phase=phase, target_rps=result.target_rps, achieved_rps=result.achieved_rps, connections=result.connections,
        seconds=result.seconds, requests=result.requests, errors=result.errors, statuses=result.statuses,
        latency_ms=result.latency_ms, generator=result.generator, generator_behind=result.generator_behind,
        send_lag_ms=result.send_lag_ms,
        generator_cpu_cores=round(result.generator_cpu_s / max(result.seconds, 1e-9), 3),
        generator_cpu_us_per_request=round(result.generator_cpu_s / max(result.requests, 1) * 1e6, 1),
        app_cpu_cores=usage["app_cpu_cores"], db_cpu_cores=usage["db_cpu_cores"],
        app_cpu_us_per_request=per_request(usage["app_cpu_s"]), db_cpu_us_per_request=per_request(usage["db_cpu_s"]),
        app_rss_mb_mean=usage["app_rss_mb_mean"], app_rss_mb_peak=usage["app_rss_mb_peak"],
        app_threads_peak=usage["app_threads_peak"],
        histogram=result.histogram,
        extra={**result.extra, "app_user_us_per_request": per_request(usage["app_user_s"]),
               "app_system_us_per_request": per_request(usage["app_system_s"])})


# --- a request alone: its round trips through the latency proxy ----------------------------------------------

SEQUENTIAL_REQUESTS = 15


def sequential_ms(url: str, token: str, count: int = SEQUENTIAL_REQUESTS) -> float:
    """Median time of one request alone (keep-alive, one after another): its database round trips show."""
    times = []
    with requests.Session() as http:
        for _ in range(count + 1):
            began = time.perf_counter()
            r = http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            if r.status_code != 200:
                raise Fatal(f"{url} answered {r.status_code} through the proxy: {r.text[:200]!r}")
            times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times[1:]), 3)


def round_trips(alone_ms: float, at_zero_ms: float, latency_ms: float) -> int:
    """Database round trips per request, from one request alone at this latency and at 0 ms. Noise only adds time
    (a JIT pause, a pool's ping of an idle connection), so a count is rounded up from .75 on, not .5: measured
    here, a one-round-trip port read 1.55 at 5 ms in a young JVM, spring-webflux's two read 2.08."""
    return max(1, int((alone_ms - at_zero_ms) / latency_ms + 0.25))

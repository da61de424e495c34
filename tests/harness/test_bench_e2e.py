"""End to end: a QUICK=1 bench of one real port on the real database, producing a report with numbers."""
import json
import os
import subprocess
import sys

from harness.paths import ROOT

PORT = "quarkus-vertx"  # the quickest to start; every port runs the same harness code


def test_quick_bench_produces_a_report_with_numbers(tmp_path):
    env = dict(os.environ, QUICK="1", BENCH_RESULTS=str(tmp_path))
    env.pop("LOADGEN", None)  # the default generator
    run = subprocess.run([sys.executable, "-m", "harness", "bench", PORT], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    [raw] = list(tmp_path.glob(f"baseline/*/{PORT}-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete" and record["iteration"] == 1 and record["scenario"] == "baseline"
    env_info = record["environment"]
    assert env_info["quick"] and env_info["generator"].startswith("openloop") and env_info["db"] and env_info["jdk"]
    calibration = record["calibration"]
    assert calibration["db_ceiling_selects_per_s"]["median"] > 1000 and calibration["wakeup_cross_cpu_us"]["median"] > 0
    assert record["startup_s"] > 0 and record["idle_rss_mb"] > 20
    assert record["capacity"]["cold"]["achieved_rps"] > 0 and record["capacity"]["warm"]["achieved_rps"] > 0
    assert record["warmup"]["windows"] and record["warmup"]["rate"] >= 100
    [cell] = record["cells"]                     # the one schema: the baseline's one cell holds its steps
    phases = [s["phase"] for s in cell["steps"]]
    assert phases[0] == "ladder" and "common" in phases and "confirm" in phases      # the ladder, then the rest
    # the baseline's steps arrive as a Poisson process ([baseline] arrivals), each judged against what it offered
    assert all(s.get("arrivals") == "poisson" and s.get("offered_rps") for s in cell["steps"])
    common = next(s for s in cell["steps"] if s["phase"] == "common")
    assert common["achieved_rps"] > 0 and common["latency_ms"]["p99"] > 0 and common["histogram"]
    assert common["app_cpu_cores"] > 0 and common["generator_cpu_us_per_request"] > 0
    assert common["send_lag_ms"]["p99"] >= 0 and common["generator_behind"] is False
    assert common["slo_ms"] == 50 and common["passed"] is (common["failure"] is None)
    # per-request kernel events of the port and the database, and the database statements per request
    kernel = common["kernel"]
    assert kernel["app_ctx_voluntary_per_request"] > 0 and kernel["db_ctx_voluntary_per_request"] > 0
    assert kernel["app_threads_ran"] >= 1 and 0.9 <= kernel["db_com_select_per_request"] <= 1.2
    mst = cell["mst"]
    assert mst["rps"] >= 100 and mst["probes"] and "first_failing_rps" in mst and "confirmed" in mst
    if mst["confirmed"]:   # a confirmed MST passed twice
        assert sum(1 for s in cell["steps"] if s["target_rps"] == mst["rps"] and s["passed"]
                   and s["phase"] in ("mst", "confirm")) >= 2
    # the workload's tokens are all valid: zero non-200 from a real port
    for s in cell["steps"]:
        assert set(s["statuses"]) == {"200"}, s["statuses"]
    for s in cell["steps"] + cell["closed"]:
        assert s["errors"] == {"non_2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}, s["errors"]
    report = (tmp_path / "RESULTS.md").read_text()
    assert PORT in report and "## Which model, when" in report and "## Baseline" in report and "## Environment" in report
    assert "## The machine" in report and "wake-up" in report.lower()
    # latency against load and CPU per request against the rate, from the ladder's rungs
    assert (tmp_path / "charts" / "baseline-latency-vs-load.png").exists()
    assert (tmp_path / "charts" / "baseline-cpu-vs-rate.png").exists()
    assert (tmp_path / "charts" / "matrix.png").exists()
    assert (tmp_path / "RESULTS-appendix.md").exists()
    assert f"[baseline {PORT} #1] common 500/s" in run.stdout and "warm-up" in run.stdout


def test_ctrl_c_stops_everything_and_keeps_finished_steps(tmp_path):
    import signal
    import psutil
    from harness import ports

    env = dict(os.environ, QUICK="1", BENCH_RESULTS=str(tmp_path))
    env.pop("LOADGEN", None)
    run = subprocess.Popen([sys.executable, "-m", "harness", "bench", PORT], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in run.stdout:
            seen.append(line)
            if f"[baseline {PORT} #1] common" in line:
                run.send_signal(signal.SIGINT)  # what Ctrl-C sends to the harness
                break
        seen.append(run.stdout.read())
        assert run.wait(timeout=60) == 130, "".join(seen)
    finally:
        if run.poll() is None:
            run.kill()
    [raw] = list(tmp_path.glob(f"baseline/*/{PORT}-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "partial" and len(record["cells"][0]["steps"]) >= 1
    assert "**Partial**" in (tmp_path / "RESULTS.md").read_text()
    jar = str(ports.PORTS[PORT].jar_path)
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"])
            if p.info["cmdline"] and (jar in p.info["cmdline"] or "wrk/bench.lua" in " ".join(p.info["cmdline"])
                                        or "openloop" in p.info["cmdline"][0])]
    assert not left, f"processes left behind: {left}"
    assert not ports.port_busy("127.0.0.1", 8080)

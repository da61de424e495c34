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
    [raw] = list(tmp_path.glob(f"*/{PORT}-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete" and record["iteration"] == 1
    env_info = record["environment"]
    assert env_info["quick"] and env_info["generator"].startswith("openloop") and env_info["db"] and env_info["jdk"]
    assert record["db_ceiling"]["selects_per_s"] > 1000
    assert record["startup_s"] > 0 and record["idle_rss_mb"] > 20
    assert record["capacity"]["cold"]["achieved_rps"] > 0 and record["capacity"]["warm"]["achieved_rps"] > 0
    assert record["warmup"]["windows"] and record["warmup"]["rate"] >= 100
    assert [s["phase"] for s in record["steps"]][0] == "common" and "confirm" in [s["phase"] for s in record["steps"]]
    common = record["steps"][0]
    assert common["achieved_rps"] > 0 and common["latency_ms"]["p99"] > 0 and common["histogram"]
    assert common["app_cpu_cores"] > 0 and common["generator_cpu_us_per_request"] > 0
    assert common["send_lag_ms"]["p99"] >= 0 and common["generator_behind"] is False
    assert record["mst"]["rps"] >= 100 and record["mst"]["probes"]
    # the workload's tokens are all valid: zero non-200 from a real port
    for s in record["steps"]:
        assert set(s["statuses"]) == {"200"}, s["statuses"]
    for s in record["steps"] + record["closed"]:
        assert s["errors"] == {"non_2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}, s["errors"]
    report = (tmp_path / "RESULTS.md").read_text()
    assert PORT in report and "## Summary" in report and "## Environment" in report
    assert (tmp_path / "charts" / "mst-and-cost.png").exists()
    assert f"[{PORT} #1] common 500/s" in run.stdout and "warm-up" in run.stdout


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
            if f"[{PORT} #1] common" in line:
                run.send_signal(signal.SIGINT)  # what Ctrl-C sends to the harness
                break
        seen.append(run.stdout.read())
        assert run.wait(timeout=60) == 130, "".join(seen)
    finally:
        if run.poll() is None:
            run.kill()
    [raw] = list(tmp_path.glob(f"*/{PORT}-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "partial" and len(record["steps"]) >= 1
    assert "Partial runs" in (tmp_path / "RESULTS.md").read_text()
    jar = str(ports.PORTS[PORT].jar_path)
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"])
            if p.info["cmdline"] and (jar in p.info["cmdline"] or "wrk/bench.lua" in " ".join(p.info["cmdline"])
                                        or "openloop" in p.info["cmdline"][0])]
    assert not left, f"processes left behind: {left}"
    assert not ports.port_busy("127.0.0.1", 8080)

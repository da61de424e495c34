"""`just calibrate`: comparing two calibrations (pure), the native tool, and one real calibration on the real DB."""
import copy
import json
import subprocess
import sys

import psutil
import pytest

from harness import calibrate, settings as settings_mod, tokens
from harness.paths import ROOT
from harness.db import LocalDatabase


def metric(median, spread=0.03, unit="µs"):
    return {"median": median, "low": median * (1 - spread), "high": median * (1 + spread), "n": 3, "unit": unit}


RECORD = {
    "db_ceiling_selects_per_s": metric(57_000, unit="selects/s"),
    "cpu_single_thread_events_per_s": metric(1_500, unit="events/s"),
    "jvm_work_us_per_op": metric(3.1),
    "wakeup_cross_cpu_us": metric(15.4),
    "wakeup_same_cpu_us": metric(7.2),
    "syscall_ns": metric(230, unit="ns"),
    "loopback_rtt_us": metric(20.0),
    "generator_us_per_request": metric(12.0),
    "steal_percent": {"median": 0.0, "low": 0.0, "high": 0.0, "n": 10, "unit": "%"},
    "seconds": 30.0, "cpus": 2, "cpu_model": "AMD EPYC", "kernel": "6.18.44",
}


def test_equal_calibrations_have_no_differences():
    assert calibrate.differences(RECORD, copy.deepcopy(RECORD)) == []


def test_differences_within_noise_are_none():
    other = copy.deepcopy(RECORD)
    other["wakeup_cross_cpu_us"] = metric(10.8, spread=0.01)   # one quiet VM, runs minutes apart: 10.8 and 15.4
    other["cpu_single_thread_events_per_s"] = metric(1_500 * 1.15, spread=0.01, unit="events/s")
    other["syscall_ns"] = metric(230 * 1.08, unit="ns")       # 8 %: inside the smallest floor
    other["steal_percent"] = metric(0.4, unit="%")             # under one percentage point
    other["db_ceiling_selects_per_s"] = metric(40_000, spread=0.4, unit="selects/s")  # its own spread is wide
    assert calibrate.differences(RECORD, other) == []


def test_three_times_slower_wakeups_are_named():
    slow = copy.deepcopy(RECORD)
    slow["wakeup_cross_cpu_us"] = metric(46.2)
    slow["wakeup_same_cpu_us"] = metric(21.6)
    found = calibrate.differences(slow, RECORD)
    assert len(found) == 2
    assert "Wake-up across CPUs" in found[0] and "3.0x slower" in found[0]
    assert "Wake-up on one CPU" in found[1] and "3.0x slower" in found[1]
    assert "faster" in calibrate.differences(RECORD, slow)[0]


def test_a_lower_db_ceiling_is_slower_and_missing_metrics_are_skipped():
    slow = {"db_ceiling_selects_per_s": metric(19_000, unit="selects/s"), "syscall_ns": metric(230, unit="ns")}
    [sentence] = calibrate.differences(slow, RECORD)
    assert sentence.startswith("DB ceiling") and "3.0x slower" in sentence
    assert calibrate.differences({}, RECORD) == [] and calibrate.differences(RECORD, {"cpus": 2}) == []


def test_table_has_a_row_per_metric_and_a_column_per_calibration():
    lines = calibrate.table(RECORD)
    assert lines[0] == "| Metric | This machine |" and len(lines) == 2 + len(calibrate.METRICS) + 4
    assert "| Wake-up across CPUs (pipe round trip) | 15.4 µs (14.9–15.9) |" in lines
    both = calibrate.table(RECORD, {"wakeup_cross_cpu_us": metric(46.2)}, "published")
    assert both[0] == "| Metric | This machine | published |"
    assert any(line.startswith("| Wake-up across CPUs") and "46.2 µs" in line for line in both)
    assert any(line.startswith("| DB ceiling") and line.endswith("| – |") for line in both)


def test_latest_recorded_takes_the_newest_run(tmp_path):
    assert calibrate.latest_recorded(tmp_path) is None
    for run_id, value in (("20260101T000000Z", 1.0), ("20260301T000000Z", 3.0), ("20260201T000000Z", 2.0)):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "p-1.json").write_text(json.dumps(
            {"run_id": run_id, "calibration": {"syscall_ns": metric(value, unit="ns")}}))
    (tmp_path / "summary.json").write_text("{}")
    path, cal = calibrate.latest_recorded(tmp_path)
    assert path.parent.name == "20260301T000000Z" and cal["syscall_ns"]["median"] == 3.0


def test_the_native_tool_gives_plausible_numbers():
    out = calibrate.kernel_costs(repeats=3, ms=100)
    if len(psutil.Process().cpu_affinity()) >= 2:
        assert len(out["wakeup_cross_cpu_us"]) == 3 and all(0 < x < 5000 for x in out["wakeup_cross_cpu_us"])
    assert all(0 < x < 5000 for x in out["wakeup_same_cpu_us"])
    assert all(0 < x < 10_000 for x in out["syscall_ns"])          # a cheap system call: well under 10 µs
    assert all(0 < x < 5000 for x in out["loopback_rtt_us"])
    assert calibrate.KERNEL.exists() and not calibrate.kernel_stale()


def test_the_jvm_workload_gives_plausible_numbers():
    """JDK 25 runs tools/calibrate/JvmWork.java from source: µs per HS256 verify + JSON of a row, per window."""
    out = calibrate.jvm_work_us(windows=2, warmup_ms=1000, window_ms=1000)
    assert len(out) == 2 and all(0.1 < x < 1000 for x in out), out


def test_without_a_compiler_the_error_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(calibrate, "KERNEL", tmp_path / "kernel")
    monkeypatch.setattr(calibrate.shutil, "which", lambda name: None)
    with pytest.raises(calibrate.Fatal, match="apt-get install gcc"):
        calibrate.build_kernel()


def test_a_real_calibration_has_every_metric():
    # three rounds as bench.toml has them, each piece at its shortest (the test checks the record, not the machine)
    settings = settings_mod.load(env={"BENCH_CALIBRATION_DB_SECONDS": "1", "BENCH_CALIBRATION_GENERATOR_SECONDS": "1",
                                      "BENCH_CALIBRATION_JVM_WARMUP_MS": "1000"})
    assert settings["calibration"]["rounds"] == 3
    with LocalDatabase(settings["cpus"]["db"]):
        tokens.ensure()
        cal = calibrate.measure(settings, say=lambda line: None)
    for key, *_ in calibrate.METRICS:
        if key == "wakeup_cross_cpu_us" and cal["cpus"] < 2:
            continue
        m = cal[key]
        assert m["n"] >= 3 and m["low"] <= m["median"] <= m["high"], (key, m)
        assert m["median"] > 0 or key == "steal_percent", (key, m)
    assert cal["seconds"] < 60 and cal["cpus"] >= 1 and cal["cpu_model"] and cal["kernel"]
    json.dumps(cal)
    assert calibrate.differences(cal, cal) == []
    assert not [p for p in psutil.process_iter(["name", "cmdline"]) if p.info["name"] == "nginx"
                and "calibrate-nginx-" in " ".join(p.info["cmdline"] or [])], "nginx was stopped"


def test_the_cli_prints_its_usage():
    out = subprocess.run([sys.executable, "-m", "harness", "calibrate", "--help"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0 and "--json" in out.stdout

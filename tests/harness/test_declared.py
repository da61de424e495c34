"""Issue 33: a toy scenario added through a declaration only (a copy of bench.toml with one more section, no code),
run QUICK against a real port and the real downstream nginx; the report shows its table."""
import json
import os
import subprocess
import sys

from harness import scenarios
from harness.paths import ROOT

TOY = """
[toy-latency]
summary = "Toy: a fixed extra downstream latency"
path = "/feed?calls=1"
axis = "downstream_latency_ms"
values = [0, 20]
common_rate = 200
iterations = 1
probe_seconds = 2
warmup_fraction = 0.5
warmup_baseline_fraction = 0
# low: at 20 ms the Vert.x WebClient's 5 connections hold the port near 250 req/s, and a step far above that
# fails slowly (until the generator's timeout)
mst_first_guess = 0.1
step_seconds = 2
cold_probe = true
drain_after_warmup = true
warm_probe = true
cell_phases = ["common", "search"]
between_probes = "none"
drain_after_failed_step = true
mst_max_probes = 3
mst_confirm_probes = 1
"""


def test_a_section_with_a_summary_is_a_scenario_run_by_the_generic_module():
    [toy] = scenarios.declared_in({"toy-latency": {"summary": "Toy"}, "load": {"connections": 64},
                                   "baseline": {"summary": "a module's own section stays the module's"}})
    assert (toy.name, toy.module) == ("toy-latency", "declared") and toy.load().__name__.endswith(".declared")


def test_a_scenario_declared_in_bench_toml_alone_runs_quick_and_reports_its_grid(tmp_path):
    settings = tmp_path / "bench.toml"
    settings.write_text((ROOT / "bench.toml").read_text() + TOY)
    env = dict(os.environ, QUICK="1", BENCH_RESULTS=str(tmp_path), BENCH_SETTINGS=str(settings))
    run = subprocess.run([sys.executable, "-m", "harness", "bench", "quarkus-vertx", "toy-latency"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    [raw] = list(tmp_path.glob("toy-latency/*/quarkus-vertx-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete" and record["schema"] == 2 and record["scenario"] == "toy-latency"
    assert [c["coords"] for c in record["cells"]] == [{"downstream_latency_ms": 0}, {"downstream_latency_ms": 20}]
    for cell in record["cells"]:
        wait = cell["coords"]["downstream_latency_ms"]
        [common] = [s for s in cell["steps"] if s["phase"] == "common"]
        assert common["target_rps"] == 200 and common["slo_ms"] == 50 + 2 * wait
        assert common["latency_ms"]["p50"] >= wait                # every answer waited for the downstream
        assert "mst" in cell and any(s["phase"] not in ("common",) for s in cell["steps"])   # the search ran
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## Toy: a fixed extra downstream latency" in text
    assert "| quarkus-vertx | 20 |" in text and "| quarkus-vertx | 0 |" in text

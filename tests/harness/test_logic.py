"""Unit tests of the harness's own logic, on recorded generator output (no server needed)."""
from pathlib import Path

import pytest

import dataclasses

from harness import loadgen, report, session, settings
from harness.method.record import COARSE, FINE, TENTHS, grid_step, round_rate
from harness.method.warmup import steady
from harness.method.record import Step

DATA = Path(__file__).parent / "data"


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


def test_round_rate():
    # the largest 1, 2 or 5 x 10^n within 2.5 % of the rate: 200 at 12,500, 5 at 255, 2 at 150, 1 below 80
    assert round_rate(12_499) == 12_400 and round_rate(12_501) == 12_600 and round_rate(257) == 255
    assert round_rate(151) == 152 and round_rate(37.4) == 37 and round_rate(0.2) == 1
    # on the grid a search can bisect to 5 % at every rate above 40 req/s, and a rate on it stays where it is
    for rate in range(40, 20_000, 7):
        assert grid_step(rate) <= 0.025 * rate and round_rate(round_rate(rate)) == round_rate(rate)
    # a search on tenths (every generator but wrk2) reaches 5 % down to 4 req/s; a rate on it stays where it is
    for tenth in range(40, 400, 3):
        assert grid_step(tenth / 10, TENTHS) <= 0.025 * tenth / 10 + 1e-9
        assert round_rate(round_rate(tenth / 10, TENTHS), TENTHS) == round_rate(tenth / 10, TENTHS)
    assert round_rate(13.5, TENTHS) == 13.6 and round_rate(20.3, TENTHS) == 20.5 and round_rate(40.4, TENTHS) == 40
    # records searched before the fine grid keep theirs (the precision a section states reads each record's own)
    assert grid_step(950, COARSE) == 10 and grid_step(1000, COARSE) == 100


def window(cpu, p50):
    return Step(phase="warmup", target_rps=100, achieved_rps=100, connections=1, seconds=1, requests=100, errors={},
                statuses={}, latency_ms={"p50": p50}, generator="g", app_cpu_us_per_request=cpu)


def test_steady_state_needs_cpu_and_p50_to_agree():
    assert steady(window(100, 1.0), window(104, 1.04), 0.05)
    assert not steady(window(100, 1.0), window(106, 1.0), 0.05)       # CPU per request still falling
    assert not steady(window(100, 1.0), window(100, 1.2), 0.05)       # p50 moved
    assert steady(window(100, 0.30), window(100, 0.34), 0.05)         # within the 0.05 ms floor
    assert not steady(window(None, 1.0), window(100, 1.0), 0.05)



def test_steady_state_needs_the_jit_quiet_where_its_share_is_known():
    busy, quiet = window(100, 1.0), window(102, 1.0)
    busy.kernel["app_jit_share"], quiet.kernel["app_jit_share"] = 0.6, 0.02
    assert not steady(busy, quiet, 0.05, jit_share=0.1) and not steady(quiet, busy, 0.05, jit_share=0.1)
    assert steady(quiet, window(101, 1.0), 0.05, jit_share=0.1)         # a window without the figure: unknown
    assert steady(busy, quiet, 0.05)                                    # not checked


def test_settings_quick_tables_and_env_overrides():
    s = settings.load(env={})
    assert not s["quick"] and s["baseline"]["step_seconds"] >= 10 and s["baseline"]["iterations"] >= 3
    q = settings.load(env={"QUICK": "1", "BENCH_BASELINE_CLOSED_CONNECTIONS": "10, 20", "BENCH_CPUS_APP": "1",
                           "BENCH_RULE_P99_MS": "20"})
    assert q["quick"] and q["baseline"]["step_seconds"] < 10 and q["baseline"]["iterations"] == 1
    assert q["search"]["max_probes"] < s["search"]["max_probes"] and q["load"]["connections"] < s["load"]["connections"]
    assert q["baseline"]["closed_connections"] == [10, 20] and q["cpus"]["app"] == "1" and q["rule"]["p99_ms"] == 20


SETTINGS = {"rule": {"p99_ms": 50, "round_trips_per_wait": 2, "min_achieved": 0.99},
            "search": {"growth": 1.15, "precision": 0.05, "max_probes": 6, "confirm_probes": 4},
            "baseline": {"common_rate": 1000}, "cpus": {"app": "0-1", "db": "0-1", "generator": "0-1"}}


def record(port, run_id, iteration, status, mst, cpu_model="AMD EPYC", p99=2.5, passes=2):
    env = {"settings": SETTINGS, "quick": False, "date": "d", "git_commit": "c", "cpus": {"app": "0-1"},
           "jvm_options": ["-Xmx1g"], "cpu_model": cpu_model, "cores": 2, "generator": "openloop 0.1.0 (x)"}
    common = Step(phase="common", target_rps=1000, achieved_rps=1000, connections=64, seconds=10, requests=10_000,
                  errors={"read": 0}, statuses={"200": 10_000}, generator="openloop", slo_ms=50,
                  latency_ms={"min": 0.1, "p50": 1.0, "p90": 1.5, "p99": p99, "p99.9": 3, "max": 5},
                  app_cpu_us_per_request=120.0, db_cpu_us_per_request=40.0, app_cpu_cores=0.12, db_cpu_cores=0.04,
                  generator_cpu_cores=0.02, generator_cpu_us_per_request=20.0,
                  kernel={"app_ctx_voluntary_per_request": 1.5,
                                                    "app_ctx_involuntary_per_request": 0.25})
    at_mst = [dict(common.to_json(), phase=phase, target_rps=mst) for phase in ("mst", "confirm")[:passes]]
    failed = dict(common.to_json(), phase="mst", target_rps=mst + 1000, passed=False, failure="p99 over the SLO")
    return {"schema": 2, "port": port, "scenario": "baseline", "run_id": run_id, "iteration": iteration,
            "status": status, "environment": env, "jvm": {}, "startup_s": 1.0, "idle_rss_mb": 100.0,
            "capacity": {"cold": None, "warm": None}, "warmup": {"settled": True, "seconds": 30, "rate": 500, "windows": []},
            "cells": [{"coords": {}, "status": status, "steps": [common.to_json(), *at_mst, failed], "cap": None,
                       "closed": [],
                       "mst": {"rps": mst, "bounded": True, "confirmed": passes >= 2, "first_failing_rps": mst + 1000,
                               "slo_ms": 50, "estimate_rps": mst, "probes": [],
                               "reason": None if passes >= 2 else "the confirmation budget ran out"}}]}


def test_report_shows_one_run_set_with_pairwise_ranking_and_lists_the_rest_apart(tmp_path):
    import json
    rows = [("r1", "quarkus-vertx", 1, "complete", 20_000, "Intel Xeon", 2),   # another machine: listed apart
            ("r2", "quarkus-vertx", 1, "complete", 9_000, "AMD EPYC", 2),
            ("r2", "quarkus-vertx", 2, "complete", 10_000, "AMD EPYC", 2),
            ("r2", "quarkus-vertx", 3, "complete", 9_600, "AMD EPYC", 2),
            ("r2", "spring-virtual", 1, "complete", 5_000, "AMD EPYC", 2),
            ("r2", "spring-virtual", 2, "complete", 5_200, "AMD EPYC", 1),     # passed once only: unconfirmed
            ("r2", "spring-virtual", 3, "partial", 4_000, "AMD EPYC", 2),
            ("r2", "spring-platform", 1, "complete", 8_000, "AMD EPYC", 2),
            ("r2", "spring-platform", 2, "complete", 9_500, "AMD EPYC", 2)]
    folder = tmp_path / "baseline"
    for run, port, it, status, mst, cpu, passes in rows:
        (folder / run).mkdir(parents=True, exist_ok=True)
        (folder / run / f"{port}-{it}.json").write_text(json.dumps(record(port, run, it, status, mst, cpu, passes=passes)))
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    # the answer first: the front page (the matrix, the decision table) opens it, the detail table after them, the
    # machine's calibration after the verdict
    assert text.split("\n## ")[1].startswith("Every port in every regime")
    assert text.index("## Which model, when") < text.index("## Every regime in detail") < text.index("## Verdict") \
        < text.index("## The machine") < text.index("## Baseline")
    assert "| quarkus-vertx | 9,600 (9,000–10,000) ✗ 10,600 (10,000–11,000) |" in text
    # spring-virtual's unconfirmed and partial iterations are not in its MST; its one confirmed MST is
    assert "| spring-virtual | 5,000 ✗ 6,000; 1/2 not confirmed |" in text
    assert "spring-virtual #2 (the confirmation budget ran out)" in text
    # pairwise: quarkus-vertx overlaps spring-platform (a tie); spring-virtual's one confirmed run of two is not a
    # range: it is shown with its count and compared with nothing
    vertx = next(line for line in text.splitlines() if line.startswith("- **quarkus-vertx**"))
    assert "tied with spring-platform" in vertx and "spring-virtual" not in vertx
    assert "- **spring-virtual** 5,000 (1 of 2 runs): not compared" in text
    # the loopback row is decided by app CPU per request at the common rate (the same in every record here: a tie
    # of all three, every port placed, none left "not compared")
    row = next(line for line in text.splitlines() if line.startswith("| CPU-bound"))
    assert "| spring-platform ≈ spring-virtual ≈ quarkus-vertx |" in row and "not compared" not in row
    assert "| 1.50 + 0.25 |" in text
    assert "Partial" in text and "spring-virtual #3" in text
    assert "## Earlier runs" in text and "Intel Xeon" in text and "20,000" not in text.split("## Earlier runs")[0]
    assert (tmp_path / "charts" / "baseline-mst.png").stat().st_size > 1000
    assert "### baseline: quarkus-vertx" in (tmp_path / "RESULTS-appendix.md").read_text()
    assert "scenario,label,run_id,iteration,phase,target_rps" in (tmp_path / "summary.csv").read_text()


def test_a_readers_newer_run_is_shown_apart_and_never_rewrites_the_published_tables(tmp_path):
    import json
    folder = tmp_path / "baseline"
    cal = lambda wake: {"wakeup_cross_cpu_us": {"median": wake, "low": wake, "high": wake, "n": 3, "unit": "µs"}}  # noqa: E731
    for run, port, mst, wake in [("r2", "quarkus-vertx", 9_000, 10.0), ("r2", "spring-virtual", 5_000, 10.0),
                                 ("r3", "spring-virtual", 1_500, 30.0)]:
        (folder / run).mkdir(parents=True, exist_ok=True)
        rec = record(port, run, 1, "complete", mst)
        rec["calibration"] = cal(wake)
        if run == "r3":
            rec["environment"] = dict(rec["environment"], git_commit="d")
        (folder / run / f"{port}-1.json").write_text(json.dumps(rec))
    (tmp_path / "published.json").write_text(json.dumps({"baseline": ["r2"]}))
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    published, yours = text.split("## Your runs")
    assert "| quarkus-vertx | 9,000 " in published and "| spring-virtual | 5,000 " in published
    assert "1,500" not in published
    assert "| spring-virtual | 1,500 " in yours and "Your machine against the published one" in yours
    assert "Wake-up across CPUs" in yours and "3.0x slower" in yours      # yours (30 µs) described against 10 µs


def test_each_of_a_readers_newer_runs_is_calibrated_against_the_published_one_not_only_the_first(tmp_path):
    """Five remedy runs in a row: the machine's state changed after the first (wake-up 226 -> 43 us here): a
    difference in any run is named with its run, never "calibrates like the published one" from the first alone."""
    import json
    folder = tmp_path / "baseline"
    cal = lambda wake: {"wakeup_cross_cpu_us": {"median": wake, "low": wake, "high": wake, "n": 3, "unit": "µs"}}  # noqa: E731
    for run, port, mst, wake in [("r2", "quarkus-vertx", 9_000, 10.0), ("r2", "spring-virtual", 5_000, 10.0),
                                 ("r3", "spring-virtual", 1_500, 10.0), ("r4", "quarkus-vertx", 8_000, 30.0)]:
        (folder / run).mkdir(parents=True, exist_ok=True)
        rec = record(port, run, 1, "complete", mst)
        rec["calibration"] = cal(wake)
        if run in ("r3", "r4"):
            rec["environment"] = dict(rec["environment"], git_commit="d")
        (folder / run / f"{port}-1.json").write_text(json.dumps(rec))
    (tmp_path / "published.json").write_text(json.dumps({"baseline": ["r2"]}))
    report.write(tmp_path, tmp_path / "RESULTS.md")
    yours = (tmp_path / "RESULTS.md").read_text().split("## Your runs")[1]
    assert "| spring-virtual | 1,500 " in yours and "| quarkus-vertx | 8,000 " in yours
    assert "run r4: Wake-up across CPUs" in yours and "3.0x slower" in yours
    assert "run r3:" not in yours and "calibrates like the published one" not in yours


def test_a_second_machine_measured_at_another_commit_stays_out_of_the_verdict(tmp_path):
    _second_machine_world(tmp_path, commits=("aaa111", "bbb222"))
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    machine = text.split("## The machine")[1].split("\n## ")[0]
    assert "The second machine's baseline ran at another code commit (bbb222, against aaa111 here" in machine
    assert "**The baseline on a second machine.**" in machine
    assert "On a second machine" not in text.split("## Verdict")[1].split("## ")[0]


def _second_machine_world(tmp_path, commits=(None, None)):
    import json
    folder = tmp_path / "baseline"
    cal = lambda speed, wake, kernel: {  # noqa: E731
        "cpu_single_thread_events_per_s": {"median": speed, "low": speed, "high": speed, "n": 3, "unit": "events/s"},
        "wakeup_cross_cpu_us": {"median": wake, "low": wake, "high": wake, "n": 3, "unit": "µs"}, "kernel": kernel}
    for run, port, mst, user, system, calibration in [
            ("r2", "quarkus-vertx", 9_000, 80, 40, cal(1300, 10, "k-v782")),
            ("r2", "spring-virtual", 5_000, 250, 80, cal(1300, 10, "k-v782")),
            ("r3", "quarkus-vertx", 12_000, 40, 160, cal(2600, 40, "k-v669")),
            ("r3", "spring-virtual", 6_000, 125, 320, cal(2600, 40, "k-v669"))]:
        (folder / run).mkdir(parents=True, exist_ok=True)
        for it in (1, 2, 3):
            rec = record(port, run, it, "complete", mst)
            rec["calibration"] = calibration
            rec["cells"][0]["steps"] = [dict(step, app_user_us_per_request=user, app_system_us_per_request=system)
                            for step in rec["cells"][0]["steps"]]
            if commit := commits[run == "r3"]:
                rec.setdefault("environment", {})["code_commit"] = commit
            (folder / run / f"{port}-{it}.json").write_text(json.dumps(rec))
    (tmp_path / "published.json").write_text(json.dumps({"baseline": ["r2"], "baseline-second-machine": ["r3"]}))


def test_a_second_machines_baseline_tests_the_cost_model_and_is_not_a_readers_run(tmp_path):
    _second_machine_world(tmp_path)
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## Your runs" not in text                         # the project's second machine is not a reader's run
    assert "Measured on one VM (kernel k-v782; its calibration: [The machine](#the-machine))." in \
        text.split("\n## ")[0]
    machine = text.split("## The machine")[1].split("\n## ")[0]
    assert "| Metric | this machine (this report) | second machine (baseline only) |" in machine
    assert "Kernel | k-v782 | k-v669 |" in machine
    assert "**The baseline on a second machine.**" in machine and "| quarkus-vertx | 9,000 | 12,000 |" in machine
    assert "MST orders that hold on both machines: quarkus-vertx > spring-virtual" in machine
    assert "none exists yet" not in machine
    verdict = text.split("## Verdict")[1].split("## ")[0]
    assert "On a second machine of the same kind (CPU 2.0x this machine's single-thread speed, cross-CPU wake-ups 4.0x" \
        in verdict
    assert "M1" not in text and "M2" not in text
    # the cost model enters the verdict only where it predicts within ±25 %; its section states it
    assert "quarkus-vertx > spring-virtual" in verdict and "The cost model" not in verdict
    assert "- The cost model (user-space work" in machine and "does not predict within ±25 %" in machine


def test_runs_through_compose_get_the_deployment_section_and_never_replace_the_hosts_baseline(tmp_path):
    import json
    folder = tmp_path / "baseline"
    for run, port, mst, mode in [("r2", "quarkus-vertx", 9_000, "local"), ("r2", "spring-virtual", 5_000, "local"),
                                 ("r3", "quarkus-vertx", 6_000, "compose"), ("r3", "spring-virtual", 4_500, "compose")]:
        (folder / run).mkdir(parents=True, exist_ok=True)
        for iteration, offset in ((1, 0), (2, 100), (3, 200)):
            rec = record(port, run, iteration, "complete", mst + offset)
            rec["environment"] = dict(rec["environment"], mode=mode)
            if mode == "compose":
                rec["environment"]["compose"] = {"compose_version": "2.32.4", "engine_version": "20.10.24",
                                                 "compose_files": ["compose.yaml", "compose.offline.yaml"]}
                for step in rec["cells"][0]["steps"]:
                    step["docker_proxy_cpu_us_per_request"] = 55.0
            (folder / run / f"{port}-{iteration}.json").write_text(json.dumps(rec))
    report.write(tmp_path, tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    baseline = text.split("## Baseline")[1].split("\n## ")[0]
    # the host's run stays the baseline: its rows, never the containers'
    assert "| quarkus-vertx | 9,100 (9,000–9,200)" in baseline and "| quarkus-vertx | 6,100" not in baseline
    assert "| spring-virtual | 5,100 (5,000–5,200)" in baseline and "| spring-virtual | 4,600" not in baseline
    deployment = text.split("## Deployment: the same ports through Compose")[1].split("\n## ")[0]
    assert "| quarkus-vertx | host | 9,100 (9,000–9,200)" in deployment
    assert "| quarkus-vertx | Compose | 6,100 (6,000–6,200)" in deployment and "| 55 |" in deployment
    assert "Engine 20.10.24" in deployment and "run r3" in deployment
    # a verdict sentence per port, the ranges compared as everywhere (above, below, level)
    assert "Through Compose quarkus-vertx's MST is 6,100 (6,000–6,200) req/s, below its 9,100 (9,000–9,200) on the " \
           "host (0.67x); at 1,000 req/s its own CPU per request was 120 µs there against 120 µs on the host, and " \
           "docker-proxy added 55 µs per request." in text
    # why: all the CPU per request on the shared cores, host against Compose, beside the MST's ratio
    assert "app 0-1, database 0-1; the generator 0-1" in deployment
    assert "- quarkus-vertx: app + database + generator + docker-proxy CPU per request 180 µs on the host, 235 µs " \
           "through Compose (medians), so the same cores allow 0.77x the host's rate; the MST moved 0.67x." in deployment
    assert "## Earlier runs" not in text


def test_a_section_from_another_machine_is_marked_in_its_warnings_rows_and_verdict():
    from harness.report.section import Decision, Section
    cal = lambda wake: {"wakeup_cross_cpu_us": {"median": wake, "low": wake, "high": wake, "n": 3}}  # noqa: E731
    section = Section("Faults", "faults", [], decisions=[Decision("restarts", "pool", "a", "defaults", "#faults")],
                      verdict=["a recovered."])
    report.mark_other_machine(section, cal(10.0), cal(10.5))          # within the noise: the same machine
    assert not section.warnings and not section.other_machine
    report.mark_other_machine(section, cal(50.0), cal(10.0))
    assert "another machine than the baseline" in section.warnings[0]
    assert section.decisions[0].regime == "restarts *(another machine)*"
    assert section.other_machine
    verdict = report.verdict([section], Path("RESULTS.md"))
    assert "**[Faults](#faults)** *(another machine: see [The machine](#the-machine))*" in verdict
    assert "- a recovered." in verdict


def test_a_sections_findings_open_the_section_and_stay_out_of_the_verdict():
    from harness.report.section import Section
    section = Section("Faults", "faults", ["body"], verdict=["a recovered."], findings=["b froze."])
    verdict = report.verdict([section], Path("RESULTS.md"))
    assert "- a recovered." in verdict and "- b froze." not in verdict
    opening = report.section_findings(section)
    assert opening[0].startswith("Besides this section's lines in the [verdict](#verdict)") and "- b froze." in opening
    assert report.section_findings(Section("Faults", "faults", [], verdict=["a recovered."])) == []


def _published(scenario: str, run_id: str) -> list[dict]:
    import json
    from harness.paths import ROOT
    return [json.loads(p.read_text()) for p in sorted((ROOT / "results" / scenario / run_id).glob("*.json"))]


def test_baseline_common_rate_figures_from_fewer_runs_than_measured_carry_their_count(tmp_path):
    """The published baseline: spring-webflux's common step failed in #1 (p99 238 ms), spring-platform's in #2 (p99
    62.1 ms), so their figures at the common rate rest on 2 of 3 runs and say so, in the table, the notes and the
    verdict; the ports whose three common steps passed keep their plain ranges. Through Compose, spring-virtual's
    common step failed in #2: its own CPU per request there is from 2 of 3 runs."""
    from harness.method import runset
    from harness.ports import PORTS
    from harness.report.sections import baseline
    host = runset.select(_published("baseline", "20261123T225632Z"), "baseline", list(PORTS))
    section = baseline.render(host, tmp_path)
    row = {}
    for line in section.body:                     # the first table's rows (the closed-loop table follows)
        if line.startswith("| "):
            row.setdefault(line.split(" | ")[0][2:], line)
    assert "| 1.50 (1.31–1.69; 2 of 3 runs) | 33.5 (22.8–44.1; 2 of 3 runs) | 478 (468–488; 2 of 3 runs) | " \
           "159 (157–160; 2 of 3 runs) |" in row["spring-webflux"]
    assert "| 335 (297–374; 2 of 3 runs) |" in row["spring-platform"]
    assert "| 0.41 (0.38–0.45) | 0.82 (0.68–0.85) | 117 (106–133) | 116 (106–126) |" in row["quarkus-vertx"]
    assert "| 124 (123–124) (1/3 settled) | 6.9 (6.8–7.8) |" in row["spring-webflux"]   # not at the common rate
    assert ("- Common-rate figures from the runs whose common step passed: spring-platform 2 of 3 (#2 failed: p99 "
            "over the SLO, p99 62.1 ms), spring-webflux 2 of 3 (#1 failed: p99 over the SLO, p99 238 ms).") in section.body
    # cheapest and dearest by median as before (a partial figure enters no comparison, but a median it has)
    assert ("App CPU per request at 2,500 req/s: from 117 (106–133) µs (quarkus-vertx) to 478 (468–488; 2 of 3 runs) "
            "µs (spring-webflux).") in section.verdict
    deployment = baseline.render_compose(runset.select(_published("baseline", "20261124T101956Z"), "baseline",
                                                       list(PORTS)), host)
    [virtual] = [v for v in deployment.verdict if v.startswith("Through Compose spring-virtual")]
    assert ("its own CPU per request was 369 (322–415; 2 of 3 runs) µs there against 331 (316–346) µs on the host, "
            "and docker-proxy added 112 (99–126; 2 of 3 runs) µs per request.") in virtual
    text = "\n".join(deployment.body)
    assert ("- Common-rate figures from the runs whose common step passed: spring-virtual (Compose) 2 of 3 (#2 failed: "
            "p99 over the SLO, p99 85.5 ms).") in text
    assert "664 µs through Compose (medians; through Compose from 2 of 3 runs)" in text
    assert "382 µs through Compose (medians), so" in text          # quarkus-vertx: every common step passed


def test_baseline_cpu_per_request_at_the_mst_against_the_common_rate(tmp_path):
    """The published baseline (run 20261129T183721Z): per run with a confirmed MST, the total CPU per request (app +
    database + generator) at the MST against the common step, and the app's voluntary context switches per request
    at both; quarkus-vertx #1: 162 µs at 2,500 req/s, 97 at its MST of 19,200 (40 % lower), 1.25 -> 0.51 switches.
    A run without a confirmed MST (spring-virtual #3) is left out, and the count says so."""
    from harness.method import runset
    from harness.ports import PORTS
    from harness.report.sections import baseline
    records = _published("baseline", "20261129T183721Z")
    vertx = [r for r in records if r["port"] == "quarkus-vertx"]
    falls, before, after = baseline.cost_fall(vertx)
    assert (falls.median, falls.n, falls.of) == (40, 2, 3)           # #3's MST is not confirmed
    assert before.median == 1.25 and 0.5 < after.median < 0.56
    section = baseline.render(runset.select(records, "baseline", list(PORTS)), tmp_path)
    [line] = [b for b in section.body if b.startswith("- At the MST against 2,500 req/s")]
    assert "spring-virtual 25 (1 of 3 runs)" in line and "quarkus-virtual 37 (35–39)" in line
    assert "quarkus-reactive 0.97 → 0.15" in line
    [sentence] = [v for v in section.verdict if v.startswith("Total CPU per request falls")]
    assert "from 8 % (spring-platform) to 40 % (quarkus-vertx) lower than at 2,500 req/s" in sentence
    [alone] = baseline.cost_fall_note({"quarkus-vertx": vertx}, 2500)[1:]      # one port: named once
    assert alone.startswith("Total CPU per request falls as the rate rises: at the MST it was 40 % (quarkus-vertx) "
                            "lower than at 2,500 req/s")
    assert "for all 6 ports" in sentence
    # no fall, no sentence that says so: the common step made dearer than the MST's
    dearer = [{**r, "cells": [{**r["cells"][0], "steps": [
        {**s, "app_cpu_us_per_request": 1.0, "db_cpu_us_per_request": 0, "generator_cpu_us_per_request": 0}
        if s["phase"] == "common" else s for s in r["cells"][0]["steps"]]}]} for r in vertx]
    # no fewer switches, no clause that says so: the common step's switches set below the MST's
    still = [{**r, "cells": [{**r["cells"][0], "steps": [
        {**s, "kernel": {**s["kernel"], "app_ctx_voluntary_per_request": 0.0}} if s["phase"] == "common" else s
        for s in r["cells"][0]["steps"]]}]} for r in vertx]
    [plain] = baseline.cost_fall_note({"quarkus-vertx": still}, 2500)[1:]
    assert plain == ("Total CPU per request falls as the rate rises: at the MST it was 40 % (quarkus-vertx) lower than "
                     "at 2,500 req/s (medians of the runs with a confirmed MST): the MST from CPU, taken at that "
                     "rate, can lie below the measured MST.")
    assert baseline.cost_fall(dearer)[0].median < 0
    assert baseline.cost_fall_note({"quarkus-vertx": dearer}, 2500)[1] is None


def test_baseline_a_passed_common_step_without_the_value_is_no_missing_run():
    """R11: only a failed common step makes a common-rate figure partial; a passed one that lacks the value (no
    kernel counters, DB CPU not sampled) is not counted as a run that failed."""
    from harness.report.sections import baseline

    def rec(it, passed, value):
        return {"iteration": it, "steps": [Step(phase="common", target_rps=2500, achieved_rps=2500.0, connections=64,
                                                seconds=5.0, requests=12500, errors={}, statuses={}, latency_ms={},
                                                generator="openloop", generator_behind=False, failure=None if passed
                                                else "p99 over the SLO",
                                                db_cpu_us_per_request=value).to_json(histogram=False)]}
    records = [rec(1, True, 114.0), rec(2, True, None), rec(3, True, 122.0)]
    figure = baseline.common_spread((s.db_cpu_us_per_request for s in baseline.common(records)), records)
    assert not figure.partial and figure.n == 2
    assert baseline.at_common((s.db_cpu_us_per_request for s in baseline.common(records)), records) == "118 (114–122)"
    failed = [rec(1, True, 114.0), rec(2, False, 130.0), rec(3, True, 122.0)]
    assert baseline.at_common((s.db_cpu_us_per_request for s in baseline.common(failed)), failed) == \
        "118 (114–122; 2 of 3 runs)"


def test_baseline_cheapest_and_dearest_name_every_tie_and_one_port_once(tmp_path):
    """S1: the verdict's app-CPU range goes through table.extremes: one port is named once, not "X to X"."""
    from harness.method import runset
    from harness.ports import PORTS
    from harness.report.sections import baseline
    records = [r for r in _published("baseline", "20261123T225632Z") if r["port"] == "quarkus-reactive"]
    section = baseline.render(runset.select(records, "baseline", list(PORTS)), tmp_path)
    [line] = [v for v in section.verdict if v.startswith("App CPU per request")]
    assert line.count("quarkus-reactive") == 1 and " to " not in line, line


def test_a_published_set_spans_two_commits_only_where_same_measurement_names_them(tmp_path):
    """results/same-measurement.json: a later commit that changed only judging or report code shares a published
    table with the earlier one; without the entry each commit is a table of its own (the newest shown)."""
    import json
    from harness import report
    from harness.method import runset

    def record(run_id, port, commit):
        return {"run_id": run_id, "port": port, "scenario": "faults", "iteration": 1,
                "environment": {"code_commit": commit, "git_commit": commit, "cpu_model": "x", "settings": {}}}
    records = [record("r1", "spring-platform", "aaa"), record("r2", "quarkus-vertx", "bbb")]
    alone = runset.select(records, "faults")
    assert list(alone.by_label) == ["quarkus-vertx"]
    both = runset.select(records, "faults", same_code={"aaa": "bbb"})
    assert sorted(both.by_label) == ["quarkus-vertx", "spring-platform"]
    # an entry naming scenarios: commits between changed another scenario's measurement, not this one's
    assert sorted(runset.select(records, "faults", same_code={"aaa": {"faults": "bbb"}}).by_label) == [
        "quarkus-vertx", "spring-platform"]
    assert list(runset.select(records, "faults", same_code={"aaa": {"memory": "bbb"}}).by_label) == ["quarkus-vertx"]
    (tmp_path / "same-measurement.json").write_text(json.dumps({"#": "why", "aaa": "bbb"}))
    assert report.same_measurement(tmp_path) == {"aaa": "bbb"}
    assert report.same_measurement(tmp_path / "nowhere") == {}


def test_a_search_tries_tenths_only_where_the_generator_takes_them():
    """wrk2's -R parses whole numbers: with it a search stays on whole rates; openloop and wrk-paced take tenths."""
    ctx = session.Context("downstream", {}, None, None, None, loadgen.Wrk2("wrk2", "wrk2 4.0.0"), None, {}, None,
                          "20990101T000000Z", DATA)
    assert ctx.grid == FINE
    assert dataclasses.replace(ctx, gen=loadgen.Openloop("openloop", "openloop 0.1.0")).grid == TENTHS
    assert dataclasses.replace(ctx, gen=loadgen.WrkPaced("wrk", "wrk 4.1.0")).grid == TENTHS


def test_the_compose_runs_are_set_beside_the_host_run_published_with_them(tmp_path):
    """The published Compose baseline (run 20261129T082035Z) ran right after a host run of the same two ports
    (T075429Z); the published baseline (T183721Z) ran 11 hours later. Their calibrations agree within their noise,
    yet the ports' figures moved 20-50 % between them: the host run published with the Compose runs is their pair,
    and without that entry the shown set (the calibration agreeing) is."""
    import json
    import shutil
    from harness.method import runset
    from harness.paths import ROOT
    for run in ("20261129T082035Z", "20261129T075429Z", "20261129T183721Z"):
        shutil.copytree(ROOT / "results" / "baseline" / run, tmp_path / "baseline" / run)
    pairs = {"baseline": ["20261129T183721Z"], "baseline-compose": ["20261129T082035Z", "20261129T075429Z"]}
    (tmp_path / report.PUBLISHED).write_text(json.dumps(pairs))
    records = [r for r in runset.load(tmp_path / "baseline") if not report.in_containers(r)]
    shown = report._select(records, "baseline", {"20261129T183721Z"})
    containers = report.compose_set(tmp_path, "baseline")
    assert containers.run_ids == ["20261129T082035Z"]
    assert report.host_set(tmp_path, "baseline", containers, shown).run_ids == ["20261129T075429Z"]
    # Compose runs without a calibration cannot be checked against any host run: the shown set, as before the pairing
    uncalibrated = report._select([{k: v for k, v in r.items() if k != "calibration"} for r in containers.records])
    assert report.host_set(tmp_path, "baseline", uncalibrated, shown) is shown
    (tmp_path / report.PUBLISHED).write_text(json.dumps({**pairs, "baseline-compose": ["20261129T082035Z"]}))
    assert report.host_set(tmp_path, "baseline", containers, shown).run_ids == ["20261129T183721Z"]

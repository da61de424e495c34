"""The downstream scenario's logic and its section of RESULTS.md, from hand-made records (no server needed)."""
import dataclasses

from harness.method import runset, schema
from harness.method.record import Mst, Step
from harness.report.sections import downstream as downstream_report
from harness.scenarios import downstream


def test_a_sequential_cell_waits_k_times_and_only_platform_threads_have_a_thread_cap():
    par, seq = downstream.Cell(200, 3, "parallel"), downstream.Cell(200, 3, "sequential")
    assert par.waits_ms == 200 and seq.waits_ms == 600
    assert par.path() == "feed?calls=3" and seq.path() == "feed?calls=3&mode=sequential"
    assert downstream.thread_cap("spring-platform", par) == 1000
    assert round(downstream.thread_cap("spring-platform", seq)) == 333
    assert downstream.thread_cap("spring-virtual", par) is None


def _step(rate, p99, phase, failure=None):
    return Step(phase=phase, target_rps=rate, achieved_rps=rate, connections=64, seconds=5, requests=rate * 5,
                errors={}, statuses={"200": rate * 5}, latency_ms={"p50": p99 / 2, "p99": p99}, generator="openloop",
                failure=failure, app_cpu_us_per_request=100.0, app_cpu_cores=0.5, db_cpu_cores=0.1,
                generator_cpu_cores=0.1, extra={"downstream_cpu_us_per_call": 20.0,
                                                "downstream_calls_per_request": 3.0}).to_json()


def _coords(latency, calls, mode="parallel"):
    return {"latency_ms": float(latency), "calls": calls, "mode": mode}


def _record(port, mst, first_failing, iteration):
    cell = schema.cell(_coords(200, 3), status="complete", slo_ms=450.0, cap="CPU", utilisation={"CPU": 0.9},
                       downstream_connections_peak=50,
                       steps=[_step(400, 210, "common"), _step(mst, 240, "mst"), _step(mst, 250, "confirm"),
                              _step(first_failing, 900, "mst", "p99 over the SLO")],
                       mst=Mst(mst, True, True, first_failing, 450.0, mst).to_json())
    return _run(port, iteration, [cell])


def test_the_section_ranks_pairwise_and_generates_its_decision_row(tmp_path):
    records = [_record("spring-platform", 900, 1000, i) for i in (1, 2, 3)] + \
              [_record("quarkus-vertx", m, m + 300, i) for i, m in ((1, 3000), (2, 3300), (3, 3100))]
    from harness import report        # as the report renders it: a row without evidence points at the section
    rs = runset.select(records, "downstream", order=["spring-platform", "quarkus-vertx"])
    section = report.rendered("downstream", rs, tmp_path)
    text = "\n".join(section.body)
    assert "| spring-platform | 900 ✗ 1,000; CPU 3/3 (CPU 0.90) |" in text
    assert "| quarkus-vertx | 3,100 (3,000–3,300) ✗ 3,400 (3,300–3,600); CPU 3/3 (CPU 0.90) |" in text
    [decision] = section.decisions
    assert decision.choice == "quarkus-vertx > spring-platform" and decision.evidence == "#downstream"
    assert decision.decided_by == "caps: CPU (2 ports)" and decision.settings == "defaults"
    assert decision.regime == "Slow downstream services: 3 calls of 200 ms in parallel per request"
    assert ("the confirmed MST runs from 900 (spring-platform) to 3,100 (3,000–3,300) req/s (quarkus-vertx); "
            "quarkus-vertx is above spring-platform") in section.verdict[0]
    assert (tmp_path / "downstream-k3.png").exists()


def test_a_remedy_run_is_a_row_of_its_own_and_named_in_the_decision_not_ranked_in_it(tmp_path):
    records = [_record("spring-platform", 900, 1000, i) for i in (1, 2, 3)] + \
              [_record("quarkus-vertx", 30, 40, i) for i in (1, 2, 3)]
    for i in (1, 2, 3):
        remedy = _record("quarkus-vertx", 4000, 4400, i)
        remedy["framework_overrides"] = {"BENCH_DOWNSTREAM_POOL_SIZE": "1200"}
        records.append(remedy)
    rs = runset.select(records, "downstream", order=["spring-platform", "quarkus-vertx"])
    section = downstream_report.render(rs, tmp_path)
    [decision, sized] = section.decisions
    # the ranking at the defaults, then a row with the remedy's run in place of quarkus-vertx's defaults
    assert decision.choice == "spring-platform > quarkus-vertx"
    assert sized.regime == decision.regime + ", the remedies' larger client pools"
    assert sized.choice == "quarkus-vertx (remedy) > spring-platform"
    # the setting it sized, by name, in its own row (the defaults' points to it): its MST is the section's and the verdict's
    assert sized.settings == "the remedies raise: `BENCH_DOWNSTREAM_POOL_SIZE`"
    assert decision.settings == "the remedies raise: the next row"
    assert ("each remedy's larger client pool where one was run, it runs from 900 (spring-platform) to 4,000 req/s "
            "(quarkus-vertx + `BENCH_DOWNSTREAM_POOL_SIZE=1200`)") in section.findings[0]   # the defaults': verdict
    assert len(section.verdict) == 1 and "at each port's defaults" in section.verdict[0]
    assert "| quarkus-vertx + `BENCH_DOWNSTREAM_POOL_SIZE=1200` | 4,000 ✗ 4,400;" in "\n".join(section.body)


def test_the_settings_name_the_bounds_sized_and_a_client_pool_that_capped_a_port_but_was_not_run(tmp_path):
    records = []
    for i in (1, 2, 3):
        pooled = _cell(200, 3, 30, 40)
        pooled["cap"] = "client pool"
        remedy = _run("quarkus-virtual", i, [_cell(200, 3, 1600, 1800)])
        remedy["framework_overrides"] = {"QUARKUS_REST_CLIENT_DOWNSTREAM_CONNECTION_POOL_SIZE": "1200"}
        records += [_run("quarkus-vertx", i, [pooled]), _run("quarkus-virtual", i, [_cell(200, 3, 80, 90)]), remedy]
    rs = runset.select(records, "downstream", order=["quarkus-virtual", "quarkus-vertx"])
    [decision, sized] = downstream_report.render(rs, tmp_path).decisions
    assert decision.settings == "the remedies raise: the next row; size the client pool: `BENCH_DOWNSTREAM_POOL_SIZE` (not run here)"
    assert sized.settings == "the remedies raise: `QUARKUS_REST_CLIENT_DOWNSTREAM_CONNECTION_POOL_SIZE`"


def test_client_pools_bound_the_rate_by_k_times_the_latency_and_overrides_are_read():
    cell = downstream.Cell(200, 3, "parallel")
    assert downstream.client_pool("quarkus-vertx", env={}) == 5
    assert downstream.client_pool("quarkus-vertx", env={"BENCH_DOWNSTREAM_POOL_SIZE": "60"}) == 60
    assert downstream.client_pool("spring-virtual", env={}) is None
    # the remedy row: Apache HttpClient 5, its pool per route sized (5 by default)
    remedy = {"SPRING_HTTP_CLIENTS_IMPERATIVE_FACTORY": "http-components"}
    assert downstream.client_pool("spring-virtual", env=remedy) == 5
    assert downstream.client_pool("spring-virtual", env={**remedy, "BENCH_DOWNSTREAM_POOL_SIZE": "1200"}) == 1200
    assert downstream.client_pool("spring-platform", env={}) == 8
    assert downstream.client_pool("spring-platform", env={}, mode="sequential") is None   # on the Tomcat thread
    assert round(downstream.pool_cap(5, cell), 1) == 8.3                                  # 5 / (3 x 0.2 s)
    assert downstream.pool_cap(5, downstream.Cell(200, 3, "sequential")) == downstream.pool_cap(5, cell)
    assert downstream.pool_cap(50, downstream.Cell(0, 3, "parallel")) is None


def test_quick_downstream_run_on_a_real_port_and_nginx(tmp_path):
    """QUICK=1 `harness bench quarkus-vertx downstream`: every cell measured against the real downstream, each step
    judged with the downstream wait added, the calls per request counted by nginx itself."""
    import json
    import os
    import subprocess
    import sys
    from harness.paths import ROOT
    env = dict(os.environ, QUICK="1", BENCH_RESULTS=str(tmp_path), BENCH_DOWNSTREAM_POOL_SIZE="64")
    run = subprocess.run([sys.executable, "-m", "harness", "bench", "quarkus-vertx", "downstream"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    [raw] = list(tmp_path.glob("downstream/*/quarkus-vertx-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete" and record["calibration"] and record["capacity"]["warm"]["achieved_rps"] > 0
    # a non-default pool is recorded, so the run is shown as a row of its own beside the defaults
    assert record["framework_overrides"] == {"BENCH_DOWNSTREAM_POOL_SIZE": "64"} and len(record["cells"]) == 2
    for cell in record["cells"]:
        coords = cell["coords"]
        assert cell["client_pool"] == 64 and cell["mst"]["probes"]
        for step in cell["steps"]:
            assert step["slo_ms"] == 50 + 2 * coords["latency_ms"] * (coords["calls"] if coords["mode"] == "sequential" else 1)
            assert step["downstream_cpu_us_per_call"] >= 0
            if step["passed"]:
                assert abs(step["downstream_calls_per_request"] - coords["calls"]) < 0.2
    assert "## Slow downstream services" in (tmp_path / "RESULTS.md").read_text()


def test_a_port_that_died_is_a_sentence_with_its_cell_and_its_log_line(tmp_path):
    records = [_record("spring-webflux", 700, 800, i) for i in (1, 2, 3)]
    second = dict(records[0]["cells"][0], coords=_coords(50, 3))
    for r in records:
        r["cells"].append(second)                   # every complete record: 200 ms, then 50 ms
    for i in (1, 2, 3):
        dead = _record("spring-virtual", 500, 600, i)
        dead.update(status="died", died="the app exited during a mst step: Terminating due to "
                                        "java.lang.OutOfMemoryError: Java heap space")
        records.append(dead)                        # finished 200 ms, died in 50 ms
    rs = runset.select(records, "downstream", order=["spring-virtual", "spring-webflux"])
    section = downstream_report.render(rs, tmp_path)
    assert ("spring-virtual died in 3 of 3 iterations, in the cell 50 ms, K=3 (the app's last log line: Terminating "
            "due to java.lang.OutOfMemoryError: Java heap space); its later cells are missing.") in section.verdict
    assert "Died during the run" in "\n".join(section.body)


def _cell(latency, calls, mst, first_failing, mode="parallel"):
    """A cell whose search confirmed `mst` below `first_failing`, or (mst 0) passed no rate: it failed at
    `first_failing`, the lowest rate it tried."""
    cell = schema.cell(_coords(latency, calls, mode), status="complete", slo_ms=450.0, utilisation={"CPU": 0.9},
                       downstream_connections_peak=50)
    if mst:
        cell.update(cap="CPU", steps=[_step(mst, 240, "mst"), _step(mst, 250, "confirm"),
                                      _step(first_failing, 900, "mst", "p99 over the SLO")],
                    mst=Mst(mst, True, True, first_failing, 450.0, mst,
                            probes=[[mst, True, "mst", None], [first_failing, False, "mst", "p99 over the SLO"],
                                    [mst, True, "confirm", None]]).to_json())
    else:
        cell.update(cap="none passed", steps=[_step(first_failing, 900, "mst", "p99 over the SLO")],
                    mst=Mst(0, False, True, first_failing, 450.0, first_failing,
                            probes=[[first_failing, False, "mst", "p99 over the SLO"]]).to_json())
    return cell


def _run(port, iteration, cells, died=None):
    record = schema.new({"port": port, "scenario": "downstream", "run_id": "r1", "iteration": iteration,
                         "status": "complete", "environment": {"git_commit": "c", "settings": {}}})
    record["cells"] = cells
    if died:
        record.update(status="died", died=died)
    return record


OOM = "the app exited during a mst step: Terminating due to java.lang.OutOfMemoryError: Java heap space"


def test_a_port_that_died_is_chosen_where_it_ran_and_the_verdict_and_table_say_where_it_died(tmp_path):
    # run order 50 ms K=3, 200 ms K=10, 50 ms K=3 sequential; spring-virtual is the best at 50 ms, then dies at
    # 200 ms K=10 in every iteration, so it has no figure there nor in the sequential cell. The rows order every port;
    # where and how it died is the verdict's sentence and the section's table
    records = [_run("spring-webflux", i, [_cell(50, 3, 500, 600), _cell(200, 10, 240, 280),
                                          _cell(50, 3, 1100, 1200, "sequential")]) for i in (1, 2, 3)]
    records += [_run("quarkus-virtual", i, [_cell(50, 3, 300, 340), _cell(200, 10, 20, 30),
                                            _cell(50, 3, 300, 340, "sequential")]) for i in (1, 2, 3)]
    records += [_run("spring-virtual", i, [_cell(50, 3, 900, 1000)], died=OOM) for i in (1, 2, 3)]
    rs = runset.select(records, "downstream", order=["spring-virtual", "spring-webflux", "quarkus-virtual"])
    section = downstream_report.render(rs, tmp_path)
    rows = {d.regime.split(": ", 1)[1]: d.choice for d in section.decisions}
    # every port in order where it ran; in the cell it died in and the later one, not compared
    assert rows["3 calls of 50 ms in parallel per request"] == "spring-virtual > spring-webflux > quarkus-virtual"
    assert rows["10 calls of 200 ms in parallel per request"] == \
        "spring-webflux > quarkus-virtual; not compared: spring-virtual (died here)"
    assert rows["3 calls of 50 ms one after another per request"] == \
        "spring-webflux > quarkus-virtual; not compared: spring-virtual (not measured: died earlier)"
    # died here (200 ms K=10), in another cell (from 50 ms K=3's view), not measured (the later sequential cell):
    # the verdict's death sentence names the cell and the later cells' loss
    assert ("spring-virtual died in 3 of 3 iterations, in the cell 200 ms, K=10 (the app's last log line: "
            "Terminating due to java.lang.OutOfMemoryError: Java heap space); its later cells are missing."
            ) in section.verdict
    # and the section's MST table: its figure at 50 ms, none in the cell it died in nor in the later one
    body = "\n".join(section.body)
    assert "| spring-virtual | 900 ✗ 1,000; CPU 3/3 (CPU 0.90) | – | – |" in body
    assert "Died during the run (the cells after it are missing from that iteration): spring-virtual #1: " in body


def test_a_port_whose_searches_passed_no_rate_is_named_below_the_ports_that_passed_one(tmp_path):
    # quarkus-vertx failed at 10/s, the lowest rate tried, in every iteration: below every port that passed 10/s;
    # spring-virtual failed at 20/s: below quarkus-reactive (passed 80/s) only, not below spring-platform (10/s)
    records = []
    for i in (1, 2, 3):
        records += [_run("spring-platform", i, [_cell(200, 3, 10, 20)]),
                    _run("spring-virtual", i, [_cell(200, 3, 0, 20)]),
                    _run("quarkus-reactive", i, [_cell(200, 3, 80, 90)]),
                    _run("quarkus-vertx", i, [_cell(200, 3, 0, 10)])]
    rs = runset.select(records, "downstream",
                       order=["spring-platform", "spring-virtual", "quarkus-reactive", "quarkus-vertx"])
    section = downstream_report.render(rs, tmp_path)
    [decision] = section.decisions
    # every port in order: quarkus-vertx failed at 10/s, where every port with a figure passed:
    # below them; spring-virtual failed at 20/s, above spring-platform's MST: not compared
    assert decision.choice == ("quarkus-reactive > spring-platform > quarkus-vertx (none passed); not compared: "
                               "spring-virtual (none passed ≥ 20/s)")
    # each that passed nothing, with who lies above it: the verdict's
    assert section.verdict[0] == (
        "With 3 calls of 200 ms in parallel per request, at each port's defaults, the confirmed MST runs from 10 "
        "(spring-platform) to 80 req/s (quarkus-reactive); quarkus-reactive is above spring-platform; spring-virtual "
        "passed no rate down to 20 req/s in every run (3), below quarkus-reactive; quarkus-vertx passed no rate down "
        "to 10 req/s in every run (3), below every port with a figure here.")
    # the table's cell says the same: none passed at the lowest rate tried
    assert "| quarkus-vertx | none passed ≥ 10/s; none passed 3/3 " in "\n".join(section.body)


def test_ports_that_passed_no_rate_are_grouped_and_a_remedy_with_a_figure_takes_their_place(tmp_path):
    records = []
    for i in (1, 2, 3):
        records += [_run("spring-platform", i, [_cell(200, 10, 0, 10)]),
                    _run("spring-webflux", i, [_cell(200, 10, 240, 280)]),
                    _run("quarkus-vertx", i, [_cell(200, 10, 0, 10)])]
        remedy = _run("quarkus-vertx", i, [_cell(200, 10, 560, 630)])
        remedy["framework_overrides"] = {"BENCH_DOWNSTREAM_POOL_SIZE": "1200"}
        records.append(remedy)
    rs = runset.select(records, "downstream", order=["spring-platform", "spring-webflux", "quarkus-vertx"])
    section = downstream_report.render(rs, tmp_path)
    [decision, sized_row] = section.decisions
    # spring-webflux alone has a figure at its defaults, the remedy with its larger pool; the two that passed nothing
    # failed at a rate below every figure: below them in the row
    assert decision.choice == "spring-webflux > spring-platform ≈ quarkus-vertx (none passed)"
    assert sized_row.choice == "quarkus-vertx (remedy) > spring-webflux > spring-platform (none passed)"
    # the two that passed nothing, grouped and below spring-webflux: the verdict's
    assert section.verdict[0].endswith(
        "the confirmed MST runs 240 req/s (spring-webflux); spring-platform, quarkus-vertx passed no rate down to "
        "10 req/s in every run (3 each), below every port with a figure here.")
    # with the remedies, spring-platform alone passed nothing (the remedy took quarkus-vertx's place): the
    # section's finding
    [sized] = section.findings
    assert sized.endswith("quarkus-vertx + `BENCH_DOWNSTREAM_POOL_SIZE=1200` is above spring-webflux; spring-platform "
                          "passed no rate down to 10 req/s in every run (3), below every port with a figure here.")


def _choices(records, order, chart_dir):
    """The decision rows' choices by regime ("3 calls of 50 ms in parallel per request"), and the section."""
    section = downstream_report.render(runset.select(records, "downstream", order=order), chart_dir)
    return {d.regime.split(": ", 1)[1]: d.choice for d in section.decisions}, section


def test_a_port_that_passed_no_rate_is_never_chosen(tmp_path):
    # one port, nothing passed (a QUICK run): no port is chosen; the verdict names the port as having passed nothing
    rows, section = _choices([_run("quarkus-vertx", 1, [_cell(200, 10, 0, 10)])], ["quarkus-vertx"], tmp_path)
    assert rows["10 calls of 200 ms in parallel per request"] == "quarkus-vertx (none passed)"
    assert section.verdict[0].endswith(
        "the confirmed MST runs nowhere (no port has a confirmed MST here); quarkus-vertx passed no rate down to "
        "10 req/s in every run (1).")
    # two ports, neither passed: no made-up ranges that "overlap"
    rows, section = _choices([_run("quarkus-vertx", 1, [_cell(200, 10, 0, 10)]),
                              _run("spring-platform", 1, [_cell(200, 10, 0, 20)])],
                             ["quarkus-vertx", "spring-platform"], tmp_path)
    assert rows["10 calls of 200 ms in parallel per request"] == "quarkus-vertx ≈ spring-platform (none passed)"
    assert section.verdict[0].endswith(
        "runs nowhere (no port has a confirmed MST here); quarkus-vertx passed no rate down to 10 req/s in every run "
        "(1); spring-platform passed no rate down to 20 req/s in every run (1).")
    assert "overlap" not in section.verdict[0]
    # a port with a figure below the lowest rate the other tried: only it is chosen, and nothing is said of the two
    rows, section = _choices([_run("a-port", 1, [_cell(200, 10, 0, 100)]),
                              _run("spring-webflux", 1, [_cell(200, 10, 50, 60)])], ["spring-webflux"], tmp_path)
    assert rows["10 calls of 200 ms in parallel per request"] == \
        "spring-webflux; not compared: a-port (none passed ≥ 100/s)"
    assert section.verdict[0].endswith(
        "the confirmed MST runs 50 req/s (spring-webflux); a-port passed no rate down to 100 req/s in every run (1).")


PLAN = {"downstream": {"cells": [[50, 3, "parallel"], [200, 10, "parallel"]]}}


def test_the_cell_a_port_died_in_comes_from_the_plan_when_no_record_is_complete(tmp_path):
    # a QUICK run (one iteration) whose only port dies in the second cell: no complete record gives the run order
    record = _run("spring-virtual", 1, [_cell(50, 3, 900, 1000)], died=OOM)
    record["environment"]["settings"] = PLAN
    rows, section = _choices([record], ["spring-virtual"], tmp_path)
    assert rows["3 calls of 50 ms in parallel per request"] == "spring-virtual"
    # the cell it died in, the plan's second, not the warm-up: the verdict's death sentence
    assert ("spring-virtual died in 1 of 1 iterations, in the cell 200 ms, K=10 (the app's last log line: "
            "Terminating due to java.lang.OutOfMemoryError: Java heap space); its later cells are missing."
            ) in section.verdict
    assert "warm-up" not in " ".join([*rows.values(), *section.verdict])


def _beside_webflux_dying_once(port: str, first: dict, k10: dict) -> list[dict]:
    """spring-webflux in 3 iterations; `port` in 3, dying in the first after its `first` cell (OOM at 200 ms K=10),
    reaching `k10` in the other two."""
    records = [_run("spring-webflux", i, [_cell(50, 3, 500, 600), _cell(200, 10, 240, 280)]) for i in (1, 2, 3)]
    records += [_run(port, 1, [first], died=OOM)] + [_run(port, i, [first, k10]) for i in (2, 3)]
    for r in records:
        r["environment"]["settings"] = PLAN
    return records


def test_a_port_that_died_in_some_runs_of_a_cell_is_not_compared_there(tmp_path):
    # spring-virtual died at 200 ms K=10 in 1 of 3 iterations: its 2 surviving runs, the highest, are not a result
    records = _beside_webflux_dying_once("spring-virtual", _cell(50, 3, 900, 1000), _cell(200, 10, 300, 330))
    rows, section = _choices(records, ["spring-virtual", "spring-webflux"], tmp_path)
    row = rows["10 calls of 200 ms in parallel per request"]
    assert row == "spring-webflux; not compared: spring-virtual (2 of 3 runs)"
    # its surviving runs' figure is shown with their count, and compared with none
    assert "spring-virtual: from the runs that confirmed one, in no comparison" in section.verdict[1]
    assert "(2 of 3 runs)" in section.verdict[1]
    assert "spring-virtual is above" not in section.verdict[1]
    # where it ran in every iteration it is compared; the cell it died in, and how often, is the verdict's
    assert rows["3 calls of 50 ms in parallel per request"] == "spring-virtual > spring-webflux"
    assert ("spring-virtual died in 1 of 3 iterations, in the cell 200 ms, K=10 (the app's last log line: "
            "Terminating due to java.lang.OutOfMemoryError: Java heap space); its later cells are missing."
            ) in section.verdict


def test_a_port_that_passed_no_rate_where_some_runs_died_counts_the_dead_runs_and_is_not_ranked(tmp_path):
    records = _beside_webflux_dying_once("quarkus-vertx", _cell(50, 3, 40, 50), _cell(200, 10, 0, 10))
    rows, section = _choices(records, ["spring-webflux", "quarkus-vertx"], tmp_path)
    assert rows["10 calls of 200 ms in parallel per request"] == \
        "spring-webflux; not compared: quarkus-vertx (none passed in 2 of 3 runs)"
    # the runs that passed nothing and the one that died there, counted, and no comparison: the verdict's
    assert section.verdict[1].endswith(
        "the confirmed MST runs 240 req/s (spring-webflux); quarkus-vertx passed no rate down to 10 req/s in 2 of 3 "
        "runs (1 died here).")
    assert ("quarkus-vertx died in 1 of 3 iterations, in the cell 200 ms, K=10 (the app's last log line: "
            "Terminating due to java.lang.OutOfMemoryError: Java heap space); its later cells are missing."
            ) in section.verdict


def test_a_run_where_every_port_died_in_the_warm_up_is_a_section_of_its_deaths(tmp_path):
    records = [_run(port, 1, [], died=OOM) for port in ("spring-virtual", "quarkus-virtual")]
    for r in records:
        r["environment"]["settings"] = PLAN
    rs = runset.select(records, "downstream", order=["spring-virtual", "quarkus-virtual"])
    section = downstream_report.render(rs, tmp_path)
    assert section is not None and section.decisions == []
    assert section.verdict == [
        f"{port} died in 1 of 1 iterations, in the warm-up (the app's last log line: Terminating due to "
        "java.lang.OutOfMemoryError: Java heap space); its later cells are missing."
        for port in ("spring-virtual", "quarkus-virtual")]
    assert "Died during the run" in "\n".join(section.body)


def test_a_search_whose_rate_passed_once_is_not_confirmed_never_passed_no_rate(tmp_path):
    # spring-virtual's 30/s passed once and its confirmation failed (MST 0, not confirmed): the table's cell says
    # "not confirmed", so neither the row nor the verdict (which names the ports that passed no rate) says it did
    once = _cell(200, 3, 0, 40)
    once["mst"] = Mst(0, False, True, 40, 450.0, 40, probes=[[40, False, "mst", "p99 over the SLO"],
                                                             [30, True, "mst", None],
                                                             [30, False, "confirm", "p99 over the SLO"]]).to_json()
    records = [_run("spring-platform", 1, [_cell(200, 3, 10, 20)]), _run("spring-virtual", 1, [once])]
    rows, section = _choices(records, ["spring-platform", "spring-virtual"], tmp_path)
    assert "passed no rate" not in rows["3 calls of 200 ms in parallel per request"]
    assert not any("passed no rate" in v for v in section.verdict)
    assert "| spring-virtual | 1/1 not confirmed;" in "\n".join(section.body)


def test_a_remedy_is_named_short_in_the_choice_unless_one_port_has_two():
    one = {"quarkus-vertx + `BENCH_DOWNSTREAM_POOL_SIZE=1200`": 1, "spring-webflux": 2}
    assert downstream_report._short(one) == {"quarkus-vertx (remedy)": 1, "spring-webflux": 2}
    two = {"quarkus-vertx + `BENCH_DOWNSTREAM_POOL_SIZE=1200`": 1, "quarkus-vertx + `BENCH_DOWNSTREAM_POOL_SIZE=64`": 2}
    assert downstream_report._short(two) == two


def test_the_first_guess_stays_below_where_the_cells_own_cpu_cost_fills_the_cpu_set():
    """spring-virtual's JDK client costs about 5x more CPU per request at 50 ms than at 0 ms: a first probe from the
    0-ms warm probe alone was 4-5x its limit and exhausted its heap in one step."""
    import types
    plan = types.SimpleNamespace(mst_first_guess=0.7)
    settings = {"cpus": {"app": "0-1", "db": "0-1", "generator": "0-1"}}
    jvm = types.SimpleNamespace(plan=plan, ctx=types.SimpleNamespace(settings=settings),
                                capacity=lambda phase: 3000.0)
    scenario = downstream.Downstream()
    scenario.bounds = (None, None)
    # settle at 100/s: app 0.29 + db 0.1 + generator 0.01 (+ nginx 0.01 beside the database) of 2 cores = 0.205
    settle = Step(phase="settle", target_rps=100, achieved_rps=100.0, connections=64, seconds=2, requests=200,
                  errors={}, statuses={"200": 200}, latency_ms={"p50": 52.0, "p99": 60.0}, generator="openloop",
                  app_cpu_cores=0.29, db_cpu_cores=0.1, generator_cpu_cores=0.01, extra={"nginx_cpu_cores": 0.01})
    cell = {"settle": settle.to_json()}
    assert round(scenario.estimate(jvm, cell)) == round(100 / 0.205)          # not 0.7 x 3,000
    assert scenario.estimate(jvm, {}) == 0.7 * 3000                          # before the settle step: as before
    cheap = dataclasses.replace(settle, app_cpu_cores=0.02, db_cpu_cores=0.01)  # a cheap client: the guess stands
    assert scenario.estimate(jvm, {"settle": cheap.to_json()}) == 0.7 * 3000
    failed = dataclasses.replace(settle, failure="p99 over the SLO")         # a failed settle step says nothing
    assert scenario.estimate(jvm, {"settle": failed.to_json()}) == 0.7 * 3000

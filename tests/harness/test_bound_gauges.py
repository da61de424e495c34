"""The gauges of the bounds on GET /feed's path (read from /proc, as the downstream steps read them), the sizes they
are judged against, and the section of the ports with every bound sized, from hand-made records."""
import socket
import subprocess
import time
from pathlib import Path

from harness import port_facts, sampling, settings
from harness.method import caps, runset, schema
from harness.method.record import Mst, Step
from harness.report.sections import downstream as downstream_report
from harness.scenarios import downstream


def test_connections_to_counts_the_client_side_of_established_connections_to_a_port():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    accepted = [server.accept()[0] for _ in clients]
    try:
        # the three client sockets, not the server's accepted ones (their local end is the port)
        assert sampling.connections_to(_self(), port) == 3
        clients.pop().close()
        accepted.pop().close()
        assert sampling.connections_to(_self(), port) == 2
    finally:
        for s in (*clients, *accepted, server):
            s.close()


def test_threads_named_counts_a_process_threads_by_the_kernel_s_cut_of_their_name():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        # Popen may return (vfork) before the kernel has renamed the child to what it executes
        comm = Path(f"/proc/{sleeper.pid}/comm")
        deadline = time.monotonic() + 5
        while comm.read_text().strip() != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sampling.threads_named(sleeper.pid, "sleep") == 1
        assert sampling.threads_named(sleeper.pid, "http-nio-8080-exec-") == 0
        # a name longer than the kernel keeps (15 characters) is compared by its first 15
        assert sampling.threads_named(sleeper.pid, "sleep" + "x" * 20) == 0
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sampling.threads_named(sleeper.pid, "sleep") is None       # gone


def test_gauges_keep_each_peak_while_the_block_runs():
    values = iter([3, 7, 5, 2, 2, 2, 2, 2])
    with sampling.Gauges({"x": lambda: next(values, 2), "none": lambda: None}) as gauges:
        gauges._sample()
        gauges._sample()
    assert gauges.peaks == {"x": 7, "none": None}


def test_tomcat_s_threads_read_boot_s_own_setting_first_then_the_app_s_then_the_default():
    assert port_facts.request_threads("spring-platform", {}) == 200
    assert port_facts.request_threads("spring-platform", {"TOMCAT_MAX_THREADS": "300"}) == 300
    assert port_facts.request_threads("spring-platform", {"TOMCAT_MAX_THREADS": "300",
                                                          "SERVER_TOMCAT_THREADS_MAX": "1200"}) == 1200
    assert port_facts.request_threads("spring-virtual", {"SERVER_TOMCAT_THREADS_MAX": "1200"}) is None
    sized = {"SERVER_TOMCAT_THREADS_MAX": "1200", "SPRING_TASK_EXECUTION_POOL_CORE_SIZE": "4000"}
    assert downstream.thread_cap("spring-platform", downstream.Cell(200, 3, "parallel"), sized) == 6000
    assert downstream.bounds("spring-platform", downstream.Cell(200, 3, "parallel"), sized) == \
        {"downstream connections": 4000, "request threads": 1200}
    # sequential calls run on the request's thread: no executor on the path
    assert downstream.bounds("spring-platform", downstream.Cell(50, 3, "sequential"), sized) == \
        {"request threads": 1200}
    # spring-webflux's Reactor Netty pool: 500 at the defaults, sized by the port's setting
    cell = downstream.Cell(200, 3, "parallel")
    assert downstream.bounds("spring-webflux", cell, {}) == {"downstream connections": 500}
    assert downstream.bounds("spring-webflux", cell, {"BENCH_DOWNSTREAM_POOL_SIZE": "4000"}) == \
        {"downstream connections": 4000}


def test_a_list_of_lists_is_overridden_as_json():
    loaded = settings.load(env={"BENCH_DOWNSTREAM_CELLS": '[[200, 3, "parallel"]]'})
    assert loaded["downstream"]["cells"] == [[200, 3, "parallel"]]
    assert settings.load(env={"BENCH_SLOW_DB_POOL_SIZES": "16, 64"})["slow-db"]["pool_sizes"] == [16, 64]


def test_a_peak_that_rose_in_the_step_is_its_own_reading_at_most_rate_times_longest_latency():
    steps = [_step(1000, "mst", {"downstream connections": 700}), _step(1500, "mst", {"downstream connections": 1100},
                                                                         max_ms=300)]
    # 1,500 req/s, none over 0.3 s: at most 1,500 x 0.3 x 3 + 1 = 1,351 connections; the peak (1,100) rose: its own
    assert caps.gauge_reading(steps, steps[1], "downstream connections", 3) == 1100
    steps[1]["gauges_peak"]["downstream connections"] = 3900
    assert caps.gauge_reading(steps, steps[1], "downstream connections", 3) == 1351.0


def test_a_gauge_left_full_by_an_earlier_heavier_step_reads_the_step_s_own_mean_occupancy():
    # a failed probe's queue filled the 4,000 connections and Tomcat's 1,200 threads; the MST's steps after it read
    # the same marks, so their own mean occupancy stands in: 630 req/s x 0.218 s (x 3 calls in parallel)
    entry = _cell(630, {"downstream connections": 2563, "request threads": 1200}, failed_first=True)
    utilisation = downstream.cap_of(_Ctx(), entry, None, None)[1]
    assert utilisation == {"CPU": 0.7, "client pool": round(630 * 0.218 * 3 / 4000, 2),
                           "threads": round(630 * 0.218 / 1200, 2)}
    assert downstream_report.held_by([entry]) is None
    # a pool that its own requests fill: 2,000 req/s x 0.218 s x 3 = 1,308 of 1,200 connections
    full = _cell(2000, {"downstream connections": 1200}, bounds={"downstream connections": 1200}, failed_first=True)
    assert downstream.cap_of(_Ctx(), full, None, None)[1]["client pool"] == 1.09
    assert downstream_report.held_by([full]) == "its client's pool of 1,200 connections"
    # sequential calls hold one connection at a time
    assert caps.per_request("downstream connections", {"calls": 3, "mode": "sequential"}) == 1
    # older records (no gauges): the MST over the rate the bound allows, as before
    assert downstream.cap_of(_Ctx(), _cell(1500, None), None, 2000.0)[1]["client pool"] == 0.75


def test_the_sized_section_orders_the_ports_no_bound_held_and_names_the_others_with_their_bound():
    records = []
    for i in (1, 2, 3):
        records.append(_run("spring-platform", i, 1100 + 50 * i, {"downstream connections": 700, "request threads": 260},
                            {"SERVER_TOMCAT_THREADS_MAX": "1200", "SPRING_TASK_EXECUTION_POOL_CORE_SIZE": "4000"}))
        records.append(_run("spring-webflux", i, 2400 + 100 * i, {"downstream connections": 1500},
                            {"BENCH_DOWNSTREAM_POOL_SIZE": "4000"}))
        records.append(_run("quarkus-vertx", i, 6000, {"downstream connections": 4000},
                            {"BENCH_DOWNSTREAM_POOL_SIZE": "4000"}, failed_first=True))
    rs = runset.select(records, "downstream", order=["spring-platform", "spring-webflux", "quarkus-vertx"])
    section = downstream_report.render_sized(rs)
    [decision] = section.decisions
    assert decision.regime == "Slow downstream services: 3 calls of 200 ms in parallel per request, every bound sized"
    assert decision.choice.startswith("spring-webflux > spring-platform")
    assert decision.choice.endswith("; limited: quarkus-vertx by its client's pool of 4,000 connections")
    assert "still limited: quarkus-vertx by its client's pool of 4,000 connections" in section.verdict[0]
    assert "no pool or thread limit held spring-platform, spring-webflux at the MST" in section.verdict[0]
    text = "\n".join(section.body)
    assert "| spring-webflux | `BENCH_DOWNSTREAM_POOL_SIZE` | 2,600 (2,500–2,700)" in text
    # the confirmation's peaks are its MST step's marks: its own mean occupancy stands in (2,600 x 0.218 s x 3)
    assert "| 1,700 (1,635–1,766) of 4,000 | – |" in text and "| 262 (251–272) of 1,200 |" in text


class _Ctx:
    settings = {"cpus": {"db": "0-1", "app": "0-1", "generator": "0-1"}}


def _self():
    import os
    return os.getpid()


def _step(rate, phase, peaks, passed=True, max_ms=260.0):
    extra = {"gauges_peak": dict(peaks)} if peaks is not None else {}
    return Step(phase=phase, target_rps=rate, achieved_rps=rate, connections=64, seconds=5, requests=rate * 5,
                errors={}, statuses={"200": rate * 5}, generator="openloop",
                latency_ms={"mean": 218.0, "p50": 201.0, "p99": 230.0, "max": max_ms},
                failure=None if passed else "p99 over the SLO", app_cpu_us_per_request=400.0, app_cpu_cores=1.2,
                db_cpu_cores=0.1, generator_cpu_cores=0.1, extra=extra).to_json()


def _cell(mst, peaks, bounds=None, failed_first=False):
    """A search whose probe at half the MST passed with half the peaks, then (failed_first: a probe at twice the MST
    failed, leaving the gauges at `peaks`) the MST and its confirmation, the first failing rate, the common step."""
    half = peaks and {g: v // 2 for g, v in peaks.items()}
    steps = [_step(mst // 2, "mst", half)]
    steps += [_step(mst * 2, "mst", peaks, passed=False)] if failed_first else []
    steps += [_step(mst, "mst", peaks), _step(mst, "confirm", peaks), _step(mst + 100, "mst", peaks, passed=False),
              _step(400, "common", peaks)]
    return schema.cell({"latency_ms": 200.0, "calls": 3, "mode": "parallel"}, status="complete", slo_ms=450.0,
                       bounds=bounds or {"downstream connections": 4000, "request threads": 1200},
                       steps=steps, mst=Mst(mst, True, True, mst + 100, 450.0, mst).to_json())


def _run(port, iteration, mst, peaks, overrides, failed_first=False):
    bounds = {"downstream connections": 4000, **({"request threads": 1200} if "request threads" in peaks else {})}
    cell = _cell(mst, peaks, bounds, failed_first)
    cell["cap"], cell["utilisation"] = downstream.cap_of(_Ctx(), cell, None, None)
    record = schema.new({"port": port, "scenario": "downstream", "run_id": f"r-{port}", "iteration": iteration,
                         "status": "complete", "environment": {"git_commit": "c", "settings": {}},
                         "framework_overrides": overrides})
    record["cells"] = [cell]
    return record


def test_a_port_whose_jvm_died_in_the_sized_cell_is_named_with_its_death_not_ranked():
    records = []
    for i in (1, 2, 3):
        records.append(_run("spring-webflux", i, 2400 + 100 * i, {"downstream connections": 1500},
                            {"BENCH_DOWNSTREAM_POOL_SIZE": "4000"}))
        dead = _run("spring-virtual", i, 1720, {"downstream connections": 1666},
                    {"BENCH_DOWNSTREAM_POOL_SIZE": "4000", "SPRING_HTTP_CLIENTS_IMPERATIVE_FACTORY": "http-components"})
        dead["cells"][0]["status"] = "partial"
        dead.update(status="died", died="the app exited during a mst step: Terminating due to "
                                         "java.lang.OutOfMemoryError: Java heap space")
        records.append(dead)
    rs = runset.select(records, "downstream", order=["spring-virtual", "spring-webflux"])
    section = downstream_report.render_sized(rs)
    [decision] = section.decisions
    assert decision.choice == "spring-webflux; not compared: spring-virtual (died in 3 of 3)"
    assert "| spring-virtual | `BENCH_DOWNSTREAM_POOL_SIZE`, `SPRING_HTTP_CLIENTS_IMPERATIVE_FACTORY` | died in 3 of " \
           "3 runs (passed up to 1,720 req/s before) |" in "\n".join(section.body)
    assert any("spring-virtual" in v and "OutOfMemoryError" in v for v in section.verdict)

"""in-flight (a declared regime): a QUICK run against a real port and the real downstream nginx."""
import json
import os
import subprocess
import sys

from harness import settings
from harness.method import plan as plan_mod
from harness.paths import ROOT
from harness.report.sections import in_flight as in_flight_report
from harness.scenarios import in_flight


def test_the_declaration_sets_rates_by_littles_law_and_sizes_every_bound_above_them():
    plan = plan_mod.section(settings.load(env={}), "in-flight", in_flight.Plan)
    assert plan.in_flight == [1000, 2500, 5000] and plan.latency_ms >= 1000 and plan.timeout_ms > plan.latency_ms
    assert plan.connections > max(plan.in_flight) and plan.cell_phases == ["common"]
    # each port's bound is sized from ports.toml's setting, above the most calls in flight; none where it has none
    assert in_flight.client_bound(plan, "quarkus-vertx") == {"BENCH_DOWNSTREAM_POOL_SIZE": 6000}
    assert in_flight.client_bound(plan, "spring-virtual") == {}


def test_a_quick_in_flight_run_on_a_real_port_and_nginx(tmp_path):
    env = dict(os.environ, QUICK="1", BENCH_RESULTS=str(tmp_path))
    run = subprocess.run([sys.executable, "-m", "harness", "bench", "quarkus-vertx", "in-flight"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    [raw] = list(tmp_path.glob("in-flight/*/quarkus-vertx-1.json"))
    record = json.loads(raw.read_text())
    quick = plan_mod.section(settings.load(env={"QUICK": "1"}), "in-flight", in_flight.Plan)
    assert record["status"] == "complete" and record["schema"] == 2 and record["warmup"]["windows"]
    # the client's bound sized above the most calls in flight, and recorded
    assert record["client_bound"] == {"BENCH_DOWNSTREAM_POOL_SIZE": int(quick.bound_margin * max(quick.in_flight))}
    assert [c["coords"]["in_flight"] for c in record["cells"]] == quick.in_flight
    for cell in record["cells"]:
        [step] = [s for s in cell["steps"] if s["phase"] == "common"]
        n = cell["coords"]["in_flight"]
        assert step["target_rps"] == round(n * 1000 / quick.latency_ms)           # Little's law
        assert step["slo_ms"] == 50 + 2 * quick.latency_ms and cell["held"] is step["passed"]
        assert step["latency_ms"]["p50"] >= quick.latency_ms                       # every answer waited downstream
        assert cell["threads"] > 0 and cell["rss_kib_per_in_flight"] is not None
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## Requests in flight: thousands waiting on a slow downstream" in text
    assert "| quarkus-vertx | 50 |" in text and "[in-flight](#in-flight)" in text


def test_the_decision_puts_the_bound_first_then_cpu_among_those_that_held():
    """A bound decides (the most requests in flight held in every run), then app CPU per request among the ports
    that held the most: lower first, `>` only where the ranges do not overlap."""
    from harness.method.spans import spread
    held = {"a": {1000: (3, 3), 5000: (3, 3)}, "b": {1000: (3, 3), 5000: (3, 3)}, "c": {1000: (3, 3), 5000: (3, 3)},
            "d": {1000: (3, 3), 5000: (2, 3)}, "e": {1000: (1, 3), 5000: (0, 3)}, "f": {1000: (3, 3), 5000: (1, 3)}}
    cpu = {"a": spread([900, 950, 1000]), "b": spread([400, 420, 450]), "c": spread([430, 500, 520])}
    assert in_flight_report.choice(held, cpu) == "b ≈ c > a (held 5,000) > d ≈ f (held 1,000) > e (held none)"
    assert in_flight_report.held_everywhere(held["d"]) == 1000 and in_flight_report.held_everywhere(held["e"]) == 0
    # as measured at spring-virtual's defaults: held 1,000 and died of heap exhaustion at 2,500 in every run
    assert in_flight_report.choice(held, cpu, {"e": [1000, 1000]}).endswith("> e (held none; died at 1,000)")
    records = [{"status": "died", "cells": [{"coords": {"in_flight": 1000}, "status": "complete"},
                                            {"coords": {"in_flight": 2500}, "status": "partial"}]},
               {"status": "complete", "cells": []}]
    assert in_flight_report.died_at(records) == [2500]


def test_a_remedy_row_is_a_sentence_beside_its_ports_defaults_never_a_rank():
    """As measured: spring-virtual on Apache HttpClient 5 (pool 6,000) held 1,000 and died at 2,500 in every
    run, as at its defaults: the sentence says both; the decision ranks the defaults only."""
    label = "spring-virtual + `SPRING_HTTP_CLIENTS_IMPERATIVE_FACTORY=http-components`"
    held = {1000: (3, 3)}
    died = {label: [2500, 2500, 2500], "spring-virtual": [2500, 2500]}
    assert in_flight_report.remedy_sentence(label, held, {1000: (3, 3)}, died) == (
        f"- {label} (a remedy row, not ranked): held 1,000, died at 2,500 in 3 run(s); spring-virtual at its "
        "defaults: held 1,000, died at 2,500 in 2 run(s).")
    assert in_flight_report.remedy_sentence(label, {1000: (2, 3)}, {}, {}).endswith("held none; spring-virtual at "
                                                                                     "its defaults: held none.")
    # where both held a count: app CPU per request there, lower only where the ranges do not overlap
    from harness.method.spans import spread
    assert in_flight_report.remedy_sentence(label, held, {1000: (3, 3)}, {}, {1000: spread([1773, 1873, 2168])},
                                            {1000: spread([2485, 2516, 2653])}).endswith(
        "App CPU per request at 1,000 in flight: 1,873 (1,773–2,168) µs against 2,516 (2,485–2,653) at the defaults "
        "(lower).")


def test_the_marginal_cost_of_a_request_in_flight_is_the_slope_between_measured_counts():
    """Dividing the whole JVM by the count spreads its fixed footprint over it; the slope between two counts does
    not: 400 MiB at 1,000 in flight and 450 MiB at 2,000 (measured by Little's law from the achieved rate and the
    mean latency) is 51.2 KiB per further request, not 410 and 230."""
    def cell(n, rate, mean_ms, rss, heap):
        return {"coords": {"in_flight": n}, "status": "complete", "heap_used_mb": heap,
                "steps": [{"phase": "common", "achieved_rps": rate, "latency_ms": {"mean": mean_ms},
                           "app_rss_mb_peak": rss}]}
    record = {"cells": [cell(1000, 500.0, 2000.0, 400.0, 100.0), cell(2500, 1000.0, 2000.0, 450.0, 150.0)]}
    assert in_flight_report.measured_in_flight(record["cells"][1]) == 2000.0
    rss, heap = in_flight_report.slopes([record, record])
    assert rss.median == 51.2 and heap.median == 51.2
    assert in_flight_report.slopes([{"cells": record["cells"][:1]}]) == (None, None)


def test_a_variant_with_thousands_in_flight_is_set_beside_the_port_it_repeats():
    from harness.method import runset, schema

    def cell(n, heap, held=True, cpu=2500.0):
        return {"coords": {"in_flight": n}, "status": "complete", "held": held, "heap_used_mb": heap,
                "steps": [{"phase": "common", "achieved_rps": n / 2, "latency_ms": {"mean": 2000.0},
                           "app_rss_mb_peak": 400.0, "app_cpu_us_per_request": cpu}]}
    recs = []
    for port, heap_hi, held_hi in (("spring-virtual", 500.0, False), ("spring-virtual-hikari", 200.0, True)):
        for i in (1, 2, 3):
            recs.append({"port": port, "scenario": "in-flight", "run_id": "20261203T000000Z", "iteration": i,
                         "status": "complete", "environment": {"settings": {"in-flight": {"latency_ms": 2000}}},
                         "framework_overrides": {}, "schema": schema.VERSION,
                         "cells": [cell(1000, 100.0, cpu=2500.0 + i), cell(2500, heap_hi, held_hi)]})
    section = in_flight_report.render_variants(runset.select(recs, "in-flight", ["spring-virtual",
                                                                                  "spring-virtual-hikari"]))
    # 100 MiB more heap over 1,500 more in flight: 68 KiB each; 400 MiB: 273 KiB
    assert section.verdict == ["With HikariCP 7.1.0, spring-virtual-hikari held 2,500 in flight in every run; "
                               "spring-virtual held 1,000 in flight in every run; each further request in flight "
                               "added 68 KiB of used heap against 273 (below); app CPU per request at 1,000 in "
                               "flight 2,502 (2,501–2,503) µs against 2,502 (2,501–2,503) (the ranges overlap)."]
    assert section.anchor == "in-flight-hikari"
    assert in_flight_report.render_variants(runset.select(recs[3:], "in-flight", ["spring-virtual-hikari"])) is None


def test_the_class_histogram_gives_the_live_heaps_total_and_its_largest_classes():
    text = """12345:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:         40000        4096000  [B (java.base@25.0.1)
   2:          1000        1024000  jdk.internal.vm.StackChunk (java.base@25.0.1)
   3:         20000         640000  java.lang.String (java.base@25.0.1)
   4:            10            320  java.lang.OutOfMemoryError (java.base@25.0.1)
Total         61010        5760320
"""
    found = in_flight.class_histogram(text, top=2)
    assert found == {"total_kib": 5625.3, "classes": [["[B", 40000, 4000.0], ["jdk.internal.vm.StackChunk", 1000, 1000.0]]}
    assert in_flight.class_histogram("12345:\nnothing here") is None

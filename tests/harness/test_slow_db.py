"""slow-db: the plan, the limits and caps (pure), the report generated from hand-made records, the latency proxy
against the real database, and a QUICK scenario run of one real port through it."""
import json
import os
import subprocess
import sys
import time
import types
from contextlib import closing

import psutil
import pytest

from harness import db, proxy, settings as settings_mod
from harness.errors import Fatal
from harness.method import plan as plan_mod, runset, schema
from harness.method import slow_db as slow_db_method
from harness.report import table
from harness.method.record import Mst, Step
from harness.method.rule import GENERATOR, LATENCY, Rule
from harness.paths import ROOT
from harness.ports import port_busy
from harness.report.section import Section
from harness.report.sections import slow_db as slow_db_report
from harness.scenarios import slow_db
from harness.target import round_trips
from harness.db import LocalDatabase

PORT = "quarkus-vertx"   # the quickest to start; every port runs the same scenario code
HTTP_PORT = "18087"


def ctx_for(env: dict):
    settings = settings_mod.load(env=env)
    return types.SimpleNamespace(settings=settings,
                                 plan=lambda t: plan_mod.section(settings, "slow-db", t))


# --- the plan -----------------------------------------------------------------------------------------------------

def test_plan_orders_latencies_down_and_the_default_pool_first_and_takes_subsets_from_the_environment():
    p = slow_db.load_plan(ctx_for({"BENCH_SLOW_DB_LATENCIES_MS": "5,20,1", "BENCH_SLOW_DB_POOL_SIZES": "300,16"}))
    assert p.latencies_ms == [20, 5, 1] and p.pool_sizes == [16, 300]
    full = slow_db.load_plan(ctx_for({}))
    assert full.iterations >= 3 and len(full.pool_sizes) >= 2


def test_a_fractional_or_zero_latency_is_refused_with_one_line():
    with pytest.raises(Fatal, match="whole milliseconds"):
        slow_db.load_plan(ctx_for({"BENCH_SLOW_DB_LATENCIES_MS": "0.5"}))
    with pytest.raises(Fatal, match="baseline"):
        slow_db.load_plan(ctx_for({"BENCH_SLOW_DB_LATENCIES_MS": "0,5"}))


def test_the_slo_leaves_room_for_the_two_database_waits_an_idle_port_shows_at_p99():
    rule = Rule.from_settings(settings_mod.load(env={}))
    assert rule.slo_ms(slow_db.LOOKUPS * 50) == rule.p99_ms + rule.round_trips_per_wait * 50
    assert rule.slo_ms(slow_db.LOOKUPS * 50) == 150      # 50 ms + 2 x 50 ms, with bench.toml's [rule]


def test_the_common_rate_is_a_share_of_the_default_pools_limit_and_at_most_the_cap():
    p = slow_db.load_plan(ctx_for({}))
    # 60 % of what 16 connections give a 2-round-trip port at 20 ms (+0.2 ms through the proxy)
    assert slow_db.common_rate(p, 16, 20, 0.2) == 240
    assert slow_db.common_rate(p, 16, 1, 0.2) == p.common_rate_max


def test_round_trips_per_request_from_a_request_alone():
    assert round_trips(51.0, 0.9, 50) == 1
    assert round_trips(101.2, 0.9, 50) == 2       # spring-webflux: a COM_PING on every release
    assert round_trips(9.46, 1.72, 5) == 1        # a young JVM's noise only adds: 1.55 is still one


# --- limits and caps ----------------------------------------------------------------------------------------------

def test_limits_are_what_each_resource_allows_for_the_hold_time_of_a_request():
    lim = slow_db.limits_rps(pool=16, threads=200, connections=512, trips=2, rtt_ms=50, cpu_rps=4000)
    assert lim["pool"] == pytest.approx(160) and lim["threads"] == pytest.approx(2000)
    assert lim["generator connections"] == pytest.approx(5120) and lim["CPU"] == pytest.approx(4000)
    assert slow_db.limits_rps(16, None, 512, 1, 20, None)["threads"] is None


def cell_(mst=300, util=None, limit=None, bounded=True, confirmed=True, latency=50, first_failing=330, steps=()):
    m = Mst(mst, confirmed, bounded, first_failing if bounded else None, 150.0, 290, [], None, limit)
    return {"coords": {"latency_ms": latency}, "status": "complete", "cap": None, "slo_ms": 50.0 + 2 * latency,
            "round_trips": 1, "round_trip_ms": latency + 0.2,
            "limits_rps": {}, "steps": list(steps), "mst": m.to_json(),
            "utilisation": util if util is not None else {"CPU": 0.3, "pool": 0.94}}


def test_the_issue_case_two_busy_cores_at_the_pools_limit_is_cpu_and_pool_not_the_pool():
    # quarkus-virtual at 50 ms: 1.94 of 2 cores busy and near pool / RTT: both are named, in order of margin
    util = slow_db.utilisation(300, 1.94, 2, {"pool": 320, "threads": None, "generator connections": 10_000})
    assert util["CPU"] == pytest.approx(0.97) and util["pool"] == pytest.approx(0.9375, abs=1e-3)
    assert slow_db_method.classify(cell_(util=util)) == "CPU and pool"
    assert slow_db_method.classify(cell_(util={"CPU": 0.7, "pool": 0.94})) == "unclear"      # CPU in the grey zone
    assert slow_db_method.classify(cell_(util={"CPU": 0.3, "pool": 0.94})) == "pool"
    assert slow_db_method.classify(cell_(util={"CPU": 0.95, "pool": 0.2, "threads": 0.9})) == "CPU and threads"


def test_a_search_the_generator_stopped_is_the_generators_never_the_ports():
    # spring-virtual at 20 and 50 ms: the generator fell behind its schedule; not re-labelled as the port's cap
    assert slow_db_method.classify(cell_(util={"CPU": 0.97, "pool": 0.3}, limit=GENERATOR, bounded=False)) == "generator"
    assert slow_db_method.classify(cell_(mst=0)) == "none passed"
    assert slow_db_method.classify(cell_(mst=0, limit=GENERATOR, bounded=False)) == "generator"
    # no rate failed and the generator kept up: no limit was met (the MST is a lower bound), not "unclear"
    assert slow_db_method.classify(cell_(util={"CPU": 0.5, "pool": 0.4}, bounded=False)) == "not reached"
    assert slow_db_method.classify({"coords": {"latency_ms": 5}}) == "not measured"


# --- the report from hand-made records ----------------------------------------------------------------------------

def step(phase, rate, passed=True, p50=51.0, p99=60.0, failure=LATENCY):
    s = Step(phase=phase, target_rps=rate, achieved_rps=rate, connections=64, seconds=4, requests=rate * 4,
             errors={}, statuses={"200": rate * 4}, latency_ms={"p50": p50, "p99": p99}, generator="openloop",
             slo_ms=150.0, failure=None if passed else failure, app_cpu_us_per_request=400.0, app_rss_mb_peak=300.0,
             extra={"busy_cores": 0.6, "proxy_cpu_cores": 0.1, "proxy_cpu_us_per_request": 50.0,
                    "app_threads_peak": 40})
    return s.to_json(histogram=False)


# (port, pool) -> per latency (5, 50): per iteration (MST, utilisation, generator-limited)
DATA = {
    ("quarkus-vertx", 16): {5: [(2900, {"CPU": 0.5, "pool": 0.93}), (3000, {"CPU": 0.5, "pool": 0.95}),
                                (2950, {"CPU": 0.52, "pool": 0.94})],
                            50: [(300, {"CPU": 0.1, "pool": 0.94}), (310, {"CPU": 0.1, "pool": 0.96}),
                                 (305, {"CPU": 0.1, "pool": 0.95})]},
    ("spring-webflux", 16): {5: [(1400, {"CPU": 0.4, "pool": 0.9}), (1450, {"CPU": 0.4, "pool": 0.92}),
                                 (1420, {"CPU": 0.4, "pool": 0.91})],
                             50: [(150, {"CPU": 0.1, "pool": 0.94}), (155, {"CPU": 0.1, "pool": 0.96}),
                                  (152, {"CPU": 0.1, "pool": 0.95})]},
    ("quarkus-vertx", 256): {5: [(9000, {"CPU": 0.97, "pool": 0.2}), (9400, {"CPU": 0.98, "pool": 0.2}),
                                 (9200, {"CPU": 0.96, "pool": 0.2})],
                             50: [(4500, {"CPU": 0.95, "pool": 0.9}), (4600, {"CPU": 0.96, "pool": 0.91}),
                                  (4550, {"CPU": 0.95, "pool": 0.9}, GENERATOR)]},
    ("spring-webflux", 256): {5: [(4000, {"CPU": 0.95, "pool": 0.1}), (4100, {"CPU": 0.96, "pool": 0.1}),
                                  (4050, {"CPU": 0.95, "pool": 0.1})],
                              50: [(2000, {"CPU": 0.9, "pool": 0.8}), (2100, {"CPU": 0.9, "pool": 0.82}),
                                   (2050, {"CPU": 0.9, "pool": 0.81})]},
}


def records():
    env = {"settings": {"db": {"pool_size": 16}, "slow-db": {"step_seconds": 4, "connections": 512,
                                                               "mst_max_probes": 2}}}
    out = []
    for (port, pool), by_latency in DATA.items():
        for i in range(3):
            cells = []
            for latency in (50, 5):
                mst, util, *limit = by_latency[latency][i]
                limit = limit[0] if limit else None
                c = cell_(mst, util, limit, bounded=limit is None, latency=latency, first_failing=int(mst * 1.15),
                          steps=[step("mst", mst), step("mst", int(mst * 1.15), passed=False), step("confirm", mst)])
                if pool == 16:
                    rate = 240 if latency == 50 else 2000
                    c["steps"].insert(0, step("common", rate, p50=latency + 1.0, p99=latency * 2.0))
                c["at_mst"] = {"app_cpu_us_per_request": 400.0, "app_rss_mb_peak": 300.0, "app_threads_peak": 40}
                cells.append(c)
            out.append({"port": port, "scenario": "slow-db", "run_id": "20261123T000000Z", "iteration": i + 1,
                        "status": "complete", "environment": env, "framework_overrides": {}, "schema": schema.VERSION,
                        "jvm": {"pool_size": pool},
                        "cells": cells, "warmup": {"seconds": 20, "rate": 1000, "settled": True},
                        "proxy_cost": {"toxiproxy": "2.12.0", "direct": {"p50_ms": 0.1},
                                       "through_proxy": [{"latency_ms": 0, "p50_ms": 0.2, "p99_ms": 0.3,
                                                          "added_ms": 0.1, "overhead_ms": 0.1,
                                                          "proxy_cpu_us_per_query": 30}]}})
    return out


def test_the_section_is_generated_from_the_records(tmp_path):
    from harness import report        # as the report renders it: a row without evidence points at the section
    rs = runset.select(records(), "slow-db", ["spring-webflux", "quarkus-vertx"])
    section = report.rendered("slow-db", rs, tmp_path)
    assert isinstance(section, Section)
    body = "\n".join(section.body)
    # the MST beside its first failing rate; the caps with their margins
    assert "| quarkus-vertx | 50 | 1 | 305 (300–310) ✗ 350 (345–356) | pool 3/3 (pool 0.95, CPU 0.10) |" in body
    # two limits near their end are named together; a generator-stopped search is the generator's, not confirmed
    # as the port's limit (shown as a bound, ≥)
    assert "CPU and pool 2/3, generator 1/3" in body
    assert "≥ 4,550 (4,500–4,600)" in body
    assert ("The generator fell behind its schedule in 1 of 24 searches. It stopped 1 (quarkus-vertx pool 256 at +50 "
            "ms #3): there the MST is where the generator stopped") in body
    assert (tmp_path / "slow-db-mst.png").exists()
    # p50 / p99 at the common rate, from the common steps
    assert "51.0 / 100 at 240/s" in body
    rows = {d.regime: d for d in section.decisions}
    pool16 = rows["database +5–50 ms away per round trip, pool 16"]
    # what decided it, with the searches it held over every latency of the row (the verdict counts every cap)
    assert pool16.decided_by == f"{slow_db_report.DECIDED_BY['pool']}; pool in 12 of 12 searches"
    assert pool16.choice == "quarkus-vertx (above every other)"
    assert pool16.settings == "`DB_POOL_SIZE` (pool 256 raised the MST of spring-webflux, quarkus-vertx)"
    assert pool16.evidence == "#slow-db"
    large = [d for d in section.decisions if d.regime.endswith("pool 256")]
    assert [d.regime for d in large] == ["database +5 ms away per round trip, pool 256",
                                         "database +50 ms away per round trip, pool 256"]
    assert large[0].decided_by == f"{slow_db_report.DECIDED_BY['CPU']}; CPU in 6 of 6 searches"
    assert large[1].decided_by == "CPU and pool together, each near its limit; CPU and pool in 5 of 6 searches"
    # no pool above the largest was run: a larger pool's effect is not claimed either way
    assert large[0].settings == "none measured (no pool above 256 was run)"
    assert "as far as the CPU" in large[1].settings
    verdict = " ".join(section.verdict)
    assert ("At +50 ms per database round trip with pool 16, the confirmed MST runs from 152 (150–155) "
            "(spring-webflux) to 305 (300–310) req/s (quarkus-vertx)") in verdict
    # a ratio against a lower bound is refused: quarkus-vertx's pool-256 MST at 50 ms is a bound, so it is "above"
    assert "pool 256 lifts the MST above pool 16's (whole ranges) for spring-webflux 13.5×, quarkus-vertx (a bound: " \
        "no ratio)." in verdict                  # the first pool above the default one: in the verdict
    assert "round trip with pool 256" not in verdict and any("round trip with pool 256" in v for v in section.findings)
    assert ("The generator fell behind its schedule in 1 slow-db search(es): it stopped 1 (those MSTs are the "
            "generator's limit, lower bounds of the port).") in section.findings     # the section's sentence
    assert "quarkus-vertx" in "\n".join(section.appendix) and "| mst | 300 |" in "\n".join(section.appendix)


def test_a_latency_no_cap_held_in_most_searches_is_a_row_of_its_own_with_every_cap_counted(tmp_path):
    """The published pool-256 case at +50 ms: CPU in a third of the searches, the rest generator, unclear and CPU
    with the pool in either order. The row says so, latency by latency, and claims no effect of a larger pool (none
    was run); the verdict counts "pool and CPU" and "CPU and pool" as one cap."""
    mixed = {("quarkus-vertx", 1): {"CPU": 0.95, "pool": 0.2}, ("quarkus-vertx", 2): {"CPU": 0.85, "pool": 0.9},
             ("spring-webflux", 1): {"CPU": 0.95, "pool": 0.1}, ("spring-webflux", 2): {"CPU": 0.9, "pool": 0.82},
             ("spring-webflux", 3): {"CPU": 0.7, "pool": 0.3}}      # quarkus-vertx #3: the generator's (DATA)
    recs = records()
    for r in recs:
        for c in r["cells"]:
            if (r["jvm"]["pool_size"] == 256 and c["coords"]["latency_ms"] == 50
                    and (r["port"], r["iteration"]) in mixed):
                c["utilisation"] = mixed[r["port"], r["iteration"]]
    section = slow_db_report.render(runset.select(recs, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    large = {d.regime: d for d in section.decisions if d.regime.endswith("pool 256")}
    assert list(large) == ["database +5 ms away per round trip, pool 256",
                           "database +50 ms away per round trip, pool 256"]
    at5, at50 = large.values()
    assert at5.decided_by == f"{slow_db_report.DECIDED_BY['CPU']}; CPU in 6 of 6 searches"
    # no cap is counted in the row (none held most searches): the verdict counts them all
    assert at50.decided_by == "no single limit: no cap held more than half of the 6 searches"
    assert at50.settings == "none indicated (no single limit)"
    assert not any("does not help" in d.settings for d in section.decisions)
    verdict = " ".join(section.verdict + section.findings)
    assert "caps: CPU in 2, CPU and pool in 2, unclear in 1, generator in 1 of 6 searches." in verdict
    assert "pool and CPU" not in verdict


def test_cpu_at_a_smaller_pool_names_only_what_the_largest_pool_measured(tmp_path):
    # pool 64 held by CPU at +5 ms where pool 256 measured lower: the larger pool lifted nobody, and says so
    recs = records()
    pool64 = [dict(r, jvm={"pool_size": 64},
                   cells=[dict(c, utilisation={"CPU": 0.95, "pool": 0.3}) for c in r["cells"]])
              for r in recs if r["jvm"]["pool_size"] == 256]
    section = slow_db_report.render(runset.select(recs + pool64, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    [row] = [d for d in section.decisions if d.regime.endswith("pool 64")]
    assert row.decided_by == f"{slow_db_report.DECIDED_BY['CPU']}; CPU in 11 of 12 searches"
    assert row.settings == "none measured: pool 256 lifted no port's MST above pool 64's"


def test_the_verdict_follows_the_numbers(tmp_path):
    recs = records()
    for r in recs:
        for c in r["cells"]:
            if r["port"] == "spring-webflux" and r["jvm"]["pool_size"] == 16 and c["coords"]["latency_ms"] == 50:
                c["mst"]["rps"] = 400 + r["iteration"]    # now above quarkus-vertx's range
                c["mst"]["first_failing_rps"] = 500
    section = slow_db_report.render(runset.select(recs, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    assert "to 402 (401–403) req/s (spring-webflux)" in " ".join(section.verdict)
    band = [d for d in section.decisions if d.regime.endswith("pool 16")]
    # spring-webflux is above at 50 ms, quarkus-vertx at 5 ms: nobody is above at both, nobody unbeaten at both
    assert band[0].choice == "no port is above the others everywhere here"


def test_searches_the_generator_fell_behind_in_without_stopping_them_are_counted_apart(tmp_path):
    """audit2 #2: the generator fell behind at 6,400/s in quarkus-vertx's pool-256 +5 ms searches; the port itself
    failed lower, so the search went on below (no cap `generator`) but the note and the verdict count them."""
    recs = records()
    for r in recs:
        for c in r["cells"]:
            if (r["port"] == "quarkus-vertx" and r["jvm"]["pool_size"] == 256 and c["coords"]["latency_ms"] == 5
                    and r["iteration"] != 2):
                c["steps"].insert(0, step("mst", 12_000, passed=False, failure=GENERATOR))
    section = slow_db_report.render(runset.select(recs, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    body = "\n".join(section.body)
    assert ("The generator fell behind its schedule in 3 of 24 searches. It stopped 1 (quarkus-vertx pool 256 at +50 "
            "ms #3): there the MST is where the generator stopped, a lower bound of the port (≥), cap `generator`. In "
            "2 more it fell behind at some rates but the port failed a rate of its own (quarkus-vertx pool 256 at +5 "
            "ms #1, #3): those steps count as the generator's failure, not the port's, and the search probed lower") \
        in body
    assert "| 9,200 (9,000–9,400) ✗ 10,580 (10,350–10,810) | CPU 3/3 (CPU 0.97, pool 0.20) |" in body   # the port's
    assert ("The generator fell behind its schedule in 3 slow-db search(es): it stopped 1 (those MSTs are the "
            "generator's limit, lower bounds of the port) and it fell behind at some step of 2 more (steps not counted "
            "as the port's failures).") in section.findings
    # a common-rate step the generator fell behind in is no search's
    recs = records()
    recs[0]["cells"][0]["steps"].insert(0, step("common", 240, passed=False, failure=GENERATOR))
    assert slow_db_report.generator_searches(recs) == ({"quarkus-vertx pool 256 at +50 ms": [3]}, {}, {})


def test_a_cap_whose_model_the_mst_exceeds_is_not_named(tmp_path):
    """audit2 #3: spring-platform, pool 64 at +50 ms, 2 round trips measured, MST 1,100 where pool / (2 x 50 ms) allows
    640 (pool 1.73): the pool's model does not fit, so the pool is not the cap in the cell, the row or the settings."""
    recs = records()
    for r in recs:
        for c in r["cells"]:
            if r["jvm"]["pool_size"] == 256 and c["coords"]["latency_ms"] == 5:
                c["utilisation"] = {"CPU": 0.45, "pool": 1.725, "threads": 0.55}
    section = slow_db_report.render(runset.select(recs, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    body = "\n".join(section.body)
    assert "| unclear: pool model exceeded 3/3 (pool 1.73, threads 0.55, CPU 0.45) |" in body
    [row] = [d for d in section.decisions if d.regime == "database +5 ms away per round trip, pool 256"]
    assert row.decided_by == (f"{slow_db_report.DECIDED_BY['unclear: pool model exceeded']}; unclear: pool model "
                              "exceeded in 6 of 6 searches")
    assert row.settings == "none indicated (no single limit; a limit's model does not fit)"
    assert "more than 5% above that limit's modelled maximum" in body
    # the same through settings_for: never the threads' or the pool's advice
    assert slow_db_report.settings_for("unclear: threads model exceeded", 64, [16, 64], []) == \
        "none indicated (no single limit; a limit's model does not fit)"


def test_the_pool_as_cap_claims_a_larger_pools_effect_only_as_measured():
    """review R6: no pool above was run, or the largest pool lifted nobody: no `DB_POOL_SIZE` effect is claimed."""
    assert slow_db_report.settings_for("pool", 256, [16, 256], []) == \
        "`DB_POOL_SIZE` (not measured: no pool above 256 was run)"
    assert slow_db_report.settings_for("pool", 16, [16, 256], []) == \
        "none measured: pool 256 lifted no port's MST above pool 16's"
    assert slow_db_report.settings_for("pool", 16, [16, 256], ["quarkus-vertx"]) == \
        "`DB_POOL_SIZE` (pool 256 raised the MST of quarkus-vertx)"


def test_a_table_cell_names_a_combination_as_the_decision_row_counts_it():
    """review S2: classify() orders "pool and CPU" by margin; the cell counts both as "CPU and pool", as the row
    does."""
    cs = [cell_(util={"CPU": 0.85, "pool": 0.95}), cell_(util={"CPU": 0.95, "pool": 0.85})]
    assert [slow_db_method.classify(c) for c in cs] == ["pool and CPU", "CPU and pool"]
    assert slow_db_report.cap_text(cs).startswith("CPU and pool 2/2 (")
    assert slow_db_report.cap_name("unclear: pool and threads models exceeded") == slow_db_report.cap_name(
        "unclear: threads and pool models exceeded") == "unclear: pool and threads models exceeded"


def unconfirmed(recs: list[dict], port: str, pool: int, latency_ms: float) -> list[dict]:
    """The records with the first iteration's MST of one (port, pool, latency) cell marked not confirmed."""
    for r in recs:
        for c in r["cells"]:
            if (r["port"], r["jvm"]["pool_size"], c["coords"]["latency_ms"], r["iteration"]) == \
                    (port, pool, latency_ms, 1):
                c["mst"]["confirmed"] = False
    return recs


def test_unconfirmed_msts_are_not_results(tmp_path):
    recs = unconfirmed(records(), "quarkus-vertx", pool=16, latency_ms=5)
    body = "\n".join(slow_db_report.render(runset.select(recs, "slow-db"), tmp_path).body)
    assert "2,975 (2,950–3,000) ✗ 3,420 (3,392–3,449); 1/3 not confirmed" in body


def test_a_port_not_compared_is_named_in_the_row_and_why_in_the_verdict(tmp_path):
    recs = unconfirmed(records(), "spring-webflux", pool=256, latency_ms=5)
    section = slow_db_report.render(runset.select(recs, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    [row] = [d for d in section.decisions if d.regime == "database +5 ms away per round trip, pool 256"]
    assert row.choice == "quarkus-vertx (the only port with a comparable MST here); not compared: spring-webflux"
    assert any("+5 ms per database round trip with pool 256" in v and "not compared: spring-webflux (2 of 3 runs)" in v
               for v in section.findings)             # a pool above the default one: the section's sentence


def test_records_without_cells_make_no_section_and_stay_out_of_a_newer_run_set(tmp_path):
    # the first method wrote one record per port with `runs` and no `cells` (read through the schema as loaded)
    old = schema.normalize({"port": "quarkus-vertx", "scenario": "slow-db", "run_id": "20261122T094059Z",
                            "status": "complete", "environment": {"git_commit": "old"},
                            "runs": [{"latency_ms": 5, "mst": {"rps": 2000}}]})
    assert slow_db_report.render(runset.select(old, "slow-db"), tmp_path) is None
    mixed = slow_db_report.render(runset.select(records() + old, "slow-db"), tmp_path)
    assert mixed.decisions


# --- the proxy ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def database():
    with LocalDatabase(settings_mod.load()["cpus"]["db"]):
        yield


def _min_select_ms(conn, count=5) -> float:
    times = []
    with conn.cursor() as cur:
        for _ in range(count):
            began = time.perf_counter()
            cur.execute("SELECT 1")
            assert cur.fetchall() == ((1,),)
            times.append((time.perf_counter() - began) * 1000)
    return min(times)


def test_the_proxy_adds_its_latency_to_every_round_trip_changes_it_live_and_leaves_nothing(database):
    with proxy.latency_proxy(5) as px:
        assert px.env() == {"DB_HOST": "127.0.0.1", "DB_PORT": str(px.port)} and px.port != db.config()["port"]
        with closing(db.connect(host=px.host, port=px.port)) as conn:
            assert px.client_connections() == 1
            assert _min_select_ms(conn) >= 5          # every round trip went through the 5-ms toxic
            px.set_latency(20)                        # the same, open connection gets the new latency
            assert _min_select_ms(conn, 3) >= 20
        pid, port = px.pid, px.port
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not port_busy("127.0.0.1", port)


# --- the scenario, end to end -------------------------------------------------------------------------------------

def test_a_quick_slow_db_run_goes_through_the_proxy_and_writes_a_complete_record(tmp_path):
    env = dict(os.environ, QUICK="1", SCENARIO="slow-db", BENCH_RESULTS=str(tmp_path), BENCH_LOAD_PORT=HTTP_PORT)
    env.pop("LOADGEN", None)
    run = subprocess.run([sys.executable, "-m", "harness", "bench", PORT], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    [raw] = list(tmp_path.glob(f"slow-db/*/{PORT}-pool16-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete" and record["scenario"] == "slow-db" and record["environment"]["quick"]
    assert record["iteration"] == 1 and record["jvm"]["pool_size"] == 16 and record["proxy_connections"] >= 1
    cost = record["proxy_cost"]
    assert [row["latency_ms"] for row in cost["through_proxy"]] == [0, 5]
    assert cost["through_proxy"][1]["p50_ms"] >= 5 and cost["through_proxy"][0]["proxy_cpu_us_per_query"] > 0
    assert record["warmup"]["windows"]
    [c] = record["cells"]
    assert c["coords"]["latency_ms"] == 5
    # a request alone took at least the added round trip: the port's query went through the proxy
    assert c["sequential_ms"] >= 5 and c["round_trips"] == 1
    # every step judged by the one rule against 50 ms + 2 x (1 lookup x 5 ms)
    assert c["slo_ms"] == 60 and all(s["slo_ms"] == 60 for s in c["steps"])
    for s in c["steps"]:
        assert s["achieved_rps"] > 0 and s["app_threads_peak"] > 0 and s["busy_cores"] > 0
        assert s["proxy_cpu_us_per_request"] > 0      # the proxy carried the port's traffic
    common = [s for s in c["steps"] if s["phase"] == "common"]
    assert len(common) == 1 and set(common[0]["statuses"]) == {"200"} and common[0]["histogram"]
    assert common[0]["latency_ms"]["p50"] >= 5
    mst = Mst.from_json(c["mst"])
    assert mst.slo_ms == 60 and mst.probes and mst.estimate_rps > 0
    assert {s["phase"] for s in c["steps"]} <= {"common", "mst", "confirm"}
    assert set(c["limits_rps"]) == set(slow_db_method.LIMITS) and c["cap"] == slow_db_method.classify(c)
    rs = runset.select(runset.load(tmp_path / "slow-db"), "slow-db")
    section = slow_db_report.render(rs, tmp_path / "charts")
    body = "\n".join(section.body)
    assert f"| {PORT} | 5 | 1 |" in body and section.decisions, body
    # a verdict sentence exists when an MST was confirmed (a QUICK run on a busy box may confirm none)
    assert bool(section.verdict) == bool(table.mst_spread([Mst.from_json(c["mst"])])), \
        [(s["phase"], s["target_rps"], s["failure"]) for s in c["steps"]]
    assert (tmp_path / "RESULTS.md").exists()


def test_a_remedy_row_and_a_pool_measured_later_join_the_section(tmp_path):
    """A documented remedy (a framework-override label) is a row and a sentence, never the choice; a pool run later
    by the same code on the same machine (only `pool_sizes` differs) is a column of its own."""
    recs = records()
    remedy = [dict(r, framework_overrides={"SERVER_TOMCAT_THREADS_MAX": "400"}, run_id="20261123T010000Z")
              for r in recs if r["port"] == "spring-webflux" and r["jvm"]["pool_size"] == 16]
    for r in remedy:
        r["cells"] = [dict(c, mst=dict(c["mst"], rps=c["mst"]["rps"] * 10)) for c in r["cells"]]
    env64 = {"settings": {"db": {"pool_size": 16}, "slow-db": {"step_seconds": 4, "connections": 512,
                                                                 "mst_max_probes": 2, "pool_sizes": [64]}}}
    pool64 = [dict(r, jvm={"pool_size": 64}, run_id="20261123T020000Z", environment=env64)
              for r in recs if r["jvm"]["pool_size"] == 16]
    section = slow_db_report.render(runset.select(recs + remedy + pool64, "slow-db", ["spring-webflux", "quarkus-vertx"]),
                             tmp_path)
    body = "\n".join(section.body)
    assert "MST pool 16 | cap pool 16 | MST pool 64 | cap pool 64 | MST pool 256" in body
    assert "| spring-webflux + `SERVER_TOMCAT_THREADS_MAX=400` | 50 |" in body
    pool16 = [d for d in section.decisions if d.regime.endswith("pool 16")]
    assert all("SERVER_TOMCAT_THREADS_MAX" not in d.choice for d in pool16)
    # lifted above its defaults at every latency of the row: a setting to change, named without its figures
    assert pool16[0].settings.endswith("; spring-webflux + `SERVER_TOMCAT_THREADS_MAX=400` (above its defaults)")
    verdict = " ".join(section.verdict + section.findings)
    assert ("spring-webflux + `SERVER_TOMCAT_THREADS_MAX=400` against spring-webflux at its defaults, MST in req/s: "
            "pool 16 at +5 ms 14,200 (14,000–14,500) against 1,420 (1,400–1,450) (above)") in verdict
    assert "pool 64 lifts the MST above pool 16's (whole ranges) for no port" in verdict
    assert "pool 256 lifts the MST above pool 64's" in verdict
    # a remedy that measured what the defaults did is no setting to change: the verdict and the table compare it
    same = [dict(r, cells=[dict(c, mst=dict(c["mst"], rps=c["mst"]["rps"] // 10)) for c in r["cells"]]) for r in remedy]
    section = slow_db_report.render(runset.select(recs + same, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    assert not any("SERVER_TOMCAT_THREADS_MAX" in d.settings for d in section.decisions)
    assert "pool 16 at +5 ms 1,420 (1,400–1,450) against 1,420 (1,400–1,450) (overlapping)" in " ".join(section.findings)


def test_a_search_the_generator_stopped_during_the_confirmation_is_counted_apart_from_the_bounds(tmp_path):
    """audit3 #1: a search stopped during its confirmation has no confirmed MST: neither a lower bound (≥) nor the
    cap `generator`, but 'not confirmed', and the note and the verdict say so."""
    recs = records()
    cell_ = next(c for r in recs for c in r["cells"] if r["port"] == "quarkus-vertx" and r["jvm"]["pool_size"] == 16
                 and r["iteration"] == 1)
    cell_["mst"] = dict(cell_["mst"], rps=0, confirmed=False, limit=GENERATOR,
                        probes=[[2400, True, "mst", None], [2300, False, "confirm", GENERATOR]],
                        reason="the generator fell behind during the confirmation")
    stopped, unconfirmed, _ = slow_db_report.generator_searches(recs)
    assert not any(1 in its for k, its in stopped.items() if k.startswith("quarkus-vertx pool 16"))
    assert [1] in [its for k, its in unconfirmed.items() if k.startswith("quarkus-vertx pool 16")]
    assert slow_db_method.classify(cell_) == "not confirmed"
    section = slow_db_report.render(runset.select(recs, "slow-db", ["spring-webflux", "quarkus-vertx"]), tmp_path)
    assert "during the confirmation (quarkus-vertx pool 16 at" in "\n".join(section.body)
    assert any("during the confirmation (no MST confirmed there)" in v for v in section.findings)


def test_a_variant_behind_the_slow_database_is_set_beside_the_port_it_repeats_in_its_own_section():
    recs = []
    for port, msts, cpu in (("spring-virtual", (300, 305, 310), 900.0), ("spring-virtual-hikari", (320, 330, 325), 500.0)):
        for i, mst in enumerate(msts):
            c = cell_(mst, {"CPU": 0.2, "pool": round(mst / 320, 3)}, first_failing=mst + 20)
            c["at_mst"] = {"app_cpu_us_per_request": cpu + i, "app_threads_peak": 60}
            recs.append({"port": port, "scenario": "slow-db", "run_id": "20261203T000000Z", "iteration": i + 1,
                         "status": "complete", "environment": {"settings": {"db": {"pool_size": 16}}},
                         "framework_overrides": {}, "schema": schema.VERSION, "jvm": {"pool_size": 16}, "cells": [c]})
    section = slow_db_report.render_variants(runset.select(recs, "slow-db", ["spring-virtual", "spring-virtual-hikari"]))
    [sentence] = section.verdict
    assert sentence.startswith("At +50 ms per database round trip with a pool of 16, spring-virtual-hikari "
                               "(HikariCP 7.1.0) holds 325 (320–330) req/s, overlapping spring-virtual's 305 (300–310)")
    assert "its app CPU per request is 501 (500–502) µs against 901 (900–902) µs (below)" in sentence
    assert "| spring-virtual-hikari | 16 | 50 | 325 (320–330) ✗ 345 (340–350) | 1.02 (1.00–1.03) |" in "\n".join(section.body)
    # without the port it repeats there is nothing to set beside
    assert slow_db_report.render_variants(runset.select(recs[3:], "slow-db", ["spring-virtual-hikari"])) is None


def test_the_jdbc_variant_behind_the_slow_database_gets_a_section_of_its_own_under_its_key():
    recs = []
    for port, cpu in (("spring-virtual", 900.0), ("spring-virtual-jdbc", 600.0)):
        for i in range(3):
            c = cell_(300 + i, {"CPU": 0.2, "pool": 0.95}, first_failing=330)
            c["at_mst"] = {"app_cpu_us_per_request": cpu + i, "app_threads_peak": 60}
            recs.append({"port": port, "scenario": "slow-db", "run_id": "20261207T000000Z", "iteration": i + 1,
                         "status": "complete", "environment": {"settings": {"db": {"pool_size": 16}}},
                         "framework_overrides": {}, "schema": schema.VERSION, "jvm": {"pool_size": 16}, "cells": [c]})
    section = slow_db_report.render_orm(runset.select(recs, "slow-db", ["spring-virtual", "spring-virtual-jdbc"]))
    assert (section.title, section.anchor) == ("Slow database: Spring MVC without JPA", "slow-db-jdbc")
    [sentence] = section.verdict
    assert sentence.startswith("At +50 ms per database round trip with a pool of 16, spring-virtual-jdbc "
                               "(JdbcTemplate, no JPA) holds 301 (300–302) req/s, overlapping spring-virtual's")
    assert "601 (600–602) µs against 901 (900–902) µs (below)" in sentence
    assert "JdbcTemplate" in section.body[0] and "HikariCP #2398" not in section.body[0]

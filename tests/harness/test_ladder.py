"""The baseline's ladder: relative CPU per request against the reference port, the model pairs, and charts drawn from
ladder steps only; and the published baseline records hold the ladder the method declares."""
import pytest

from harness import port_facts, report, scenarios
from harness.method.record import steps_of
from harness.paths import ROOT
from harness.report import charts, ladder


def step(phase: str, rate: float, app_us: float, passed: bool = True, p99: float = 2.0) -> dict:
    return {"phase": phase, "target_rps": rate, "achieved_rps": rate, "connections": 64, "seconds": 20,
            "requests": int(rate * 20), "errors": {}, "statuses": {"200": int(rate * 20)}, "generator": "openloop",
            "latency_ms": {"p50": p99 / 4, "p99": p99, "p99.9": p99 * 2}, "app_cpu_us_per_request": app_us,
            "db_cpu_us_per_request": 10.0, "generator_cpu_us_per_request": 5.0,
            **({} if passed else {"failure": "p99 over the SLO"})}


def record(port: str, iteration: int, costs: dict[float, float], failed: tuple = (), extra: tuple = ()) -> dict:
    steps = [step("ladder", rate, us, passed=rate not in failed) for rate, us in costs.items()]
    return {"port": port, "iteration": iteration, "status": "complete",
            "cells": [{"coords": {}, "status": "complete", "steps": steps + list(extra)}]}


RATES = (500.0, 1000.0, 2000.0)


def world(factor: dict[str, float], failed: dict[str, tuple] | None = None) -> dict[str, list[dict]]:
    """Three runs a port, each port's CPU per request its factor x the reference's (100, 102, 98 µs a run)."""
    return {name: [record(name, i + 1, {r: f * base for r in RATES}, (failed or {}).get(name, ()))
                   for i, base in enumerate((100.0, 102.0, 98.0))] for name, f in factor.items()}


def test_relative_cpu_divides_by_the_reference_median_at_each_rung():
    ref = port_facts.reference()
    by = world({ref: 1.0, "spring-virtual": 0.9, "spring-webflux": 1.25})
    rel = ladder.relative(by)
    assert rel[ref][500.0].median == pytest.approx(1.0)
    assert rel["spring-webflux"][1000.0].low == pytest.approx(1.25 * 0.98)
    whole = ladder.over_ladder(by)
    assert whole["spring-virtual"].median == pytest.approx(0.9)
    assert whole["spring-virtual"].high == pytest.approx(0.9 * 1.02)
    assert ladder.pairs(by)[("spring-virtual", ref)].median == pytest.approx(0.9)


def test_only_the_rungs_every_run_held_enter_the_figure_over_the_ladder():
    ref = port_facts.reference()
    by = world({ref: 1.0, "spring-webflux": 1.2}, failed={"spring-webflux": (2000.0,)})
    assert ladder.held(by) == [500.0, 1000.0]
    by["spring-webflux"][0]["cells"][0]["steps"][0]["app_cpu_us_per_request"] = 10 * 100.0   # one run at 500 req/s
    assert ladder.over_ladder(by)["spring-webflux"].high == pytest.approx((10.0 + 1.2) / 2)   # its rungs' median


def test_a_rung_the_generator_alone_failed_leaves_only_that_run_out():
    ref = port_facts.reference()
    by = world({ref: 1.0, "spring-virtual": 0.9})
    steps = by["spring-virtual"][1]["cells"][0]["steps"]
    steps[2]["failure"] = "generator behind its schedule"
    assert ladder.held(by) == list(RATES)
    assert ladder.relative(by)["spring-virtual"][2000.0].partial
    assert ladder.over_ladder(by)["spring-virtual"].median == pytest.approx(0.9)


def test_the_latency_chart_is_drawn_from_ladder_steps_only(monkeypatch, tmp_path):
    ref = port_facts.reference()
    by = world({ref: 1.0, "quarkus-vertx": 0.4})
    for records in by.values():      # search probes at rates the ladder never ran, in other JVMs
        for r in records:
            r["cells"][0]["steps"] += [step("mst", 4321.0 + r["iteration"], 50.0), step("confirm", 3100.0, 50.0)]
    drawn = {}
    monkeypatch.setattr(charts, "panels", lambda path, title, xlabel, plots, failed=None, hline=None:
                        drawn.update({label: series for label, series in plots}) or path)
    assert ladder.latency_chart(tmp_path / "x.png", by, 50.0)
    rates = {x for series in drawn.values() for points in series.values() for x, s in points if s}
    assert rates == set(RATES)


def test_the_ladder_order_never_joins_ports_that_do_not_overlap():
    ref = port_facts.reference()
    by = world({ref: 1.0, "spring-virtual": 0.97, "quarkus-vertx": 0.4})
    sentence = ladder.verdict(by)[0]
    assert "quarkus-vertx (no ORM, raw Vert.x client) >" in sentence
    assert "spring-virtual ≈ spring-platform" in sentence or "spring-platform ≈ spring-virtual" in sentence


def published_baseline() -> list[dict]:
    rs = report.run_sets(ROOT / "results")[0].get(scenarios.BASELINE)
    return rs.records if rs else []


def test_every_published_baseline_record_holds_its_ladder():
    """Each complete record of the published baseline: at least 5 rungs at the fixed rates its settings declare, each
    at least 20 s and 10,000 requests long, the rates the same for every port."""
    records = [r for r in published_baseline() if r.get("status") == "complete"]
    assert records
    declared = {tuple(r["environment"]["settings"]["baseline"]["ladder_rates"]) for r in records}
    assert len(declared) == 1 and len(next(iter(declared))) >= 5
    for r in records:
        rungs = steps_of(r, "ladder")
        passed_or_not = {s.target_rps for s in rungs}
        assert passed_or_not <= set(next(iter(declared))), r["port"]
        assert len(rungs) >= 5 or any(not s.passed for s in rungs), r["port"]      # a failed rung ends the ladder
        assert all(s.seconds >= 19.5 and s.requests >= 9_900 for s in rungs if s.passed), r["port"]


def test_published_confirmations_are_long_enough():
    """Runs made with the longer confirmations: every confirmation step at least max(10 s, 100,000 / rate), up to the
    declared cap."""
    checked = 0
    for r in published_baseline():
        search = r["environment"]["settings"].get("search", {})
        if not search.get("confirm_min_requests"):
            continue
        for s in steps_of(r, "confirm"):
            wanted = max(search["confirm_min_seconds"], search["confirm_min_requests"] / s.target_rps)
            wanted = min(wanted, search.get("confirm_max_seconds") or wanted)
            assert s.seconds >= wanted - 0.5, (r["port"], s.target_rps, s.seconds)
            checked += 1
    assert checked

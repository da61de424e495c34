"""The baseline's ladder: relative CPU per request against the reference port, the model pairs, and charts drawn from
ladder steps only; and the published baseline records hold the ladder the method declares."""
import pytest

from harness import port_facts, report, scenarios
from harness.method import runset
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


def test_a_set_run_in_parts_divides_each_part_by_its_own_reference():
    """Two parts on a machine 20 % slower in the second: the reference ran in both, so a port of the second part
    keeps its own factor instead of the drift's."""
    ref = port_facts.reference()
    first = world({ref: 1.0, "spring-virtual": 0.9})
    second = world({ref: 1.2, "quarkus-virtual": 0.8 * 1.2})
    for part, run in ((first, "A"), (second, "B")):
        for records in part.values():
            for r in records:
                r["run_id"] = run
    by = {ref: first[ref] + second[ref], "spring-virtual": first["spring-virtual"],
          "quarkus-virtual": second["quarkus-virtual"]}
    assert ladder.anchored(by)
    assert ladder.over_ladder(by)["quarkus-virtual"].median == pytest.approx(0.8)
    assert ladder.relative(by)["spring-virtual"][500.0].median == pytest.approx(0.9)
    assert ladder.relative(by)[ref][1000.0].median == pytest.approx(1.0)
    del by[ref][3:]                    # the second part without the reference: it falls back to all the reference's runs
    assert not ladder.anchored(by)
    assert ladder.over_ladder(by)["quarkus-virtual"].median == pytest.approx(0.96)


def test_a_published_set_in_parts_joins_the_reference_and_compares_rates_within_a_machine_state():
    """The reference ran in both parts: a published set keeps both parts' runs of it (the newest set keeps only the
    newest run of a unit); absolute figures are compared only between ports whose runs read one machine state."""
    ref = port_facts.reference()
    def part(run: str, cal: float, ports: dict[str, float]) -> list[dict]:
        records = [r for rs in world(ports).values() for r in rs]
        for r in records:
            r |= {"run_id": run, "environment": {"code_commit": "c"}, "calibration": {"jvm_work_us_per_op": cal}}
        return records
    records = part("A", 0.4, {ref: 1.0, "spring-virtual": 0.9}) + part("B", 0.6, {ref: 1.2, "quarkus-virtual": 0.96})
    apart = lambda a, b: ["slower"] if a["jvm_work_us_per_op"] != b["jvm_work_us_per_op"] else []   # noqa: E731
    joined = runset.select(records, differences=apart, join=True)
    assert {r["run_id"] for r in joined.by_label[ref]} == {"A", "B"} and len(joined.by_label[ref]) == 6
    assert ladder.over_ladder(joined.by_label)["quarkus-virtual"].median == pytest.approx(0.8)
    assert not joined.same_state(ref, "spring-virtual") and not joined.same_state("spring-virtual", "quarkus-virtual")
    assert joined.same_state("spring-virtual", "spring-virtual")
    newest = runset.select(records, differences=apart)
    assert {r["run_id"] for r in newest.by_label[ref]} == {"B"}
    same = runset.select(records, differences=lambda a, b: [], join=True)
    assert same.same_state(ref, "quarkus-virtual")


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
        # Poisson arrivals send a random count of mean rate x seconds (10,000 at the lowest rung): three standard
        # deviations (3 x 100) below it is still the rung's schedule, not a short rung
        assert all(s.seconds >= 19.5 and s.requests >= s.target_rps * s.seconds - 3 * (s.target_rps * s.seconds) ** 0.5
                   for s in rungs if s.passed), r["port"]


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


def twice(name: str, iteration: int, even: float, poisson: float, p99_poisson: float = 3.0) -> dict:
    """A JVM that ran the ladder under both arrival processes (the even one at `even` µs, the Poisson one at
    `poisson` µs a request)."""
    steps = [dict(step("ladder", r, even), arrivals="even") for r in RATES]
    steps += [dict(step("ladder", r, poisson, p99=p99_poisson), arrivals="poisson", offered_rps=r * 1.003)
              for r in RATES]
    return {"port": name, "iteration": iteration, "status": "complete",
            "cells": [{"coords": {}, "status": "complete", "steps": steps + [step("common", 2500, 1.0)]}]}


def test_a_second_arrival_process_never_enters_the_main_figures_and_is_paired_in_its_jvm():
    ref = port_facts.reference()
    by = {ref: [twice(ref, i, 100.0 + i, 90.0 + i) for i in (1, 2, 3)],
          "spring-virtual": [twice("spring-virtual", i, 95.0 + i, 60.0) for i in (1, 2, 3)]}
    assert ladder.processes(by) == ["even", "poisson"]
    main = ladder.main(by)
    assert {s.target_rps for r in main[ref] for s in steps_of(r, "ladder")} == set(RATES)
    assert all(len(steps_of(r, "ladder")) == len(RATES) for r in main[ref])      # one rung a rate: the even one
    assert len(steps_of(main[ref][0], "common")) == 1                            # other steps kept
    assert ladder.over_ladder(main)["spring-virtual"].median == pytest.approx(97.0 / 102.0)
    cpu, per_run = ladder.paired_arrivals(by["spring-virtual"], "even", "poisson", ladder.app_cpu)
    assert per_run.low == pytest.approx(60.0 / 98.0) and per_run.high == pytest.approx(60.0 / 96.0)
    assert cpu[500.0].n == 3
    p99, _ = ladder.paired_arrivals(by[ref], "even", "poisson", lambda s: s.p99)
    assert p99[1000.0].median == pytest.approx(1.5)
    # a record without arrivals labels: every rung is the main process's
    plain = world({ref: 1.0})
    assert ladder.processes(plain) == ["even"] and ladder.main(plain) == plain


def test_a_variant_pair_is_the_variant_over_the_port_it_repeats():
    variant, of = port_facts.variant_pairs()[0]
    ref = port_facts.reference()
    by = world({ref: 1.0, of: 1.0, variant: 0.8})
    assert ladder.variant_pairs(by)[(variant, of)].median == pytest.approx(0.8)
    assert (variant, of) not in ladder.pairs(by)


def test_the_variant_clause_joins_the_sentence_on_the_port_it_repeats():
    from harness.report.section import Section
    variant, of = port_facts.variant_pairs()[0]
    ref = port_facts.reference()
    base = Section("Baseline", "baseline", [], answer=[f"One ({of} ÷ {ref}: 0.97 (0.95–1.04) over 500 req/s).",
                                                         f"Two (spring-webflux ÷ {ref}: 1.4)."])
    beside = Section("Variants", "baseline-variants", [],
                     answer=[f"without the ORM it costs 12% less ({variant} ÷ {of}: 0.88 (0.85–0.90))"])
    report.with_clause([base, beside], beside)
    assert base.answer[0].endswith(f"; without the ORM it costs 12% less ({variant} ÷ {of}: 0.88 (0.85–0.90)).")
    assert base.answer[1].startswith("Two") and beside.answer == []
    lone = Section("Variants", "baseline-variants", [], answer=[f"without it ({variant} ÷ {of}: 0.9)"])
    report.with_clause([Section("Other", "other", [], answer=["Nothing."])], lone)
    assert lone.answer == [f"Without it ({variant} ÷ {of}: 0.9)."]


def test_the_ladder_runs_once_per_arrival_process_reversed_on_even_iterations():
    import types
    from harness import driver

    class Jvm:
        def __init__(self, iteration):
            self.iteration, self.calls, self.drained = iteration, [], 0
            self.plan = types.SimpleNamespace(ladder_rates=[1000, 500], ladder_seconds=20, ladder_min_requests=0,
                                              ladder_arrivals=["even", "poisson"])
            self.target = types.SimpleNamespace(drain=lambda slo: setattr(self, "drained", self.drained + 1))

        def step(self, cell, rate, phase, seconds=None, **kwargs):
            self.calls.append((kwargs.get("arrivals"), rate))
            failed = kwargs.get("arrivals") == "poisson" and rate == 1000
            return types.SimpleNamespace(failure="p99 over the SLO" if failed else None, passed=not failed)

    odd, even = Jvm(1), Jvm(2)
    driver.run_ladder(odd, {}, 50.0)
    driver.run_ladder(even, {}, 50.0)
    assert odd.calls == [("even", 500), ("even", 1000), ("poisson", 500), ("poisson", 1000)]
    assert even.calls == [("poisson", 500), ("poisson", 1000), ("even", 500), ("even", 1000)]
    assert odd.drained == even.drained == 1          # the failed rung drained; the other ladder still runs
    plain = Jvm(1)
    plain.plan.ladder_arrivals = []
    driver.run_ladder(plain, {}, 50.0)
    assert plain.calls == [(None, 500), (None, 1000)]            # no arrivals argument: [load]'s process


def test_a_quantile_with_few_requests_beyond_carries_its_order_statistics_interval():
    from hdrh.histogram import HdrHistogram
    h = HdrHistogram(1, 60_000_000, 3)
    for v in range(1, 10_001):                      # 10,000 requests of 1..10,000 µs
        h.record_value(v)
    lo, v, hi, beyond = ladder.quantile_interval(h, 0.99)
    assert beyond == 100 and v == pytest.approx(9.9, rel=0.01)
    # ranks 9,900 ± 1.96 x sqrt(99): about 9,880 and 9,920
    assert lo == pytest.approx(9.88, rel=0.01) and hi == pytest.approx(9.92, rel=0.01) and lo < v < hi
    assert ladder.quantile_interval(h, 0.5)[3] >= ladder.ENOUGH_BEYOND


def test_the_run_sets_own_arrival_process_is_the_main_one():
    """A run made with Poisson as its scenario's default: its Poisson rungs draw every figure, an even ladder run
    beside them in the same JVM is the second process."""
    ref = port_facts.reference()
    by = {ref: [twice(ref, i, 100.0 + i, 90.0 + i) for i in (1, 2, 3)],
          "spring-virtual": [twice("spring-virtual", i, 95.0 + i, 60.0) for i in (1, 2, 3)]}
    for records in by.values():
        for r in records:
            r["environment"] = {"settings": {"load": {"arrivals": "even"}, "baseline": {"arrivals": "poisson"}}}
    assert ladder.main_process(by) == "poisson" and ladder.processes(by) == ["poisson", "even"]
    assert ladder.over_ladder(ladder.main(by))["spring-virtual"].median == pytest.approx(60.0 / 92.0)
    _, per_run = ladder.paired_arrivals(by["spring-virtual"], "poisson", "even", ladder.app_cpu)
    assert per_run.median == pytest.approx(97.0 / 60.0)


def test_the_separate_cores_section_counts_the_pairs_that_keep_their_order():
    """Each pair of ports compared on separate cores and on the shared ones: kept, reversed, or moved between a tie
    and an order; the model pairs beside their shared figures."""
    from types import SimpleNamespace
    from harness.report.sections import baseline
    ref = port_facts.reference()

    def run_set(factor):
        by = world(factor)
        for records in by.values():
            for r in records:
                r["run_id"] = "R"
        return SimpleNamespace(by_label=by, run_ids=["R"], iterations=3, warnings=[], calibration={},
                               settings=lambda section: {"app": "1", "db": "0", "generator": "0"})
    apart = run_set({ref: 1.0, "spring-virtual": 0.8, "spring-webflux": 1.5, "quarkus-vertx": 0.3})
    shared = run_set({ref: 1.0, "spring-virtual": 1.2, "spring-webflux": 1.5, "quarkus-vertx": 1.0})
    section = baseline.render_cores(apart, shared)
    assert section.anchor == "baseline-cores"
    counted = next(v for v in section.verdict if v.startswith("Of the "))
    # reversed: spring-virtual against the reference (0.8 below, 1.2 above); quarkus-vertx against the reference
    # (below, then a tie); the other four pairs keep their order
    assert counted.startswith("Of the 6 pairs of ports, 4 stand as on the shared cores")
    assert f"1 reverses ({ref} and spring-virtual)" in counted
    assert f"and 1 moves between a tie and an order ({ref} and quarkus-vertx)" in counted
    assert f"spring-virtual ÷ {ref} 0.80" in section.verdict[-1] and "(1.20" in section.verdict[-1]
    assert baseline.render_cores(run_set({}), shared) is None

"""The shared method (harness/method): search, confirmation, pass rule, spans, ties, caps, plans, run sets."""
import dataclasses

import pytest

from harness.errors import Fatal
from harness.method import caps, plan, rule, runset, search, spans
from harness.report import table
from harness.method.record import FINE, TENTHS, Mst, Step
from harness.method.rule import Rule

PLAN = search.SearchPlan(growth=1.15, precision=0.05, max_probes=6, bisect_probes=5, confirm_probes=4)
SLO = 50.0


def capacity(limit, flaky=(), generator_from=None, generator_late=()):
    """A port that passes every rate <= limit, except the (rate, nth try) pairs in `flaky`; the generator falls
    behind at every rate from `generator_from` and at the (rate, nth try) pairs in `generator_late`."""
    tries = {}

    def measure(rate, phase):
        tries[rate] = tries.get(rate, 0) + 1
        if generator_from and rate >= generator_from or (rate, tries[rate]) in generator_late:
            return rule.GENERATOR
        if (rate, tries[rate]) in flaky:
            return rule.LATENCY
        return None if rate <= limit else rule.LATENCY
    return measure


def test_search_finds_and_confirms_a_bounded_mst():
    m = search.find_mst(capacity(5000), 3000, PLAN, SLO)
    assert m.confirmed and m.bounded
    assert 4500 <= m.rps <= 5000 < m.first_failing_rps
    assert m.first_failing_rps <= 5000 * 1.15 * 1.15
    # a confirmed MST passed twice
    assert sum(1 for r, ok, *_ in m.probes if r == m.rps and ok) >= 2


def test_failed_confirmation_steps_down_until_a_rate_passes_twice():
    first = search.find_mst(capacity(5000), 3000, PLAN, SLO)
    m = search.find_mst(capacity(5000, flaky={(first.rps, 2)}), 3000, PLAN, SLO)
    assert m.confirmed
    assert m.rps < first.rps                   # the refuted rate is not shown
    assert m.first_failing_rps == first.rps    # it is the first failing rate now
    assert sum(1 for r, ok, *_ in m.probes if r == m.rps and ok) == 2


def test_the_bracket_never_measures_the_same_rate_twice_where_the_grid_is_coarse():
    # 3 x 1.15 rounds back to 3 on the 1-req/s grid: the next probe is the next grid point, 4
    m = search.find_mst(capacity(5), 3, PLAN, SLO, floor=1)
    searched = [r for r, _, phase, _ in m.probes if phase == "mst"]
    assert searched[:2] == [3, 4] and len(searched) == len(set(searched))
    assert m.rps == 5 and m.first_failing_rps == 6 and m.confirmed


def test_below_40_req_s_a_search_on_tenths_reaches_its_precision_where_whole_rates_cannot():
    # a client pool of 8 held 3 x 0.2 s a request: 13.3 req/s. Whole rates end 13 ✗ 14 (7 %); tenths within 5 %
    whole = search.find_mst(capacity(8 / 0.6), 9, PLAN, SLO, floor=1)
    tenths = search.find_mst(capacity(8 / 0.6), 9, PLAN, SLO, floor=1, grid=TENTHS)
    assert (whole.rps, whole.first_failing_rps, whole.grid) == (13, 14, FINE)
    assert tenths.grid == TENTHS and tenths.confirmed and tenths.rps <= 8 / 0.6 < tenths.first_failing_rps
    assert (tenths.first_failing_rps - tenths.rps) / tenths.first_failing_rps <= 0.06
    assert all(round(r, 1) == r for r, *_ in tenths.probes)
    # shown with its tenth ("13.2 ✗ 13.6"), not rounded to the whole rates it lies between
    assert table.mst_cell([tenths]) == f"{tenths.rps:g} ✗ {tenths.first_failing_rps:g}" and "." in table.mst_cell([tenths])
    assert spans.rate(1200) == "1,200" and spans.rate(13.0) == "13" and spans.rate(8.4) == "8.4"


def test_a_first_guess_far_too_high_still_finds_a_passing_rate_beyond_the_budget():
    # a guess 4x too high: 1,600 -> 1,390 -> 1,050 -> 690 fail within the 4-probe budget; the search goes on down
    m = search.find_mst(capacity(400), 1600, search.SearchPlan(1.15, 0.05, 4, 5, 2), SLO)
    assert m.rps and m.rps <= 400 < m.first_failing_rps and m.confirmed
    searched = [(r, ok) for r, ok, phase, _ in m.probes if phase == "mst"]
    first_pass = next(i for i, (_, ok) in enumerate(searched) if ok)
    down = [r for r, _ in searched[:first_pass + 1]]
    assert down == sorted(down, reverse=True) and len(down) > 4
    # then bisection (its own budget) to the stated precision: the MST ends within 5 % (or one grid step) of it
    assert m.first_failing_rps - m.rps <= max(0.05 * m.first_failing_rps, 10)


def test_a_limit_never_found_is_a_lower_bound():
    m = search.find_mst(capacity(10**6), 1000, search.SearchPlan(1.15, 0.05, 3, 5, 2), SLO)
    assert not m.bounded and m.first_failing_rps is None
    assert m.text().startswith("≥ ")


def test_the_generator_falling_behind_bounds_the_search_without_blaming_the_port():
    m = search.find_mst(capacity(10**6, generator_from=4000), 3000, PLAN, SLO)
    assert m.limit == rule.GENERATOR and not m.bounded and m.first_failing_rps is None
    # the search bisected below the generator's limit instead of stopping at the first pass
    assert 3800 <= m.rps < 4000 and m.confirmed


def test_a_step_the_generator_alone_failed_is_measured_once_more():
    # the generator late once at a rate the port holds: the second try decides, and the search goes on past it
    once = search.find_mst(capacity(5000, generator_late={(3450, 1)}), 3000, PLAN, SLO)
    assert [p for p in once.probes if p[0] == 3450][:2] == [[3450, False, "mst", rule.GENERATOR],
                                                             [3450, True, "mst", None]]
    assert once.limit is None and once.bounded and 4500 <= once.rps <= 5000 < once.first_failing_rps
    # late at every try: twice per rate, then the search keeps below it
    always = search.find_mst(capacity(10**6, generator_from=4000), 3000, PLAN, SLO)
    late = [r for r, ok, _, f in always.probes if f == rule.GENERATOR]
    assert late and all(late.count(r) == 2 for r in late)


def test_a_port_failure_below_the_generators_limit_still_bounds_the_mst():
    m = search.find_mst(capacity(3500, generator_from=4000), 3000, PLAN, SLO)
    assert m.limit is None and m.bounded and m.rps <= 3500 < m.first_failing_rps


def test_nothing_passing_gives_zero_and_says_why():
    m = search.find_mst(capacity(0), 1000, PLAN, SLO)
    assert m.rps == 0 and not m.confirmed and m.reason


def test_unconfirmed_when_every_confirmation_fails():
    flaky = {(r, n) for r in range(0, 10000, 10) for n in (2, 3, 4)}
    m = search.find_mst(capacity(5000, flaky=flaky), 3000, search.SearchPlan(1.15, 0.05, 6, 5, 2), SLO)
    assert not m.confirmed and "NOT confirmed" in m.text()


def test_rule_bounds_and_reasons():
    r = rule.Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)
    assert r.slo_ms() == 50 and r.slo_ms(5 * 20) == 250
    ok = dict(target_rps=1000, achieved_rps=995, errors=0, p99_ms=49.0, generator_behind=False, slo_ms=50)
    assert r.failure(**ok) is None
    assert r.failure(**{**ok, "generator_behind": True}) == rule.GENERATOR
    assert r.failure(**{**ok, "achieved_rps": 980}) == rule.RATE
    assert r.failure(**{**ok, "errors": 1}) == rule.ERRORS
    assert r.failure(**{**ok, "p99_ms": 50.1}) == rule.LATENCY
    assert r.failure(**{**ok, "p99_ms": None}) == rule.NO_ANSWERS


def test_spans_keep_bounds_and_ties_are_pairwise_never_chained():
    a, b, c = spans.spread([14500, 16700, 15000]), spans.spread([10600, 12000, 11000]), spans.spread([9200, 10600])
    assert spans.compare(a, c) == ">"        # 14,500-16,700 lies above 9,200-10,600
    assert spans.compare(a, b) == ">" and spans.compare(b, c) == "="
    bound = spans.spread([2300, 2600], at_least=True)
    assert spans.span(bound) == "≥ 2,450 (2,300–2,600)"
    assert spans.ratio(b, bound) is None and spans.ratio(bound, b) is None
    # below a bound nothing is known; a bound above a whole range beats it
    assert spans.compare(b, bound) == "?" and spans.compare(bound, b) == "?"
    high = spans.spread([20000, 21000], at_least=True)
    assert spans.compare(high, b) == ">" and spans.compare(b, high) == "<"
    lines = spans.ranking({"a": a, "b": b, "c": c})
    assert lines[0].startswith("**a**") and "above b, c" in lines[0]
    assert "tied with c" in lines[1] and "tied with b" in lines[2]
    # lower is better (latency): the cheaper range wins
    assert spans.compare(spans.spread([1, 2]), spans.spread([3, 4]), higher_is_better=False) == ">"


def test_msts_closer_than_their_searches_brackets_tie():
    """A search knows its limit only to within its bracket: an MST apart from another needs its lowest run at or
    above every rate at which a run of the other failed (issue 34: 310 against 300 req/s, inside the precision)."""
    def mst(rps, failing):
        return Mst(rps=rps, confirmed=True, bounded=True, first_failing_rps=failing, slo_ms=50, estimate_rps=rps)
    low = table.mst_spread([mst(300, 330), mst(300, 320), mst(290, 310)])
    assert low.ceiling == 330 and spans.span(low) == "300 (290–300)"
    assert spans.compare(table.mst_spread([mst(310, 340)] * 3), low) == "="     # 310 < 330: inside the bracket
    assert spans.compare(table.mst_spread([mst(330, 350)] * 3), low) == ">"     # passed where every run failed
    assert spans.compare(low, table.mst_spread([mst(330, 350)] * 3)) == "<"
    # a figure without a ceiling (CPU, latency) compares by its range alone, as before
    assert spans.compare(spans.spread([310, 320]), spans.spread([290, 300])) == ">"


def test_a_section_states_the_precision_its_searches_reached():
    def mst(rps, failing, confirmed=True):
        return Mst(rps=rps, confirmed=confirmed, bounded=failing is not None, first_failing_rps=failing, slo_ms=50,
                   estimate_rps=rps)
    # 2,000 ✗ 2,100 (5 %), 50 ✗ 60 (one grid step), 1,000 ✗ 1,300 and 300 ✗ 400 (wider); bounds and unconfirmed
    # searches have no bracket to state
    line = table.precision_reached([mst(2000, 2100), mst(50, 60), mst(1000, 1300), mst(300, 400), mst(900, None),
                                    mst(700, 800, confirmed=False), None], 0.05)
    assert line.startswith("Search precision: 2 of 4 confirmed searches ended within 5% (or one step of the rate "
                           "grid: 10 req/s below 1,000 and 100 above) of their first failing rate; the others "
                           "23%–25% below it.")
    assert table.precision_reached([mst(900, None)], 0.05) is None
    # on the fine grid (every search since it) 50 ✗ 60 is no longer one step: the step there is 1 req/s
    fine = [dataclasses.replace(m, grid=FINE) for m in (mst(2000, 2100), mst(50, 60), mst(78, 80))]
    assert table.precision_reached(fine, 0.05).startswith(
        "Search precision: 2 of 3 confirmed searches ended within 5% (or one step of the rate grid: the largest 1, 2 "
        "or 5 × 10ⁿ req/s within 2.5% of the rate, 1 req/s at least) of their first failing rate; the other 17% below")


def test_caps_are_named_only_when_one_limit_explains_the_result():
    assert caps.classify({"CPU": 0.97, "pool": 0.3}) == "CPU"
    assert caps.classify({"CPU": 0.97, "pool": 0.9}) == "CPU and pool"
    assert caps.classify({"CPU": 0.97, "pool": 0.7}) == "unclear"
    assert caps.classify({"CPU": 0.5, "pool": 0.4}) == "unclear"
    assert caps.classify({"CPU": 0.97}, generator_failed=True) == "generator"


def test_a_limit_the_mst_exceeds_is_never_named_its_model_does_not_fit():
    # slow-db spring-platform, pool 64 at +50 ms: 2 round trips measured, MST 1,100 where pool / (2 x 50 ms) allows 640
    at_1100 = {"pool": 1.725, "threads": 0.552, "CPU": 0.45}
    assert caps.classify(at_1100, mst=True) == "unclear: pool model exceeded"
    assert caps.classify({"threads": 1.205, "pool": 1.1, "CPU": 0.92}, mst=True) == \
        "unclear: threads and pool models exceeded"
    # medians put a limit met exactly a little above 1 (quarkus-vertx, pool 16 at +50 ms: 1.004): still that limit
    assert caps.classify({"pool": 1.004, "CPU": 0.14}, mst=True) == "pool"
    assert caps.classify({"pool": caps.EXCEEDED, "CPU": 0.14}, mst=True) == "pool"
    # cap_at is at an MST; text names the same
    mst = Mst(1100, True, True, 1300, 150.0, 1000, [], None, None)
    assert caps.cap_at(mst, at_1100) == "unclear: pool model exceeded"
    assert caps.text(at_1100, mst=True) == "unclear: pool model exceeded (pool 1.73, threads 0.55, CPU 0.45)"
    # at a failed step (many-users: offered connections over the server's limit) above 1 is what explains it
    assert caps.classify({"connection limit": 1.22, "open files": 0.41, "CPU": 0.3}) == "connection limit"


@dataclasses.dataclass(frozen=True)
class _Plan:
    seconds: float
    rates: list[float]


def test_plan_sections_have_no_defaults_in_code():
    p = plan.section({"x": {"seconds": 5, "rates": [1, 2]}}, "x", _Plan)
    assert p.seconds == 5.0 and isinstance(p.seconds, float) and p.rates == [1.0, 2.0]
    with pytest.raises(Fatal, match="lacks rates"):
        plan.section({"x": {"seconds": 5}}, "x", _Plan)
    with pytest.raises(Fatal, match="unknown key"):
        plan.section({"x": {"seconds": 5, "rates": [], "typo": 1}}, "x", _Plan)


def test_step_and_mst_round_trip_through_json():
    s = Step(phase="common", target_rps=100, achieved_rps=99.5, connections=8, seconds=3, requests=300,
             errors={"read": 0}, statuses={"200": 300}, latency_ms={"p99": 1.0}, generator="openloop",
             extra={"proxy_cpu_cores": 0.2})
    data = s.to_json()
    assert data["passed"] and data["proxy_cpu_cores"] == 0.2
    back = Step.from_json(data)
    assert back == s
    m = Mst.from_json({"rps": 900, "confirmed": True, "bounded": False, "first_failing_rps": None, "slo_p99_ms": 50,
                       "estimate_rps": 800, "probes": []})
    assert m.slo_ms == 50 and m.text() == "≥ 900/s"


def _rec(port, run_id, commit="a", cpu="fast", settings=None, calibration=None, scenario="baseline", **extra):
    return {"port": port, "run_id": run_id, "scenario": scenario, "calibration": calibration,
            "environment": {"git_commit": commit, "cpu_model": cpu, "settings": settings or {"x": 1}}, **extra}


def test_a_run_set_is_one_commit_and_settings_and_warns_on_another_machine():
    records = [_rec("a", "1", commit="old"), _rec("a", "2", iteration=1), _rec("a", "2", iteration=2),
               _rec("b", "3"), _rec("b", "4", settings={"x": 2})]
    rs = runset.select(records, "baseline", order=["a", "b"])
    assert list(rs.by_label) == ["b"]          # the newest fingerprint ({"x": 2}) holds b only
    rs = runset.select(records[:4], "baseline", order=["a", "b"])
    assert list(rs.by_label) == ["a", "b"] and [r["iteration"] for r in rs.by_label["a"]] == [1, 2]
    assert {r["run_id"] for r in rs.outside} == {"1"}
    cal = [_rec("a", "5", calibration={"w": 1}), _rec("b", "6", calibration={"w": 3})]
    rs = runset.select(cal, "baseline", differences=lambda x, y: [] if x == y else ["wake-ups differ"])
    assert rs.warnings and "wake-ups differ" in rs.warnings[0]


def test_a_commit_of_results_alone_does_not_split_a_run_set():
    # defaults, then the results committed, then a remedy run: another HEAD, the same code
    defaults = _rec("a", "1", commit="c1")
    defaults["environment"]["code_commit"] = "k1"
    remedy = _rec("a", "2", commit="c2")
    remedy["environment"]["code_commit"] = "k1"
    remedy["framework_overrides"] = {"POOL": "9"}
    rs = runset.select([defaults, remedy], "baseline")
    assert list(rs.by_label) == ["a", "a + `POOL=9`"]
    remedy["environment"]["code_commit"] = "k2"                  # other code: apart
    assert list(runset.select([defaults, remedy], "baseline").by_label) == ["a + `POOL=9`"]


def test_a_pool_measured_later_by_the_same_code_joins_the_run_set():
    """slow-db runs one JVM per pool: a later run of another pool (only `pool_sizes` differs) adds its units; a
    run with other settings does not."""
    def rec(run_id, pool, pools, iteration=1, x=1, calibration=None):
        return _rec("a", run_id, settings={"slow-db": {"pool_sizes": pools, "x": x}}, calibration=calibration,
                    scenario="slow-db", jvm={"pool_size": pool}, iteration=iteration)
    first = [rec("1", p, [16, 256], i, calibration={"w": 1}) for p in (16, 256) for i in (1, 2)]
    later = [rec("2", 64, [64], i, calibration={"w": 2}) for i in (1, 2)]
    rs = runset.select(first + later, "slow-db", differences=lambda x, y: [] if x == y else ["wake-ups differ"])
    assert [(runset.pool_of(r), r["iteration"]) for r in rs.by_label["a"]] == [
        (16, 1), (16, 2), (64, 1), (64, 2), (256, 1), (256, 2)]
    assert rs.run_ids == ["1", "2"] and not rs.outside and rs.iterations == "2"
    assert rs.warnings and "run 2 against run 1" in rs.warnings[0]      # each run's machine is checked
    described = runset.select(first + later, "slow-db", differences=lambda x, y: [f"{x['w']} vs {y['w']}"])
    assert described.warnings == ["run 2 against run 1: 2 vs 1"]        # the later run described against the first
    again = [rec("3", 16, [16], 1)]                                     # the newest run of a unit replaces it
    rs = runset.select(first + later + again, "slow-db")
    assert [(runset.pool_of(r), r["run_id"]) for r in rs.by_label["a"]] == [
        (16, "3"), (64, "2"), (64, "2"), (256, "1"), (256, "1")]
    other = [rec("4", 64, [64], 1, x=2)]                                # other settings: a set of its own
    rs = runset.select(first + later + other, "slow-db")
    assert [r["run_id"] for r in rs.by_label["a"]] == ["4"] and len(rs.outside) == 6


def test_pinning_run_by_latency_joins_one_set_and_a_rerun_replaces_only_its_cells():
    """pinning runs a fresh JVM per (latency, port, runtime): a part at one latency (its common rate beside it) joins
    a part at the other; a later run of one latency replaces that latency's cells only; the set's latencies are
    cells, not settings, so a section's other keys still split sets."""
    def rec(run_id, latency, latencies, rates, iteration=1, step=5):
        settings = {"pinning": {"latencies_ms": latencies, "common_rates": rates, "step_seconds": step}}
        return _rec("a", run_id, settings=settings, scenario="pinning", iteration=iteration,
                    jvm={"latency_ms": latency, "runtime": "jdk25-cj9"})
    five = [rec("1", 5, [5], [100], i) for i in (1, 2, 3)]
    zero = [rec("2", 0, [0], [1000], i) for i in (1, 2, 3)]
    rs = runset.select(five + zero, "pinning")
    assert rs.run_ids == ["1", "2"] and rs.iterations == "3" and not rs.outside
    again = [rec("3", 5, [0, 5], [1000, 100], 1)]
    rs = runset.select(five + zero + again, "pinning")
    cells = [(r["jvm"]["latency_ms"], r["run_id"]) for r in rs.by_label["a"]]
    assert cells == [(0, "2"), (0, "2"), (0, "2"), (5, "3")]
    assert runset.select(five + [rec("4", 0, [0], [1000], step=6)], "pinning").run_ids == ["4"]   # another step
    # slow-db's latencies are not a unit choice (one JVM runs them all): another list is another set
    a, b = (_rec("a", run, scenario="slow-db", settings={"slow-db": {"latencies_ms": lat}}, jvm={"pool_size": 16})
            for run, lat in (("1", [5]), ("2", [50])))
    assert runset.select([a, b], "slow-db").run_ids == ["2"]


# --- table: the one formatter ---------------------------------------------------------------------------------------

def test_the_choice_is_pairwise_never_chained():
    a, b, c = spans.Spread(100, 95, 105, 3), spans.Spread(104, 100, 108, 3), spans.Spread(110, 106, 112, 3)
    # a = b and b = c overlap, but c lies above a: only b and c are below no other
    assert table.choice([{"a": a, "b": b, "c": c}]) == "b, c (not below any other; ranges overlap)"
    assert table.choice([{"a": a, "c": c}]) == "c (above every other)"
    assert table.choice([{"a": a}]) == "a (the only port with a comparable MST here)"
    # a lower bound is above nothing it overlaps, and nothing is above it: it is not named, but listed apart
    bound = spans.Spread(100, 95, 105, 3, at_least=True)
    assert table.choice([{"a": bound, "c": c}]) == "c (not below any other); not compared: a (≥: its limit was not found)"
    assert table.choice([{"a": bound, "c": c}], reasons=False) == "c (not below any other); not compared: a"   # the table
    # c above at one cell, a at the other: nobody everywhere; named per cell when the cells are named
    assert table.choice([{"a": a, "c": c}, {"a": c, "c": a}]) == "no port is above the others everywhere here"
    assert table.choice([{"a": a, "c": c}, {"a": c, "c": a}], ["N = 1", "N = 5"]) == \
        "depends: N = 1: c; N = 5: a (not below any other)"


def test_a_lower_bound_is_named_only_above_every_other():
    """Nothing is ever above a bound, so it is always below none; named there it would say nothing, however far
    below the others its range lies (baseline: spring-virtual ≥ 4,200 (3,300–4,200) against 8,400–8,800)."""
    low = spans.Spread(4200, 3300, 4200, 3, at_least=True)
    firm, near = spans.Spread(8600, 8400, 8800, 3), spans.Spread(8500, 8300, 8700, 3)
    mid = spans.Spread(6000, 5800, 6200, 3)
    assert table.choice([{"v": low, "x": firm}]) == "x (not below any other); not compared: v (≥: its limit was not found)"
    # "ranges overlap" only where two or more are named; one note for the partial figures and the bounds
    some = spans.Spread(3000, 3000, 3000, 1, of=3)
    assert table.choice([{"v": low, "w": some, "x": firm, "y": near, "z": mid}]) == \
        "x, y (not below any other; ranges overlap); not compared: w (1 of 3 runs), v (≥: its limit was not found)"
    # a bound whose whole range lies above every other's is above every other: its true value is higher still
    high = spans.Spread(9500, 9200, 9800, 3, at_least=True)
    assert table.choice([{"v": high, "x": firm, "z": mid}]) == "v (above every other)"
    # bounds only, or only bounds left below none: not settled, said so
    assert table.choice([{"v": low, "h": spans.Spread(5000, 4000, 6000, 3, at_least=True)}]) == \
        "not settled: every figure here is a lower bound; not compared: v (≥: its limit was not found), " \
        "h (≥: its limit was not found)"
    assert table.choice([{"v": spans.Spread(9000, 8900, 9100, 3, at_least=True),
                          "u": spans.Spread(9000, 8900, 9100, 3, at_least=True), "z": mid}]) == \
        "not settled: only lower bounds are below no other here; not compared: v (≥: its limit was not found), " \
        "u (≥: its limit was not found)"
    # cell by cell: a bound is left out of its cell's list
    assert table.choice([{"v": low, "x": mid}, {"v": firm, "x": mid}], ["N = 1", "N = 5"]) == \
        "depends: N = 1: x; N = 5: v (not below any other); not compared: v (≥ at N = 1: its limit was not found)"
    # partial in one cell, a bound in another: one entry
    assert table.choice([{"v": some, "x": mid, "y": firm}, {"v": low, "x": mid, "y": firm}]) == \
        "y (above every other compared here); not compared: v (1 of 3 runs; ≥: its limit was not found)"
    # a bound in one cell and below another port in the other is not chosen, as any port below another: no note
    assert table.choice([{"v": low, "y": firm}, {"v": mid, "y": firm}]) == "y (not below any other)"
    assert table.choice([{"v": low, "x": near, "y": firm}, {"v": mid, "x": near, "y": firm}]) == \
        "x, y (not below any other; ranges overlap)"


def test_a_choice_over_cells_is_true_when_no_port_is_in_every_cell_or_its_bounds_are_firm_elsewhere():
    a, b = spans.Spread(100, 90, 110, 3), spans.Spread(300, 290, 310, 3)
    bound = spans.Spread(100, 90, 110, 3, at_least=True)
    low, near = spans.Spread(50, 40, 60, 3), spans.Spread(55, 45, 65, 3)
    # no port has a figure in every cell (and no bound anywhere): said so, each port listed with why
    assert table.choice([{"a": a}, {"b": b}]) == "not settled: no port has a comparable figure in every cell; " \
        "not compared: a (no figure in every cell), b (no figure in every cell)"
    # bounds in one cell, firm (and tied) in the other: not "every figure here is a lower bound"
    assert table.choice([{"a": bound, "b": bound}, {"a": low, "b": near}]) == \
        "not settled: every port is a lower bound in some cell here; " \
        "not compared: a (≥: its limit was not found), b (≥: its limit was not found)"


def test_one_port_in_every_cell_lists_the_ports_with_a_figure_in_some_cells_only():
    a, b = spans.Spread(100, 90, 110, 3), spans.Spread(300, 290, 310, 3)
    bound, high = spans.Spread(100, 90, 110, 3, at_least=True), spans.Spread(300, 290, 310, 3, at_least=True)
    # one port in every cell: the others, with a figure in some cells only (bounds too), are listed, never dropped
    assert table.choice([{"a": bound, "b": high}, {"a": a}]) == \
        "a (the only port with a comparable MST in every cell); not compared: b (≥: its limit was not found; " \
        "no figure in every cell)"
    assert table.choice([{"a": a, "b": b}, {"a": a}], ["+5 ms", "+50 ms"]) == \
        "a (the only port with a comparable MST in every cell); not compared: b (no figure at +50 ms)"


def test_above_every_other_says_compared_here_when_some_are_not_compared():
    a, b, c = spans.Spread(100, 90, 110, 3), spans.Spread(300, 290, 310, 3), spans.Spread(50, 50, 50, 3)
    assert table.choice([{"a": a, "b": b, "c": c}, {"b": b, "c": c}]) == \
        "b (above every other compared here); not compared: a (no figure in every cell)"
    assert table.choice([{"a": a, "c": c, "s": spans.Spread(3000, 3000, 3000, 1, of=3)}]) == \
        "a (above every other compared here); not compared: s (1 of 3 runs)"


def test_the_lowest_and_highest_median_name_every_port_that_has_it():
    a, b = spans.Spread(620, 620, 620, 3), spans.Spread(1200, 1200, 1200, 3)
    items = {"a": a, "b": b, "c": b, "d": spans.Spread(1200, 1100, 1300, 3)}
    assert table.extremes(items, "req/s") == "from 620 req/s (a) to 1,200 req/s (b, c, d)"
    assert table.extremes({"b": b, "c": b}, "req/s") == "1,200 req/s (b, c)"
    assert table.extremes({"a": a, "b": b, "c": b}, "req/s") == "from 620 req/s (a) to 1,200 req/s (b, c)"
    assert table.range_sentence({"a": a, "b": b, "c": b}) == \
        "from 620 (a) to 1,200 req/s (b, c); b is above a; c is above a"
    assert table.from_to({"b": b, "c": b}) == "1,200 req/s (b, c)"


def test_a_tie_whose_spans_differ_keeps_bounds_and_counts_and_nothing_gives_a_dash():
    a, b = spans.Spread(620, 620, 620, 3), spans.Spread(1200, 1200, 1200, 3)
    # a tie whose spans differ keeps a bound's ≥ and a partial figure's count beside its name
    tied = {"a": spans.Spread(1200, 1100, 1300, 3), "b": spans.Spread(1200, 1200, 1200, 3, at_least=True)}
    assert table.from_to(tied) == "1,200 req/s (a: 1,200 (1,100–1,300); b: ≥ 1,200)"
    assert table.extremes({"a": a, "b": b, "c": spans.Spread(1200, 1200, 1200, 1, of=3)}, "req/s") == \
        "from 620 req/s (a) to 1,200 req/s (b: 1,200; c: 1,200 (1 of 3 runs))"


def test_extremes_and_from_to_of_nothing_are_a_dash():
    assert table.extremes({}, "ms") == "–" and table.from_to({}) == "–"


def _mst(rps, confirmed=True, failing=None, probes=()):
    return Mst(rps, confirmed, failing is not None, failing, 50.0, rps or 100, [list(p) for p in probes])


def test_an_mst_cell_shows_confirmed_values_their_first_failing_rate_and_what_is_missing():
    assert table.mst_cell([_mst(300, failing=330), _mst(280, failing=310), _mst(290, failing=320)]) == \
        "290 (280–300) ✗ 320 (310–330)"
    assert table.mst_cell([_mst(300, failing=330), _mst(310, confirmed=False, failing=340)]) == \
        "300 ✗ 330; 1/2 not confirmed"
    assert table.mst_cell([_mst(300), _mst(0, probes=[(20, False), (40, False)])]) == "≥ 300; none passed ≥ 20/s in 1/2"
    assert table.mst_cell([None]) == "–"
    # a rate passed once and its confirmation failed (rps 0 recorded): not confirmed, never "none passed"
    once = _mst(0, confirmed=False, probes=[(2800, False), (2400, True), (2500, False), (2400, False), (2300, False)])
    assert table.mst_cell([_mst(2200, failing=2300), once, _mst(2300, failing=2400)]) == \
        "2,250 (2,200–2,300) ✗ 2,350 (2,300–2,400); 1/3 not confirmed"
    assert table.mst_cell([_mst(2200, failing=2300), once, _mst(0, probes=[(20, False)]),
                           _mst(2100, confirmed=False)]) == \
        "2,200 ✗ 2,300; none passed ≥ 20/s in 1/4; 2/4 not confirmed"
    assert table.range_sentence({"a": spans.Spread(100, 95, 105, 3), "b": spans.Spread(200, 190, 210, 3)}) == \
        "from 100 (95–105) (a) to 200 (190–210) req/s (b); b is above a"


def test_an_mst_only_some_iterations_confirmed_shows_its_count_and_enters_no_comparison():
    some = table.mst_spread([_mst(3000, failing=3300), _mst(2000, confirmed=False, failing=2200), None,
                             _mst(0, probes=[(500, False)])])
    assert some.partial and spans.span(some) == "3,000 (1 of 3 runs)"
    assert spans.span(spans.Spread(5000, 4400, 5600, 2, of=3)) == "5,000 (4,400–5,600; 2 of 3 runs)"
    every = table.mst_spread([_mst(300, failing=330), _mst(280, failing=310)])
    assert not every.partial and spans.span(every) == "290 (280–300)"
    low = spans.Spread(100, 95, 105, 3)
    # wholly above the other's range, yet one run is not a range: no order, no ratio, not chosen
    assert spans.compare(some, low) == "?" and spans.ratio(some, low) is None
    assert spans.relation(low, some) == "not settled against"
    assert table.choice([{"a": low, "b": some}]) == \
        "a (the only port with a comparable MST here); not compared: b (1 of 3 runs)"
    # a port only some runs confirmed keeps those runs' figure in the range, with its count, and is compared with none
    assert table.range_sentence({"a": low, "b": some, "c": spans.Spread(200, 190, 210, 3)}) == \
        "from 100 (95–105) (a) to 3,000 (1 of 3 runs) req/s (b); c is above a; b: from the runs that confirmed one, " \
        "in no comparison"
    assert spans.ranking({"a": low, "b": some})[0] == "**b** 3,000 (1 of 3 runs): not compared (not every run gave a value)"


def test_the_step_table_has_the_common_columns_a_scenarios_own_and_the_verdict():
    s = Step(phase="mst", target_rps=1000, achieved_rps=990, connections=64, seconds=10, requests=9900, errors={},
             statuses={}, latency_ms={"p50": 1.0, "p99": 70.0, "max": 90.0}, generator="openloop", failure="latency",
             app_cpu_cores=1.2, db_cpu_cores=0.3, generator_cpu_cores=0.1, app_threads_peak=40,
             extra={"proxy_cpu_cores": 0.2, "proxy_cpu_us_per_request": 200.0})
    assert s.busy_cores == 1.8 and s.to_json()["busy_cores"] == 1.8
    lines = table.step_table([s], ("busy", "proxy cores", "threads", ("own", lambda step: "x")))
    assert lines[0].startswith("| phase | target/s | achieved/s | p50 | p99 | max |") and lines[0].endswith("| own | result |")
    assert lines[1].startswith("|---|---:|") and lines[1].endswith("---:|---|")
    assert lines[2] == ("| mst | 1,000 | 990 | 1.00 | 70.0 | 90.0 | – | 0 | 1.20 | 0.30 | 0.10 | – | 1.80 | 0.20 | 40 | x "
                        "| **latency** |")
    # below 40 req/s a rate has its tenth (the search's grid there), the achieved one too
    slow = dataclasses.replace(s, target_rps=13.6, achieved_rps=13.58)
    assert table.step_table([slow])[2].startswith("| mst | 13.6 | 13.6 | ")


def test_the_baseline_keeps_its_decision_row_when_no_mst_was_confirmed(tmp_path):
    """A quick run whose only MST failed confirmation still answers the regime: never no row. The row is decided by
    app CPU per request at the common rate over at least two runs: one run is "not determined", three name the port."""
    import json
    from harness.paths import ROOT
    from harness.report.sections import baseline
    paths = sorted((ROOT / "results" / "baseline").glob("20261123T225632Z/quarkus-vertx-*.json"))
    records = [json.loads(p.read_text()) for p in paths]
    records[0]["cells"][0]["mst"].update(confirmed=False, reason="the confirmation at 9,000 failed")
    section = baseline.render(runset.select(records[:1], "baseline"), tmp_path)
    [decision] = section.decisions
    assert decision.choice.startswith("not determined") and "quarkus-vertx #1 (" in "\n".join(section.body)
    [decision] = baseline.render(runset.select(records, "baseline"), tmp_path).decisions
    assert decision.choice == "quarkus-vertx" and len(records) == 3


def test_a_search_whose_rate_passed_once_is_not_confirmed_never_none_passed():
    """A rate passed once and its confirmation failed: the cap is not read there and nothing says "none passed"."""
    once = Mst(rps=0, confirmed=False, bounded=True, first_failing_rps=2500, slo_ms=60, estimate_rps=2800,
               probes=[[2800, False, "mst", "p99"], [2400, True, "mst", None], [2400, False, "confirm", "p99"]],
               reason="no rate passed twice within the confirmation budget")
    assert once.passed_once and once.text() == "none confirmed (no rate passed twice within the confirmation budget)"
    assert caps.cap_at(once, {"CPU": 0.9}) == caps.NOT_CONFIRMED
    unconfirmed = dataclasses.replace(once, rps=2400)
    assert caps.cap_at(unconfirmed, {"CPU": 0.9}) == caps.NOT_CONFIRMED
    never = dataclasses.replace(once, probes=[[2800, False, "mst", "p99"], [10, False, "mst", "p99"]])
    assert not never.passed_once and never.text() == "none passed" and caps.cap_at(never, {}) == "none passed"
    assert caps.cap_at(dataclasses.replace(unconfirmed, confirmed=True), {"CPU": 0.95, "pool": 0.3}) == "CPU"


def test_a_search_the_generator_stopped_during_its_confirmation_is_not_confirmed_not_a_bound():
    stopped = Mst(rps=0, confirmed=False, bounded=True, first_failing_rps=2400, slo_ms=60, estimate_rps=2800,
                  probes=[[2400, True, "mst", None], [2300, False, "confirm", "generator behind its schedule"]],
                  reason="the generator fell behind during the confirmation", limit="generator behind its schedule")
    assert caps.cap_at(dataclasses.replace(stopped, limit=rule.GENERATOR), {}) == caps.NOT_CONFIRMED
    confirmed_bound = dataclasses.replace(stopped, rps=2700, confirmed=True, bounded=False, limit=rule.GENERATOR)
    assert caps.cap_at(confirmed_bound, {"CPU": 0.9}) == "generator"
    nothing = dataclasses.replace(stopped, probes=[[2400, False, "mst", rule.GENERATOR]], limit=rule.GENERATOR)
    assert caps.cap_at(nothing, {}) == "generator"        # the generator fell behind at every rate tried


def test_a_range_starts_at_a_figure_found_and_names_a_bound_below_it_apart():
    found = {"a": spans.Spread(780, 780, 780, 3), "b": spans.Spread(1800, 1800, 1800, 3),
             "v": spans.Spread(550, 550, 610, 3, at_least=True)}
    assert table.from_to(found) == "from 780 (a) to 1,800 req/s (b)"
    assert table.unplaced_note(found) == "; not compared: v (≥ 550 (550–610): its limit was not found)"
    assert table.range_sentence(found).endswith("; not compared: v (≥ 550 (550–610): its limit was not found)")
    # a bound at the top says the highest is at least that: it stays
    top = dict(found, v=spans.Spread(2000, 1900, 2100, 3, at_least=True))
    assert table.from_to(top) == "from 780 (a) to ≥ 2,000 (1,900–2,100) req/s (v)" and not table.unplaced_note(top)


def test_one_port_above_every_port_compared_is_said_so_beside_the_bounds_left_out():
    assert table.choice([{"x": spans.Spread(8600, 8400, 8800, 3), "y": spans.Spread(4100, 3600, 4400, 3),
                          "v": spans.Spread(4200, 3300, 4200, 3, at_least=True)}]) == \
        "x (above every other compared here); not compared: v (≥: its limit was not found)"


def test_a_margin_that_two_digits_would_round_across_a_threshold_gets_three():
    assert caps.classify({"pool": 0.797, "CPU": 0.35}, mst=True) == caps.UNCLEAR
    assert caps.explain({"pool": 0.797, "CPU": 0.35}) == "pool 0.797, CPU 0.35"
    assert caps.explain({"pool": 0.81, "CPU": 0.304}) == "pool 0.81, CPU 0.30"


def test_a_label_gives_back_its_port_and_its_settings():
    record = {"port": "quarkus-vertx", "framework_overrides": {"BENCH_DOWNSTREAM_POOL_SIZE": "1200", "A_B": "x=y"}}
    label = runset.label(record)
    assert runset.port_of(label) == "quarkus-vertx"
    assert runset.settings_of(label) == ["BENCH_DOWNSTREAM_POOL_SIZE", "A_B"]
    assert runset.settings_of(runset.label({"port": "spring-virtual"})) == []


def test_order_puts_a_greater_sign_only_where_every_pair_across_it_is_apart():
    from harness.method.spans import Spread
    # b overlaps a and c, a lies below c: no ">" between neighbours that overlap, and no "≈" chain a ≈ b ≈ c that
    # would join two that lie apart: b is named apart
    items = {"a": Spread(100, 90, 110, 3), "b": Spread(115, 105, 125, 3), "c": Spread(130, 120, 140, 3),
             "d": Spread(300, 280, 320, 3)}
    assert table.order(items, higher_is_better=False) == "a > c > d; not placed: b (overlaps both a and c, which lie apart)"
    assert table.order(items) == "d > c > a; not placed: b (overlaps both c and a, which lie apart)"
    close = {"a": Spread(100, 90, 110, 3), "b": Spread(105, 95, 115, 3), "d": Spread(300, 280, 320, 3)}
    assert table.order(close, higher_is_better=False) == "a ≈ b > d"
    assert table.order({"x": Spread(5, 4, 6, 3), "y": Spread(9, 8, 10, 3)}) == "y > x"
    assert table.order({"x": Spread(5, 4, 6, 3)}) == "x"


def test_a_lower_bound_below_a_figure_found_is_not_ranked_and_leaves_the_greater_signs_standing():
    """A ≥ 8 below figures of 13 to 840 (downstream 200 ms x 3): in the chain it would be last and turn every ">" into
    "≈" (nothing is above a bound); it is listed as not compared. A bound at the top is placed."""
    from harness.method.spans import Spread
    items = {"w": Spread(840, 820, 860, 3), "p": Spread(13, 13, 13, 3), "v": Spread(8, 6, 8, 3, at_least=True)}
    assert table.ranked(items) == "w > p; not compared: v (≥ 8 (6–8): its limit was not found)"
    top = {"w": Spread(900, 880, 950, 3, at_least=True), "p": Spread(13, 13, 13, 3)}
    assert table.ranked(top) == "w > p"


def test_a_failure_is_blamed_on_what_failed():
    """Issue 34: the port's criteria first; the generator only when it alone failed."""
    from harness.method.rule import ERRORS, GENERATOR, LATENCY, RATE
    rule_ = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)
    common = dict(target_rps=4400, slo_ms=50.0)
    # behind its schedule, but the port's p99 was 414 ms: the port's failure (spring-virtual baseline #1)
    assert rule_.failure(achieved_rps=4400, errors=0, p99_ms=414.0, generator_behind=True, **common) == LATENCY
    assert rule_.failure(achieved_rps=4000, errors=0, p99_ms=20.0, generator_behind=True, **common) == RATE
    assert rule_.failure(achieved_rps=4400, errors=3, p99_ms=20.0, generator_behind=True, **common) == ERRORS
    # the port held its criteria: the generator alone fell behind, or every connection was busy
    assert rule_.failure(achieved_rps=4400, errors=0, p99_ms=20.0, generator_behind=True, **common) == GENERATOR
    assert rule_.failure(achieved_rps=4000, errors=0, p99_ms=20.0, generator_behind=False, connections_busy=True,
                        **common) == GENERATOR
    assert rule_.failure(achieved_rps=4000, errors=0, p99_ms=80.0, generator_behind=False, connections_busy=True,
                        **common) == RATE
    assert rule_.failure(achieved_rps=4400, errors=0, p99_ms=20.0, generator_behind=False, **common) is None


def test_a_published_search_is_judged_again_by_todays_rule():
    """A step the earlier rule gave the generator while the port's p99 was over the SLO becomes the port's failure:
    the MST keeps its rate and gains its first failing rate (no longer a lower bound)."""
    from harness.method.rule import GENERATOR, LATENCY
    from harness.method.search import rejudge
    rule_ = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)

    def step(rate, phase, p99, failure):
        return {"phase": phase, "target_rps": rate, "achieved_rps": rate, "connections": 64, "slo_ms": 50.0,
                "latency_ms": {"p99": p99}, "errors": {}, "generator_behind": failure == GENERATOR,
                "failure": failure, "passed": failure is None}
    steps = [step(2500, "common", 5, None), step(3800, "mst", 8, None), step(4400, "mst", 414, GENERATOR),
             step(4100, "mst", 9, None), step(4100, "confirm", 9, None)]
    mst = {"rps": 4100, "confirmed": True, "bounded": False, "first_failing_rps": None, "limit": GENERATOR,
           "reason": "the generator, not the port, stopped the search",
           "probes": [[3800, True, "mst", None], [4400, False, "mst", GENERATOR], [4100, True, "mst", None],
                      [4100, True, "confirm", None]]}
    cell = {"steps": steps, "mst": mst}
    rejudge(cell, rule_)
    assert steps[2]["failure"] == LATENCY and mst["probes"][1][3] == LATENCY
    assert mst["rps"] == 4100 and mst["bounded"] and mst["first_failing_rps"] == 4400
    assert mst["limit"] is None and mst["reason"] is None
    # a step where the port held and the generator alone fell behind stays the generator's
    alone = {"steps": [step(5000, "mst", 9, GENERATOR)], "mst": None}
    rejudge(alone, rule_)
    assert alone["steps"][0]["failure"] == GENERATOR


def test_the_warm_up_runs_the_hot_path_at_full_load_before_its_constant_rate():
    """Issue 34: a closed-loop stage until three windows in a row agree on rate and CPU per request (two agreeing
    while C2 still compiles are a plateau, not the end), then constant load at the higher of the caller's rate and
    rate_fraction x that rate, until steady; the record keeps the closed loop's rate."""
    from harness.method.warmup import WarmupPlan, until_steady
    plan = WarmupPlan(window_seconds=1, tolerance=0.05, max_seconds=1e9, closed_max_seconds=1e9, rate_fraction=0.5)
    served = iter([900.0, 1616.0, 1549.0, 3900.0, 4000.0, 4000.0])   # a JIT warming up, with a plateau
    asked = []

    def step(rate, achieved, cpu):
        return Step(phase="x", target_rps=rate, achieved_rps=achieved, connections=64, seconds=1, requests=1,
                    errors={}, statuses={}, latency_ms={"p50": 1.0, "p99": 2.0}, generator="fake",
                    app_cpu_us_per_request=cpu)

    def closed(seconds):
        rate = next(served)
        return step(None, rate, 1e6 / rate)

    def measure(rate, seconds):
        asked.append(rate)
        return step(rate, rate, 250.0)
    warm = until_steady(measure, 150, plan, closed=closed, drain=lambda: None)
    assert warm.settled and warm.closed_rps == 4000.0
    assert asked == [2000, 2000]                 # 0.5 x the settled closed loop, not the caller's 150
    assert [w["target_rps"] for w in warm.windows] == [None] * 6 + [2000, 2000]

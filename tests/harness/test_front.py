"""The front page's pieces on regimes made here: the choice per framework, pairwise; a bound named and never ranked;
colours within a row; the answer capped; and the method pieces beside it (confirmation lengths, Poisson arrivals)."""
import pytest

from harness import loadgen
from harness.errors import Fatal
from harness.method.search import SearchPlan
from harness.method.spans import spread
from harness.report import front
from harness.report.section import Regime, Section


def regime(**figures) -> dict:
    return {name.replace("_", "-"): spread(values) for name, values in figures.items()}


def test_the_choice_orders_each_framework_pairwise_and_names_the_bound():
    figures = regime(spring_platform=[1.0, 0.98, 1.02], spring_virtual=[0.95, 0.97, 1.01],
                     spring_webflux=[1.2, 1.25, 1.3], quarkus_virtual=[0.8, 0.82, 0.84],
                     quarkus_reactive=[0.6, 0.62, 0.64], quarkus_vertx=[0.3, 0.31, 0.33])
    text = front.choose(Regime("loopback", "CPU", figures, higher_is_better=False, digits=2))
    assert text.startswith("Spring: ")
    assert "> spring-webflux" in text and "≈" in text.split(";")[0]
    assert "Quarkus: quarkus-vertx (no ORM, raw Vert.x client) > quarkus-reactive > quarkus-virtual" in text
    bound = front.choose(Regime("pool", "the pool", figures, bound={n: "its pool of 16" for n in figures}))
    assert bound == "limited by its pool of 16: " + ", ".join(figures)


def test_a_partial_figure_is_never_ranked_and_is_grey():
    figures = regime(spring_platform=[100, 110, 120], quarkus_vertx=[300, 310])
    figures["quarkus-vertx"] = spread([300, 310], of=3)
    r = Regime("x", "y", figures)
    assert "quarkus-vertx" not in front.choose(r)
    assert front.scores(r) == {"spring-platform": 1.0, "quarkus-vertx": None}
    assert "2 of 3 runs" in front.cell_text(r, "quarkus-vertx")


def test_colours_compare_within_the_row_lower_better_where_it_says():
    r = Regime("x", "y", regime(spring_platform=[10], spring_virtual=[20], spring_webflux=[30]), higher_is_better=False,
               notes={"quarkus-vertx": ("died here", 0.0)})
    assert front.scores(r) == {"spring-platform": 1.0, "spring-virtual": 0.5, "spring-webflux": 0.0, "quarkus-vertx": 0.0}


def test_the_answer_keeps_at_most_eight_sentences():
    sections = [Section(f"s{i}", f"s{i}", [], answer=[f"Sentence {i}a.", f"Sentence {i}b."]) for i in range(6)]
    lines = front.answer(sections)
    assert lines[0] == "## The answer"
    assert lines[2].count("Sentence") == 8


def test_a_confirmation_step_lasts_long_enough_for_its_quantiles():
    plan = SearchPlan(1.15, 0.05, 6, 5, 4, confirm_min_seconds=10, confirm_min_requests=100_000, confirm_max_seconds=60)
    assert plan.confirm_seconds(20_000, 10) == 10            # 10 s already hold 200,000
    assert plan.confirm_seconds(4_000, 10) == 25
    assert plan.confirm_seconds(150, 4) == 60                # the cap
    assert plan.confirm_seconds(3_000, 3) == pytest.approx(33.4)
    assert SearchPlan(1.15, 0.05, 6, 5, 4).confirm_seconds(4_000, 5) == 5     # QUICK: the scenario's step


def test_poisson_arrivals_reach_openloop_only():
    gen = loadgen.Openloop("openloop", "0.1.0", arrivals="poisson")
    assert gen.command("http://127.0.0.1:8080/", 1000, 5, 64)[-2:] == ["--arrivals", "poisson"]
    assert "--arrivals" not in loadgen.Openloop("openloop", "0.1.0").command("http://127.0.0.1:8080/", 1000, 5, 64)
    with pytest.raises(Fatal, match="even, poisson"):
        loadgen.open_model({}, arrivals="bursty")
    with pytest.raises(Fatal, match="openloop only"):
        loadgen.open_model({"LOADGEN": "wrk-paced"}, arrivals="poisson")


def test_the_baseline_runs_poisson_arrivals_and_every_other_scenario_loads():
    """bench.toml as shipped: the baseline's own `arrivals` (Poisson, the sensitivity check's outcome) before [load]'s
    even ones, which every other scenario keeps; an override of the baseline's reaches it."""
    from harness import settings as settings_mod   # here: only this test reads the shipped settings
    shipped = settings_mod.load(env={})
    assert settings_mod.arrivals(shipped, "baseline") == "poisson"
    assert {settings_mod.arrivals(shipped, name) for name in ("slow-db", "faults", "startup", "downstream")} == {"even"}
    assert settings_mod.arrivals(settings_mod.load(env={"BENCH_BASELINE_ARRIVALS": "even"}), "baseline") == "even"

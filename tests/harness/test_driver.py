"""The driver owns the SLO: a scenario declares only the latency its regime adds, and every step, drain and search
of its cells is judged at the rule's SLO with that added (on the fake world of tracing.py)."""
import json

import tracing
from harness import driver, settings as settings_mod
from harness.method.rule import Rule
from harness.scenarios import baseline


class Toy(driver.Scenario):
    """A toy regime that adds 20 ms to each request's waits, and says nothing else about its SLO."""

    def added_latency_ms(self, jvm, cell):
        return 20.0


def test_a_scenario_that_declares_only_its_added_latency_is_judged_at_that_slo_everywhere(monkeypatch, tmp_path):
    # the toy runs on the baseline's declaration (its lifecycle: probes, warm-up, common step, search, closed loop)
    monkeypatch.setattr(baseline, "run", lambda ctx, selected: driver.run(ctx, Toy(), ctx.plan(baseline.Plan), selected))
    events = tracing.record("baseline", ["quarkus-vertx"], monkeypatch, tmp_path, quick=True)
    slo = Rule.from_settings(settings_mod.load()).slo_ms(20.0)
    assert slo > Rule.from_settings(settings_mod.load()).slo_ms()
    in_cells = [e for e in events if e[0] == "rate" and not e[1].startswith("warmup")]
    assert {e[1] for e in in_cells} >= {"common", "mst", "confirm"}
    assert {e[6] for e in in_cells} == {slo}                           # every step of the cell, search included
    [record] = [json.loads(p.read_text()) for p in tmp_path.rglob("*.json") if '"cells"' in p.read_text()]
    [cell] = record["cells"]
    assert cell["slo_ms"] == slo and cell["mst"]["slo_ms"] == slo


def test_a_scenario_that_adds_nothing_is_judged_at_the_rule_s_own_slo(monkeypatch, tmp_path):
    events = tracing.record("baseline", ["quarkus-vertx"], monkeypatch, tmp_path, quick=True)
    assert {e[6] for e in events if e[0] == "rate" and e[1] in ("common", "mst", "confirm")} == {None}

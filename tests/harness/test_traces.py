"""Each scenario's call trace on the fake world (tests/harness/tracing.py) equals the fixture recorded from the
code before the scenarios became data (issue 33): the same starts, steps, rates, seconds, URLs, knobs and pauses,
in the same order, so the published runs stay valid without re-measuring. TRACE_WRITE=1 rewrites the fixtures
(only ever from code whose traces are to become the reference). The fixtures in data/traces were first recorded from
commit d8a4a95, the last before harness/driver.py, in a clean export of it, and rewritten only where the method
changed on purpose (the baseline's ladder, confirmation steps of max(10 s, 100,000 requests / rate)); each case
gives the same trace alone and in any order."""
import os

import pytest

import tracing

ALL = list(tracing.CAPACITY)
CASES = {
    "baseline": dict(names=ALL),
    "baseline-quick": dict(scenario="baseline", names=["quarkus-vertx", "spring-webflux"], quick=True),
    "slow-db": dict(names=ALL),
    "slow-db-quick": dict(scenario="slow-db", names=["spring-platform", "quarkus-vertx"], quick=True),
    "queries": dict(names=ALL),
    "queries-quick": dict(scenario="queries", names=["spring-webflux"], quick=True),
    "pinning": dict(names=ALL),
    "pinning-quick": dict(scenario="pinning", names=["spring-virtual"], quick=True),
    "downstream": dict(names=ALL),
    "downstream-quick": dict(scenario="downstream", names=["spring-platform", "quarkus-vertx"], quick=True),
    "memory": dict(names=ALL),
    "memory-quick": dict(scenario="memory", names=["quarkus-vertx"], quick=True),
    "many-users": dict(names=ALL),
    "many-users-quick": dict(scenario="many-users", names=["quarkus-vertx"], quick=True),
    "faults": dict(names=ALL),
    "faults-quick": dict(scenario="faults", names=["spring-virtual"], quick=True),
    "startup": dict(names=ALL),
    "startup-quick": dict(scenario="startup", names=["quarkus-vertx"], quick=True),
    # declared after the restructuring (issue 33): its fixture comes from the driver, a regression check
    "in-flight": dict(names=ALL),
    "in-flight-quick": dict(scenario="in-flight", names=["quarkus-vertx"], quick=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_scenario_does_what_it_did(case, monkeypatch, tmp_path):
    spec = dict(CASES[case])
    scenario = spec.pop("scenario", case)
    events = tracing.record(scenario, spec.pop("names"), monkeypatch, tmp_path, **spec)
    if os.environ.get("TRACE_WRITE"):
        tracing.write_fixture(case, events)
    assert events == tracing.fixture(case)

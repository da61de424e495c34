"""The scenarios: `just bench NAME|all [SCENARIO]`, baseline by default. Each measures one regime on the one method
and lives in its own module here (importing the method and the measuring layer, never another scenario):

    run(ctx: session.Context, selected: list[ports.Port]) -> None    writes results/<scenario>/<run_id>/*.json
    render(rs: method.runset.RunSet, charts: pathlib.Path) -> Section | None    its part of RESULTS.md

and optionally `ports_for(selected) -> selected` to narrow or refuse the ports, and `render_compose(containers,
host) -> Section | None`, its runs through Compose (BENCH_ENV=compose) beside the host run of their machine (the
report finds both run sets: report.compose_set, report.host_set). A bench.toml section with a `summary`
is a scenario too, declared there alone and run by declared.py (its axis one the driver knows).
"""
from __future__ import annotations

import dataclasses
import importlib
import tomllib

from ..errors import Fatal
from ..method import runset
from ..paths import SETTINGS
from ..settings import identifier


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str          # the recipe's SCENARIO, the bench.toml section, the folder under results/, the report's anchor
    summary: str       # one line for help and errors
    module: str = ""   # its module when not named after it: "declared" for a scenario declared in bench.toml alone

    def load(self):
        """harness.scenarios.<the name as a Python identifier> (a module name cannot hold '-'), or its `module`."""
        return importlib.import_module(f"{__name__}.{self.module or identifier(self.name)}")


BASELINE = DEFAULT = runset.BASELINE     # the reference scenario (the machine's figures) and `just bench`'s default
SCENARIOS = {s.name: s for s in [
    Scenario(BASELINE, "loopback database: MST, latency and CPU per request at constant rates"),
    Scenario("slow-db", "1-50 ms between every port and the database, default and large pools"),
    Scenario("many-users", "1,000-10,000 concurrent connections at a fixed rate"),
    Scenario("queries", "N sequential queries per request (?queries=N), on loopback and at 5 ms"),
    Scenario("pinning", "JDK 21 + Connector/J 8.0 against JDK 25 + 9.x: virtual-thread pinning"),
    Scenario("faults", "database freeze and restart, 2x overload, a connection flood, hostile tokens"),
    Scenario("downstream", "K parallel calls per request to a downstream with 50-200 ms of latency"),
    Scenario("memory", "each port in a memory cgroup of 1,024-128 MiB, its heap sized from the limit"),
    Scenario("startup", "a cold JVM under load from its first listening moment, plain and AOT cache"),
    Scenario("in-flight", "thousands of requests in flight on a downstream answering in seconds"),
]}


def declared_in(settings: dict) -> list[Scenario]:
    """The sections of a settings file that declare a scenario on their own (a `summary`; declared.py runs them)."""
    return [Scenario(name, values["summary"], "declared") for name, values in settings.items()
            if isinstance(values, dict) and isinstance(values.get("summary"), str) and name not in SCENARIOS]


with open(SETTINGS, "rb") as _f:
    SCENARIOS.update({s.name: s for s in declared_in(tomllib.load(_f))})


def select(name: str | None) -> Scenario:
    name = name or DEFAULT
    if name not in SCENARIOS:
        raise Fatal(f"unknown scenario '{name}': choose one of {', '.join(SCENARIOS)}")
    return SCENARIOS[name]

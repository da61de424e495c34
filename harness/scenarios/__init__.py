"""The scenarios: `just bench NAME|all [SCENARIO]`, baseline by default. Each measures one regime on the one method
and lives in its own module here (importing the method and the measuring layer, never another scenario nor the
report):

    run(ctx: session.Context, selected: list[ports.Port]) -> None    writes results/<scenario>/<run_id>/*.json

and optionally `ports_for(selected) -> selected` to narrow or refuse the ports. Its part of RESULTS.md is
harness/report/sections/<the same module name>.py. A bench.toml section with a `summary` is a scenario too,
declared there alone and run by declared.py (its axis one the driver knows).
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
    summary: str = ""  # a scenario declared in bench.toml alone: its one line (the section's heading)
    module: str = ""   # its module when not named after it: "declared" for a scenario declared in bench.toml alone

    def load(self):
        """harness.scenarios.<the name as a Python identifier> (a module name cannot hold '-'), or its `module`."""
        return importlib.import_module(f"{__name__}.{self.module or identifier(self.name)}")


BASELINE = DEFAULT = runset.BASELINE     # the reference scenario (the machine's figures) and `just bench`'s default
# the scenarios with a module here, in the report's order (docs/scenarios.md says what each measures)
SCENARIOS = {name: Scenario(name) for name in [BASELINE, "slow-db", "many-users", "queries", "pinning", "faults",
                                               "downstream", "memory", "startup", "in-flight"]}


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

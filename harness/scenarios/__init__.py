"""Named scenarios beyond the baseline run: `SCENARIO=NAME just bench PORT|all`.

Each scenario measures one regime of the users' question (a slow database, many users, faults, ...) and
lives in its own module here, which defines

    run(ctx: common.Context, selected: list[ports.Port]) -> None
        measures and writes results/<scenario>/<run_id>/<port>.json (rewritten as it goes, like bench)
    render(results: pathlib.Path) -> list[str]
        the scenario's section of RESULTS.md (Markdown lines, heading included) from results/<scenario>/,
        or [] when there is nothing to show

so adding a scenario touches this list and its own module only.
"""
from __future__ import annotations

import dataclasses
import importlib

from ..errors import Fatal


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str          # SCENARIO=name, and the folder under results/
    module: str        # harness.scenarios.<module>
    summary: str       # one line for `just --list`-style help and errors

    def load(self):
        return importlib.import_module(f"{__name__}.{self.module}")


SCENARIOS = {s.name: s for s in [
    Scenario("faults", "faults", "database freeze and restart, 2x overload, a connection flood, hostile tokens"),
    Scenario("slow-db", "slow_db", "1-50 ms between every port and the database, default and large pools"),
    Scenario("many-users", "many_users", "1,000-10,000 concurrent connections at a fixed rate"),
    Scenario("queries", "queries", "N sequential queries per request (?queries=N), on loopback and at 5 ms"),
    Scenario("pinning", "pinning", "JDK 21 + Connector/J 8.0 against JDK 25 + 9.x: virtual-thread pinning"),
]}

BASELINE = "baseline"


def select(name: str) -> Scenario | None:
    """The scenario named by SCENARIO (None for the baseline run)."""
    if name in ("", BASELINE):
        return None
    if name not in SCENARIOS:
        raise Fatal(f"unknown scenario '{name}': choose one of {', '.join(SCENARIOS)} (or leave SCENARIO unset)")
    return SCENARIOS[name]


def sections(results) -> list[str]:
    """Every scenario's section of RESULTS.md, in the order above; scenarios without results add nothing."""
    lines: list[str] = []
    for scenario in SCENARIOS.values():
        if not (results / scenario.name).is_dir():
            continue
        try:
            module = scenario.load()
        except ModuleNotFoundError:
            continue
        lines += module.render(results / scenario.name)
    return lines

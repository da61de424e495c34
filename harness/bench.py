"""`just bench NAME|all [SCENARIO]`: one scenario (baseline by default) over the named ports, then RESULTS.md.

The top of the harness: it picks the scenario, opens the session (database, tokens, builds, calibration,
environment) and, on the way out (also after Ctrl-C, so what finished is kept and shown), writes the report.
Nothing imports this module."""
from __future__ import annotations

import time

from . import ports, report, scenarios
from .paths import ROOT
from .session import output_paths, session


def main(selected: list[ports.Port], scenario_name: str | None = None) -> None:
    scenario = scenarios.select(scenario_name)
    module = scenario.load()
    # a scenario that applies to some ports only narrows the selection (or refuses it) before anything starts
    if hasattr(module, "ports_for"):
        selected = module.ports_for(selected)
    began = time.monotonic()
    with session(scenario.name, selected) as ctx:
        try:
            module.run(ctx, selected)
        finally:
            results, markdown = output_paths(ctx.settings)
            report.write(results, markdown)
    print(f"bench: {scenario.name} done in {(time.monotonic() - began) / 60:.1f} min; report in "
          f"{markdown.relative_to(ROOT) if markdown.is_relative_to(ROOT) else markdown}", flush=True)

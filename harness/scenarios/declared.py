"""A scenario declared in bench.toml alone (issue 33): a section with a `summary`, the `path` requested, one `axis`
(a name in AXES: what the driver sets for each cell) with its `values`, and the lifecycle's knobs (driver.Lifecycle).
The registry (scenarios/__init__.py) lists every such section beside the scenario modules. Each cell runs its
declared phases (a common step at common_rate, an MST search from the warm probe); its report is the generic grid:
per port and value, the MST and, at the common rate, p99 and app CPU per request, median (min–max) over the runs.

A regime whose side service or limit is not in AXES still needs code: an entry here, or a module of its own (as
in-flight)."""
from __future__ import annotations

import contextlib
import dataclasses

from .. import downstream as downstream_mod, driver, ports
from ..errors import Fatal
from ..method.record import Mst
from ..method.runset import RunSet
from ..method.spans import cell as span_cell, ms, num
from ..session import Context
from ..report import table
from ..report.section import Section


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """A declared section: what it measures and the driver's knobs."""
    summary: str                    # one line, for help and the report's heading
    path: str                       # requested on the port, e.g. "/feed?calls=1"
    axis: str                       # a key of AXES
    values: list[float]             # the axis's value per cell, in order
    common_rate: int | None = None  # the "common" phase's rate


class Downstream:
    """downstream_latency_ms: the downstream nginx answering each call after the cell's value (the JVM starts with it
    at 0 ms and is warmed up there); each step judged with that wait added to the rule's p99."""

    def __init__(self):
        self.nginx = None

    @contextlib.contextmanager
    def around_jvm(self, jvm: driver.Jvm):
        self.nginx = downstream_mod.up(0)
        try:
            yield {"extra_env": self.nginx.env()}
        finally:
            downstream_mod.down(self.nginx.port)

    def set(self, jvm: driver.Jvm, value: float) -> float:
        """Sets the cell's value; returns the SLO its steps are judged by."""
        self.nginx = downstream_mod.up(value, port=self.nginx.port)
        jvm.target = dataclasses.replace(jvm.target, sides={"nginx": self.nginx.cpu_seconds})
        return jvm.ctx.rule.slo_ms(value)


AXES = {"downstream_latency_ms": Downstream}


class Declared(driver.Scenario):
    def __init__(self, plan: Plan):
        self.axis = AXES[plan.axis]()

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [{plan.axis: value} for value in plan.values]

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm):
        with self.axis.around_jvm(jvm) as kwargs:
            yield kwargs

    def started(self, jvm: driver.Jvm) -> None:
        super().started(jvm)
        jvm.target = dataclasses.replace(jvm.target, url=jvm.target.url.rstrip("/") + jvm.plan.path)

    @contextlib.contextmanager
    def cell_regime(self, jvm: driver.Jvm, cell: dict):
        cell["slo_ms"] = self.axis.set(jvm, cell["coords"][jvm.plan.axis])
        yield

    def slo_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return cell["slo_ms"]

    def step_kwargs(self, jvm: driver.Jvm, cell: dict) -> dict:
        return {"slo_ms": cell["slo_ms"]}


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = ctx.plan(Plan)
    if plan.axis not in AXES:
        raise Fatal(f"bench.toml [{ctx.scenario}] axis '{plan.axis}': choose one of {', '.join(AXES)}")
    driver.run(ctx, Declared(plan), plan, selected)


# --- the report: the generic grid ----------------------------------------------------------------------------

def render(rs: RunSet, chart_dir) -> Section | None:
    if not rs:
        return None
    plan = rs.plan
    axis = plan.get("axis", "value")
    rows = []
    for label, records in rs.by_label.items():
        cells = [c for r in records for c in r.get("cells") or [] if c.get("status") == "complete"]
        for value in sorted({c["coords"][axis] for c in cells}):
            at = [c for c in cells if c["coords"][axis] == value]
            common = [s for c in at for s in c.get("steps", []) if s.get("phase") == "common" and s.get("passed")]
            msts = [m for c in at if (m := Mst.from_json(c.get("mst"))) and m.confirmed]
            rows.append([label, num(value), span_cell(m.rps for m in msts) + ("" if msts else " (none confirmed)"),
                         span_cell((s["latency_ms"].get("p99") for s in common), ms),
                         span_cell(s.get("app_cpu_us_per_request") for s in common)])
    body = [f"{plan.get('summary')}: `GET {plan.get('path')}` per port, one cell per {axis} "
            f"({', '.join(num(v) for v in plan.get('values') or [])}); run {', '.join(rs.run_ids)}, {rs.iterations} "
            f"iteration(s). Declared in bench.toml alone (harness/scenarios/declared.py): MST (confirmed searches) and, "
            f"at {num(plan.get('common_rate'))} req/s (steps that passed), p99 and app CPU per request, median "
            "(min–max).", "",
            *table.markdown(["port", axis, "MST (req/s)", f"p99 at {num(plan.get('common_rate'))} req/s (ms)",
                             "app CPU (µs/req)"], rows, text_columns=2)]
    return Section(plan.get("summary") or rs.scenario, rs.scenario, body, warnings=rs.warnings)

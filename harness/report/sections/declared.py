"""A scenario declared in bench.toml alone: the generic grid (per port and value, MST, p99 and app CPU per request)."""
from __future__ import annotations

from ...method.record import Mst
from ...method.runset import RunSet
from ...method.spans import cell as span_cell, ms, num
from .. import table
from ..section import Section, text


def render(rs: RunSet, chart_dir) -> Section | None:
    if not rs:
        return None
    plan = rs.plan
    axis, rate = plan.get("axis", "value"), num(plan.get("common_rate"))
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
    body = [text("declared-method").format(summary=plan.get("summary"), path=plan.get("path"), axis=axis, rate=rate,
                                           values=", ".join(num(v) for v in plan.get("values") or []),
                                           runs=", ".join(rs.run_ids), iterations=rs.iterations), "",
            *table.markdown(["port", axis, "MST (req/s)", f"p99 at {rate} req/s (ms)", "app CPU (µs/req)"], rows,
                            text_columns=2)]
    return Section(plan.get("summary") or rs.scenario, rs.scenario, body, warnings=rs.warnings)

"""The report's "Where the CPU goes": the newest profile per port (results/profiles/*/split.json, written by `just
profile`), its app CPU per request by category."""
from __future__ import annotations

import json
from pathlib import Path

from .. import port_facts
from ..method import runset
from ..method.cpu_split import AGREEMENT_TOLERANCE, CATEGORIES, WARM, shown


def newest_profiles(results_dir: Path) -> dict[str, tuple[Path, dict]]:
    """The newest split.json per port (with its framework settings, if any: runset.label) under
    results_dir/profiles/."""
    newest: dict[str, tuple[Path, dict]] = {}
    for path in sorted((results_dir / "profiles").glob("*/split.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        variant = record.get("variant", WARM)
        label = record.get("port") and runset.label(record) + ("" if variant == WARM else f" ({variant})") \
            + (f" at /{record['path']}" if record.get("path") else "") \
            + (f", database +{record['db_latency_ms']:g} ms" if record.get("db_latency_ms") else "") \
            + (f", {record['arrivals']} arrivals" if record.get("arrivals", "even") != "even" else "")
        if label and (label not in newest or record.get("utc", "") >= newest[label][1].get("utc", "")):
            newest[label] = (path, record)
    return newest


def render_split(results_dir: Path) -> list[str]:
    """Markdown: for the newest profile per port, µs of app CPU per request by category, with a link to
    its flame graph, and one line per port with its rate and agreement. [] when there is none."""
    newest = newest_profiles(results_dir)
    if not newest:
        return []
    order = runset.ordered(newest, port_facts.order())
    lines = ["| port | app CPU µs/req | " + " | ".join(CATEGORIES) + " | app cs/req (vol+invol) | DB cs/req | "
             "threads ran | profile |", "|---|---:|" + "---:|" * len(CATEGORIES) + "---:|---:|---:|---|"]
    notes = []
    for port in order:
        path, r = newest[port]
        flame = path.parent / r.get("files", {}).get("flame_graph", "flame.html")
        cells = [_us(r["categories"].get(c, {}).get("us_per_request")) for c in CATEGORIES]
        mark = "" if r.get("trustworthy") else " (not trustworthy)"
        k = r.get("unprofiled_kernel") or {}
        switches = lambda p: "-" if f"{p}_ctx_voluntary_per_request" not in k else (  # noqa: E731
            f"{k[f'{p}_ctx_voluntary_per_request']:.2f} + {k[f'{p}_ctx_involuntary_per_request']:.2f}")
        lines.append(f"| {port} | {_us(r.get('app_cpu_us_per_request'))} | " + " | ".join(cells)
                     + f" | {switches('app')} | {switches('db')} | {k.get('app_threads_ran', '-')} | "
                       f"[flame graph]({shown(flame)}){mark} |")
        agreement = r.get("agreement")
        notes.append(f"- {port}: profiled {r.get('profile_seconds', 0):.0f} s at {r['rate_rps']:,} req/s "
                     f"(achieved {r['step']['achieved_rps']:,.0f}) after {r.get('warmup_seconds', '?')} s of warm-up, "
                     f"on {r.get('utc', '?')}"
                     + (f" (kernel {r['machine']['kernel']})" if r.get("machine") else " (machine not recorded)")
                     + "; profiler total "
                     f"{r['profiler_cpu_s']:.2f} s vs measured app CPU {r['app_cpu_s']:.2f} s, agreement "
                     f"{'-' if agreement is None else f'{agreement:.2f}'}"
                     + ("" if r.get("trustworthy") else f" — outside ±{AGREEMENT_TOLERANCE:.0%}: not trustworthy")
                     + ("" if "profiling_overhead" not in r else
                        f"; the same step unprofiled: {r['unprofiled_app_cpu_us_per_request']:.1f} µs/req "
                        f"(profiling adds {r['profiling_overhead']:+.0%})"))
    unknown = [port for port in order if not newest[port][1].get("machine")]
    if unknown:
        notes.append(f"- **{', '.join(unknown)}: profiled before profiles recorded their machine**, possibly on another "
                     "machine than the tables above: compare their split, not their µs, or rerun `just profile NAME`.")
    return lines + [""] + notes


def _us(value) -> str:
    return "-" if value is None else f"{value:.1f}"

"""RESULTS.md, its charts and a tidy CSV, regenerated from the raw results only (never edited by hand)."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from .paths import ROOT

ORDER = ["spring-platform", "spring-virtual", "spring-webflux", "quarkus-virtual", "quarkus-reactive", "quarkus-vertx"]
LATENCY_KEYS = ["p50", "p75", "p90", "p99", "p99.9", "p99.99", "max"]
SEED_KEYS = ["min", "p10", "p25", "p50", "p75", "p90", "p99", "max"]


def latest_records(results: Path) -> dict[str, dict]:
    """Per port, the newest complete run (or, lacking one, the newest partial run)."""
    chosen: dict[str, dict] = {}
    for path in sorted(results.glob("*/*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        name = record.get("port")
        old = chosen.get(name)
        if old is None or record["status"] == "complete" or old["status"] != "complete":
            chosen[name] = record
    return dict(sorted(chosen.items(), key=lambda kv: ORDER.index(kv[0]) if kv[0] in ORDER else 99))


def step_at(record: dict, rate: int) -> dict | None:
    for s in record["steps"]:
        if s["target_rps"] == rate and s["phase"] == "sweep":
            return s
    return None


def fmt(value, digits=1, unit=""):
    if value is None:
        return "–"
    if isinstance(value, float):
        value = f"{value:.{digits}f}"
    return f"{value}{unit}"


def ms(value):
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def mst_text(record) -> str:
    m = record.get("mst")
    if not m:
        return "–"
    if m["rps"] == 0:
        return f"< {m['first_failing_rps']:,}"  # even the lowest rate tried failed
    return f"{'≥ ' if not m['bounded'] else ''}{m['rps']:,}"


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def charts(records: dict, common_rate: int, chart_dir: Path) -> list[tuple[str, Path]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chart_dir.mkdir(parents=True, exist_ok=True)
    made = []
    names = list(records)
    colors = {n: plt.cm.tab10(i) for i, n in enumerate(ORDER + [n for n in names if n not in ORDER])}

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, r in records.items():
        steps = sorted((s for s in r["steps"] if s["latency_ms"]), key=lambda s: s["achieved_rps"])
        if not steps:
            continue
        x = [s["achieved_rps"] for s in steps]
        ax.plot(x, [s["latency_ms"]["p99"] for s in steps], "o-", color=colors[name], label=f"{name} p99")
        ax.plot(x, [s["latency_ms"]["p50"] for s in steps], "x:", color=colors[name], alpha=0.6)
    ax.set_yscale("log")
    ax.set_xlabel("achieved throughput (req/s)")
    ax.set_ylabel("latency (ms, log) — solid p99, dotted p50")
    ax.set_title("Latency vs throughput (constant-rate steps)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    made.append(("Latency vs throughput", chart_dir / "latency-vs-throughput.png"))
    fig.savefig(made[-1][1], dpi=110)
    plt.close(fig)

    rates = sorted({s["target_rps"] for r in records.values() for s in r["steps"] if s["phase"] == "sweep"})
    if rates:
        fig, ax = plt.subplots(figsize=(9, 5))
        width = 0.8 / max(len(records), 1)
        for i, (name, r) in enumerate(records.items()):
            ys = []
            for rate in rates:
                s = step_at(r, rate)
                ys.append(s["latency_ms"].get("p99", 0) if s and s["passed"] else 0)
            ax.bar([j + i * width for j in range(len(rates))], ys, width, color=colors[name], label=name)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rates))], [f"{r:,}" for r in rates])
        ax.set_yscale("log")
        ax.set_xlabel("target rate (req/s); no bar = step failed or not run")
        ax.set_ylabel("p99 latency (ms, log)")
        ax.set_title("p99 by rate")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        made.append(("p99 by rate", chart_dir / "p99-by-rate.png"))
        fig.savefig(made[-1][1], dpi=110)
        plt.close(fig)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    msts = [r["mst"]["rps"] if r.get("mst") else 0 for r in records.values()]
    ax1.barh(names, msts, color=[colors[n] for n in names])
    ceilings = [r["db_ceiling"]["selects_per_s"] for r in records.values() if r.get("db_ceiling")]
    if ceilings:
        ax1.axvline(max(ceilings), color="black", linestyle="--", label="DB ceiling (sysbench)")
        ax1.legend(fontsize=8, loc="lower right")
    ax1.set_xlabel("max sustainable throughput (req/s)")
    ax1.set_title("MST at the p99 SLO")
    ax1.invert_yaxis()
    eff = []
    for r in records.values():
        s = step_at(r, common_rate)
        eff.append(s.get("app_cpu_ms_per_1k_requests") or 0 if s else 0)
    ax2.barh(names, eff, color=[colors[n] for n in names])
    ax2.set_xlabel(f"app CPU ms per 1000 requests at {common_rate:,} req/s (lower is better)")
    ax2.set_title("Efficiency")
    ax2.invert_yaxis()
    fig.tight_layout()
    made.append(("MST and efficiency", chart_dir / "mst-and-efficiency.png"))
    fig.savefig(made[-1][1], dpi=110)
    plt.close(fig)
    return made


def write_csv(records: dict, path: Path) -> None:
    """One row per measured step, units in the column names (tidy data)."""
    columns = ["port", "run_id", "phase", "target_rps", "achieved_rps", "connections", "passed",
               *[f"latency_{k}_ms" for k in ["min", *[k for k in LATENCY_KEYS if k != "max"], "max"]],
               "errors", "app_cpu_cores", "db_cpu_cores", "generator_cpu_cores", "app_cpu_ms_per_1k_requests",
               "app_rss_mb_mean", "app_rss_mb_peak"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for name, r in records.items():
            for s in r["steps"] + [dict(c, phase="closed") for c in r.get("closed", [])]:
                lat = s["latency_ms"]
                w.writerow([name, r["run_id"], s["phase"], s.get("target_rps", ""), s["achieved_rps"],
                            s.get("connections", ""), s.get("passed", ""),
                            *[lat.get(k, "") for k in ["min", *[k for k in LATENCY_KEYS if k != "max"], "max"]],
                            sum(s["errors"].values()), s.get("app_cpu_cores"), s.get("db_cpu_cores"),
                            s.get("generator_cpu_cores"), s.get("app_cpu_ms_per_1k_requests"),
                            s.get("app_rss_mb_mean"), s.get("app_rss_mb_peak")])


def render(records: dict, charts_made: list, markdown: Path, csv_path: Path) -> str:
    first = next(iter(records.values()))
    env = first["environment"]
    settings = env["settings"]
    common = settings["common_rate"]
    slo = settings["slo_p99_ms"]
    out = ["# Results", "",
           "Generated by `just report` from the raw results in `" + _rel(csv_path.parent, markdown.parent) +
           "/` (one JSON file per port and run). Do not edit: rerun `just bench NAME` or `just report`.", ""]
    if env.get("quick"):
        out += ["> **QUICK=1 smoke run: seconds-long steps. These numbers are not results.**", ""]

    # TL;DR
    ranked = sorted(records.values(), key=lambda r: (r.get("mst") or {}).get("rps", 0), reverse=True)
    ceiling = first.get("db_ceiling", {}).get("selects_per_s")
    out += ["## TL;DR", ""]
    if ranked and ranked[0].get("mst"):
        best = ranked[0]
        line = [f"- Highest max sustainable throughput (p99 ≤ {slo} ms, 0 errors, ≥ 99 % of the target rate): "
                f"**{best['port']}** at {mst_text(best)} req/s"]
        if ceiling:
            line.append(f" ({best['mst']['rps'] / ceiling:.0%} of the database's own ceiling, {ceiling:,} selects/s)")
        out.append("".join(line) + ".")
        worst = ranked[-1]
        if worst is not best and worst.get("mst") and worst["mst"]["rps"]:
            out.append(f"- Lowest: **{worst['port']}** at {mst_text(worst)} req/s "
                       f"({best['mst']['rps'] / worst['mst']['rps']:.1f}x less than the highest).")
    at_common = [(r["port"], step_at(r, common)) for r in records.values()]
    at_common = [(n, s) for n, s in at_common if s and s["passed"]]
    if at_common:
        n, s = min(at_common, key=lambda x: x[1].get("app_cpu_ms_per_1k_requests") or 1e9)
        out.append(f"- At {common:,} req/s the cheapest port is **{n}**: "
                   f"{fmt(s.get('app_cpu_ms_per_1k_requests'))} ms of app CPU per 1000 requests, "
                   f"p99 {ms(s['latency_ms']['p99'])} ms.")
    busy = []
    for r in records.values():
        at_mst = [s for s in r["steps"] if r.get("mst") and s["target_rps"] == r["mst"]["rps"] and s["passed"]]
        if at_mst and at_mst[-1].get("app_cpu_cores") is not None and at_mst[-1].get("db_cpu_cores") is not None:
            s = at_mst[-1]
            busy.append(s["app_cpu_cores"] + s["db_cpu_cores"] + s["generator_cpu_cores"])
    if busy:
        out.append(f"- At each port's MST, app + database + generator used {min(busy):.1f}–{max(busy):.1f} of the "
                   f"machine's {env.get('cores')} cores (CPU sets: {', '.join(f'{k} {v}' for k, v in env['cpus'].items())}): "
                   "where they share cores, the ports compete with the database and the load generator, and "
                   "absolute rates are this machine's, not the frameworks' limits; compare ports with each other.")
    partial = [r["port"] for r in records.values() if r["status"] != "complete"]
    if partial:
        out.append(f"- **Partial runs** (interrupted; finished steps kept): {', '.join(partial)}.")
    out.append("")

    out += ["## Summary", "",
            f"MST: the highest constant rate with achieved ≥ 99 % of target, 0 errors and p99 ≤ {slo} ms. "
            f"Latency, CPU and memory at the common rate of {common:,} req/s. CPU is the port's process "
            "(CPU seconds / wall seconds); `ms CPU/1k req` is the app's CPU time per 1000 requests.", "",
            "| port | MST (req/s) | MST / DB ceiling | p50 (ms) | p99 (ms) | app cores | ms CPU/1k req | DB cores | "
            "RSS mean (MiB) | startup (s) | idle RSS (MiB) | run |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in records.items():
        s = step_at(r, common)
        ok = s is not None and s["passed"]
        ratio = f"{r['mst']['rps'] / r['db_ceiling']['selects_per_s']:.0%}" if r.get("mst") and r.get("db_ceiling") else "–"
        out.append(f"| {name} | {mst_text(r)} | {ratio} | {ms(s['latency_ms']['p50']) if ok else '–'} | "
                   f"{ms(s['latency_ms']['p99']) if ok else '–'} | {fmt(s.get('app_cpu_cores'), 2) if ok else '–'} | "
                   f"{fmt(s.get('app_cpu_ms_per_1k_requests')) if ok else '–'} | {fmt(s.get('db_cpu_cores'), 2) if ok else '–'} | "
                   f"{fmt(s.get('app_rss_mb_mean'), 0) if ok else '–'} | {fmt(r.get('startup_s'), 2)} | "
                   f"{fmt(r.get('idle_rss_mb'), 0)} | {r['run_id']}{'' if r['status'] == 'complete' else ' (partial)'} |")
    if ceiling:
        c = first["db_ceiling"]
        out += ["", f"Database ceiling: {c['selects_per_s']:,} primary-key selects/s ({c['tool']}, "
                f"{c['threads']} threads = the ports' pool size, prepared statement, {c['seconds']} s, "
                f"on the app's CPU set)."]
    out.append("")

    for title, path in charts_made:
        out += [f"![{title}]({_rel(path, markdown.parent)})", ""]

    out += ["## Per-rate results", "",
            "Constant-rate steps in the order run (sweep upward until a step fails, then the MST search). "
            "Latency in ms, measured from each request's intended send time (coordinated-omission corrected).", ""]
    for name, r in records.items():
        out += [f"### {name}", "",
                "| phase | target/s | achieved/s | " + " | ".join(LATENCY_KEYS) + " | errors | app cores | DB cores | "
                "gen cores | ms CPU/1k req | RSS mean/peak (MiB) | pass |",
                "|---|---:|---:|" + "---:|" * len(LATENCY_KEYS) + "---:|---:|---:|---:|---:|---:|---|"]
        for s in r["steps"]:
            lat = s["latency_ms"]
            out.append(f"| {s['phase']} | {s['target_rps']:,} | {s['achieved_rps']:,.0f} | "
                       + " | ".join(ms(lat.get(k)) for k in LATENCY_KEYS)
                       + f" | {sum(s['errors'].values())} | {fmt(s.get('app_cpu_cores'), 2)} | "
                       f"{fmt(s.get('db_cpu_cores'), 2)} | {fmt(s.get('generator_cpu_cores'), 2)} | "
                       f"{fmt(s.get('app_cpu_ms_per_1k_requests'))} | {fmt(s.get('app_rss_mb_mean'), 0)}/"
                       f"{fmt(s.get('app_rss_mb_peak'), 0)} | {'yes' if s['passed'] else '**no**'} |")
        if r.get("skipped_rates"):
            out.append(f"\nNot run (above capacity): {', '.join(f'{x:,}' for x in r['skipped_rates'])} req/s.")
        out.append("")

    if any(r.get("closed") for r in records.values()):
        out += ["## Closed loop (the seed article's replication)", "",
                "Fixed connections sending as fast as answers come back (wrk's closed loop, latency as wrk reports "
                "it). Useful to compare with the seed article; constant-rate steps above are the fairer view.", "",
                "| port | connections | req/s | " + " | ".join(SEED_KEYS) + " | errors | app cores |",
                "|---|---:|---:|" + "---:|" * len(SEED_KEYS) + "---:|---:|"]
        for name, r in records.items():
            for c in r.get("closed", []):
                out.append(f"| {name} | {c['connections']} | {c['achieved_rps']:,.0f} | "
                           + " | ".join(ms(c["latency_ms"].get(k)) for k in SEED_KEYS)
                           + f" | {sum(c['errors'].values())} | {fmt(c.get('app_cpu_cores'), 2)} |")
        out.append("")

    out += ["## Environment", "", "| | |", "|---|---|"]
    for key in ["date", "git_commit", "mode", "cpu_model", "cores", "ram_gib", "os", "kernel", "jdk", "db",
                "db_location", "generator", "closed_loop_generator", "pool_size"]:
        out.append(f"| {key} | {env.get(key)} |")
    out.append(f"| frameworks | {', '.join(f'{k} {v}' for k, v in env['frameworks'].items())} |")
    out.append(f"| CPU sets | {', '.join(f'{k} {v}' for k, v in env['cpus'].items())} |")
    out.append(f"| JVM options (all ports) | `{' '.join(env['jvm_options'])}` |")
    out.append(f"| steps | {settings['step_seconds']} s each after {settings['warmup_seconds']} s warm-up at "
               f"{settings['warmup_rate']:,} req/s; {settings['connections']} connections; SLO p99 ≤ {slo} ms |")
    runs = sorted({(r["run_id"], r["environment"]["git_commit"]) for r in records.values()})
    if len(runs) > 1:
        out.append(f"| runs | {'; '.join(f'{a} at {b}' for a, b in runs)} (ports benchmarked separately) |")
    out += ["", f"Raw data: `{_rel(csv_path, markdown.parent)}` (one row per step) and the JSON files beside it.", ""]
    return "\n".join(out)


def write(results: Path | None = None, markdown: Path | None = None) -> None:
    results = results or ROOT / "results"
    markdown = markdown or ROOT / "RESULTS.md"
    markdown.parent.mkdir(parents=True, exist_ok=True)
    records = latest_records(results)
    if not records:
        markdown.write_text("# Results\n\nNo results yet: run `just bench NAME` or `just bench all`.\n")
        return
    common = next(iter(records.values()))["environment"]["settings"]["common_rate"]
    made = charts(records, common, results / "charts")
    csv_path = results / "summary.csv"
    write_csv(records, csv_path)
    markdown.write_text(render(records, made, markdown, csv_path))

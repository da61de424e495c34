"""RESULTS.md, its charts and a tidy CSV, regenerated from the raw results only (never edited by hand).

One run set per table: the report shows the newest set of runs that share one machine, one code version and
one set of settings (the "fingerprint"); every figure is the median of its iterations with min-max beside it,
and ports whose ranges overlap are called a tie. Anything older is listed apart, never mixed in.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import statistics
from pathlib import Path

from .paths import ROOT

LATENCY_KEYS = ["p50", "p90", "p99", "p99.9", "max"]
SEED_KEYS = ["p50", "p90", "p99", "max"]
SPREAD_LIMIT = 0.15
DOCS = ROOT / "docs"
FINGERPRINT_KEYS = ("cpu_model", "cores", "ram_gib", "kernel", "jdk", "db", "db_location", "mode", "git_commit",
                    "cpus", "jvm_options", "pool_size", "settings", "quick")


def port_order() -> list[str]:
    from .ports import PORTS
    return list(PORTS)


# --- loading and grouping --------------------------------------------------------------------------------

def load_records(results: Path) -> list[dict]:
    records = []
    for path in sorted(results.glob("*/*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and "port" in record and "run_id" in record:
            records.append(record)
    return records


def fingerprint(record: dict) -> str:
    env = record.get("environment", {})
    generator = env.get("generator", "").split(",")[0].split(" (")[0]
    return json.dumps([env.get(k) for k in FINGERPRINT_KEYS] + [generator, "iteration" in record], sort_keys=True)


@dataclasses.dataclass
class PortRuns:
    """One port's iterations inside the run set."""
    name: str
    records: list[dict]

    @property
    def complete(self) -> list[dict]:
        return [r for r in self.records if r["status"] == "complete"]

    def common_steps(self) -> list[dict]:
        return [s for r in self.records for s in r["steps"] if s.get("phase") == "common"]

    def msts(self) -> list[int]:
        return [r["mst"]["rps"] for r in self.complete if r.get("mst")]


def run_set(records: list[dict]) -> tuple[dict[str, PortRuns], list[dict]]:
    """The newest run set (per port: its newest run with that fingerprint) and everything else."""
    if not records:
        return {}, []
    newest = max(records, key=lambda r: r["run_id"])
    key = fingerprint(newest)
    chosen: dict[str, str] = {}
    for r in records:
        if fingerprint(r) == key and r["run_id"] > chosen.get(r["port"], ""):
            chosen[r["port"]] = r["run_id"]
    order = port_order()
    inside: dict[str, PortRuns] = {}
    for name in sorted(chosen, key=lambda n: order.index(n) if n in order else 99):
        rs = sorted((r for r in records if r["port"] == name and r["run_id"] == chosen[name]),
                    key=lambda r: r.get("iteration", 1))
        inside[name] = PortRuns(name, rs)
    outside = [r for r in records if not (r["port"] in chosen and r["run_id"] == chosen[r["port"]])]
    return inside, outside


# --- statistics ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Spread:
    median: float
    low: float
    high: float
    n: int

    @property
    def relative(self) -> float:
        return (self.high - self.low) / self.median if self.median else 0.0

    def overlaps(self, other: "Spread") -> bool:
        return self.low <= other.high and other.low <= self.high


def spread(values) -> Spread | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return Spread(statistics.median(values), min(values), max(values), len(values))


def tie_groups(items: list[tuple[str, Spread]], higher_is_better: bool = True) -> list[list[tuple[str, Spread]]]:
    """Ports sorted by median; neighbours whose min-max ranges overlap fall into one group (a tie)."""
    ranked = sorted(items, key=lambda kv: kv[1].median, reverse=higher_is_better)
    groups: list[list[tuple[str, Spread]]] = []
    for item in ranked:
        if groups and any(item[1].overlaps(other) for _, other in groups[-1]):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


# --- formatting ----------------------------------------------------------------------------------------

def num(value, digits=0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def ms(value) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def span(s: Spread | None, fmt=num) -> str:
    if s is None:
        return "–"
    if s.n == 1 or s.low == s.high:
        return fmt(s.median)
    return f"{fmt(s.median)} ({fmt(s.low)}–{fmt(s.high)})"


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def passed_common(p: PortRuns) -> list[dict]:
    return [s for s in p.common_steps() if s.get("passed")]


# --- charts --------------------------------------------------------------------------------------------

def charts(runs: dict[str, PortRuns], slo: float, common: int, chart_dir: Path) -> list[tuple[str, Path]]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chart_dir.mkdir(parents=True, exist_ok=True)
    for old in chart_dir.glob("*.png"):
        old.unlink()
    made = []
    names = list(runs)
    colors = {n: plt.cm.tab10(i % 10) for i, n in enumerate(port_order() + [n for n in names if n not in port_order()])}

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, p in runs.items():
        steps = [s for r in p.records for s in r["steps"] if s["latency_ms"].get("p99")]
        ok = sorted((s for s in steps if s["passed"]), key=lambda s: s["achieved_rps"])
        bad = [s for s in steps if not s["passed"]]
        ax.plot([s["achieved_rps"] for s in ok], [s["latency_ms"]["p99"] for s in ok], "o", color=colors[name],
                label=f"{name}")
        ax.plot([s["achieved_rps"] for s in bad], [s["latency_ms"]["p99"] for s in bad], "o", mfc="none",
                color=colors[name])
    ax.axhline(slo, color="black", linestyle="--", linewidth=1, label=f"SLO p99 {slo:g} ms")
    ax.set_yscale("log")
    ax.set_xlabel("achieved throughput (req/s)")
    ax.set_ylabel("p99 latency (ms, log)")
    ax.set_title("p99 of every constant-rate step (filled: passed, hollow: failed)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    made.append(("p99 of every step", chart_dir / "p99-vs-throughput.png"))
    fig.savefig(made[-1][1], dpi=110)
    plt.close(fig)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    msts = {n: spread(p.msts()) for n, p in runs.items()}
    shown = [n for n in names if msts[n]]
    ax1.barh(shown, [msts[n].median for n in shown], color=[colors[n] for n in shown],
             xerr=[[msts[n].median - msts[n].low for n in shown], [msts[n].high - msts[n].median for n in shown]],
             capsize=4)
    ax1.set_xlabel("max sustainable throughput (req/s): median, bars min–max")
    ax1.set_title(f"MST at p99 ≤ {slo:g} ms")
    ax1.set_xlim(0, max([msts[n].high for n in shown] or [1]) * 1.1)
    ax1.invert_yaxis()
    cpu = {n: spread(s.get("app_cpu_us_per_request") for s in passed_common(p)) for n, p in runs.items()}
    dbc = {n: spread(s.get("db_cpu_us_per_request") for s in passed_common(p)) for n, p in runs.items()}
    shown = [n for n in names if cpu[n]]
    ax2.barh(shown, [cpu[n].median for n in shown], color=[colors[n] for n in shown],
             xerr=[[cpu[n].median - cpu[n].low for n in shown], [cpu[n].high - cpu[n].median for n in shown]],
             capsize=4, label="app")
    ax2.barh(shown, [dbc[n].median if dbc[n] else 0 for n in shown], left=[cpu[n].median for n in shown],
             color="lightgrey", label="database")
    ax2.set_xlabel(f"CPU µs per request at {common:,} req/s (passing steps only; lower is better)")
    ax2.set_title("Cost per request")
    ax2.legend(fontsize=8, loc="lower right")
    ax2.invert_yaxis()
    fig.tight_layout()
    made.append(("MST and cost per request", chart_dir / "mst-and-cost.png"))
    fig.savefig(made[-1][1], dpi=110)
    plt.close(fig)
    return made


# --- CSV -------------------------------------------------------------------------------------------------

def write_csv(runs: dict[str, PortRuns], path: Path) -> None:
    """One row per measured step, units in the column names (tidy data)."""
    lat_keys = ["min", "p50", "p90", "p99", "p99.9", "max"]
    columns = ["port", "run_id", "iteration", "phase", "target_rps", "achieved_rps", "connections", "passed",
               "failure", *[f"latency_{k}_ms" for k in lat_keys], "send_lag_p99_ms", "errors", "app_cpu_cores",
               "db_cpu_cores", "generator_cpu_cores", "app_cpu_us_per_request", "db_cpu_us_per_request",
               "generator_cpu_us_per_request", "app_rss_mb_mean", "app_rss_mb_peak"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for name, p in runs.items():
            for r in p.records:
                warm = (r.get("warmup") or {}).get("windows", [])
                for s in [dict(x, phase="warmup") for x in warm] + r["steps"] + [dict(c, phase="closed") for c in r.get("closed", [])]:
                    lat = s["latency_ms"]
                    w.writerow([name, r["run_id"], r.get("iteration", 1), s.get("phase"), s.get("target_rps") or "",
                                s["achieved_rps"], s.get("connections", ""), s.get("passed", ""), s.get("failure") or "",
                                *[lat.get(k, "") for k in lat_keys], (s.get("send_lag_ms") or {}).get("p99", ""),
                                sum(s["errors"].values()), s.get("app_cpu_cores"), s.get("db_cpu_cores"),
                                s.get("generator_cpu_cores"), s.get("app_cpu_us_per_request"),
                                s.get("db_cpu_us_per_request"), s.get("generator_cpu_us_per_request"),
                                s.get("app_rss_mb_mean"), s.get("app_rss_mb_peak")])


# --- markdown --------------------------------------------------------------------------------------------

def tldr(runs: dict[str, PortRuns], env: dict, ceiling: int | None, common: int, slo: float) -> list[str]:
    out = ["## TL;DR", ""]
    iterations = max(len(p.records) for p in runs.values())
    msts = [(n, s) for n, p in runs.items() if (s := spread(p.msts()))]
    if msts:
        groups = tie_groups(msts)
        parts = []
        for g in groups:
            text = " = ".join(f"**{n}** {span(s)}" for n, s in g)
            parts.append(f"({text}: a tie, ranges overlap)" if len(g) > 1 else text)
        out.append(f"- Max sustainable throughput (p99 ≤ {slo:g} ms, 0 errors, ≥ 99 % of the target rate), "
                   f"median (min–max) of {iterations} iteration(s), req/s, best first: " + " > ".join(parts) + ".")
        if ceiling:
            best = groups[0][0][1]
            share = best.median / ceiling
            out.append(f"- The best median MST is {share:.0%} of the database's own ceiling ({ceiling:,} selects/s, "
                       "sysbench)" + (": the ports, not the database, are the limit here." if share < 0.5 else "."))
    costs = [(n, s) for n, p in runs.items() if (s := spread(x.get("app_cpu_us_per_request") for x in passed_common(p)))]
    if costs:
        groups = tie_groups(costs, higher_is_better=False)
        parts = [" = ".join(f"**{n}** {span(s)}" for n, s in g) for g in groups]
        out.append(f"- App CPU per request at {common:,} req/s (µs, median (min–max), cheapest first; '=' is a tie): "
                   + " < ".join(parts) + ".")
    wide = [n for n, s in msts if s.relative > SPREAD_LIMIT]
    if wide:
        out.append(f"- MST varied by more than {SPREAD_LIMIT:.0%} across iterations for: {', '.join(wide)} "
                   "(see [Why the numbers look like this](#why-the-numbers-look-like-this)).")
    unsettled = [f"{n} #{r.get('iteration', 1)}" for n, p in runs.items() for r in p.records
                 if r.get("warmup") and not r["warmup"].get("settled")]
    if unsettled:
        out.append(f"- Warm-up did not reach a steady state within its limit for: {', '.join(unsettled)}.")
    busy = []
    for p in runs.values():
        for r in p.complete:
            at = [s for s in r["steps"] if s.get("passed") and s["target_rps"] == r["mst"]["rps"]]
            if at and at[-1].get("app_cpu_cores") is not None and at[-1].get("db_cpu_cores") is not None:
                busy.append(at[-1]["app_cpu_cores"] + at[-1]["db_cpu_cores"] + at[-1]["generator_cpu_cores"])
    if busy:
        out.append(f"- At each port's MST, app + database + generator used {min(busy):.1f}–{max(busy):.1f} of the "
                   f"machine's {env.get('cores')} cores (CPU sets: {', '.join(f'{k} {v}' for k, v in env['cpus'].items())}): "
                   "they compete for the same cores, so absolute rates are this machine's, not the frameworks' "
                   "limits; compare the ports with each other.")
    partial = sorted({f"{n} #{r.get('iteration', 1)}" for n, p in runs.items() for r in p.records if r["status"] != "complete"})
    if partial:
        out.append(f"- **Partial runs** (interrupted; finished steps kept): {', '.join(partial)}.")
    return out + [""]


def summary_table(runs: dict[str, PortRuns], common: int, slo: float) -> list[str]:
    out = ["## Summary", "",
           f"Every figure: median (min–max) over the iterations, each on a fresh JVM. MST: the highest constant rate "
           f"with ≥ 99 % of the target achieved, 0 errors, p99 ≤ {slo:g} ms, the generator on schedule, confirmed by "
           f"a second run. Latency and CPU at the common rate of {common:,} req/s; CPU per request is the process's "
           "CPU time (user + system) divided by the requests served.", "",
           "| port | MST (req/s) | MST spread | p50 (ms) | p99 (ms) | app CPU µs/req | DB CPU µs/req | "
           "RSS (MiB) | warm-up (s) | startup (s) | idle RSS (MiB) | iterations |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, p in runs.items():
        common_ok = passed_common(p)
        mst = spread(p.msts())
        failed_common = len(p.common_steps()) - len(common_ok)
        warm = [r["warmup"] for r in p.records if r.get("warmup")]
        settled = sum(1 for w in warm if w.get("settled"))
        out.append(
            f"| {name} | {span(mst)} | {f'{mst.relative:.0%}' if mst else '–'} | "
            f"{span(spread(s['latency_ms'].get('p50') for s in common_ok), ms)} | "
            f"{span(spread(s['latency_ms'].get('p99') for s in common_ok), ms)}"
            f"{f' ({failed_common} failed)' if failed_common else ''} | "
            f"{span(spread(s.get('app_cpu_us_per_request') for s in common_ok))} | "
            f"{span(spread(s.get('db_cpu_us_per_request') for s in common_ok))} | "
            f"{span(spread(s.get('app_rss_mb_mean') for s in common_ok))} | "
            f"{span(spread(w['seconds'] for w in warm))} ({settled}/{len(warm)} settled) | "
            f"{span(spread(r.get('startup_s') for r in p.records), lambda v: f'{v:.1f}')} | "
            f"{span(spread(r.get('idle_rss_mb') for r in p.records))} | {len(p.complete)}/{len(p.records)} |")
    return out + [""]


def per_port(runs: dict[str, PortRuns]) -> list[str]:
    out = ["## Every step", "",
           "Per port and iteration, in the order run: the warm-up, the capacity probes (closed loop), the common-rate "
           "step, the MST search and its confirmation. Latency in ms from each request's intended send time "
           "(coordinated-omission corrected); `lag p99` is the generator's own send lateness.", ""]
    for name, p in runs.items():
        out += [f"### {name}", ""]
        for r in p.records:
            w = r.get("warmup") or {}
            cap = r.get("capacity", {})
            m = r.get("mst") or {}
            out.append(f"**Iteration {r.get('iteration', 1)}** ({r['status']}): started in {num(r.get('startup_s'), 1)} s; "
                       f"capacity cold {num(cap.get('cold', {}).get('achieved_rps'))}/s, warm "
                       f"{num(cap.get('warm', {}).get('achieved_rps'))}/s; warm-up {num(w.get('seconds'))} s at "
                       f"{num(w.get('rate'))}/s, {'settled' if w.get('settled') else '**not settled**'} "
                       f"({len(w.get('windows', []))} windows); MST {num(m.get('rps'))}/s"
                       f"{'' if m.get('confirmed') else ' (**not confirmed**)'}.")
            out += ["", "| phase | target/s | achieved/s | " + " | ".join(LATENCY_KEYS) + " | lag p99 | errors | "
                    "app cores | DB cores | gen cores | app µs/req | DB µs/req | result |",
                    "|---|---:|---:|" + "---:|" * len(LATENCY_KEYS) + "---:|---:|---:|---:|---:|---:|---:|---|"]
            for s in r["steps"]:
                lat = s["latency_ms"]
                out.append(f"| {s['phase']} | {s['target_rps']:,} | {s['achieved_rps']:,.0f} | "
                           + " | ".join(ms(lat.get(k)) for k in LATENCY_KEYS)
                           + f" | {ms((s.get('send_lag_ms') or {}).get('p99'))} | {sum(s['errors'].values())} | "
                           f"{num(s.get('app_cpu_cores'), 2)} | {num(s.get('db_cpu_cores'), 2)} | "
                           f"{num(s.get('generator_cpu_cores'), 2)} | {num(s.get('app_cpu_us_per_request'))} | "
                           f"{num(s.get('db_cpu_us_per_request'))} | {'pass' if s['passed'] else '**' + (s.get('failure') or 'fail') + '**'} |")
            out.append("")
    return out


def closed_table(runs: dict[str, PortRuns]) -> list[str]:
    rows = []
    for name, p in runs.items():
        by_conn: dict[int, list[dict]] = {}
        for r in p.records:
            for c in r.get("closed", []):
                by_conn.setdefault(c["connections"], []).append(c)
        for conn, cs in sorted(by_conn.items()):
            rows.append(f"| {name} | {conn} | {span(spread(c['achieved_rps'] for c in cs))} | "
                        + " | ".join(ms(statistics.median(c["latency_ms"][k] for c in cs)) for k in SEED_KEYS)
                        + f" | {sum(sum(c['errors'].values()) for c in cs)} | "
                        f"{span(spread(c.get('app_cpu_cores') for c in cs), lambda v: f'{v:.2f}')} |")
    if not rows:
        return []
    return ["## Closed loop (the seed article's replication)", "",
            "Fixed connections sending as fast as answers come back (wrk's closed loop, latency as wrk reports it: "
            "not corrected for coordinated omission). Median (min–max) over the iterations; latencies are medians.", "",
            "| port | connections | req/s | " + " | ".join(SEED_KEYS) + " | errors | app cores |",
            "|---|---:|---:|" + "---:|" * len(SEED_KEYS) + "---:|---:|", *rows, ""]


def included(name: str, markdown: Path) -> list[str]:
    """A hand-written section kept in docs/ (configuration, explanations), embedded as it is."""
    path = DOCS / name
    if not path.exists():
        return []
    text = path.read_text().rstrip()
    # links in docs/ are relative to docs/: make them relative to the report
    rel = _rel(DOCS, markdown.parent)
    text = text.replace("](../", "](" + ("" if rel == "docs" else rel + "/../")).replace("](./", f"]({rel}/")
    return [text, ""]


def cpu_split(results: Path) -> list[str]:
    try:
        from .profile import render_split
    except ImportError:
        return []
    lines = render_split(results)
    return ["## Where the CPU goes", "", *lines, ""] if lines else []


def scenario_sections(results: Path) -> list[str]:
    """The named scenarios' sections (SCENARIO=NAME runs under results/<scenario>/), each from its own module."""
    from . import scenarios
    return scenarios.sections(results)


def earlier(outside: list[dict]) -> list[str]:
    if not outside:
        return []
    runs: dict[str, dict] = {}
    for r in outside:
        e = runs.setdefault(r["run_id"], {"ports": set(), "env": r.get("environment", {})})
        e["ports"].add(r["port"])
    out = ["## Earlier runs (not in the tables above)", "",
           "Runs on another machine, code version or settings: not comparable with the tables above, so left out "
           "of them. Their raw files stay in `results/`.", "",
           "| run | ports | machine | commit | generator |", "|---|---|---|---|---|"]
    for run_id, e in sorted(runs.items(), reverse=True):
        env = e["env"]
        out.append(f"| {run_id} | {', '.join(sorted(e['ports']))} | {env.get('cpu_model', '?')}, {env.get('cores', '?')} cores | "
                   f"{env.get('git_commit', '?')} | {env.get('generator', '?').split(',')[0]} |")
    return out + [""]


def environment(runs: dict[str, PortRuns], env: dict, ceiling: dict | None) -> list[str]:
    settings = env["settings"]
    out = ["## Environment", "", "| | |", "|---|---|"]
    for key in ["date", "git_commit", "mode", "cpu_model", "cores", "ram_gib", "os", "kernel", "jdk", "db",
                "db_location", "generator", "closed_loop_generator", "pool_size"]:
        out.append(f"| {key} | {env.get(key)} |")
    out.append(f"| frameworks | {', '.join(f'{k} {v}' for k, v in env['frameworks'].items())} |")
    out.append(f"| CPU sets | {', '.join(f'{k} {v}' for k, v in env['cpus'].items())} |")
    out.append(f"| JVM options (all ports) | `{' '.join(env['jvm_options'])}` |")
    out.append(f"| steps | {settings['step_seconds']} s each, {settings['connections']} connections, SLO p99 ≤ "
               f"{settings['slo_p99_ms']} ms; warm-up in {settings.get('warmup_window_seconds')}-s windows until CPU/req "
               f"and p50 agree within {settings.get('warmup_tolerance', 0):.0%} (at most {settings.get('warmup_max_seconds')} s) |")
    if ceiling:
        out.append(f"| database ceiling | {ceiling['selects_per_s']:,} primary-key selects/s ({ceiling['tool']}, "
                   f"{ceiling['threads']} threads = the ports' pool size, prepared, {ceiling['seconds']} s, on the app's CPU set) |")
    out.append(f"| runs in this report | {', '.join(sorted({r['run_id'] for p in runs.values() for r in p.records}))} |")
    return out + [""]


def render(runs: dict[str, PortRuns], outside: list[dict], charts_made, markdown: Path, results: Path, csv_path: Path) -> str:
    first = next(iter(runs.values())).records[0]
    env = first["environment"]
    settings = env["settings"]
    common, slo = settings["common_rate"], settings["slo_p99_ms"]
    ceiling = first.get("db_ceiling")
    out = ["# Results", "",
           "Generated by `just report` from the raw results in `" + _rel(results, markdown.parent) +
           "/` (one JSON file per port and iteration). Do not edit: rerun `just bench NAME` or `just report`.", ""]
    if env.get("quick"):
        out += ["> **QUICK=1 smoke run: seconds-long steps. These numbers are not results.**", ""]
    out += included("verdict.md", markdown)
    out += tldr(runs, env, ceiling and ceiling.get("selects_per_s"), common, slo)
    out += summary_table(runs, common, slo)
    for title, path in charts_made:
        out += [f"![{title}]({_rel(path, markdown.parent)})", ""]
    out += included("configuration.md", markdown)
    out += cpu_split(results)
    out += included("findings.md", markdown)
    out += scenario_sections(results)
    out += closed_table(runs)
    out += per_port(runs)
    out += earlier(outside)
    out += environment(runs, env, ceiling)
    out += [f"Raw data: `{_rel(csv_path, markdown.parent)}` (one row per step) and the JSON files beside it.", ""]
    return "\n".join(out)


def write(results: Path | None = None, markdown: Path | None = None) -> None:
    results = results or ROOT / "results"
    markdown = markdown or ROOT / "RESULTS.md"
    markdown.parent.mkdir(parents=True, exist_ok=True)
    runs, outside = run_set(load_records(results))
    if not runs:
        markdown.write_text("# Results\n\nNo results yet: run `just bench NAME` or `just bench all`.\n")
        print(f"report: no results in {results}; wrote an empty {markdown.name}")
        return
    settings = next(iter(runs.values())).records[0]["environment"]["settings"]
    made = charts(runs, settings["slo_p99_ms"], settings["common_rate"], results / "charts")
    csv_path = results / "summary.csv"
    write_csv(runs, csv_path)
    markdown.write_text(render(runs, outside, made, markdown, results, csv_path))
    iterations = sum(len(p.records) for p in runs.values())
    print(f"report: {markdown} from {len(runs)} port(s), {iterations} iteration(s) of run(s) "
          f"{', '.join(sorted({r['run_id'] for p in runs.values() for r in p.records}))}"
          f"{f'; {len(outside)} older record(s) listed apart' if outside else ''}; charts in {results / 'charts'}")

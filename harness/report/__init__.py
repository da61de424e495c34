"""RESULTS.md, RESULTS-appendix.md, the charts and a tidy CSV, regenerated from the raw results only.

Layout (a reader's decision first): a line naming the machine, the answer in plain words, the port × regime matrix,
the decision table (report/front.py), every regime in detail, the verdict, the pass rule, the
machine's calibration, one section per scenario, hand-written docs/, the environment. Each scenario shows one run set (method/runset.py):
published.json's, with a newer unpublished run shown apart in "Your runs", so a partial run never rewrites the
published verdict.
"""
from __future__ import annotations

import csv
import dataclasses
import importlib
import json
import os
import re
from pathlib import Path

from .. import port_facts, scenarios
from ..method import calibration as calibrations, runset
from ..method.record import FINE, GRIDS, Mst, mst_of, steps_of
from ..method.rule import Rule
from ..paths import ROOT
from ..settings import identifier
from . import costmodel, front, table
from .cpu_split import render_split
from .section import Section

DOCS = ROOT / "docs"
PUBLISHED = "published.json"
SECOND_MACHINE_KEY = "baseline-second-machine"   # ... and for the baseline on another kind of machine
VARIANTS_KEY = "baseline-variants"   # ... the variant ports beside the ports they repeat, in a run set of their own
CORES_KEY = "baseline-cores"         # ... the ports with the app on a core of its own, beside the shared cores
HIKARI_KEY = "baseline-hikari"       # ... spring-virtual on HikariCP 7.1.0 beside Boot's managed 7.0.2, in a set of its own
SIZED_KEY = "downstream-sized"       # ... the downstream ports with every bound on the path sized, beside the defaults
WATCHED_KEY = "faults-watched"       # ... the database restart watched for minutes, beside the faults
POOL_VARIANTS_KEY = "slow-db-hikari"  # ... spring-virtual on HikariCP 7.0.2 and 7.1.0 behind the slow database
IN_FLIGHT_VARIANTS_KEY = "in-flight-hikari"   # ... and with thousands of requests in flight
ORM_VARIANTS_KEY = "slow-db-jdbc"    # ... spring-virtual on JdbcTemplate beside Spring Data JPA behind the slow database
# per scenario: the run sets published beside its section, each as its key, the section module's function that
# renders it, and its name where it ran on another machine than the baseline
BESIDE = {"downstream": ((SIZED_KEY, "render_sized", "downstream with every bound sized"),),
          "faults": ((WATCHED_KEY, "render_watched", "the restart watched for minutes"),),
          "slow-db": ((POOL_VARIANTS_KEY, "render_variants", "the slow database on HikariCP 7.1.0"),
                      (ORM_VARIANTS_KEY, "render_orm", "the slow database on JdbcTemplate")),
          "in-flight": ((IN_FLIGHT_VARIANTS_KEY, "render_variants", "requests in flight on HikariCP 7.1.0"),)}


def published(results: Path) -> dict[str, list[str]]:
    try:
        return json.loads((results / PUBLISHED).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


# Each results folder's records, read and judged once per report (several run sets are chosen from one folder)
_LOADED: dict[Path, list[dict]] = {}


def loaded(folder: Path) -> list[dict]:
    if folder not in _LOADED:
        _LOADED[folder] = runset.load(folder)
    return _LOADED[folder]


def in_containers(record: dict) -> bool:
    return runset.mode_of(record) == "compose"


# results/same-measurement.json: {code commit: the commit whose measurement it repeats exactly, or {scenario: that
# commit} where the commits between changed some scenarios' measurement}, for published sets
SAME_MEASUREMENT = "same-measurement.json"


def same_measurement(results: Path) -> dict:
    """Each entry: a later commit that changed only judging or report code (the trace fixtures of
    tests/harness/test_traces.py unchanged), or only some scenarios' measurement (then the entry names the others),
    so its runs and the earlier commit's share a published table."""
    try:
        return {k: v for k, v in json.loads((results / SAME_MEASUREMENT).read_text()).items() if not k.startswith("#")}
    except (OSError, json.JSONDecodeError):
        return {}


def _select(records: list[dict], name: str = scenarios.BASELINE, ids: set[str] = frozenset(),
            same_code: dict | None = None) -> runset.RunSet:
    """The run set of `records` from the runs `ids` (from all of them when `ids` is empty)."""
    return runset.select([r for r in records if r["run_id"] in ids] if ids else records, name, port_facts.order(),
                         calibrations.differences, same_code, join=bool(ids))


def compose_set(results: Path, name: str) -> runset.RunSet:
    """A scenario's runs through Compose: published.json's "<name>-compose", else the newest such runs."""
    records = [r for r in loaded(results / name) if in_containers(r)]
    return _select(records, name, ids=set(published(results).get(f"{name}-compose", [])))


def machine(calibration: dict | None) -> dict | None:
    """A calibration without the database's ceiling: in containers that is the containers', not the machine's."""
    return calibration and {k: v for k, v in calibration.items() if not k.startswith("db_")}


def host_set(results: Path, name: str, containers: runset.RunSet, shown: runset.RunSet | None) -> runset.RunSet | None:
    """The host's runs to set beside the Compose ones: the host run published with them ("<name>-compose" may list
    the host run measured right before them: calibrations agree within their noise across hours in which a port's
    figures moved 20-50 %, so the run beside them wins), else the shown set when it was measured on the same
    machine, else the newest host run set of the scenario that was (its calibration agrees), else None: figures
    from two machines are never compared."""
    def same(rs: runset.RunSet | None) -> bool:
        return bool(rs and rs.calibration and not calibrations.differences(machine(containers.calibration),
                                                                         machine(rs.calibration)))
    if not containers or not containers.calibration:
        return shown
    records = [r for r in loaded(results / name) if not in_containers(r)]
    paired = set(published(results).get(f"{name}-compose", [])) & {r["run_id"] for r in records}
    if paired and same(rs := _select(records, name, paired)):
        return rs
    if same(shown):
        return shown
    for run_id in sorted({r["run_id"] for r in records}, reverse=True):
        if same(rs := _select(records, name, {run_id})):
            return rs
    return None


def second_machine_set(results: Path) -> runset.RunSet | None:
    """The baseline on a second machine (the cost model's test of transfer), None when none is published."""
    ids = set(published(results).get(SECOND_MACHINE_KEY, []))
    records = [r for r in loaded(results / scenarios.BASELINE) if r["run_id"] in ids and not in_containers(r)]
    return _select(records) if records else None


def published_set(results: Path, key: str, name: str = scenarios.BASELINE) -> runset.RunSet | None:
    """A run set published under its own key beside a scenario's (e.g. VARIANTS_KEY), None when none is."""
    ids = set(published(results).get(key, []))
    records = [r for r in loaded(results / name) if r["run_id"] in ids and not in_containers(r)]
    return _select(records, name, same_code=same_measurement(results)) if records else None


def beside(pub: dict[str, list[str]], name: str) -> set[str]:
    """The runs of a scenario published under a key of their own ("<name>-..."): never "your runs"."""
    return {i for key, ids in pub.items() if key.startswith(f"{name}-") for i in ids}


def with_clause(sections: list[Section], clause_section: Section) -> None:
    """A beside section's answer is a clause of the sentence on the port its variant repeats (the front page keeps
    eight sentences): appended to the first sentence whose pair that port leads, else a sentence of its own."""
    kept = []
    for clause in clause_section.answer:
        pair = re.search(r"\((\S+) ÷ (\S+?):", clause)
        lead = f"({pair.group(2)} ÷ " if pair else None
        where = next(((section, i) for section in sections for i, sentence in enumerate(section.answer)
                      if lead and lead in sentence), None)
        if where:
            section, i = where
            section.answer[i] = f"{section.answer[i].rstrip('.')}; {clause}."
        else:
            kept.append(clause[0].upper() + clause[1:] + ".")
    clause_section.answer[:] = kept


def run_sets(results: Path) -> tuple[dict[str, runset.RunSet], dict[str, runset.RunSet]]:
    """Per scenario: the run set shown (published, else the newest) and a newer unpublished one; none in containers."""
    _LOADED.clear()                   # the records as they are now: a report starts here (a test adds some between two)
    pub, same_code = published(results), same_measurement(results)
    shown, yours = {}, {}
    for name in scenarios.SCENARIOS:
        records = [r for r in loaded(results / name) if not in_containers(r)]
        ids = set(pub.get(name, []))
        if rs := _select(records, name, ids, same_code if ids else None):
            shown[name] = rs
        newer = [r for r in records if r["run_id"] not in ids | beside(pub, name) and r["run_id"] > max(ids)] \
            if ids else []
        if other := _select(newer, name):
            yours[name] = other
    return shown, yours


# --- pieces ----------------------------------------------------------------------------------------------

def included(name: str, markdown: Path) -> list[str]:
    """A hand-written section kept in docs/ (configuration, explanations), embedded as it is."""
    if not (DOCS / name).exists():
        return []
    rel = os.path.relpath(DOCS, markdown.parent)
    up = "" if rel == "docs" else rel + "/../"
    return [(DOCS / name).read_text().rstrip().replace("](../", f"]({up}").replace("](./", f"]({rel}/"), ""]


def relink(lines: list[str], chart_dir: Path, markdown: Path) -> list[str]:
    """Chart paths written by the scenarios (absolute) made relative to the Markdown file."""
    rel = os.path.relpath(chart_dir, markdown.parent)
    return [line.replace(f"]({chart_dir}/", f"]({rel}/") for line in lines]


def machines(shown: dict[str, runset.RunSet], second: runset.RunSet | None):
    """The baseline's two calibrated machines (else None), and the cost model's lines and verdict across them."""
    first = shown.get(scenarios.BASELINE)
    if not first or not second or not first.calibration or not second.calibration:
        return None, [], []
    pair = (costmodel.Machine("this machine", first.by_label, first.calibration),
            costmodel.Machine("second machine", second.by_label, second.calibration))
    mst = [{name: m for name, records in machine.by_label.items() if (m := table.mst_spread(map(mst_of, records)))}
           for machine in pair]
    lines, sentences = costmodel.cross_machine(*pair, *mst)
    code = [rs.environment.get("code_commit") for rs in (first, second)]
    if code[0] == code[1]:
        return pair, lines, sentences
    # another commit measured the second machine (other versions, another warm-up): machine and method are mixed in
    # every difference, so the comparison stays in The machine and out of the verdict
    return pair, [f"The second machine's baseline ran at another code commit ({code[1] or 'unknown'}, against "
                  f"{code[0] or 'unknown'} here: other framework versions and another warm-up), so each difference "
                  "below mixes the machine with the versions and the method; none of it enters a verdict.", "",
                  *lines], []


def machine_pointer(shown: dict[str, runset.RunSet], others: list[str]) -> list[str]:
    """One line above the decision table: the machine the figures come from (its calibration follows the verdict,
    so the report opens with the answer), and `others`, the scenarios mark_other_machine found on another one."""
    first = next((rs.calibration for rs in shown.values() if rs.calibration), None)     # as calibration_section's
    if not first:
        return []
    vcpus = f"{first['cpus']}-vCPU " if first.get("cpus") else ""
    named = ", ".join(others[:-1]) + f" and {others[-1]}" if len(others) > 1 else "".join(others)
    return [f"Measured on one {vcpus}VM (kernel {first.get('kernel', '?')}; its calibration: "
            "[The machine](#the-machine))" + (f"; {named} ran on another machine of the same kind (rows "
                                               "marked *(another machine)*): compare ports within a row, not figures "
                                               "across rows" if others else "") + ".", ""]


def calibration_section(shown: dict[str, runset.RunSet],
                        pair: tuple[costmodel.Machine, costmodel.Machine] | None = None,
                        transfer: list[str] = ()) -> list[str]:
    """The machine behind the tables (beside the second one), the scenarios' machines, the cost model, `transfer`."""
    cals = {name: rs.calibration for name, rs in shown.items() if rs.calibration}
    out = ["## The machine", "",
           "Machines of one kind differ up to 3.5x here (same CPU model string), so every run records a calibration "
           "(`just calibrate` prints yours in under a minute). Compare yours with this one before comparing "
           "numbers.", ""]
    if not cals:
        return out + ["No run in this report carries a calibration yet (runs of the first method).", ""]
    first_name, first = next(iter(cals.items()))
    out += (calibrations.table(first, pair[1].calibration, "second machine (baseline only)", "this machine (this report)")
            if pair else calibrations.table(first)) + [""]
    # each other machine described against the first
    mixed = [f"**{name}** was measured on another machine than {first_name}: {sentence}"
             for name, cal in cals.items() for sentence in calibrations.differences(cal, first)]
    mixed += [f"**{name}** carries no calibration (a run of the first method): its machine cannot be checked."
              for name, rs in shown.items() if not rs.calibration]
    if mixed:
        out += ["> **Runs from different or unchecked machines are shown below; do not compare across them:**", "",
                *[f"> - {line}" for line in mixed], ""]
    if base := shown.get(scenarios.BASELINE):
        out += costmodel.report(base.by_label, base.calibration, pair[1] if pair else None)
    return out + list(transfer)


def mark_other_machine(section: Section, calibration: dict | None, baseline: dict | None,
                       other_cpus: bool = False) -> None:
    """A section measured on another machine than the baseline says so: above its table, in its rows and in the
    heading of its verdict sentences. `other_cpus`: its calibration ran on other CPU sets than the baseline's, so it
    cannot show the machine to be the same (the DB ceiling on one core is not the one on two)."""
    if not other_cpus and (not calibration or not baseline or not calibrations.differences(calibration, baseline)):
        return
    why = ("its calibration ran on other CPU sets, so it cannot show the machine state to be the baseline's"
           if other_cpus else "its calibration differs: see \"The machine\"")
    section.warnings.append(f"Measured on another machine than the baseline ({why}): compare the ports with each "
                            "other here, not with the other sections' figures.")
    section.other_machine = True              # its verdict group says so in its heading
    section.decisions[:] = [dataclasses.replace(d, regime=f"{d.regime} *(another machine)*") for d in section.decisions]


def section_module(name: str):
    """A scenario's part of the report: harness/report/sections/<its measuring module's name>.py."""
    scenario = scenarios.SCENARIOS[name]
    return importlib.import_module(f"{__name__}.sections.{scenario.module or identifier(name)}")


def rendered(name: str, rs: runset.RunSet, chart_dir: Path) -> Section | None:
    """A scenario's section; a decision row without evidence points at the section."""
    section = section_module(name).render(rs, chart_dir)
    if section is not None:
        section.decisions[:] = [d if d.evidence else dataclasses.replace(d, evidence=f"#{section.anchor}")
                                for d in section.decisions]
        one_each = {label: s for label, records in rs.by_label.items()
                    if name == scenarios.BASELINE and (s := table.mst_spread(map(mst_of, records)))}
        with_search_lines(section, rs, one_each)
    return section


def with_search_lines(section: Section, rs: runset.RunSet, spreads: dict | None = None,
                      beside: runset.RunSet | None = None) -> None:
    """Every section with searches states the precision they reached (closer MSTs tie), and how many of them were
    confirmed and how many non-monotonic: the MSTs' noise, shown. `spreads`: the MSTs whose spread is said in words;
    `beside`: another set the section shows (the host's beside the Compose runs), its searches counted with them."""
    found = searches(rs) + (searches(beside) if beside else [])
    for line in (table.precision_reached(found, rs.settings("search").get("precision", 0.05)),
                 table.search_noise(found, spreads)):
        if line:
            section.body += ([""] if section.body and section.body[-1] else []) + [line, ""]


def searches(rs: runset.RunSet) -> list[Mst]:
    """Every MST search in a run set's cells."""
    return [Mst.from_json(c["mst"]) for r in rs.records for c in r.get("cells") or [] if isinstance(c.get("mst"), dict)]


def decision_table(sections: list[Section]) -> list[str]:
    rows = [[d.regime, d.decided_by, d.choice, d.settings, f"[{d.evidence.lstrip('#')}]({d.evidence})"]
            for s in sections for d in s.decisions]
    if not rows:
        return []
    return ["## Every regime in detail", "",
            "One row per regime, generated from the runs below: what decided the result there, the choice the data "
            "supports (a port is named above another only when its whole range of results lies above the other's, "
            "and an MST also at or above every rate at which the other failed; `≈`: not apart), "
            "and the settings to change. The figures, and why a port was not compared, are in the verdict below and "
            "in the linked section.", "",
            *table.markdown(["regime", "what decided it", "choice", "settings to change", "evidence"], rows, 5)]


def verdict(sections: list[Section], markdown: Path, machine: list[str] = ()) -> list[str]:
    groups = [(f"**[{s.title}](#{s.anchor})**" + (" *(another machine: see [The machine](#the-machine))*"
                                                   if s.other_machine else ""), s.verdict)
              for s in sections if s.verdict]
    groups += [("**[The machine](#the-machine)**", list(machine))] if machine else []
    if not groups:
        return []
    lines = [line for heading, sentences in groups for line in (heading, "", *(f"- {x}" for x in sentences), "")]
    return ["## Verdict", "", "Every number below is generated from the runs' JSON; grouped by the section that "
            "holds its evidence (a section with more sentences of the same kind opens with them).", "", *lines,
            *included("verdict.md", markdown)]


def section_findings(section: Section) -> list[str]:
    """The section's generated sentences beyond its headline ones in the verdict: the same rules, read here."""
    if not section.findings:
        return []
    return ["Besides this section's lines in the [verdict](#verdict), generated the same way from the JSON:", "",
            *(f"- {x}" for x in section.findings), ""]


def rule_section(shown: dict[str, runset.RunSet]) -> list[str]:
    settings = next((rs.environment["settings"] for rs in shown.values() if rs.settings("rule")), None)
    if not settings:
        return []
    rule = Rule(**settings["rule"])
    search = settings.get("search", {})
    used = sorted({m.grid for rs in shown.values() for m in searches(rs)}) or [FINE]
    grids = "; or ".join(GRIDS[g] for g in used) + ("; each section's precision line says which" if len(used) > 1 else "")
    return ["## The pass rule (every scenario)", "",
            f"A constant-rate step passes when: {rule.describe()}. Latency is measured from each request's intended "
            "send time (coordinated omission corrected). The **MST** (max sustainable throughput) is the highest "
            "rate that passed twice: found by bracketing from the iteration's own measurement and bisecting to "
            f"{search.get('precision', 0):.0%} (or to one step of the rate grid where that is coarser: {grids}), then "
            "confirmed; a failed confirmation steps down until a rate passes "
            "twice. The lowest rate that failed is shown beside it; a limit never found is shown as ≥ and enters no "
            "ratio and no tie; an MST that only some iterations confirmed is shown with their count (\"3,000 (1 of 3 "
            "runs)\") and enters no comparison. Figures are the median (min–max) of the iterations, each on a fresh "
            "JVM; one port is above another only when its whole range lies above the other's (pairwise, never "
            "chained) and, for MSTs, at or above every rate at which a run of the other failed: a search knows its "
            "limit only to within its bracket, so MSTs closer than that are a tie (≈).", ""]


def yours_section(yours: dict[str, runset.RunSet], shown: dict[str, runset.RunSet], chart_dir: Path) -> list[str]:
    if not yours:
        return []
    out = ["## Your runs (not published)", "",
           "Runs newer than the published ones, shown apart so the published tables and verdict above stay intact. "
           "Compare the calibrations first: a machine that differs changes every absolute number.", ""]
    for name, rs in yours.items():
        if (section := rendered(name, rs, chart_dir / "yours")) is None:
            continue
        out += [f"### Yours: {section.title} (run {', '.join(rs.run_ids)})", ""]
        pub = shown.get(name)
        if rs.calibration and pub and pub.calibration:
            # each of your runs against the published one: the machine's state can change between runs
            cals = rs.calibrations
            diff = [f"{f'run {run_id}: ' if len(cals) > 1 else ''}{d}" for run_id, cal in sorted(cals.items())
                    for d in calibrations.differences(cal, pub.calibration)]
            out += calibrations.table(rs.calibration, pub.calibration, "published") + [""]
            out += ([f"- Your machine against the published one: {d}" for d in diff] or
                    ["- Your machine calibrates like the published one: the numbers are comparable."]) + [""]
            if name == scenarios.BASELINE:
                out += costmodel.transfer(pub.by_label, pub.calibration, rs.by_label, rs.calibration)
        if judged := section.verdict + section.findings:    # e.g. a remedy row against its port's defaults
            out += ["What this section's judges say of your run (the rules of the published sections):", "",
                    *(f"- {x}" for x in judged), ""]
        out += section.body
    return out


def earlier(shown: dict[str, runset.RunSet]) -> list[str]:
    runs: dict[tuple[str, str], list[dict]] = {}
    for name, rs in shown.items():
        for r in rs.outside:
            runs.setdefault((name, r["run_id"]), []).append(r)
    if not runs:
        return []
    rows = []
    for (name, run_id), records in sorted(runs.items(), reverse=True):
        env = records[0].get("environment", {})
        rows.append([name, run_id, ", ".join(sorted({r["port"] for r in records})),
                     f"{env.get('cpu_model', '?')}, {env.get('cores', '?')} cores", str(env.get("git_commit", "?"))])
    return ["## Earlier runs (not in the tables)", "",
            "Another code version, settings or machine: not comparable with the tables above, so left out of them. "
            "Their raw files stay in `results/`.", "",
            *table.markdown(["scenario", "run", "ports", "machine", "commit"], rows, 5)]


def environment(shown: dict[str, runset.RunSet]) -> list[str]:
    rows = []
    for name, rs in shown.items():
        env = rs.environment
        # the code each run measured: two where same-measurement.json joins them
        commits = sorted({str(r.get("environment", {}).get("code_commit", env.get("git_commit"))) for r in rs.records})
        rows.append([name, ", ".join(rs.run_ids), ", ".join(commits), f"{env.get('cpu_model')}, "
                     f"{env.get('cores')} cores, {env.get('ram_gib')} GiB, kernel {env.get('kernel')}",
                     str(env.get("jdk")), str(env.get("db")), str(env.get("generator", "")).split(",")[0],
                     f"`{' '.join(env.get('jvm_options', []))}`"])
    return ["## Environment", "", *table.markdown(["scenario", "runs", "code commit", "machine", "JDK", "DB", "generator",
                                                   "JVM options"], rows, 8)]


def findings_link(markdown: Path) -> list[str]:
    """The notes written by hand about particular runs (profiles, one-off re-runs) stay in docs/findings.md, linked
    and never included: their figures come from the runs they name, not from the records this report reads, so they
    would go stale here."""
    if not (DOCS / "findings.md").exists():
        return []
    rel = os.path.relpath(DOCS / "findings.md", markdown.parent)
    return ["## Why the numbers look like this", "",
            f"Explanations written by hand, each resting on the run it names (profiles, one-off re-runs, another "
            f"machine): [{rel}]({rel}). They are not regenerated; every figure above is.", ""]


def cpu_section(results: Path) -> list[str]:
    lines = render_split(results)
    return ["## Where the CPU goes", "", *lines, ""] if lines else []


def write_csv(shown: dict[str, runset.RunSet], path: Path) -> None:
    """One row per measured step of every shown run set, units in the column names (tidy data)."""
    lat = ["p50", "p90", "p99", "p99.9", "max"]
    cpu = ["app_cpu_cores", "db_cpu_cores", "generator_cpu_cores", "app_cpu_us_per_request", "db_cpu_us_per_request",
           "app_rss_mb_mean"]
    steps = [(name, label, r, s) for name, rs in shown.items() for label, records in rs.by_label.items()
             for r in records for s in steps_of(r)]
    kernel_keys = sorted({k for *_, s in steps for k in s.kernel})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", "label", "run_id", "iteration", "phase", "target_rps", "achieved_rps", "connections",
                    "slo_ms", "passed", "failure", *[f"latency_{k}_ms" for k in lat], "errors", *cpu, *kernel_keys])
        for name, label, r, s in steps:
            w.writerow([name, label, r["run_id"], r.get("iteration", 1), s.phase, s.target_rps or "", s.achieved_rps,
                        s.connections, s.slo_ms or "", s.passed, s.failure or "",
                        *[s.latency_ms.get(k, "") for k in lat], s.error_count, *[getattr(s, c) for c in cpu],
                        *[s.kernel.get(k, "") for k in kernel_keys]])


def beside_sections(results: Path, chart_dir: Path, first: runset.RunSet | None, others: list[str]) -> list[Section]:
    """The baseline's beside sections: the variant ports' share and the arrival process's check (VARIANTS_KEY), the
    pool's newer release (HIKARI_KEY), the app on a core of its own (CORES_KEY)."""
    from .sections import baseline     # here: the sections import this package (section_module loads them the same way)
    out = []
    if rs := published_set(results, VARIANTS_KEY):
        out += [(rs, s, "the variant runs") for s in (baseline.render_variants(rs, chart_dir), baseline.render_arrivals(rs))
                if s is not None]
    if (rs := published_set(results, HIKARI_KEY)) and (s := baseline.render_variants(rs, chart_dir, baseline.HIKARI)) is not None:
        out.append((rs, s, "the HikariCP 7.1.0 runs"))
    if (rs := published_set(results, CORES_KEY)) and (s := baseline.render_cores(rs, first)) is not None:
        out.append((rs, s, "the separate-cores runs"))
    counted: set[int] = set()            # a set shown in two sections has its searches counted in the first only
    for rs, section, name in out:
        if id(rs) not in counted:
            counted.add(id(rs))
            with_search_lines(section, rs)
        if first:
            mark_other_machine(section, rs.calibration, first.calibration, rs.settings("cpus") != first.settings("cpus"))
            if section.other_machine and name not in others:
                others.append(name)
    return [section for _, section, _ in out]


def scenario_beside(results: Path, first: runset.RunSet | None, others: list[str], name: str) -> list[Section]:
    """The run sets published under keys of their own beside scenario `name`'s section (BESIDE), each rendered by
    its section module, marked where it ran on another machine than the baseline."""
    out = []
    for key, render_name, what in BESIDE.get(name, ()):
        rs = published_set(results, key, name)
        if rs and (section := getattr(section_module(name), render_name)(rs)) is not None:
            with_search_lines(section, rs)
            if first:
                mark_other_machine(section, rs.calibration, first.calibration)
                if section.other_machine:
                    others.append(what)
            out.append(section)
    return out


# --- the whole report ------------------------------------------------------------------------------------

def render(results: Path, markdown: Path, appendix_path: Path, chart_dir: Path) -> tuple[str, str, dict]:
    shown, yours = run_sets(results)
    first = shown.get(scenarios.BASELINE)
    sections: list[Section] = []
    others: list[str] = []            # the scenarios measured on another machine than the baseline
    for name, rs in shown.items():
        if (section := rendered(name, rs, chart_dir)) is not None:
            if first and name != scenarios.BASELINE:
                mark_other_machine(section, rs.calibration, first.calibration)
                if section.other_machine:
                    others.append(name)
            sections.append(section)
            if name == scenarios.BASELINE:
                sections += beside_sections(results, chart_dir, first, others)
            sections += scenario_beside(results, first, others, name)
    # a scenario that shows its runs through Compose beside the host's (the baseline: what the containers cost)
    for name in scenarios.SCENARIOS:
        module = section_module(name)
        if hasattr(module, "render_compose") and (apart := module.render_compose(
                containers := compose_set(results, name),
                host := host_set(results, name, containers, shown.get(name)))) is not None:
            with_search_lines(apart, containers, beside=host)
            if first:
                mark_other_machine(apart, machine(containers.calibration), machine(first.calibration))
                if apart.other_machine:
                    others.append(f"{name} through Compose")
            sections.append(apart)
    out = ["# Results", "",
           f"Generated by `just report` from the raw results in `{os.path.relpath(results, markdown.parent)}/`. "
           "Do not edit: rerun `just bench NAME [SCENARIO]` or `just report`. Step-by-step tables: "
           f"[{appendix_path.name}]({os.path.relpath(appendix_path, markdown.parent)}).", ""]
    if any(rs.environment.get("quick") for rs in shown.values()):
        out += ["> **QUICK=1 smoke run: seconds-long steps. These numbers are not results.**", ""]
    pair, transfer, transfer_verdict = machines(shown, second_machine_set(results))
    out += machine_pointer(shown, others)
    variants = {words[1] for words in section_module(scenarios.BASELINE).VARIANT_SETS}
    for section in sections:
        if section.anchor in variants:
            with_clause(sections, section)
    out += front.answer(sections)
    out += front.matrix(sections, chart_dir)
    out += front.decisions(sections)
    out += decision_table(sections)
    out += verdict(sections, markdown, transfer_verdict)
    out += rule_section(shown)
    out += calibration_section(shown, pair, transfer)
    for section in sections:
        out += [f'<a id="{section.anchor}"></a>', "", f"## {section.title}", ""]
        out += [f"> **{w}**" for w in section.warnings] + ([""] if section.warnings else [])
        out += section_findings(section)
        out += section.body
    out += yours_section(yours, shown, chart_dir)
    out += included("configuration.md", markdown)
    out += cpu_section(results)
    out += findings_link(markdown)
    out += earlier(shown)
    out += environment(shown)
    out += [f"Raw data: `{os.path.relpath(results / 'summary.csv', markdown.parent)}` (one row per step) and the "
            "JSON files beside it.", ""]
    appendix = ["# Results: every step", "",
                f"The step tables behind [{markdown.name}]({markdown.name}), per scenario.", "",
                *(line for section in sections for line in section.appendix)]
    return "\n".join(relink(out, chart_dir, markdown)), "\n".join(relink(appendix, chart_dir, appendix_path)), shown


def write(results: Path | None = None, markdown: Path | None = None) -> None:
    results = results or ROOT / "results"
    markdown = markdown or ROOT / "RESULTS.md"
    markdown.parent.mkdir(parents=True, exist_ok=True)
    appendix_path = markdown.with_name(markdown.stem + "-appendix.md")
    chart_dir = results / "charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    for old in list(chart_dir.glob("*.png")) + list(chart_dir.glob("yours/*.png")):
        old.unlink()
    text, appendix, shown = render(results, markdown, appendix_path, chart_dir)
    if not shown:
        markdown.write_text("# Results\n\nNo results yet: run `just bench NAME` or `just bench all`.\n")
        print(f"report: no results in {results}; wrote an empty {markdown.name}")
        return
    markdown.write_text(text)
    appendix_path.write_text(appendix)
    write_csv(shown, results / "summary.csv")
    print(f"report: {markdown} and {appendix_path.name} from "
          + "; ".join(f"{name} run {', '.join(rs.run_ids)}" for name, rs in shown.items()) + f"; charts in {chart_dir}")


"""Which records a table shows: one run set, never a mix (docs/method.md, "Published and your own runs"). Per unit (a label, at one pool
where a scenario runs a JVM per pool) its newest run with the newest record's fingerprint (code, settings but
UNIT_CHOICES, machine). The CPU model string does not identify a machine (two VMs with the same string differed 3x
here), so the set's calibrations are compared too: a difference is a warning printed above the table."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from . import schema

MACHINE_KEYS = ("cpu_model", "cores", "ram_gib", "kernel")
SOFTWARE_KEYS = ("jdk", "db", "db_location", "mode", "git_commit", "cpus", "jvm_options", "pool_size", "quick")
BASELINE = "baseline"
# Per bench.toml section, the settings that choose which units a run measures, not how any unit is measured: slow-db
# runs a JVM per pool; pinning a fresh JVM per (latency, port, runtime), so a part may run some latencies (each with
# its common rate, which the record keeps) or some runtimes, and join the others
UNIT_CHOICES = {"slow-db": ("pool_sizes",),
                "pinning": ("latencies_ms", "common_rates", "reference_latencies_ms", "runtimes")}


def load(folder: Path) -> list[dict]:
    """Every run record under `folder` (<run_id>/<file>.json), oldest first."""
    records = []
    for path in sorted(folder.glob("*/*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and "port" in record and "run_id" in record:
            records += schema.normalize(record)
    return records


def mode_of(record: dict) -> str:
    """Where the run's processes ran: "local" (the host) or "compose" (containers, BENCH_ENV=compose)."""
    return record.get("environment", {}).get("mode", "local")


def scenario_of(record: dict) -> str:
    return record.get("scenario") or BASELINE


def label(record: dict) -> str:
    """The port's name, with the framework settings a run was given (the defaults have none)."""
    return record["port"] + "".join(f" + `{k}={v}`" for k, v in (record.get("framework_overrides") or {}).items())


def port_of(label_: str) -> str:
    """The port a label names (a label with framework settings is "port + `K=V`")."""
    return label_.split(" + ")[0]


def settings_of(label_: str) -> list[str]:
    """The names of the framework settings a label carries ("port + `K=V`" -> ["K"]; the defaults: [])."""
    return [part.strip("`").split("=", 1)[0] for part in label_.split(" + ")[1:]]


def split_remedies(by_label: dict) -> tuple[dict, dict]:
    """A run set's labels at their defaults, and the remedy runs (labels with framework settings)."""
    return ({lab: v for lab, v in by_label.items() if lab == port_of(lab)},
            {lab: v for lab, v in by_label.items() if lab != port_of(lab)})


def pool_of(record: dict) -> int | None:
    """The pool size a record's JVM ran with where a scenario runs a JVM per pool (its coordinate in the one
    schema), else the one a record noted."""
    return (record.get("jvm") or {}).get("pool_size", record.get("pool_size"))


def unit(record: dict) -> tuple:
    """What one run measures once per iteration: a label, at one pool size where the scenario runs a JVM per pool,
    and at its JVM's other coordinates (pinning's latency and runtime) where a run may choose among them."""
    if scenario_of(record) not in UNIT_CHOICES:
        return label(record), pool_of(record)
    return label(record), pool_of(record), *sorted((k, v) for k, v in (record.get("jvm") or {}).items()
                                                   if k != "pool_size")


def same_as(code: str, scenario: str, same_code: dict | None) -> str:
    """The commit whose measurement `code`'s runs of `scenario` repeat exactly: an entry of same_code (a commit, or
    {scenario: commit} where the commits between changed other scenarios' measurement), else `code` itself."""
    same = (same_code or {}).get(code, code)
    return same.get(scenario, code) if isinstance(same, dict) else same


def fingerprint(record: dict, same_code: dict | None = None) -> str:
    """What must be equal for two runs to share a table: machine, software, code, settings, generator, scenario.
    `same_code` maps a code commit to another whose measurement it repeats exactly (results/same-measurement.json:
    commits that changed only judging or report code, or only other scenarios, the trace fixtures unchanged)."""
    env = record.get("environment", {})
    generator = env.get("generator", "").split(",")[0].split(" (")[0]
    if "code_commit" in env:       # the code measured, not the commit of the results beside it
        env = {**env, "git_commit": same_as(env["code_commit"], scenario_of(record), same_code)}
    settings = env.get("settings")
    if isinstance(settings, dict):
        settings = {section: {k: v for k, v in values.items() if k not in UNIT_CHOICES.get(section, ())}
                    if isinstance(values, dict) else values for section, values in settings.items()}
    return json.dumps([env.get(k) for k in MACHINE_KEYS + SOFTWARE_KEYS] + [settings, generator, scenario_of(record)],
                      sort_keys=True)


@dataclasses.dataclass
class RunSet:
    scenario: str
    by_label: dict[str, list[dict]]      # label -> that run's records (iterations, or one record per run)
    outside: list[dict]
    warnings: list[str]
    apart: set[frozenset[str]] = dataclasses.field(default_factory=set)   # pairs of runs on different machine states

    @property
    def records(self) -> list[dict]:
        return [r for rs in self.by_label.values() for r in rs]

    @property
    def run_ids(self) -> list[str]:
        return sorted({r["run_id"] for r in self.records})

    @property
    def environment(self) -> dict:
        return self.records[0].get("environment", {}) if self.records else {}

    @property
    def calibration(self) -> dict | None:
        return self.first("calibration")

    @property
    def calibrations(self) -> dict[str, dict]:
        """One calibration per run, its first record's (a label's units may come from several runs), in set order."""
        first: dict[str, dict] = {}
        for r in self.records:
            if r.get("calibration"):
                first.setdefault(r["run_id"], r["calibration"])
        return first

    @property
    def iterations(self) -> str:
        """Iterations per unit: "3", or "2–3" where they differ (a unit's iteration counted once however many runs
        its label's units came from)."""
        per_unit: dict[tuple, set] = {}
        for r in self.records:
            per_unit.setdefault(unit(r), set()).add((r["run_id"], r.get("iteration")))
        return "–".join(map(str, sorted({len(runs) for runs in per_unit.values()})))

    def same_state(self, a: str, b: str) -> bool:
        """Whether two labels' absolute figures (rates, µs) may be compared: no run of one read another machine state
        than a run of the other (a ratio to a reference in the same run may be compared across states)."""
        runs = [{r["run_id"] for r in self.by_label.get(lab, [])} for lab in (a, b)]
        return not any(frozenset({x, y}) in self.apart for x in runs[0] for y in runs[1])

    def first(self, key: str, default=None):
        """The first record's `key` that is set."""
        return next((r[key] for r in self.records if r.get(key) is not None), default)

    @property
    def plan(self) -> dict:
        """The scenario's own bench.toml section the run set was measured with."""
        return self.settings(self.scenario)

    def settings(self, section: str) -> dict:
        """A section of the bench.toml settings the run set was measured with ({} when absent)."""
        return (self.environment.get("settings") or {}).get(section) or {}

    def __bool__(self) -> bool:
        return bool(self.by_label)


def ordered(labels, order: list[str] | None = None) -> list[str]:
    """Labels in the ports' order (`order`: port names), each port's defaults before its settings; others last."""
    order = order or []
    return sorted(labels, key=lambda lab: (order.index(port_of(lab)) if port_of(lab) in order else len(order), lab))


def select(records: list[dict], scenario: str = BASELINE, order: list[str] | None = None,
           differences=None, same_code: dict | None = None, join: bool = False) -> RunSet:
    """`differences(cal_a, cal_b) -> list[str]` compares two calibrations (harness.calibrate.differences);
    `same_code`: see fingerprint. `join`: a unit measured in several of the runs keeps all of them (a published set
    names its runs: a set run in parts repeats the reference in each part, so each part is judged against its own),
    else only its newest run (a re-run replaces what it repeats)."""
    mine = [r for r in records if scenario_of(r) == scenario]
    if not mine:
        return RunSet(scenario, {}, [], [])
    newest = max(mine, key=lambda r: r["run_id"])
    key = fingerprint(newest, same_code)
    chosen: dict[tuple, set[str]] = {}
    for r in mine:
        if fingerprint(r, same_code) != key:
            continue
        runs = chosen.setdefault(unit(r), set())
        if join:
            runs.add(r["run_id"])
        elif r["run_id"] > max(runs, default=""):
            chosen[unit(r)] = {r["run_id"]}
    labels = ordered({u[0] for u in chosen}, order)
    by_label = {lab: sorted((r for r in mine if label(r) == lab and r["run_id"] in chosen.get(unit(r), ())),
                            key=lambda r: (pool_of(r) or 0, r["run_id"], r.get("iteration", 1)))
                for lab in labels}
    inside = {id(r) for rs in by_label.values() for r in rs}
    rs = RunSet(scenario, by_label, [r for r in mine if id(r) not in inside], [])
    if differences:
        cals = list(rs.calibrations.items())
        for run_id, cal in cals[1:]:                                              # each run against the first
            sentences = differences(cal, cals[0][1])
            rs.warnings += [f"run {run_id} against run {cals[0][0]}: {sentence}" for sentence in sentences]
            if sentences:
                rs.apart.add(frozenset({run_id, cals[0][0]}))
        missing = sorted({r["run_id"] for r in rs.records if not r.get("calibration")})
        if missing and cals:
            rs.warnings.append(f"run(s) {', '.join(missing)} carry no calibration: the machine cannot be checked")
    return rs

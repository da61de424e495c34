"""One run of one scenario: the database up (local, external or compose), the token pool, the ports built, the
machine calibrated, the environment captured; a Context that every scenario measures through. Its records go to
results/<scenario>/<run_id>/<port>[-<n>].json, rewritten after every step (an interrupted run keeps what finished)."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import statistics
from pathlib import Path
from typing import Iterator

from . import calibrate, compose, db, envinfo, loadgen, ports, settings as settings_mod, tokens
from .errors import Fatal
from .method import plan as plan_mod
from .method import runset
from .method.record import FINE, TENTHS, confirmed, mst_of, round_rate
from .method.rule import Rule
from .method.search import SearchPlan
from .method.warmup import WarmupPlan
from .paths import BUILD, ROOT
from .target import Target, correctness_check, save, start_port, target_url
from .db import LocalDatabase

FRAMEWORK_ENV_PREFIXES = ("QUARKUS_", "SPRING_", "SERVER_")
# quarkus-vertx's own bench.downstream.pool-size; JVM flags given through the JVM's own variable (e.g. Reactor
# Netty's -Dreactor.netty.ioWorkerCount, a system property only)
FRAMEWORK_ENV_NAMES = ("BENCH_DOWNSTREAM_POOL_SIZE", "JAVA_TOOL_OPTIONS")


def output_paths(settings: dict) -> tuple[Path, Path]:
    """Where raw results and the report go: a QUICK smoke run never replaces real results."""
    if os.environ.get("BENCH_RESULTS") or settings["quick"]:
        results = Path(os.environ.get("BENCH_RESULTS") or BUILD / "quick")
        return results, results / "RESULTS.md"
    return ROOT / "results", ROOT / "RESULTS.md"


def framework_overrides(env=os.environ) -> dict[str, str]:
    """Framework settings given as environment variables (e.g. a documented remedy): recorded, shown apart."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(FRAMEWORK_ENV_PREFIXES) or k in FRAMEWORK_ENV_NAMES}


def rotation(items: list, iteration: int) -> list:
    """Iteration i starts one item later than iteration i-1 (interleaved: no port always runs first or last)."""
    shift = (iteration - 1) % (len(items) or 1)
    return items[shift:] + items[:shift]


def rounds(items, iterations: int):
    """(iteration, item) over `iterations` rounds of the items, each round rotated."""
    for iteration in range(1, iterations + 1):
        for item in rotation(list(items), iteration):
            yield iteration, item


@dataclasses.dataclass
class Context:
    scenario: str
    settings: dict
    rule: Rule
    search: SearchPlan
    warmup: WarmupPlan
    gen: loadgen.OpenModel
    closed_gen: loadgen.ClosedLoop | None
    env: dict
    calibration: dict | None
    run_id: str
    results: Path                 # results/ (or BENCH_RESULTS, or build/quick for QUICK=1)

    @property
    def grid(self) -> str:
        """The rate grid a search tries its rates on: whole req/s only where the generator takes no fraction."""
        return FINE if self.gen is not None and self.gen.whole_rates else TENTHS

    @property
    def out_dir(self) -> Path:
        return self.results / self.scenario / self.run_id

    def path(self, port: ports.Port, suffix: str = "") -> Path:
        return self.out_dir / f"{port.name}{suffix}.json"

    def plan(self, plan_type: type, **derived):
        """This scenario's bench.toml section as its plan dataclass."""
        return plan_mod.section(self.settings, self.scenario, plan_type, **derived)

    def new_record(self, port: ports.Port, iteration: int, **fields) -> dict:
        return {"port": port.name, "scenario": self.scenario, "run_id": self.run_id, "iteration": iteration,
                "status": "partial", "environment": self.env, "calibration": self.calibration,
                "framework_overrides": framework_overrides(), **fields}

    def save(self, record: dict, path: Path) -> None:
        save(record, path)

    def say(self, tag: str, text: str) -> None:
        print(f"[{self.scenario} {tag}] {text}", flush=True)

    def capacity(self, target: Target, record: dict, path: Path, phase: str, seconds: float, say,
                 step_phase: str | None = None) -> float:
        """A closed-loop probe at the load's connections, kept as record["capacity"][phase] (its step's phase:
        `step_phase`, else capacity-<phase>): its rate."""
        connections = self.settings["load"]["connections"]
        probe = target.closed(connections, seconds, phase=step_phase or f"capacity-{phase}")
        record["capacity"][phase] = probe.to_json(histogram=False)
        self.save(record, path)
        say(f"{phase} capacity (closed loop, {connections} connections): {probe.achieved_rps:,.0f}/s")
        return probe.achieved_rps

    @contextlib.contextmanager
    def port(self, port: ports.Port, extra_env: dict | None = None,
             variant: ports.Variant | None = None) -> Iterator[tuple[object, Target]]:
        """The port on a fresh JVM (`variant`: another JDK and jar), rows checked, as a Target; stopped after."""
        pool = tokens.load()
        running = start_port(port, self.settings, pool[0], extra_env=extra_env, variant=variant)
        try:
            url = target_url(running, self.settings)
            correctness_check(url, pool, self.settings["load"]["check_tokens"])
            in_compose = compose.enabled()
            yield running, Target(url, running.pid, compose.db_pid() if in_compose else db.server_pid(), self.gen,
                                  self.closed_gen, self.settings, self.rule, log=running.log,
                                  sides={"docker_proxy": compose.proxy_cpu_seconds} if in_compose else {})
        finally:
            running.stop()


def baseline_msts(results: Path) -> dict[str, int]:
    """Median confirmed, bounded MST per port in the newest baseline run set under `results` that searched (runs in
    containers only for a run in containers; a run of the ladder alone, e.g. the separate-cores one, has no MST), to
    scale a scenario's rates by: {} when there is none."""
    records = [r for r in runset.load(results / runset.BASELINE) if mst_of(r) is not None]
    of_mode = lambda m: [r for r in records if runset.mode_of(r) == m]  # noqa: E731
    rs = runset.select(of_mode(os.environ.get("BENCH_ENV", "local")) or of_mode("local"), runset.BASELINE)
    found = {name: [m.rps for m in confirmed(map(mst_of, records)) if m.bounded]
             for name, records in rs.by_label.items()}
    return {name: int(statistics.median(rps)) for name, rps in found.items() if rps}


def choose_rate(cap: int, fraction: float, msts: dict[str, int]) -> tuple[int, str]:
    """A rate every port sustains: min(cap, fraction x the lowest baseline MST), and how it was chosen."""
    if not msts:
        return cap, "the fixed cap (no baseline MSTs in the results)"
    lowest = min(msts, key=msts.get)
    share = f"{fraction:.0%} of the lowest baseline MST"
    scaled = round_rate(fraction * msts[lowest])
    if scaled >= cap:
        return cap, f"the fixed cap ({share}, {lowest}'s {msts[lowest]:,}/s, is higher)"
    return scaled, f"{share} ({lowest}: {msts[lowest]:,}/s)"


@contextlib.contextmanager
def session(scenario: str, selected: list[ports.Port]) -> Iterator[Context]:
    """Everything a scenario's run needs, torn down on the way out (the database only if this run started it)."""
    settings = settings_mod.load()
    load = settings["load"]
    gen = loadgen.open_model(threads=load["generator_threads"], max_lag_ms=load["generator_max_lag_ms"],
                             arrivals=settings_mod.arrivals(settings, scenario))
    closed_gen = loadgen.closed_loop()
    results, _ = output_paths(settings)
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if compose.enabled():
        database = compose.Stack(settings)          # MySQL in compose, seeded by its db-seed service
    elif db.is_external():
        database = contextlib.nullcontext()
        db.seed()
    else:
        database = LocalDatabase(settings["cpus"]["db"])
    with database:
        tokens.ensure()
        if os.environ.get("BENCH_APP") != "external":
            ports.build(selected)
        env = envinfo.capture(settings, gen, closed_gen, scenario)
        print(f"{scenario}: calibrating the machine (database ceiling, CPU, wake-ups, loopback, generator)", flush=True)
        calibration = calibrate.measure(settings, say=lambda text: print(text, flush=True))
        ctx = Context(scenario, settings, Rule.from_settings(settings),
                      plan_mod.section(settings, "search", SearchPlan),
                      plan_mod.section(settings, "warmup", WarmupPlan),
                      gen, closed_gen, env, calibration, run_id, results)
        out = ctx.out_dir.relative_to(ROOT) if ctx.out_dir.is_relative_to(ROOT) else ctx.out_dir
        print(f"{scenario}: {len(selected)} port(s) with {gen.describe()}; results in {out}/", flush=True)
        yield ctx


def require(condition: bool, message: str) -> None:
    if not condition:
        raise Fatal(message)

"""What every scenario shares: the run's context (settings, generator, environment, where results go), a port
started with extra environment and measured like the baseline, and the baseline's MSTs to scale rates by."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import statistics
import time
from pathlib import Path
from typing import Iterator

import requests

from .. import bench, db, envinfo, loadgen, ports, report, settings as settings_mod, tokens
from ..errors import Fatal
from ..paths import ROOT
from ..verify import LocalDatabase

SEQUENTIAL_REQUESTS = 15


@dataclasses.dataclass
class Context:
    scenario: str
    settings: dict
    gen: loadgen.Openloop         # scenarios use openloop's extras (intervals, idle connections, token files)
    closed_gen: loadgen.ClosedLoop | None
    env: dict
    run_id: str
    results: Path                 # results/ (or BENCH_RESULTS / build/quick for QUICK=1)

    @property
    def out_dir(self) -> Path:
        return self.results / self.scenario / self.run_id

    def path(self, port: ports.Port, suffix: str = "") -> Path:
        return self.out_dir / f"{port.name}{suffix}.json"

    def new_record(self, port: ports.Port, **fields) -> dict:
        return {"port": port.name, "scenario": self.scenario, "run_id": self.run_id, "status": "partial",
                "environment": self.env, "framework_overrides": framework_overrides(), **fields}

    def save(self, record: dict, path: Path) -> None:
        bench.save(record, path)

    @contextlib.contextmanager
    def port(self, port: ports.Port, extra_env: dict | None = None,
             variant: ports.Variant | None = None) -> Iterator[tuple[ports.Running, bench.Target]]:
        """The port on a fresh JVM (with `extra_env`, e.g. DB_PORT of a proxy or DB_POOL_SIZE; `variant`: another
        JDK and jar), rows checked, as a Target that measures steps exactly as the baseline does; stopped on the way out."""
        pool = tokens.load()
        running = ports.start(port, self.settings, pool[0], extra_env=extra_env, variant=variant)
        try:
            url = bench.target_url(running, self.settings)
            bench.correctness_check(url, pool, self.settings["load"]["check_tokens"])
            yield running, bench.Target(url, running.pid, db.server_pid(), self.gen, self.closed_gen, self.settings)
        finally:
            running.stop()


FRAMEWORK_ENV_PREFIXES = ("QUARKUS_", "SPRING_", "SERVER_")


def framework_overrides(env=os.environ) -> dict[str, str]:
    """Framework settings given as environment variables for this run (e.g. a documented remedy such as
    QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true): recorded, so such a run is shown apart from the defaults."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(FRAMEWORK_ENV_PREFIXES)}


def label(record: dict) -> str:
    """The port's name, with the framework overrides a run had (the defaults have none)."""
    overrides = record.get("framework_overrides") or {}
    return record["port"] + "".join(f" + `{k}={v}`" for k, v in overrides.items())


def baseline_msts(results: Path | None = None) -> dict[str, int]:
    """Median MST per port in the report's current run set (what RESULTS.md shows), to scale scenario rates."""
    results = results or ROOT / "results"
    runs, _ = report.run_set(report.load_records(results))
    return {name: int(statistics.median(p.msts())) for name, p in runs.items() if p.msts()}


@contextlib.contextmanager
def session(scenario: str, selected: list[ports.Port]) -> Iterator[Context]:
    """The local DB (started and stopped like bench does), the token pool, the ports built, the environment
    captured; the report rewritten at the end, also after Ctrl-C, so what finished is kept and shown."""
    settings = settings_mod.load()
    load = settings["load"]
    gen = loadgen.openloop(threads=load["generator_threads"], max_lag_ms=load["generator_max_lag_ms"])
    results, markdown = bench.output_paths(settings)
    run_id = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    database = contextlib.nullcontext() if db.is_external() else LocalDatabase(settings["cpus"]["db"])
    with database:
        if db.is_external():
            db.seed()
        tokens.ensure()
        ports.build(selected)
        env = envinfo.capture(settings, gen, loadgen.closed_loop())
        env["scenario"] = scenario
        ctx = Context(scenario, settings, gen, loadgen.closed_loop(), env, run_id, results)
        print(f"{scenario}: {len(selected)} port(s); results in {_rel(ctx.out_dir)}/", flush=True)
        try:
            yield ctx
        finally:
            report.write(results, markdown)


def load_runs(results: Path) -> list[dict]:
    """Every record of one scenario (results/<scenario>/<run_id>/*.json), oldest first."""
    records = []
    for path in sorted(results.glob("*/*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return records


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(name: str, selected: list[ports.Port]) -> None:
    from . import select
    scenario = select(name)
    if scenario is None:
        raise Fatal("no scenario given")
    module = scenario.load()
    # a scenario that applies to some ports only narrows the selection (or refuses it) before anything starts
    if hasattr(module, "ports_for"):
        selected = module.ports_for(selected)
    with session(scenario.name, selected) as ctx:
        module.run(ctx, selected)


# --- a request alone: its database round trips --------------------------------------------------------------
def sequential_ms(url: str, token: str, count: int = SEQUENTIAL_REQUESTS) -> float:
    """Median time of one request alone (keep-alive, one after another): its database round trips show."""
    times = []
    with requests.Session() as http:
        for _ in range(count + 1):
            began = time.perf_counter()
            r = http.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            if r.status_code != 200:
                raise Fatal(f"{url} answered {r.status_code} through the proxy: {r.text[:200]!r}")
            times.append((time.perf_counter() - began) * 1000)
    return round(statistics.median(times[1:]), 3)


def slo_ms(base_ms: float, queries: int, latency_ms: float, round_trips: int) -> float:
    """The p99 a step must stay under with `queries` lookups per request at this database latency (slow-db and
    queries alike): the baseline's SLO plus the database waits an idle port already shows at p99, `round_trips` per
    lookup (a request alone takes one; HikariCP's ping of a connection idle for over 500 ms and r2dbc-mysql's
    COM_PING on release make it two)."""
    return base_ms + round_trips * queries * latency_ms


def round_trips(alone_ms: float, at_zero_ms: float, latency_ms: float) -> int:
    """Database round trips per request, from one request alone at this latency and at 0 ms. Noise only adds time
    (a JIT pause, a pool's ping of an idle connection), so a count is rounded up from .75 on, not .5: measured
    here, a one-round-trip port read 1.55 at 5 ms in a young JVM, spring-webflux's two read 2.08."""
    return max(1, int((alone_ms - at_zero_ms) / latency_ms + 0.25))

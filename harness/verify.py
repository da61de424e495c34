"""`just test`'s per-port part: each port's own framework tests, then the conformance suite over HTTP."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from . import compose, db, downstream, ports, settings as settings_mod, tokens
from .paths import BUILD, ROOT


def run_conformance(port: ports.Port, settings: dict, quiet: bool = False) -> dict:
    """Starts the downstream (GET /feed's nginx, access log on) and the packaged port, runs the suite against
    them, stops both; returns what was measured."""
    pool = tokens.load()
    with downstream.running(0, access_log=True) as ds:
        running = ports.start(port, settings, token=pool[0], extra_env=ds.env())
        try:
            env = dict(os.environ, CONFORMANCE_URL=running.url, CONFORMANCE_PORT=port.name,
                       CONFORMANCE_DOWNSTREAM_PORT=str(ds.port))
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance"]
            passed = subprocess.run(cmd + (["--no-header", "-rN"] if quiet else []), cwd=ROOT, env=env).returncode == 0
        finally:
            running.stop()
    cost_file = BUILD / "conformance" / f"{port.name}.json"
    cost = json.loads(cost_file.read_text()) if passed and cost_file.exists() else {}
    return {"passed": passed, "startup_s": running.startup_seconds, "idle_rss_mb": running.idle_rss_mb, **cost}


def conformance(selected: list[ports.Port]) -> int:
    settings = settings_mod.load()
    with db.LocalDatabase(settings["cpus"]["db"]):
        tokens.ensure()
        ports.build(selected)
        results = {p.name: run_conformance(p, settings) for p in selected}
    return summarize({name: {"conformance": r} for name, r in results.items()})


def all_ports(selected: list[ports.Port]) -> int:
    """Framework tests (mvn verify, which also packages) and conformance, a pass/fail line per port."""
    settings = settings_mod.load()
    outcome: dict[str, dict] = {p.name: {} for p in selected}
    with db.LocalDatabase(settings["cpus"]["db"]):
        tokens.ensure()
        modules: dict[tuple[str, str, str | None], bool] = {}
        for port in selected:
            key = (port.family, port.module, port.maven_profile)     # a profile's jar is its module built again
            if key not in modules:
                print(f"\n== framework tests: {port.family}/{port.module}"
                      + (f" (profile {port.maven_profile})" if port.maven_profile else ""), flush=True)
                modules[key] = ports.maven(port.family, *port.profile_args, "-pl", port.module, "verify",
                                           quiet=False).returncode == 0
            outcome[port.name]["framework_tests"] = modules[key]
        for port in selected:
            print(f"\n== conformance: {port.name}", flush=True)
            if not port.jar_path.exists():
                outcome[port.name]["conformance"] = {"passed": False, "why": "no jar (build failed)"}
                continue
            outcome[port.name]["conformance"] = run_conformance(port, settings)
    return summarize(outcome)


def summarize(outcome: dict[str, dict]) -> int:
    print("\nport                   framework  conformance  statements/req  startup  idle RSS")
    failed = 0
    for name, r in outcome.items():
        c = r.get("conformance", {})
        fw = r.get("framework_tests")
        ok = c.get("passed", False) and fw is not False
        failed += not ok
        stmts = f"{c['statements_per_request']:.2f}" if "statements_per_request" in c else "-"
        startup = f"{c['startup_s']:.1f} s" if c.get("startup_s") else "-"
        rss = f"{c['idle_rss_mb']:.0f} MiB" if c.get("idle_rss_mb") else "-"
        fw_text = "-" if fw is None else ("pass" if fw else "FAIL")
        print(f"{'PASS' if ok else 'FAIL'} {name:<20} {fw_text:<10} {'pass' if c.get('passed') else 'FAIL':<12} "
              f"{stmts:<15} {startup:<8} {rss}")
    print(f"ports: {len(outcome) - failed} passed, {failed} failed")
    return 1 if failed else 0


def compose_suite(quick_port: str = "quarkus-vertx") -> int:
    """`just test`'s compose part: the database and all six ports in containers through Compose (compose.yaml, plus
    compose.offline.yaml where no registry is reachable), the conformance suite against each container (statement
    counting included, on the containers' database), a QUICK bench of one port with BENCH_ENV=compose, then
    everything down, failing if Docker still holds a container, network or volume of the project."""
    settings = settings_mod.load()
    selected = list(ports.PORTS.values())
    tokens.ensure()
    # the containers' database on its own host port, beside a local MariaDB that may be running on 3306
    os.environ["DB_PORT"] = os.environ.get("BENCH_COMPOSE_TEST_DB_PORT", "3316")
    outcome: dict[str, dict] = {}
    try:
        urls = compose.up(selected, settings, access_log=True)  # the conformance suite counts /feed's calls
        compose.use_compose_db()
        bridge = compose.bridge_address()   # where a restarted downstream must listen again for the containers
        for port in selected:
            print(f"\n== conformance in a container: {port.name} ({urls[port.name]})", flush=True)
            env = dict(os.environ, CONFORMANCE_URL=urls[port.name], CONFORMANCE_PORT=f"{port.name}-compose",
                       CONFORMANCE_DOWNSTREAM_PORT=str(downstream.default_port()),
                       CONFORMANCE_DOWNSTREAM_ALSO_ON=bridge)
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance"]
            outcome[port.name] = {"conformance": {"passed": subprocess.run(cmd, cwd=ROOT, env=env).returncode == 0}}
    finally:
        left = compose.down(settings, stop_engine_too=False)
    print(f"\n== QUICK bench of {quick_port} through Compose", flush=True)
    bench = subprocess.run([sys.executable, "-m", "harness", "bench", quick_port, "baseline"], cwd=ROOT,
                           env=dict(os.environ, BENCH_ENV="compose", QUICK="1"))
    left += compose.down(settings)
    failed = summarize(outcome)
    if bench.returncode != 0:
        print(f"FAIL QUICK bench of {quick_port} through Compose (exit {bench.returncode})")
    if left:
        print(f"FAIL Docker still holds the project's {', '.join(left)}")
    return 1 if failed or bench.returncode != 0 or left else 0

"""Command line of the harness; the justfile's recipes are thin calls to these verbs. Each verb imports what only it
needs inside its function: the db-seed image runs `db seed` with its seeding packages alone, and a verb starts
without loading the others."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from . import db, ports, settings as settings_mod, tokens
from .errors import Fatal
from .paths import RESULTS, ROOT


def cmd_db(args):
    {"up": lambda: db.up(settings_mod.load()["cpus"]["db"]), "down": db.down, "seed": db.seed}[args.action]()


def cmd_downstream(args):
    from . import downstream  # lazy: see the docstring
    if args.action == "up":
        ds = downstream.up(float(args.latency_ms), access_log=args.access_log)
        print(f"downstream: nginx on {ds.url} (pid {ds.pid}), latency {args.latency_ms} ms; "
              f"`just downstream-down` stops it", file=sys.stderr)
    else:
        stopped = downstream.down()
        print("downstream: stopped" if stopped else "downstream: was not running", file=sys.stderr)


def cmd_tokens(args):
    tokens.generate() if args.force else tokens.ensure()


def cmd_build(args):
    ports.build(ports.select(args.name), force=args.force)


def cmd_run(args):
    port = ports.select(args.name)[0]
    settings = settings_mod.load()
    http_port = int(os.environ.get("PORT") or settings["load"]["port"])
    db.up(settings["cpus"]["db"])
    ports.build([port])
    print(f"run: {port.name} on http://127.0.0.1:{http_port}/ (Ctrl-C stops it)", file=sys.stderr)
    sys.exit(ports.start(port, settings, token="", http_port=http_port, foreground=True))


def cmd_check(args):
    from . import verify  # lazy: see the docstring
    sys.exit(verify.conformance(ports.select(args.name)))


def cmd_verify(args):
    from . import verify  # lazy: see the docstring
    sys.exit(verify.all_ports(ports.select(args.name)))


def cmd_verify_compose(args):
    from . import verify  # lazy: see the docstring
    sys.exit(verify.compose_suite())


def cmd_compose(args):
    from . import compose  # lazy: see the docstring
    settings = settings_mod.load()
    if args.action == "up":
        if not args.name:
            raise Fatal("compose up needs a port name or all")
        urls = compose.up(ports.select(args.name), settings)
        for name, url in urls.items():
            print(f"compose: {name} on {url}", file=sys.stderr)
        print("compose: the database on 127.0.0.1:" + os.environ.get("DB_PORT", "3306")
              + "; `just compose-down` removes everything", file=sys.stderr)
    else:
        left = compose.down(settings)
        if left:
            raise Fatal(f"Docker still holds the project's {', '.join(left)}: `docker rm -f` them")
        print("compose: the project's containers, networks and volumes are removed", file=sys.stderr)


def cmd_bench(args):
    from . import bench, scenarios  # lazy: see the docstring
    scenario = args.scenario or os.environ.get("SCENARIO") or None
    bench.main(ports.select(args.name, scenarios.select(scenario).name), scenario)


def cmd_profile(args):
    from . import profile  # lazy: see the docstring
    rate, variant = args.rate or None, args.variant or "warm"   # the recipe passes empty strings for its defaults
    if rate is not None and not rate.isdigit():     # `just profile NAME cold`: a variant where the rate goes
        rate, variant = None, rate
    latency, db_latency = (milliseconds(name, value) for name, value in
                           (("LATENCY_MS", args.latency_ms), ("DB_LATENCY_MS", args.db_latency_ms)))
    profile.main(ports.select(args.name)[0], int(rate) if rate else None, variant, args.path or "", latency, db_latency)


def milliseconds(name: str, value: str) -> float:
    try:
        return float(value or 0)
    except ValueError:
        raise Fatal(f"{name} must be a number of milliseconds, not '{value}'") from None


def cmd_eval(args):
    from . import generator_eval  # lazy: see the docstring
    generator_eval.main()


def cmd_calibrate(args):
    import json  # lazy: see the docstring
    from . import calibrate  # lazy: see the docstring
    from .db import LocalDatabase  # lazy: see the docstring
    settings = settings_mod.load()
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    with LocalDatabase(settings["cpus"]["db"]):   # up for the DB ceiling; stopped again if this started it
        tokens.ensure()                            # openloop sends a token per request
        cal = calibrate.measure(settings, say)
    if args.json:
        print(json.dumps(cal, indent=1, ensure_ascii=False))
        return
    from . import report  # lazy: see the docstring
    results = Path(os.environ.get("BENCH_RESULTS") or RESULTS)
    published = {run_id for ids in report.published(results).values() for run_id in ids}
    recorded = calibrate.latest_recorded(run_ids=published)
    name = "published"
    if recorded is None:
        recorded, name = calibrate.latest_recorded(), "newest run"
    other = recorded[1] if recorded else None
    print()
    print("\n".join(calibrate.table(cal, other, f"{name} ({recorded[0].parent.name})" if recorded else "")))
    if recorded is None:
        print("\nNo run record in results/ holds a calibration yet: nothing to compare with.")
        return
    found = calibrate.differences(cal, other)
    where = recorded[0].relative_to(ROOT) if recorded[0].is_relative_to(ROOT) else recorded[0]
    print(f"\nCompared with {where}: " + ("the same machine within noise." if not found else
          "this machine differs; do not put runs from both in one table:"))
    for line in found:
        print(f"- {line}")


def cmd_remedies(args):
    """Each port of bench.toml [remedies] <scenario> again, with the setting its framework's documentation
    recommends for that regime: its own row beside the defaults (a run's framework settings are in its label)."""
    import subprocess  # lazy: see the docstring
    from . import scenarios  # lazy: see the docstring
    scenario = scenarios.select(args.scenario)
    rows = settings_mod.load()["remedies"].get(scenario.name)
    if not rows:
        raise Fatal(f"bench.toml [remedies] names no remedy for {scenario.name}: add a row there")
    for name in args.ports:
        ports.select(name)
        if name not in {row[0] for row in rows}:
            raise Fatal(f"bench.toml [remedies] {scenario.name} has no row for {name}: name one of "
                        f"{', '.join(row[0] for row in rows)}")
    for port, *assignments in (row for row in rows if not args.ports or row[0] in args.ports):
        ports.select(port)
        env = dict(a.split("=", 1) for a in assignments)
        print(f"remedies: {port} with {' '.join(assignments)}", flush=True)
        run = subprocess.run([sys.executable, "-m", "harness", "bench", port, scenario.name], env={**os.environ, **env})
        if run.returncode:
            sys.exit(run.returncode)


def cmd_report(args):
    from . import report  # lazy: see the docstring
    report.write()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="harness", description=__doc__)
    sub = parser.add_subparsers(required=True)
    p = sub.add_parser("db", help="the local database"); p.add_argument("action", choices=["up", "down", "seed"]); p.set_defaults(func=cmd_db)
    p = sub.add_parser("downstream", help="the downstream nginx of GET /feed"); p.add_argument("action", choices=["up", "down"]); p.add_argument("latency_ms", nargs="?", default="0"); p.add_argument("--access-log", action="store_true"); p.set_defaults(func=cmd_downstream)
    p = sub.add_parser("tokens", help="write the token pool"); p.add_argument("--force", action="store_true"); p.set_defaults(func=cmd_tokens)
    p = sub.add_parser("build", help="build ports"); p.add_argument("name", nargs="?", default="all"); p.add_argument("--force", action="store_true"); p.set_defaults(func=cmd_build)
    p = sub.add_parser("run", help="run one port in the foreground"); p.add_argument("name"); p.set_defaults(func=cmd_run)
    p = sub.add_parser("check", help="conformance suite against ports"); p.add_argument("name", nargs="?", default="all"); p.set_defaults(func=cmd_check)
    p = sub.add_parser("verify", help="framework tests + conformance per port"); p.add_argument("name", nargs="?", default="all"); p.set_defaults(func=cmd_verify)
    p = sub.add_parser("verify-compose", help="the database and the six ports through Compose: conformance, a QUICK bench, nothing left"); p.set_defaults(func=cmd_verify_compose)
    p = sub.add_parser("compose", help="the database and ports in containers"); p.add_argument("action", choices=["up", "down"]); p.add_argument("name", nargs="?"); p.set_defaults(func=cmd_compose)
    p = sub.add_parser("bench", help="benchmark ports in a scenario"); p.add_argument("name"); p.add_argument("scenario", nargs="?"); p.set_defaults(func=cmd_bench)
    p = sub.add_parser("remedies", help="the documented remedy of each port in a scenario, as rows of their own"); p.add_argument("scenario"); p.add_argument("ports", nargs="*"); p.set_defaults(func=cmd_remedies)
    p = sub.add_parser("profile", help="CPU profile of one port at a constant rate"); p.add_argument("name"); p.add_argument("rate", nargs="?"); p.add_argument("variant", nargs="?", default="warm"); p.add_argument("path", nargs="?", default=""); p.add_argument("latency_ms", nargs="?", default="0"); p.add_argument("db_latency_ms", nargs="?", default="0"); p.set_defaults(func=cmd_profile)
    p = sub.add_parser("eval-generators", help="measure the load generator candidates"); p.set_defaults(func=cmd_eval)
    p = sub.add_parser("calibrate", help="measure this machine (under a minute) and compare with the published run")
    p.add_argument("--json", action="store_true", help="print the calibration record as JSON"); p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("report", help="write RESULTS.md from results/"); p.set_defaults(func=cmd_report)
    args = parser.parse_args(argv)
    # SIGTERM (e.g. from CI's timeout) unwinds like Ctrl-C, so every started process is stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        args.func(args)
    except Fatal as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted: stopped what this run started", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()

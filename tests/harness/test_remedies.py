"""`just remedies SCENARIO`: each port of bench.toml [remedies] again, with its framework's documented setting in its
environment, as a bench run of its own."""
import subprocess

import pytest

from harness import __main__ as cli, settings as settings_mod
from harness.paths import ROOT


def test_every_remedy_names_a_port_and_framework_settings_the_run_records():
    from harness.ports import PORTS
    from harness.session import framework_overrides
    remedies = settings_mod.load(env={})["remedies"]
    assert {"downstream", "slow-db", "faults"} <= set(remedies)
    for rows in remedies.values():
        for port, *assignments in rows:
            assert port in PORTS and assignments
            env = dict(a.split("=", 1) for a in assignments)
            assert framework_overrides(env) == env          # recorded, so the run is labelled apart


def test_remedies_run_the_bench_once_per_row_with_the_setting_in_its_environment(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, env: calls.append((cmd[-2:], env)) or
                        subprocess.CompletedProcess(cmd, 0))
    cli.main(["remedies", "slow-db"])
    [(args, env)] = calls
    assert args == ["spring-platform", "slow-db"] and env["SERVER_TOMCAT_THREADS_MAX"] == "400"


def test_a_scenario_without_remedies_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["remedies", "baseline"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == \
        "error: bench.toml [remedies] names no remedy for baseline: add a row there"
    assert "remedies SCENARIO *PORTS: _venv _tools" in (ROOT / "justfile").read_text()


def test_a_port_named_without_a_remedy_row_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["remedies", "slow-db", "quarkus-vertx"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == \
        "error: bench.toml [remedies] slow-db has no row for quarkus-vertx: name one of spring-platform"

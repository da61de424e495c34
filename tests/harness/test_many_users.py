"""Unit tests of the many-users scenario: its own logic, the rule applied to every count, and the Section (table,
decisions, verdict) generated from hand-made records (no server, no load)."""
import ast
import dataclasses
import os
import resource
from pathlib import Path

import pytest

from harness import port_facts, settings as settings_mod
from harness.errors import Fatal
from harness.method import plan as plan_mod
from harness.method import caps, runset, schema
from harness.method.record import Step
from harness.method.rule import GENERATOR, RATE, Rule
from harness.report.sections import many_users as many_users_report
from harness.scenarios import many_users

ROOT = Path(__file__).resolve().parents[2]
RULE = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)


# --- the plan: bench.toml [many-users] is its schema ------------------------------------------------------------

def test_plan_reads_bench_toml_with_three_iterations_and_the_quick_table_over_it():
    full = many_users.checked(plan_mod.section(settings_mod.load(env={}), "many-users", many_users.Plan))
    assert full.iterations >= 3 and full.connections == [1000, 5000, 10000]
    quick = many_users.checked(plan_mod.section(settings_mod.load(env={"QUICK": "1"}), "many-users", many_users.Plan))
    assert quick.iterations == 1 and max(quick.connections) < max(full.connections)


def test_plan_refuses_unknown_keys_and_an_empty_connection_list_and_sorts_the_counts():
    good = {"iterations": 3, "connections": [5000, 1000], "rate_cap": 2000, "mst_fraction": 0.5, "step_seconds": 10,
            "passes": 2, "pause_seconds": 3, "fd_margin": 1000, "cold_probe": False, "drain_after_warmup": False,
            "warm_probe": False, "cell_phases": ["pause"], "between_probes": "none", "probe_seconds": 0,
            "warmup_fraction": 0, "warmup_baseline_fraction": 0, "mst_first_guess": 0}
    assert many_users.checked(plan_mod.section({"many-users": good}, "many-users", many_users.Plan)).connections \
        == [1000, 5000]
    with pytest.raises(Fatal, match="unknown key.*warmup_seconds"):     # now [warmup]'s
        plan_mod.section({"many-users": {**good, "warmup_seconds": 20}}, "many-users", many_users.Plan)
    with pytest.raises(Fatal):
        many_users.checked(plan_mod.section({"many-users": {**good, "connections": []}}, "many-users",
                                            many_users.Plan))


def test_module_imports_only_the_method_and_the_measuring_layer():
    tree = ast.parse((ROOT / "harness/scenarios/many_users.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names |= {base, *(f"{base}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    parts = {part for name in names for part in name.strip(".").split(".")}
    assert parts & {"ports", "method", "session"} == {"ports", "method", "session"}
    # no report code: its part of RESULTS.md is harness/report/sections/many_users.py
    for forbidden in ("bench", "report", "charts", "table", "common", "section", "baseline", "slow_db", "queries",
                      "faults", "pinning"):
        assert forbidden not in parts, forbidden


# --- pure logic --------------------------------------------------------------------------------------------------

def test_rate_is_the_cap_or_a_fraction_of_the_lowest_baseline_mst():
    assert many_users.choose_rate(2000, 0.5, {})[0] == 2000
    rate, basis = many_users.choose_rate(2000, 0.5, {"a": 5000, "b": 2400, "c": 8800})
    assert rate == 1200 and basis == "50% of the lowest baseline MST (b: 2,400/s)"
    assert many_users.choose_rate(2000, 0.5, {"a": 9000})[0] == 2000
    assert many_users.choose_rate(2000, 0.5, {"a": 2470})[0] == 1240          # on the rate grid


def test_each_count_is_held_long_enough_for_every_connection_to_be_used():
    assert many_users.hold_seconds(1000, 1200, 15, 2) == 15
    assert many_users.hold_seconds(10000, 1200, 15, 2) == 17     # 2 x 10,000 / 1,200 = 16.7 -> 17
    assert many_users.hold_seconds(10000, 500, 3, 1) == 20


SS = """\
LISTEN 0      250    127.0.0.1:3306 0.0.0.0:*
LISTEN 3      100            *:18080       *:*
LISTEN 7      4096           *:8080       *:*
LISTEN 0      4096      [::1]:9090      [::]:*
"""


def test_listen_socket_queue_and_backlog_from_ss():
    assert many_users.parse_listen(SS, 8080) == (7, 4096)      # not 18080's line
    assert many_users.parse_listen(SS, 18080) == (3, 100)
    assert many_users.parse_listen(SS, 9090) == (0, 4096)
    assert many_users.parse_listen(SS, 1234) is None


def test_kernel_listen_counters_from_proc_net_netstat():
    text = ("TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPHPHits\nTcpExt: 0 386 390 12\n"
            "IpExt: InNoRoutes\nIpExt: 0\n")
    assert many_users.parse_netstat(text) == {"ListenOverflows": 386, "ListenDrops": 390}
    assert many_users.parse_netstat("") == {}


def test_every_port_has_its_servers_defaults_and_only_tomcat_a_connection_limit():
    from harness.ports import PORTS
    assert {name: many_users_report.server_of(name) for name in PORTS} == {
        "spring-platform": "tomcat", "spring-virtual": "tomcat", "spring-webflux": "netty",
        "quarkus-virtual": "vertx", "quarkus-reactive": "vertx", "quarkus-vertx": "vertx",
        "spring-virtual-jdbc": "tomcat", "spring-virtual-hikari": "tomcat"}
    assert many_users_report.server_of("spring-virtual + `SERVER_TOMCAT_MAXCONNECTIONS=20000`") == "tomcat"
    assert {k: s.max_connections for k, s in port_facts.SERVERS.items()} == {"tomcat": 8192, "netty": None,
                                                                               "vertx": None}


def test_open_files_limit_is_checked_on_the_real_process():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    got = many_users.ensure_app_fds(os.getpid(), min(soft, 64))
    assert got == {"soft": soft, "hard": hard, "raised_by_harness": False}
    if hard != resource.RLIM_INFINITY:
        with pytest.raises(Fatal, match="ulimit -Hn"):
            many_users.ensure_app_fds(os.getpid(), hard + 1)


def test_cpu_set_of_a_taskset_list():
    assert len(caps.cpu_set("0-1")) == 2 and len(caps.cpu_set("0-3,8,10-11")) == 7 and caps.cpu_set(None) == set()
    assert caps.cpu_set("0-1,0-1,4") == {0, 1, 4}


def test_utilisation_names_the_connection_limit_and_counts_the_roles_sharing_the_app_cores():
    s = step(10000, 1330, 10002.0, app=0.3, db=0.1, gen=0.1, fds=8220)
    shared = many_users_report.utilisation(s, "spring-platform", 20000,
                                           {"app": "0-1", "db": "0-1", "generator": "0-1"})
    assert shared == {"connection limit": pytest.approx(10000 / 8192), "CPU": 0.25, "open files": 0.411}
    apart = many_users_report.utilisation(s, "quarkus-vertx", None, {"app": "0-1", "db": "2-3", "generator": "4"})
    assert apart == {"connection limit": None, "CPU": 0.15, "open files": None}


# --- measuring: every count is a step of the one rule --------------------------------------------------------------

class FakeTarget:
    """Target.rate's contract: a Step judged by the rule against slo_ms (the real one does the same)."""

    def __init__(self, achieved):
        self.app_pid, self.calls, self.achieved = os.getpid(), [], achieved

    def rate(self, rate, seconds, phase="step", slo_ms=None, connections=None, url=None, extra=()):
        self.calls.append({"rate": rate, "seconds": seconds, "phase": phase, "slo_ms": slo_ms,
                           "connections": connections})
        s = step(connections, self.achieved, 4.0, target=rate, seconds=seconds, gen=0.2)
        s.phase, s.slo_ms = phase, slo_ms
        s.failure = RULE.failure(target_rps=rate, achieved_rps=s.achieved_rps, errors=s.error_count, p99_ms=s.p99,
                                 generator_behind=False, slo_ms=slo_ms)
        return s


@dataclasses.dataclass
class FakeCtx:
    rule: Rule = RULE


def test_a_count_is_judged_by_the_rule_with_nothing_added_and_watched(monkeypatch):
    monkeypatch.setattr(many_users, "listen_state", lambda port: ((5, 100), 0.01))
    target = FakeTarget(achieved=2000)
    s = many_users.measure(FakeCtx(), target, 1, 5000, 2000, 10)
    assert target.calls == [{"rate": 2000, "seconds": 10, "phase": "connections", "slo_ms": 50.0,
                             "connections": 5000}]
    assert s.passed and s.slo_ms == RULE.slo_ms() == 50.0
    assert s.extra["accept_queue_peak"] == 5 and s.app_threads_peak >= 1
    assert s.extra["watch_ss_cpu_s"] > 0
    # the watch's `ss` runs are taken out of the generator's CPU (0.2 cores x 10 s before)
    assert s.generator_cpu_cores == pytest.approx((2.0 - s.extra["watch_ss_cpu_s"]) / 10, abs=1e-3)

    short = many_users.measure(FakeCtx(), FakeTarget(achieved=1500), 1, 10000, 2000, 10)
    assert short.failure == RATE


# --- the section, from hand-made records ---------------------------------------------------------------------------

ENV = {"generator": "openloop 0.1 (tools/openloop)", "quick": False, "git_commit": "abc", "cores": 2,
       "settings": {"rule": dataclasses.asdict(RULE), "cpus": {"app": "0-1", "db": "0-1", "generator": "0-1"},
                    "load": {"connections": 64}}}


def step(n, achieved, p99, target=2000, seconds=10, app=0.4, db=0.1, gen=0.1, fds=None, errors=None, behind=False):
    s = Step(phase="connections", target_rps=target, achieved_rps=achieved, connections=n, seconds=seconds,
             requests=int(achieved * seconds), errors={"connect": 0, "read": 0, "timeout": 0, **(errors or {})},
             statuses={"200": int(achieved * seconds)}, latency_ms={"p50": 0.4, "p99": p99}, generator="openloop",
             generator_behind=behind, generator_cpu_cores=gen, app_cpu_cores=app, db_cpu_cores=db,
             app_cpu_us_per_request=200.0, app_rss_mb_peak=600.0 + n / 100,
             extra={"connections_opened": n, "app_connections_peak": min(n, 8192), "accept_queue_peak": 0,
                    "app_threads_peak": 40, "app_fds_peak": fds or n + 30, "listen_overflows": {}})
    s.slo_ms = RULE.slo_ms()
    s.failure = RULE.failure(target_rps=target, achieved_rps=achieved, errors=s.error_count, p99_ms=p99,
                             generator_behind=behind, slo_ms=s.slo_ms)
    return s


def record(port, iteration, steps, overrides=None, run_id="20260101T000000Z"):
    """A record as the driver writes it: one cell per connection count, its one step."""
    r = schema.new({"port": port, "scenario": "many-users", "run_id": run_id, "iteration": iteration,
                    "status": "complete", "environment": ENV, "calibration": None,
                    "framework_overrides": overrides or {}},
                   rate=2000, rate_basis="the fixed cap", slo_ms=50.0,
                   plan={"step_seconds": 10, "passes": 2, "connections": [1000, 10000]},
                   system={"somaxconn": 4096, "generator_nofile": {"hard": 20000}}, listen_backlog=100,
                   app_nofile={"soft": 20000})
    r["warmup"] = {"rate": 2000, "settled": True, "seconds": 20.0, "tolerance": 0.05, "windows": []}
    r["cells"] = [schema.cell({"connections": s.connections}, status="complete", steps=[s.to_json(histogram=False)])
                  for s in steps]
    return r


def tomcat_fails(achieved=(1330, 1880)):
    return [record("spring-platform", i + 1, [step(1000, 2000, 4.0), step(10000, a, 10002.0, fds=8220)])
            for i, a in enumerate(achieved)] + \
        [record("quarkus-vertx", i + 1, [step(1000, 2000, 2.0), step(10000, 2000, p99)])
         for i, p99 in enumerate((2.1, 2.6))] + \
        [record("spring-webflux", i + 1, [step(1000, 2000, 4.5), step(10000, 2000, p99)])
         for i, p99 in enumerate((5.3, 7.3))]


def section_of(records, tmp_path):
    from harness import report        # as the report renders it: a row without evidence points at the section
    return report.rendered("many-users", runset.select(records, "many-users", port_facts.order()), tmp_path)


def test_table_shows_the_achieved_rate_and_pass_or_fail_with_the_reason_per_count(tmp_path):
    sec = section_of(tomcat_fails(), tmp_path)
    text = "\n".join(sec.body)
    assert sec.title == "Many concurrent users" and sec.anchor == "many-users"
    assert "**2,000 req/s**" in text and "p99 ≤ 50 ms" in text
    assert "Warm-up until steady ([warmup]): 6 of 6 settled, after 20 s, at 2,000 req/s" in text
    assert "| spring-platform | 1,000 | 2,000 | 0.40 | 4.00 | pass (2/2) |" in text
    row = next(line for line in sec.body if line.startswith("| spring-platform | 10,000 |"))
    assert "| 1,605 (1,330–1,880) |" in row
    assert "**FAIL** (0/2 passed): rate not reached ×2; limited by connection limit (connection limit 1.22" in row
    assert "| quarkus-vertx | 10,000 | 2,000 | 0.40 | 2.35 (2.10–2.60) | pass (2/2) |" in text
    assert (tmp_path / "many-users-p99.png").exists() and (tmp_path / "many-users-rate.png").exists()
    assert "many-users-p99.png" in text and "many-users-rate.png" in text
    appendix = "\n".join(sec.appendix)
    assert "8,192 (`server.tomcat.max-connections`)" in appendix and "**rate not reached**" in appendix


def test_decision_names_the_connection_limit_and_the_ports_that_passed_every_count(tmp_path):
    sec = section_of(tomcat_fails(), tmp_path)
    [d] = sec.decisions
    assert d.regime.startswith("Thousands of keep-alive connections (1,000, 10,000)")
    assert d.decided_by == "the server's connection limit (Tomcat 11 (NIO): 8,192)"
    assert d.choice == ("spring-webflux, quarkus-vertx (passed at every count in every run); lowest p99 at 10,000: "
                        "quarkus-vertx (below every other)")
    assert d.settings == "spring-platform: `SERVER_TOMCAT_MAXCONNECTIONS` above 10,000 (not run here)"
    assert d.evidence == "#many-users"
    assert "spring-platform failed at 10,000 in 2 of 2 run(s) (rate not reached; achieved 1,605 (1,330–1,880) " \
           "of 2,000 req/s, above its server's connection limit of 8,192)" in sec.verdict[0]
    assert sec.verdict[1].startswith("p99 at 10,000 connections runs from 2.35 (2.10–2.60) ms (quarkus-vertx) to "
                                     "10,002 ms (spring-platform)")
    # two ports on the same server past its limit: the setting once, for both
    virtual = [dict(r, port="spring-virtual") for r in tomcat_fails() if r["port"] == "spring-platform"]
    [d] = section_of(tomcat_fails() + virtual, tmp_path).decisions
    assert d.settings == "spring-platform, spring-virtual: `SERVER_TOMCAT_MAXCONNECTIONS` above 10,000 (not run here)"


def test_verdict_and_decision_follow_the_numbers_when_every_port_passes(tmp_path):
    records = tomcat_fails(achieved=(2000, 2000))
    for r in records:       # Tomcat served everyone this time: p99 within the SLO
        for s in (s for c in r["cells"] for s in c["steps"]):
            if s["connections"] == 10000 and r["port"] == "spring-platform":
                s.update(latency_ms={"p50": 0.4, "p99": 9.0}, failure=None, passed=True)
    sec = section_of(records, tmp_path)
    [d] = sec.decisions
    assert d.decided_by == "nothing at these counts: no port reached a limit" and d.settings == "defaults"
    assert d.choice.startswith("spring-platform, spring-webflux, quarkus-vertx (passed")
    assert "8,192" not in sec.verdict[0] and "failed" not in sec.verdict[0]
    assert "9.00 ms (spring-platform)" in sec.verdict[1]


def test_a_remedy_run_that_passed_is_the_setting_to_change(tmp_path):
    fix = {"SERVER_TOMCAT_MAXCONNECTIONS": "20000"}
    records = tomcat_fails() + [record("spring-platform", i, [step(1000, 2000, 4.0), step(10000, 2000, 8.0)], fix,
                                       run_id="20260101T010000Z") for i in (1, 2)]
    sec = section_of(records, tmp_path)
    assert "spring-platform + `SERVER_TOMCAT_MAXCONNECTIONS=20000` (run: passed at every count)" in sec.decisions[0].settings
    assert any(line.startswith("| spring-platform + `SERVER_TOMCAT_MAXCONNECTIONS=20000` | 10,000 | 2,000 |")
               for line in sec.body)


def test_a_generator_that_fell_behind_is_no_verdict_on_the_port(tmp_path):
    """The generator alone failed (behind its schedule while the port served the rate within the SLO): no verdict.
    Behind while the rate was not served, the failure is the port's (blame what failed)."""
    assert step(10000, 1500, 30.0, behind=True).failure == "rate not reached"
    records = [record("quarkus-vertx", 1, [step(1000, 2000, 2.0), step(10000, 2000, 30.0, behind=True)])]
    sec = section_of(records, tmp_path)
    row = next(line for line in sec.body if line.startswith("| quarkus-vertx | 10,000 |"))
    assert f"no verdict: {GENERATOR}" in row
    assert "failed" not in sec.verdict[0] and "no verdict at some count" in sec.verdict[0]
    assert sec.decisions[0].choice.startswith("none")


def test_a_record_of_the_first_method_is_not_read_and_no_set_renders_nothing(tmp_path):
    """The records of the shapes before the one schema were moved into it once: one of those shapes is not read."""
    old = {"port": "spring-virtual", "scenario": "many-users", "run_id": "20251122T102044Z", "iteration": 1,
           "status": "complete", "environment": {"settings": {"connections": 64}}, "steps": []}
    assert schema.normalize(old) == []
    assert many_users_report.render(runset.select([], "many-users"), tmp_path) is None


def test_the_intro_says_how_the_warm_up_went_from_the_records(tmp_path):
    """Every published warm-up started at the rate (1,500), failed its first window and ended lower
    (1,000 or 700): the intro does not say "warmed up at the rate"; where every warm-up stayed at the rate it does."""
    import json
    from harness.paths import ROOT
    records = [r for p in sorted((ROOT / "results" / "many-users" / "20261124T104252Z").glob("*.json"))
               for r in schema.normalize(json.loads(p.read_text()))]            # as runset.load reads them
    intro = section_of(records, tmp_path).body[0]
    assert "warmed up at the rate" not in intro
    assert ("a fresh JVM, warmed up on the [load] connections from the rate down (a failed window lowers it): 18 of 18 "
            "warm-ups ended below the rate, at 1,000 (700–1,000) req/s, then the counts") in intro
    assert "warmed up at the rate on the [load] connections, then" in section_of(tomcat_fails(), tmp_path).body[0]
    lowered = tomcat_fails()
    lowered[0]["warmup"] = {**lowered[0]["warmup"], "rate": 1400}
    assert "1 of 6 warm-ups ended below the rate, at 1,400 req/s" in section_of(lowered, tmp_path).body[0]

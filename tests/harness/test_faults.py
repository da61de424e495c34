"""The faults scenario: its parts against a real port on a real MariaDB (hostile tokens mixed into a constant-rate
stream, a 2-s database freeze the port must ride out without a restart, `db up` working with one call right after
the server was killed), the one rule on 1-s windows, and its report section generated from hand-made records.
The database here is the test's own instance (its own data directory and port), so killing and freezing it
disturbs nothing else."""
import dataclasses
import os
import signal
import time
from contextlib import closing

import pytest
import requests

from harness import db, hostile, loadgen, ports, session, settings as settings_mod, tokens
from harness.method import plan as plan_mod, runset, schema
from harness.method import rule as rule_mod
from harness.method.faults import errors_split, hostile_outcome, valid_rate
from harness.method.rule import ERRORS, GENERATOR, LATENCY, NO_ANSWERS, Rule
from harness.method.search import SearchPlan
from harness.method.timeline import failed_windows, judge_windows, recovery_s
from harness.method.warmup import WarmupPlan
from harness.paths import BUILD
from harness.report.sections import faults as faults_report
from harness.scenarios import faults
from harness.target import Target
from harness.db import LocalDatabase

PORT = "quarkus-vertx"
HTTP_PORT = 18086
DB_PORT = "13306"
RATE = 1000
RULE = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)


# --- against a real port -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def own_db():
    env = pytest.MonkeyPatch()
    env.setenv("DB_PORT", DB_PORT)
    env.setenv("DB_DATADIR", str(BUILD / "faults-test-db"))
    try:
        settings = settings_mod.load(env={"BENCH_LOAD_PORT": str(HTTP_PORT)})
        with LocalDatabase(settings["cpus"]["db"]):
            tokens.ensure()
            yield settings
        db.down()   # the test's own instance: stopped even if an aborted run had left it up
    finally:
        env.undo()


@pytest.fixture(scope="module")
def app(own_db):
    ports.build([ports.PORTS[PORT]])
    running = ports.start(ports.PORTS[PORT], own_db, tokens.load()[0], http_port=HTTP_PORT)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def cases(own_db, app, tmp_path_factory):
    gen = loadgen.openloop()
    gen.run_rate(app.url, RATE, 3, 64, None)  # warm-up
    plan = faults.Plan(iterations=1, normal_fraction=0.5, probe_fraction=0.7, probe_seconds=2, pause_seconds=0,
                       normal_seconds=3, interval_seconds=1, fault_at_seconds=2, freeze_seconds=2, after_seconds=4,
                       overload_factor=2, overload_seconds=1, recover_factor=0.5, recover_seconds=1,
                       overload_connections=64, fresh_fraction=0.1, fresh_connections=64, idle_connections=0, idle_connect_concurrency=256, hostile_fraction=0.1,
                       cases=["normal", "hostile", "flood", "freeze", "restart", "overload"], cold_probe=False,
                       drain_after_warmup=False, warm_probe=False, cell_phases=["pause"], between_probes="none",
                       step_seconds=0, warmup_fraction=0, warmup_baseline_fraction=0, mst_first_guess=0)
    rule = Rule.from_settings(own_db)
    ctx = session.Context("faults", own_db, rule, plan_mod.section(own_db, "search", SearchPlan),
                          plan_mod.section(own_db, "warmup", WarmupPlan), gen, None, {}, None, "test",
                          tmp_path_factory.mktemp("faults"))
    target = Target(app.url, app.pid, db.server_pid(), gen, None, own_db, rule)
    return faults.Cases(ctx, plan, target, tokens.load()[0], RATE, 2 * RATE)


def accounted(step: dict, rate: float, seconds: float) -> bool:
    """Every scheduled request was answered (any status) or counted as a failure of one kind."""
    failed = sum(n for kind, n in step["errors"].items() if kind != "non_2xx")
    return step["requests"] + failed == int(rate * seconds)


def test_hostile_tokens_under_load_get_401_or_404_never_5xx(cases):
    r = cases.hostile()
    s, step = r["summary"], r["step"]
    mix = step["mix"]
    assert s["hostile_sent"] > 100 and s["hostile_unexpected"] == 0 and s["hostile_5xx"] == 0, s["by_case"]
    assert s["hostile_as_expected"] == s["hostile_sent"]
    assert set(mix["statuses"]) <= {"401", "404"}
    # each hostile line got exactly its expected status, whenever it was sent
    for case, want, got in zip(r["cases"], r["expected_statuses"], mix["statuses_by_line"]):
        assert set(got) <= {str(want)}, (case, got)
    assert step["statuses"] == {"200": step["requests"]}, "valid requests are counted apart"
    assert mix["completed"] + step["requests"] == RATE * 3
    # every window judged by the rule, against the rule's SLO
    # every complete window of the schedule judged (openloop reports none for the schedule's last second)
    assert s["windows"] == len(step["intervals"]) >= 2 and all("failure" in w for w in step["intervals"])
    assert step["slo_ms"] == cases.ctx.rule.slo_ms() and s["slo_ms"] == cases.ctx.rule.slo_ms()


def test_a_port_rides_out_a_database_freeze_without_a_restart(cases, app):
    r = cases.db_fault("freeze")
    s, step = r["summary"], r["step"]
    assert 1.9 <= s["fault_s"] < 3, s
    assert s["answers_after"] and s["same_jvm"], s
    assert app.process.poll() is None and app.pid == cases.target.app_pid
    assert cases.target.count_statements, "statement counting is back on after the fault"
    assert accounted(step, RATE, 8), (step["requests"], step["errors"])
    # the requests due during the freeze waited for it (the open model charges them): the whole step fails the rule
    assert s["max_ms"] > 1000 and step["failure"] is not None, s
    assert sum(w["completed"] for w in step["intervals"]) <= step["requests"]
    assert s["errors_during"] + s["errors_after"] == sum(w["errors"] + w["non_2xx"] for w in step["intervals"])
    # the window that holds the freeze's end fails, so recovery (if any) is counted after it
    assert s["failed_windows"] >= 1
    if s["recovery_s"] is not None:
        assert 0 <= s["recovery_s"] <= s["observed_after_s"]
    # recovery is judged on fresh requests only: a probe whose first request was due after the database was back
    fresh = r["fresh"]
    assert fresh["after_fault_s"] >= faults.FRESH_LEAD_S - 0.05 and fresh["rate"] == faults.MIN_RATE
    assert fresh["step"]["phase"] == "freeze-fresh" and fresh["step"]["requests"] > 0
    assert fresh["windows"] and all("failure" in w for w in fresh["windows"])
    assert s["recovery_judged_on"].startswith("fresh requests") and "recovery_all_s" in s
    with closing(db.connect()) as conn, conn.cursor() as cur:   # the DB was resumed
        cur.execute("SELECT 1")


def test_overload_sends_nothing_after_its_schedule(cases):
    """The 2x run drops what it still holds at its schedule's end (counted among its errors), so the 0.5x run, on
    which recovery is judged, meets only what the port itself still owes."""
    r = cases.overload()
    high, s = r["high"], r["summary"]
    assert high["unsent_at_end"] == s["unsent_high"] >= 0
    assert high["errors"]["timeout"] >= s["unsent_high"]
    assert accounted(high, 2 * 2 * RATE, 1), (high["requests"], high["errors"])
    assert s["recovery_judged_on"].startswith("the 0.5x run")


def test_db_up_works_with_one_call_right_after_a_kill_and_the_port_reconnects(own_db, app):
    pid = db.server_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    db.up(own_db["cpus"]["db"])   # one call: no "unreachable" while the killed server is still going away
    new = db.server_pid()
    assert new is not None and new != pid
    with closing(db.connect()) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM users")
        assert cur.fetchone()[0] == db.USER_COUNT
    # the port's pool finds its connections dead and reconnects by itself: 200s again, same JVM
    token = tokens.load()[1]
    deadline, status = time.monotonic() + 30, None
    while time.monotonic() < deadline and status != 200:
        try:
            status = requests.get(app.url, headers={"Authorization": f"Bearer {token}"}, timeout=5).status_code
        except requests.RequestException:
            pass
        time.sleep(0.2)
    assert status == 200 and app.process.poll() is None


# --- the one rule on 1-s windows --------------------------------------------------------------------------------

def windows(rows):
    """(t_s, completed, p99_ms[, errors[, non_2xx]])"""
    return [{"t_s": w[0], "completed": w[1], "p99_ms": w[2], "errors": w[3] if len(w) > 3 else 0,
             "non_2xx": w[4] if len(w) > 4 else 0} for w in rows]


def test_each_window_is_judged_by_the_one_rule():
    judged = judge_windows(windows([(1, 100, 1.0), (2, 98, 1.0), (3, 0, 0.0), (4, 100, 51.0),
                                           (5, 100, 1.0, 1), (6, 100, 1.0, 0, 2), (7, 100, 50.0), (8, 3, 900.0)]),
                                  rate=100, interval_s=1, rule=RULE, slo_ms=RULE.slo_ms(), until_s=7)
    assert [w["failure"] for w in judged] == [None, rule_mod.RATE, NO_ANSWERS, LATENCY, ERRORS, ERRORS, None]
    # a window after the schedule's end only drains: not judged
    assert len(judged) == 7
    # the same window against another SLO: the bar is the caller's slo_ms, nothing else
    assert judge_windows(windows([(1, 100, 51.0)]), 100, 1, RULE, 60.0, 1)[0]["failure"] is None


@pytest.mark.parametrize("rows,from_s,expected", [
    # frozen from 2 to 4 s (nothing completes), a burst of slow answers, then normal: the passing tail starts at 5 s
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 0, 0.0), (4, 0, 0.0), (5, 300, 1900.0), (6, 100, 1.5), (7, 100, 1.2)], 4.0, 1.0),
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 100, 90.0)], 1.0, None),        # bad at the end: not recovered
    ([(1, 100, 1.0), (2, 10, 1.0), (3, 100, 1.0)], 1.0, 1.0),           # too few answers is not a passing window
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 100, 1.0, 1)], 1.0, None),      # an error is not a passing window
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 100, 1.0, 0, 1)], 1.0, None),   # nor is a non-2xx answer
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 100, 1.0)], 1.5, 0.0),          # nothing failed after it: at once
    ([(1, 100, 1.0), (2, 100, 70.0), (3, 100, 1.0), (4, 100, 70.0), (5, 100, 1.0)], 0.0, 4.0),  # the LAST good tail
])
def test_recovery_is_the_start_of_the_tail_that_passes_the_rule(rows, from_s, expected):
    judged = judge_windows(windows(rows), 100, 1, RULE, RULE.slo_ms(), 100)
    assert recovery_s(judged, from_s, 1) == expected


def test_recovery_uses_the_same_bar_for_every_port():
    """The old rule scaled each port's bar by its own pre-fault p99: a 10-ms port and a 49-ms port got different
    bars. Now a window at 40 ms passes for both, one at 60 ms fails for both."""
    calm = windows([(1, 100, 0.8), (2, 100, 0.9), (3, 100, 40.0), (4, 100, 40.0)])
    noisy = windows([(1, 100, 45.0), (2, 100, 49.0), (3, 100, 40.0), (4, 100, 40.0)])
    late = windows([(1, 100, 0.8), (2, 100, 0.9), (3, 100, 60.0), (4, 100, 60.0)])
    for rows, expected in ((calm, 0.0), (noisy, 0.0), (late, None)):
        assert recovery_s(judge_windows(rows, 100, 1, RULE, 50.0, 4), 2.0, 1) == expected


def test_hostile_windows_expect_the_valid_share_less_its_chance_spread():
    assert valid_rate(1000, 1.0, 1) == 1000
    assert valid_rate(1000, 0.9, 1) == pytest.approx(900 - 3 * 90 ** 0.5, abs=0.1)
    # a window 1 sigma short of 900 valid answers passes the rule; a port that served 80 % of them does not
    ok = windows([(1, 890, 2.0)])
    short = windows([(1, 800, 2.0)])
    rate = valid_rate(1000, 0.9, 1)
    assert judge_windows(ok, rate, 1, RULE, 50.0, 1)[0]["failure"] is None
    assert judge_windows(short, rate, 1, RULE, 50.0, 1)[0]["failure"] == rule_mod.RATE


def test_failed_windows_and_errors_split_at_the_end_of_the_fault():
    judged = judge_windows(windows([(1, 100, 1.0), (2, 100, 900.0), (3, 100, 1.0, 2), (4, 100, 1.0)]),
                                  100, 1, RULE, 50.0, 4)
    assert failed_windows(judged) == (2, 4)
    assert failed_windows(judged, 2.0) == (1, 2)
    intervals = [{"t_s": t, "completed": 10, "p99_ms": 1, "errors": e, "non_2xx": n}
                 for t, e, n in [(1, 0, 0), (2, 3, 1), (3, 2, 0), (4, 0, 5)]]
    assert errors_split(intervals, 2.5, 1) == (6, 5)


def test_hostile_lines_are_the_conformance_cases_with_their_statuses():
    lines = hostile.header_lines(now=1_700_000_000)
    cases = [c for c, _, _ in lines]
    assert len(cases) == len(set(cases))
    assert {s for _, _, s in lines} == {401, 404}
    assert sum(1 for _, _, s in lines if s == 404) == hostile.UNKNOWN_USERS
    # every hostile value of the conformance suite is a line (trimmed; "Bearer " and "Bearer" are one)
    values = {v.strip() for _, v in hostile.hostile_tokens(now=1_700_000_000)}
    assert values == {v for _, v, s in lines if s == 401}
    assert all(v == v.strip() and "\n" not in v for _, v, _ in lines)
    outcome = hostile_outcome(lines[:2], {"completed": 10, "statuses_by_line": [{"401": 5}, {"401": 3, "500": 2}],
                                                 "errors": {"timeout": 1}})
    assert outcome["hostile_unexpected"] == 2 and outcome["hostile_5xx"] == 2 and outcome["hostile_sent"] == 11


def test_framework_overrides_are_recorded_and_label_the_row():
    env = {"QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW": "true", "PATH": "/bin", "SPRING_PROFILES_ACTIVE": "x"}
    got = session.framework_overrides(env)
    assert got == {"QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW": "true", "SPRING_PROFILES_ACTIVE": "x"}
    assert runset.label({"port": "quarkus-virtual", "framework_overrides": {}}) == "quarkus-virtual"
    assert (runset.label({"port": "quarkus-virtual", "framework_overrides": {"QUARKUS_X": "1"}})
            == "quarkus-virtual + `QUARKUS_X=1`")


def test_the_plan_is_the_bench_toml_section():
    settings = settings_mod.load()
    plan = plan_mod.section(settings, "faults", faults.Plan)
    assert plan.iterations >= 3
    # every key of the section is the plan's, and every field of the plan without a default (the driver's optional
    # knobs, driver.Lifecycle, keep every other scenario's behaviour when left out) is in the section
    fields = dataclasses.fields(faults.Plan)
    required = {f.name for f in fields if f.default is dataclasses.MISSING}
    assert required <= set(settings["faults"]) <= {f.name for f in fields}
    assert {f.name for f in fields} - {f.name for f in dataclasses.fields(faults.driver.Lifecycle)} <= required


# --- the report section from hand-made records -----------------------------------------------------------------

def fault_case(recovery, errors, rate=1000, fault_s=2.0):
    return {"summary": {"rate": rate, "slo_ms": 50.0, "recovery_s": recovery, "errors_during": errors, "fault_s": fault_s,
                        "errors_after": 0, "failed_windows": 2, "windows": 11, "p99_ms": 900.0, "failure": LATENCY},
            "step": {"target_rps": rate, "seconds": 19, "intervals": [{"t_s": 1, "completed": 1000, "p99_ms": 2.0, "errors": 0,
                                                   "non_2xx": 0, "failure": None},
                                                  {"t_s": 5, "completed": 900, "p99_ms": 3000.0, "errors": 0,
                                                   "non_2xx": 0, "failure": LATENCY}]}}


def record(port, iteration, restart, freeze, achieved, overload_recovery, hostile_failed, overrides=None,
           behind=False):
    """A record as the driver writes it: a cell per case, in the order run."""
    run_id = "20260101T000000Z"
    r = schema.new({"port": port, "scenario": "faults", "run_id": run_id, "iteration": iteration,
                    "status": "complete", "framework_overrides": overrides or {},
                    "environment": {"settings": {"faults": {"hostile_fraction": 0.1, "normal_fraction": 0.5,
                                                            "overload_factor": 2.0, "recover_factor": 0.5}}}},
                   rate=1000, mst=2000, mst_source="baseline", answers_at_end=True, same_jvm_at_end=True)
    r["cells"] = [schema.cell({"case": name}, status="complete", **c) for name, c in {
                "normal": {"summary": {"rate": 1000, "slo_ms": 50.0, "errors": 0, "failed_windows": 0, "windows": 10,
                                       "p99_ms": 2.0, "failure": None}},
                "hostile": {"summary": {"rate": 1000, "slo_ms": 50.0, "errors": 0, "failed_windows": hostile_failed,
                                        "windows": 10, "p99_ms": 5.0, "hostile_unexpected": 0, "failure": None}},
                "flood": {"summary": {"rate": 1000, "slo_ms": 50.0, "errors": 0, "failed_windows": 0, "windows": 10,
                                      "p99_ms": 4.0, "failure": None}},
                "freeze": fault_case(*freeze), "restart": fault_case(*restart),
                "overload": {"summary": {"rate_high": 4000, "rate_low": 1000, "achieved_high_rps": achieved,
                                         "errors_high": 10, "errors_low": 0, "recovery_s": overload_recovery,
                                         "failed_windows": 1, "windows": 25, "generator_behind": behind},
                             "high": {"seconds": 15, "intervals": []}, "low": {"intervals": []}}}.items()]
    return r


def case(r: dict, name: str) -> dict:
    """A record's case (its cell)."""
    return faults_report.cases_of(r)[name]


def hand_made():
    out = []
    for i in (1, 2, 3):
        out.append(record("spring-platform", i, (1.0 + i, 10 + i), (0.5, 3), 2500 + 10 * i, 4.0, 0))
        out.append(record("quarkus-virtual", i, (None, 5000 + i), (1.0, 4), 3000 + 10 * i, 3.0, 1))
        out.append(record("quarkus-vertx", i, (0.5 * i, 800 + 100 * i), (0.5, 600), 3900 + 10 * i, 2.0, 8))
        out.append(record("quarkus-virtual", i, (3.0, 20), (1.0, 4), 3000, 3.0, 0,
                          overrides={"QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW": "true"}))
    return out


def test_render_generates_decisions_and_verdict_from_the_records(tmp_path):
    rs = runset.select(hand_made(), "faults")
    section = faults_report.render(rs, tmp_path)
    text = "\n".join(section.body)
    assert "quarkus-virtual + `QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true`" in text
    rows = {d.regime: d for d in section.decisions}
    db_row = rows["database restarts / freezes"]
    # who recovered from every fault, the fewest errors per case named pairwise, who did not; no figures
    # recovery first: quarkus-vertx back first after a restart (its errors then unranked), the freezes tie on time
    assert db_row.choice == ("quarkus-vertx, spring-platform always recovered; back first after a restart: "
                             "quarkus-vertx; fewest freeze errors a second: spring-platform; "
                             "not always recovered: quarkus-virtual")
    assert db_row.decided_by == ("time until the rule holds again after the fault, then errors per second of fault "
                                 "(pairwise)")
    assert "QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true" in db_row.settings
    # the remedy run is a row of its own
    remedy = rows["database restarts / freezes, with `QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true`"]
    assert remedy.choice == "quarkus-virtual + `QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true` always recovered"
    assert remedy.settings == "`QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW=true`"
    over = rows["overload 2x, then 0.5x"]
    assert over.choice == "quarkus-vertx serves the most at 2x (above every other), always recovered"
    assert "largely repeats the MST ranking" in over.decided_by
    verdict = " ".join(section.verdict)
    # every recovery time has its errors beside it, both from the records
    # errors beside their share of the requests offered (1,000 req/s x 19 s)
    assert "spring-platform recovered after 3.0 (2.0–4.0) s with 12 (11–13) errors (0.063 (0.058–0.068) % of " \
           "the requests, 6.0 (5.5–6.5) a second of fault)" in verdict
    assert "quarkus-vertx recovered after 1.0 (0.5–1.5) s with 1,000 (900–1,100) errors (5.3 (4.7–5.8) %" in verdict
    # no errors a second of fault where it never recovered: its errors kept counting after the fault had ended
    assert "quarkus-virtual did not recover in any of 3 run(s) (5,002 (5,001–5,003) errors (26 % of the " \
           "requests))" in verdict
    # hostile input: the share of failed windows, with the normal run's beside it
    assert "quarkus-vertx 80 % of windows failed (without them 0 %)" in " ".join(section.findings)   # the section's
    assert (tmp_path / "faults-db-timeline.png").exists()
    assert section.appendix and any("not recovered" in line for line in section.appendix)


def test_the_verdict_follows_the_numbers(tmp_path):
    records = hand_made()
    for r in records:
        if r["port"] == "quarkus-virtual" and not r["framework_overrides"]:
            case(r, "restart")["summary"]["recovery_s"] = 7.0
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    verdict = " ".join(section.verdict)
    assert "quarkus-virtual recovered after 7.0 s with 5,002 (5,001–5,003) errors" in verdict
    db_row = next(d for d in section.decisions if d.regime == "database restarts / freezes")
    assert "not always recovered" not in db_row.choice and "documented remedy" not in db_row.settings
    assert db_row.choice.startswith("quarkus-vertx, quarkus-virtual, spring-platform always recovered; ")


def published_like(port, restarts, served, behind=(False, False, False)):
    """Three iterations shaped like a published run: every freeze 0 errors, the restart's errors, 2x served."""
    return [record(port, i + 1, (0.5, restarts[i]), (3.0, 0), served[i], 11.0, 0, behind=behind[i])
            for i in range(3)]


def test_the_db_row_gives_restart_and_freeze_apart_and_compares_errors_per_case(tmp_path):
    # pooled, the restart's and the freeze's errors overlapped ("8 (0–16)" against "60 (0–527)": 'error counts
    # overlap'); per case the restarts settle it and the freezes have none
    records = (published_like("spring-platform", (16, 16, 16), (9000, 9100, 9200))
               + published_like("spring-virtual", (14, 5, 5), (7000, 7100, 7200))
               + published_like("quarkus-reactive", (111, 545, 163), (12500, 14000, 15300))
               + published_like("quarkus-vertx", (527, 119, 159), (18700, 22600, 22700)))
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    db_row = next(d for d in section.decisions if d.regime == "database restarts / freezes")
    # the restarts settle who has the fewest; the freezes (none) name no one
    assert db_row.choice == ("quarkus-reactive, quarkus-vertx, spring-platform, spring-virtual always recovered; "
                             "fewest restart errors a second: spring-virtual")
    verdict = " ".join(section.verdict)
    assert ("spring-virtual fewest (below every other), quarkus-reactive, quarkus-vertx the most (no other's "
            "range above theirs).") in verdict   # names joined by ", " as everywhere else in the report
    assert "Errors per second of fault among them: none in any run." in " ".join(section.findings)   # freezes


def test_errors_are_compared_per_second_of_fault_not_as_a_share_of_the_rate(tmp_path):
    """A restart fails the requests in flight when it strikes: per second of the fault, the port with fewer errors is
    the fewer, whatever rate each was offered (the share of the requests offered stays in the sentence)."""
    slow = published_like("spring-virtual", (10, 11, 12), (2000, 2000, 2000))
    fast = published_like("quarkus-vertx", (20, 21, 22), (8000, 8000, 8000))
    for r in fast:
        for name in ("freeze", "restart"):
            faults_report.cases_of(r)[name]["step"]["target_rps"] = 4000
    section = faults_report.render(runset.select(slow + fast, "faults"), tmp_path)
    db_row = next(d for d in section.decisions if d.regime == "database restarts / freezes")
    assert "fewest restart errors a second: spring-virtual" in db_row.choice
    assert "quarkus-vertx recovered after 0.5 s with 21 (20–22) errors (0.028 (0.026–0.029) % of the requests, " \
           "10.5 (10.0–11.0) a second of fault)" in " ".join(section.verdict)


def test_fresh_probe_windows_are_judged_on_answers_errors_and_p99_only():
    rule = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)
    judged = judge_windows(windows([(1, 0, None), (2, 37, 900.0), (3, 99, 4.0), (4, 98, 3.0, 1),
                                          (5, 96, 3.0), (6, 97, 2.0)]), None, 1, rule, 50.0, until_s=5)
    assert [w["failure"] for w in judged] == [NO_ANSWERS, LATENCY, None, ERRORS, None]   # 96 of 100: no rate rule
    assert recovery_s(judged, 0.0, 1) == 4.0


def offered(records: list[dict], rate_high: int) -> list[dict]:
    """The rate offered at 2x (2x the port's MST), as the records carry it."""
    for r in records:
        case(r, "overload")["summary"]["rate_high"] = rate_high
    return records


def test_served_at_2x_with_the_generator_behind_is_a_lower_bound(tmp_path):
    # as published: quarkus-vertx's median and maximum come from runs whose generator fell behind at 2x,
    # spring-platform's and spring-virtual's too: what they served is ≥, yet never more than the rate offered (2x
    # their MST), and quarkus-vertx's lowest run (18,731, on schedule) lies above every other port's 2x rate
    records = (offered(published_like("spring-platform", (16,) * 3, (9893, 9217, 9489), (True, True, False)), 11200)
               + offered(published_like("spring-virtual", (5,) * 3, (7422, 6723, 7588), (True, True, True)), 10400)
               + offered(published_like("spring-webflux", (16,) * 3, (7635, 7598, 8314)), 10000)
               + offered(published_like("quarkus-reactive", (163,) * 3, (12522, 14060, 15310)), 17400)
               + offered(published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747), (False, True, True)),
                         23800))
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    over = next(d for d in section.decisions if d.regime == "overload 2x, then 0.5x")
    assert over.choice == (
        "quarkus-vertx serves the most at 2x (above every other), always recovered; generator behind in some runs: "
        "served rate a bound (≥) there, compared up to the rate offered")
    assert "each port's own MST" in over.decided_by
    verdict = " ".join(section.verdict)
    assert "the generator fell behind its schedule at 2x in 7 of 15 runs, and what was served then is a lower bound" \
        in verdict
    assert "quarkus-vertx served ≥ 22,614 (18,731–22,747) req/s at 2x (generator behind in 2 of 3 runs; " in verdict
    assert "quarkus-reactive served 14,060 (12,522–15,310) req/s at 2x (10 errors of its own" in verdict
    assert "≥ 22,614 (18,731–22,747)" in "\n".join(section.body)


def test_a_port_whose_generator_fell_behind_is_compared_up_to_the_rate_it_was_offered(tmp_path):
    def choice(rate_high: int) -> str:
        records = (offered(published_like("spring-virtual", (5,) * 3, (7422, 6723, 7588), (True, True, True)),
                           rate_high)
                   + offered(published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747)), 23800))
        return next(d for d in faults_report.render(runset.select(records, "faults"), tmp_path).decisions
                    if d.regime == "overload 2x, then 0.5x").choice
    # offered 10,400: whatever spring-virtual could have served lies below quarkus-vertx's lowest run
    assert choice(10400).startswith("quarkus-vertx serves the most at 2x (above every other), always recovered; "
                                    "generator behind in some runs")
    # offered 30,000: it could have served more than quarkus-vertx, so neither is above the other
    assert choice(30000).startswith("quarkus-vertx, spring-virtual below no other at 2x, always recovered; "
                                    "generator behind in some runs")


def test_a_bound_above_every_other_at_2x_is_named(tmp_path):
    records = (published_like("spring-webflux", (16,) * 3, (7635, 7598, 8314))
               + published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747), (False, True, True)))
    over = next(d for d in faults_report.render(runset.select(records, "faults"), tmp_path).decisions
                if d.regime == "overload 2x, then 0.5x")
    assert over.choice.startswith("quarkus-vertx serves the most at 2x (above every other), always recovered; "
                                  "generator behind in some runs: served rate a bound (≥) there")
    assert "not compared" not in over.choice


def test_served_at_2x_is_a_bound_only_when_the_generator_fell_behind_at_2x(tmp_path):
    # quarkus-vertx #2 as published: the generator fell behind in the 0.5x step only (the summary's
    # generator_behind ORs the two steps); the 2x figure is firm and the count is the 2x step's
    records = (published_like("spring-webflux", (16,) * 3, (7635, 7598, 8314))
               + published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747), (False, True, False)))
    for r in records:
        case(r, "overload")["high"]["generator_behind"] = False
        case(r, "overload")["low"]["generator_behind"] = case(r, "overload")["summary"]["generator_behind"]
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    over = next(d for d in section.decisions if d.regime == "overload 2x, then 0.5x")
    assert over.choice == "quarkus-vertx serves the most at 2x (above every other), always recovered"
    verdict = " ".join(section.verdict)
    assert "generator fell behind" not in verdict and "generator behind" not in verdict
    assert "quarkus-vertx served 22,614 (18,731–22,747) req/s at 2x (10 errors of its own" in verdict
    assert "schedule at 2x in some iteration" in "\n".join(section.body)
    # the 2x step's own flag set: a bound, counted
    case(records[4], "overload")["high"]["generator_behind"] = True
    verdict = " ".join(faults_report.render(runset.select(records, "faults"), tmp_path).verdict)
    assert "the generator fell behind its schedule at 2x in 1 of 6 runs" in verdict
    assert "quarkus-vertx served ≥ 22,614 (18,731–22,747) req/s at 2x (generator behind in 1 of 3 runs; " in verdict


def test_served_at_2x_is_the_ports_own_figure_when_the_port_failed_there(tmp_path):
    # as published once: quarkus-vertx's 2x step fell behind its schedule (1.99 of 2 cores busy) and served 7,852
    # of 14,700 req/s: the rule labels it "rate not reached", the port's failure, so 7,852 is no lower bound
    # (the generator is named only when it alone failed)
    records = (published_like("spring-webflux", (16,) * 3, (7635, 7598, 8314))
               + published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747), (True, True, True)))
    for r in records:
        high = case(r, "overload")["high"]
        high.update(generator_behind=case(r, "overload")["summary"]["generator_behind"], failure="rate not reached")
    verdict = " ".join(faults_report.render(runset.select(records, "faults"), tmp_path).verdict)
    assert "quarkus-vertx served 22,614 (18,731–22,747) req/s at 2x (10 errors of its own" in verdict
    assert "generator behind" not in verdict
    case(records[3], "overload")["high"]["failure"] = GENERATOR      # the port held, the generator lagged
    verdict = " ".join(faults_report.render(runset.select(records, "faults"), tmp_path).verdict)
    assert "quarkus-vertx served ≥ 22,614 (18,731–22,747) req/s at 2x (generator behind in 1 of 3 runs; " in verdict


def test_a_port_whose_restart_never_ran_is_not_recovered_from_every_restart(tmp_path):
    # a run interrupted after the freeze: spring-platform has no restart in any iteration
    records = (published_like("spring-platform", (16,) * 3, (9000, 9100, 9200))
               + published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747)))
    for r in records[:3]:
        r["cells"] = [c for c in r["cells"] if c["coords"]["case"] not in ("restart", "overload")]
        r["status"] = "partial"
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    db_row = next(d for d in section.decisions if d.regime == "database restarts / freezes")
    assert db_row.choice == "quarkus-vertx always recovered; restart not run: spring-platform"
    verdict = " ".join(section.verdict)
    assert ("quarkus-vertx recovered after 0.5 s with 159 errors (0.84 % of the requests, 79.5 a second of fault); "
            "spring-platform: not run.") in verdict
    assert "spring-platform recovered after 3.0 s with 0 errors" in " ".join(section.findings)   # its freeze ran


def test_the_rows_name_who_did_not_recover_and_whom_each_overlapping_port_lies_above(tmp_path):
    records = (published_like("spring-webflux", (16,) * 3, (7635, 7598, 8314))
               + published_like("quarkus-reactive", (163,) * 3, (22000, 22500, 23000))
               + published_like("quarkus-vertx", (159,) * 3, (18731, 22614, 22747)))
    for r in records[:3]:
        case(r, "restart")["summary"]["recovery_s"] = None
        case(r, "overload")["summary"]["recovery_s"] = None
    rows = {d.regime: d for d in faults_report.render(runset.select(records[:3], "faults"), tmp_path).decisions}
    assert rows["database restarts / freezes"].choice == ("no port always recovered; not always recovered: "
                                                          "spring-webflux")
    assert rows["overload 2x, then 0.5x"].choice == ("none recovered at 0.5x within the run; not always recovered: "
                                                     "spring-webflux")
    # quarkus-reactive and quarkus-vertx overlap at 2x, each above spring-webflux once it recovers
    for r in records[:3]:
        case(r, "overload")["summary"]["recovery_s"] = 11.0
    over = next(d for d in faults_report.render(runset.select(records, "faults"), tmp_path).decisions
                if d.regime == "overload 2x, then 0.5x")
    assert over.choice == ("quarkus-vertx (above spring-webflux), quarkus-reactive (above spring-webflux) below no "
                           "other at 2x, always recovered")   # the higher median first


def test_recovery_time_decides_before_errors(tmp_path):
    """The port with the fewest restart errors but the slowest recovery is never named first: recovery time decides,
    then errors per second of fault among the ports back first."""
    records = []
    for i in (1, 2, 3):
        records.append(record("spring-virtual", i, (8.5 + 2 * i, 5), (3.0, 0), 7000, 2.0, 0))
        records.append(record("spring-platform", i, (3.0 + 0.5 * i, 16), (3.0, 0), 9000, 2.0, 0))
        records.append(record("quarkus-vertx", i, (3.0 + 0.5 * i, 160), (3.0, 0), 9000, 2.0, 0))
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    db_row = next(d for d in section.decisions if d.regime == "database restarts / freezes")
    assert "back first after a restart: quarkus-vertx, spring-platform;" in db_row.choice
    assert "fewest restart errors a second among them: spring-platform" in db_row.choice
    assert "spring-virtual (below every other)" not in db_row.choice
    assert db_row.decided_by.startswith("time until the rule holds again after the fault")
    verdict = " ".join(section.verdict)
    assert "lower first: quarkus-vertx ≈ spring-platform > spring-virtual." in verdict \
        or "lower first: spring-platform ≈ quarkus-vertx > spring-virtual." in verdict
    assert "spring-platform recovered after 4.0 (3.5–4.5) s with 16 errors" in verdict and "8.0 a second of fault" in verdict


def test_requests_the_generator_never_sent_are_never_the_ports_errors(tmp_path):
    records = [record("spring-platform", i, (3.0, 16), (3.0, 0), 9000, 2.0, 0) for i in (1, 2, 3)]
    for r in records:
        case(r, "overload")["summary"].update(unsent_high=8, errors_high_by_kind={"timeout": 9, "connect": 1})
    section = faults_report.render(runset.select(records, "faults"), tmp_path)
    verdict = " ".join(section.verdict)
    assert "2 errors of its own; 8 requests never sent, held in the generator's queue at the end (not the port's)" \
        in verdict
    appendix = "\n".join(section.appendix)
    assert "timeout 1, connect 1, never sent (the generator's queue) 8" in appendix


def test_the_app_log_gives_the_exceptions_once_each_and_every_sqlstate():
    from harness.method.faults import LOG_ERRORS_KEPT, log_errors
    log = "\n".join([
        "2026-12-03 13:00:01,123 WARN  [org.hib.eng.jdb.spi.SqlExceptionHelper] (executor-thread-1) SQL Error: 0, "
        "SQLState: 08S01",
        "jakarta.persistence.PersistenceException: org.hibernate.exception.JDBCConnectionException: could not prepare",
        "Caused by: com.mysql.cj.jdbc.exceptions.CommunicationsException: Communications link failure (conn=41)",
        "Caused by: com.mysql.cj.jdbc.exceptions.CommunicationsException: Communications link failure (conn=42)",
        "\tat io.agroal.pool.ConnectionPool.getConnection(ConnectionPool.java:250)",
        "\tat com.mysql.cj.jdbc.exceptions.SQLError.createCommunicationsException(SQLError.java:165)",
        "2026-12-03 13:00:02,000 WARN  [org.hib.eng.jdb.spi.SqlExceptionHelper] SQL Error: 1927, SQLState: 70100",
        *(f"ERROR [io.quarkus.vertx.http.runtime.QuarkusErrorHandler] HTTP Request to / failed, error id: {uid}-1: "
          "org.hibernate.exception.JDBCConnectionException: JDBC exception executing SQL" for uid in ("f3bbe7e1", "0a9d4c2b")),
    ])
    found = log_errors(log)
    assert found["sqlstates"] == ["08S01", "70100"]
    assert found["exceptions"][0].startswith("jakarta.persistence.PersistenceException: org.hibernate")
    assert sum("CommunicationsException" in e for e in found["exceptions"]) == 1   # conn=41 and 42: one error
    assert sum(e.startswith("org.hibernate.exception.JDBCConnectionException") for e in found["exceptions"]) == 1
    assert not any("SQLError" in e for e in found["exceptions"])   # a stack frame is no error
    many = "\n".join(f"java.lang.IllegalStateException{'x' * i}Exception: {i}" for i in range(LOG_ERRORS_KEPT + 3))
    assert len(log_errors(many)["exceptions"]) == LOG_ERRORS_KEPT and log_errors(many)["distinct_exceptions"] > LOG_ERRORS_KEPT
    assert log_errors("") == {"exceptions": [], "distinct_exceptions": 0, "sqlstates": []}


def test_the_app_log_is_read_from_its_offset_and_only_its_ends_when_it_is_huge(tmp_path):
    from harness.target import Target
    log = tmp_path / "app.log"
    log.write_bytes(b"before\n" + b"FIRST\n" + b"x" * 100 + b"\nLAST\n")
    target = Target.__new__(Target)
    target.log = str(log)
    assert target.log_since(7, keep=1000) == "FIRST\n" + "x" * 100 + "\nLAST\n"
    ends = target.log_since(7, keep=8)
    assert ends.startswith("FIRST\n") and ends.endswith("\nLAST\n") and len(ends) == 17
    target.log = str(tmp_path / "missing.log")
    assert target.log_since(0) == "" and target.log_size() == 0

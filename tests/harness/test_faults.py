"""The faults scenario's parts against a real port on a real MariaDB: hostile tokens mixed into a constant-rate
stream, a 2-s database freeze the port must ride out without a restart, and `db up` working with one call right
after the server was killed (it used to fail once with "unreachable"). The database here is the test's own
instance (its own data directory and port), so killing and freezing it disturbs nothing else."""
import os
import signal
import time
from contextlib import closing

import pytest
import requests

from harness import db, loadgen, ports, settings as settings_mod, tokens
from harness.paths import BUILD
from harness.scenarios import common, faults
from harness.verify import LocalDatabase

PORT = "quarkus-vertx"
HTTP_PORT = 18086
DB_PORT = "13306"
RATE = 1000


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
    plan = faults.Plan(iterations=1, warmup_seconds=0, normal_fraction=0.5, normal_seconds=3, interval_seconds=1,
                       fault_at_seconds=2, freeze_seconds=2, after_seconds=4, recovery_factor=2.0, overload_factor=2,
                       overload_seconds=1, recover_factor=0.5, recover_seconds=1, overload_connections=64,
                       idle_connections=0, idle_connect_concurrency=256, hostile_fraction=0.1, probe_fraction=0.7)
    ctx = common.Context("faults", own_db, gen, None, {}, "test", tmp_path_factory.mktemp("faults"))
    return faults.Cases(ctx, plan), faults.Port(app.url, app.pid, tokens.load()[0], 2 * RATE, "test", RATE)


def accounted(step: dict, seconds: float) -> bool:
    """Every scheduled request was answered (any status) or counted as a failure of one kind."""
    failed = sum(n for kind, n in step["errors"].items() if kind != "non_2xx")
    return step["requests"] + failed == int(RATE * seconds)


def test_hostile_tokens_under_load_get_401_or_404_never_5xx(cases):
    c, p = cases
    normal = c.normal(p)
    r = c.hostile(p, normal)
    s, mix = r["summary"], r["run"]["mix"]
    assert s["hostile_sent"] > 100 and s["hostile_unexpected"] == 0 and s["hostile_5xx"] == 0, s["by_case"]
    assert s["hostile_as_expected"] == s["hostile_sent"]
    assert set(mix["statuses"]) <= {"401", "404"}
    # each hostile case got exactly its expected status, whenever it was sent
    for case, want, got in zip(r["cases"], r["expected_statuses"], mix["statuses_by_line"]):
        assert set(got) <= {str(want)}, (case, got)
    assert r["run"]["statuses"] == {"200": r["run"]["requests"]}, "valid requests are counted apart"
    assert mix["completed"] + r["run"]["requests"] == RATE * 3


def test_a_port_rides_out_a_database_freeze_without_a_restart(cases, app):
    c, p = cases
    r = c.db_fault(p, "freeze")
    s, step = r["summary"], r["run"]
    assert 1.9 <= s["fault_s"] < 3, s
    assert s["alive"] and s["same_pid"] and s["answers_after"], s
    assert app.process.poll() is None and app.pid == p.pid
    assert accounted(step, 8), (step["requests"], step["errors"])
    # the requests due during the freeze waited for it (the open model charges them)
    assert s["max_ms"] > 1000, s
    assert sum(w["completed"] for w in step["intervals"]) <= step["requests"]
    assert s["errors_during"] + s["errors_after"] == sum(w["errors"] + w["non_2xx"] for w in step["intervals"])
    with closing(db.connect()) as conn, conn.cursor() as cur:   # the DB was resumed
        cur.execute("SELECT 1")


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


@pytest.mark.parametrize("windows,from_s,expected", [
    # frozen from 2 to 4 s (nothing completes), a burst of slow answers, then normal: good from the 6th window
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 0, 0.0), (4, 0, 0.0), (5, 300, 1900.0), (6, 100, 1.5), (7, 100, 1.2)], 4.0, 2.0),
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 100, 9.0)], 1.0, None),         # bad at the end: not recovered
    ([(1, 100, 1.0), (2, 10, 1.0), (3, 100, 1.0)], 1.0, 2.0),           # too few answers is not a good window
    ([(1, 100, 1.0), (2, 100, 1.0), (3, 100, 1.0, 1)], 1.0, None),      # an error is not a good window
])
def test_recovery_is_the_start_of_the_good_tail(windows, from_s, expected):
    intervals = [{"t_s": w[0], "completed": w[1], "p99_ms": w[2], "errors": w[3] if len(w) > 3 else 0, "non_2xx": 0}
                 for w in windows]
    assert faults.recovery_s(intervals, from_s, 2.0, 100) == expected


def test_errors_are_split_at_the_window_holding_the_end_of_the_fault():
    intervals = [{"t_s": t, "completed": 10, "p99_ms": 1, "errors": e, "non_2xx": n}
                 for t, e, n in [(1, 0, 0), (2, 3, 1), (3, 2, 0), (4, 0, 5)]]
    assert faults.errors_split(intervals, 2.5, 1) == (6, 5)
    assert faults.reference_p99([{"t_s": 1, "completed": 5, "p99_ms": 2.0}, {"t_s": 2, "completed": 5, "p99_ms": 3.0},
                                 {"t_s": 3, "completed": 5, "p99_ms": 90.0}], 2.5) == 3.0


def test_framework_overrides_are_recorded_and_label_the_row():
    env = {"QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW": "true", "PATH": "/bin", "SPRING_PROFILES_ACTIVE": "x"}
    got = common.framework_overrides(env)
    assert got == {"QUARKUS_DATASOURCE_JDBC_VALIDATE_ON_BORROW": "true", "SPRING_PROFILES_ACTIVE": "x"}
    assert common.label({"port": "quarkus-virtual", "framework_overrides": {}}) == "quarkus-virtual"
    assert (common.label({"port": "quarkus-virtual", "framework_overrides": {"QUARKUS_X": "1"}})
            == "quarkus-virtual + `QUARKUS_X=1`")

"""The database: the embedded local MariaDB (db/local.sh) or an external MySQL/MariaDB given by DB_*."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pymysql

from .paths import ROOT, USERS_TSV
from .errors import Fatal

USER_COUNT = 100_000


def config(env=os.environ) -> dict:
    return {
        "host": env.get("DB_HOST", "127.0.0.1"),
        "port": int(env.get("DB_PORT", "3306")),
        "database": env.get("DB_NAME", "bench"),
        "user": env.get("DB_USER", "bench"),
        "password": env.get("DB_PASSWORD", "bench"),
    }


def is_external(env=os.environ) -> bool:
    return env.get("BENCH_DB", "local") == "external"


def connect(**overrides):
    cfg = config() | overrides
    try:
        return pymysql.connect(**cfg, autocommit=True, connect_timeout=5)
    except pymysql.err.OperationalError as e:
        raise Fatal(f"database {cfg['host']}:{cfg['port']} is unreachable ({e.args[-1]}): "
                    f"run `just db-up`, or set DB_HOST/DB_PORT/DB_USER/DB_PASSWORD for an existing MySQL") from None


def _local(command: str, cpus: str | None = None) -> None:
    env = dict(os.environ)
    if cpus:
        env["DB_CPUS"] = cpus
    result = subprocess.run([str(ROOT / "db" / "local.sh"), command], env=env)
    if result.returncode != 0:
        raise Fatal(f"db/local.sh {command} failed (see the line above)")


def ensure_users_file() -> None:
    if not USERS_TSV.exists():
        USERS_TSV.parent.mkdir(parents=True, exist_ok=True)
        print("db: generating 100,000 users (db/generate_users.py)", file=sys.stderr)
        subprocess.run([sys.executable, str(ROOT / "db" / "generate_users.py"), str(USERS_TSV)], check=True)


def exact_collation(server_version: str) -> str:
    """A binary collation that also keeps trailing spaces significant (NO PAD), so that a lookup matches only
    the stored spelling: MariaDB's utf8mb4_bin pads (ignores trailing spaces), utf8mb4_nopad_bin does not;
    MySQL 8's utf8mb4_0900_bin is NO PAD already."""
    return "utf8mb4_nopad_bin" if "mariadb" in server_version.lower() else "utf8mb4_0900_bin"


def ensure_exact_match(cur) -> None:
    """The primary key compares emails exactly (case and trailing spaces count), on every server."""
    cur.execute("SELECT VERSION()")
    collation = exact_collation(cur.fetchone()[0])
    cur.execute("SELECT COLLATION_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'users' AND COLUMN_NAME = 'email'")
    if cur.fetchone()[0] != collation:
        print(f"db: users.email gets the exact-match collation {collation}", file=sys.stderr)
        cur.execute(f"ALTER TABLE users MODIFY email VARCHAR(255) CHARACTER SET utf8mb4 COLLATE {collation} NOT NULL")


def seed() -> None:
    """Creates the users table and loads the users, unless all of them are there already."""
    ensure_users_file()
    with closing(connect()) as conn, conn.cursor() as cur:
        cur.execute((ROOT / "db" / "schema.sql").read_text())
        ensure_exact_match(cur)
        cur.execute("SELECT COUNT(*) FROM users")
        if cur.fetchone()[0] == USER_COUNT:
            return
        print("db: loading users", file=sys.stderr)
        cur.execute("DELETE FROM users")
        with open(USERS_TSV, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        insert = "INSERT INTO users (email, first, last, city, county, age) VALUES (%s, %s, %s, %s, %s, %s)"
        for i in range(0, len(rows), 5000):
            cur.executemany(insert, rows[i:i + 5000])


def wait_reachable(timeout_s: float = 30.0) -> None:
    """Returns once the DB accepts a login over TCP (as the ports connect), else the usual Fatal."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            connect().close()
            return
        except Fatal:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def up(cpus: str | None = None) -> None:
    """Starts the local server (also right after it was killed: db/local.sh waits for a dying server to go
    and for the new one to accept TCP) and seeds it; one call is enough."""
    if not is_external():
        _local("start", cpus)
    wait_reachable()
    seed()


def down() -> None:
    if not is_external():
        _local("stop")


def datadir(env=os.environ) -> Path:
    """The local server's data directory (db/local.sh's DB_DATADIR)."""
    return Path(env.get("DB_DATADIR") or ROOT / ".data" / "mariadb")


def server_pid() -> int | None:
    """The local server's pid (for CPU sampling, and for the faults scenario's signals); None for an
    external DB or when the server in the pid file is gone (killed, not yet reaped, or never started)."""
    import psutil  # here, not at the top: compose's db-seed image imports this module with only its seeding packages
    pidfile = datadir() / "mysqld.pid"
    if is_external() or not pidfile.exists():
        return None
    try:
        pid = int(pidfile.read_text().strip())
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return None
    except (ValueError, OSError, psutil.Error):
        return None
    return pid


def status_counters(cur, names=("Questions", "Com_select")) -> dict:
    cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join(["%s"] * len(names)), names)
    return {name: int(value) for name, value in cur.fetchall()}


STATEMENT_STATUS = {"questions": "Questions", "com_select": "Com_select", "com_stmt_execute": "Com_stmt_execute",
                    "com_admin_commands": "Com_admin_commands"}   # COM_PING among them: a pool's liveness check
# What the harness's own statement_counters calls add between two of them (the second call's value minus the
# first's), measured on MariaDB 10.11 with PyMySQL 2.2 and checked by tests/harness/test_kernel.py. Questions
# includes the statement that reads it, so the second call's SHOW GLOBAL STATUS is in its own value (1). With a
# connection of its own per call (conn=None), PyMySQL's SET NAMES at connect is one more question, and the first
# call's COM_QUIT a third (the handshake is none). SHOW and SET are neither SELECTs nor prepared executions.
STATEMENT_COUNTERS_COST = {"questions": 3, "com_select": 0, "com_stmt_execute": 0, "com_admin_commands": 0}  # conn=None
STATEMENT_COUNTERS_COST_SHARED = {"questions": 1, "com_select": 0, "com_stmt_execute": 0,            # one conn
                                  "com_admin_commands": 0}


def statement_counters(conn=None) -> dict[str, int]:
    """The server's statement counters, as {"questions", "com_select", "com_stmt_execute", "com_admin_commands"}:
    SHOW GLOBAL STATUS
    Questions (statements clients sent, prepared executions included; COM_STMT_PREPARE/CLOSE and COM_PING not),
    Com_select (SELECTs, prepared ones included) and Com_stmt_execute (prepared executions, binary protocol or
    SQL EXECUTE) and Com_admin_commands (COM_PING and other admin commands: a pool's liveness check, r2dbc-mysql's
    ping on release), the names tests/conformance reads. Raw server values: take the statements between two calls
    with `statements_between`, which removes the calls' own statements (STATEMENT_COUNTERS_COST: 3 questions
    with a connection per call, 1 when both calls are given the same connection)."""
    if conn is None:
        with closing(connect()) as own:
            return statement_counters(own)
    with conn.cursor() as cur:
        found = status_counters(cur, tuple(STATEMENT_STATUS.values()))
    return {key: found.get(name, 0) for key, name in STATEMENT_STATUS.items()}


def statements_between(before: dict[str, int], after: dict[str, int],
                       shared_connection: bool = False) -> dict[str, int]:
    """The statements all clients except the harness's two statement_counters calls sent between those calls
    (exact for the questions, SELECTs and prepared executions; other harness statements in between count)."""
    cost = STATEMENT_COUNTERS_COST_SHARED if shared_connection else STATEMENT_COUNTERS_COST
    return {key: after[key] - before[key] - cost[key] for key in STATEMENT_STATUS}


def version() -> str:
    with closing(connect()) as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return cur.fetchone()[0]


def user_row(cur, email: str) -> dict | None:
    cur.execute("SELECT email, first, last, city, county, age FROM users WHERE email = %s", (email,))
    row = cur.fetchone()
    return None if row is None else dict(zip(("email", "first", "last", "city", "county", "age"), row))


class LocalDatabase:
    """Starts the local DB when it is not running, and stops it afterwards only if it started it."""

    def __init__(self, cpus: str | None = None):
        self.cpus, self.started = cpus, False

    def __enter__(self):
        self.started = not is_external() and server_pid() is None
        up(self.cpus)
        return self

    def __exit__(self, *exc):
        if self.started:
            down()

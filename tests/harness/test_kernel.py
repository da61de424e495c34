"""harness.kernel (context switches, read/write syscalls and threads that ran, from /proc) against child processes
that do known work, and db.statement_counters against the real database. All but the last test are fast and
need no database."""
import os
import statistics
import subprocess
import sys
import textwrap
import time
from contextlib import closing

import pytest

from harness import db, kernel
from harness.db import LocalDatabase

N = 200

# A child with three threads: the main one does what stdin asks, "busy" (named as a JIT compiler thread) spins for
# 0.3 s when asked, "idle" waits forever. It prints its pid and the two threads' tids, then "done" after each command.
CHILD = textwrap.dedent("""
    import os, sys, threading, time
    spin = threading.Event()
    def busy():
        # named as the JVM names a JIT compiler thread (kept to 15 characters by the kernel)
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write("C2 CompilerThread0")
        spin.wait()
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            pass
        threading.Event().wait()
    def idle():
        threading.Event().wait()
    threads = [threading.Thread(target=f, daemon=True) for f in (busy, idle)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    print(os.getpid(), *(t.native_id for t in threads), flush=True)
    null = os.open(os.devnull, os.O_WRONLY)
    for line in sys.stdin:
        command, n = line.split()
        if command == "write-sleep":
            for _ in range(int(n)):
                os.write(null, b"x")
                time.sleep(0.001)
        elif command == "spin":
            spin.set()
            time.sleep(0.5)
        elif command == "threads":   # starts n threads that each sleep once, then wait forever
            for _ in range(int(n)):
                threading.Thread(target=lambda: (time.sleep(0.001), threading.Event().wait()), daemon=True).start()
            time.sleep(0.1)
        print("done", flush=True)
""")


class Child:
    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        self.pid, self.busy, self.idle = map(int, self.process.stdout.readline().split())

    def do(self, command: str, n: int = 0):
        self.process.stdin.write(f"{command} {n}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "done"

    def close(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture
def child():
    c = Child()
    yield c
    c.close()


def test_writes_and_sleeps_show_as_write_syscalls_and_voluntary_switches(child):
    before = kernel.snapshot([child.pid])
    child.do("write-sleep", N)
    after = kernel.snapshot([child.pid])
    assert after.syscw - before.syscw >= N   # N writes to /dev/null (+ the "done" line)
    assert after.voluntary - before.voluntary >= N / 2   # each sleep blocks the main thread
    assert after.at > before.at
    counts = kernel.per_request(before, after, N, "app")
    assert counts["app_syscalls_write_per_request"] >= 1.0
    assert counts["app_ctx_voluntary_per_request"] >= 0.5
    assert counts["app_threads"] == 3


def test_threads_ran_counts_the_busy_thread_and_not_the_idle_one(child):
    before = kernel.snapshot([child.pid])
    child.do("spin")
    after = kernel.snapshot([child.pid])
    # 0.3 s of spinning at 100 ticks/s: 30, fewer when the machine is busy
    assert after.task_ticks[child.busy] - before.task_ticks[child.busy] >= 5
    assert after.task_ticks[child.idle] == before.task_ticks[child.idle]
    assert after.task_switches[child.idle] == before.task_switches[child.idle]
    counts = kernel.per_request(before, after, 1, "app")
    assert counts["app_threads_ran"] == 2   # busy, and the main thread that read the command (never idle)
    assert counts["app_threads"] == 3


def test_the_jit_share_is_the_compiler_threads_ticks_over_the_trees(child):
    before = kernel.snapshot([child.pid])
    assert before.jit_tids == {child.busy}
    child.do("spin")
    after = kernel.snapshot([child.pid])
    assert kernel.jit_share(before, after) > 0.5      # the busy thread spun; the main one only read a line
    assert kernel.jit_share(before, before) is None and kernel.jit_share(None, after) is None
    by_hand = kernel.Counters(at=0, voluntary=0, involuntary=0, syscr=None, syscw=None, task_ticks={1: 10, 2: 10})
    grown = kernel.Counters(at=1, voluntary=0, involuntary=0, syscr=None, syscw=None, task_ticks={1: 40, 2: 20, 3: 10},
                            jit_tids=frozenset({2, 3}))
    assert kernel.jit_share(by_hand, grown) == 0.4     # (10 + 10 new) of 50 ticks


def test_new_threads_count_as_ran_and_as_threads(child):
    before = kernel.snapshot([child.pid])
    child.do("threads", 5)
    after = kernel.snapshot([child.pid])
    counts = kernel.per_request(before, after, 1, "app")
    assert counts["app_threads"] == 8
    assert counts["app_threads_ran"] == 6   # the 5 new ones (each slept once) and the main thread


def test_a_child_process_is_part_of_the_tree():
    parent = Child()
    try:
        pids = kernel.tree_pids(os.getpid())
        assert pids[0] == os.getpid() and parent.pid in pids
        snap = kernel.snapshot(pids)
        assert parent.busy in snap.task_ticks and os.getpid() in snap.task_ticks
    finally:
        parent.close()


def test_a_vanished_or_zombie_pid_gives_none():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    pid = process.pid
    deadline = time.monotonic() + 10
    while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert kernel.snapshot([pid]) is None          # exited, not yet reaped
    process.wait()
    assert kernel.snapshot([pid]) is None          # gone
    assert kernel.snapshot([]) is None
    assert kernel.snapshot([os.getpid(), pid]) is not None   # a vanished child is skipped
    assert kernel.per_request(None, kernel.snapshot([os.getpid()]), 10, "app") == {}
    assert kernel.tree_pids(pid) == []


def counters(at, switches, ticks, io=(0, 0)):
    return kernel.Counters(at=at, voluntary=sum(v for v, _ in switches.values()),
                           involuntary=sum(i for _, i in switches.values()), syscr=io[0], syscw=io[1],
                           task_ticks=ticks, task_switches=switches, process_io={1: io})


def test_per_request_divides_and_rounds():
    before = counters(0.0, {1: (100, 10), 2: (5, 0), 3: (7, 7)}, {1: 50, 2: 3, 3: 9}, io=(1000, 500))
    # tid 3 exited (its switches are lost, not subtracted), tid 4 is new; tid 2 did nothing
    after = counters(30.0, {1: (400, 40), 2: (5, 0), 4: (30, 0)}, {1: 80, 2: 3, 4: 1}, io=(1600, 800))
    assert kernel.per_request(before, after, 300, "db") == {
        "db_ctx_voluntary_per_request": 1.1,        # (300 + 0 + 30) / 300
        "db_ctx_involuntary_per_request": 0.1,      # 30 / 300
        "db_syscalls_read_per_request": 2.0,
        "db_syscalls_write_per_request": 1.0,
        "db_threads_ran": 2,                        # tids 1 and 4
        "db_threads": 3,
    }
    assert kernel.per_request(before, after, 7, "x")["x_ctx_voluntary_per_request"] == 47.14   # 330 / 7
    assert kernel.per_request(before, after, 0, "db") == {}


def test_unreadable_io_leaves_the_syscall_keys_out():
    before = kernel.Counters(0.0, 10, 1, None, None, {1: 5})
    after = kernel.Counters(1.0, 30, 3, None, None, {1: 9, 2: 0})
    assert kernel.per_request(before, after, 10, "app") == {
        "app_ctx_voluntary_per_request": 2.0, "app_ctx_involuntary_per_request": 0.2,
        "app_threads_ran": 1, "app_threads": 2}


def test_snapshot_is_cheap():
    """A snapshot of a 250-thread process (a JVM under load has 30-250): measured ~8 ms here."""
    code = ("import threading, time\n"
            "for _ in range(249): threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
            "print(flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()
        times = []
        for _ in range(30):
            start = time.perf_counter()
            snap = kernel.snapshot([process.pid])
            times.append(time.perf_counter() - start)
        assert len(snap.task_ticks) == 250
        print(f"\nsnapshot of 250 threads: median {statistics.median(times) * 1e3:.1f} ms")
        assert statistics.median(times) < 0.1
    finally:
        process.kill()
        process.wait()


def test_statement_counters_count_exactly_what_clients_sent():
    """Against the real database (started here if it is not running: run under `flock /tmp/bench.lock`)."""
    with LocalDatabase():
        with closing(db.connect()) as conn:
            before = db.statement_counters()
            with conn.cursor() as cur:
                for _ in range(20):
                    cur.execute("SELECT 1")
                cur.execute("PREPARE s FROM 'SELECT ?'")
                for _ in range(5):
                    cur.execute("EXECUTE s USING 1")
                cur.execute("DEALLOCATE PREPARE s")
            conn.ping(reconnect=False)
            conn.ping(reconnect=False)
            after = db.statement_counters()
            assert db.statements_between(before, after) == {"questions": 27, "com_select": 25, "com_stmt_execute": 5,
                                                            "com_admin_commands": 2}
            none = {"questions": 0, "com_select": 0, "com_stmt_execute": 0, "com_admin_commands": 0}
            assert db.statements_between(after, db.statement_counters()) == none
            shared = [db.statement_counters(conn) for _ in range(2)]
            assert db.statements_between(*shared, shared_connection=True) == none

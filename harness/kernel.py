"""Kernel event counts per request for a process tree (the port, the database), read from /proc.

Beside CPU per request, these are counts that do not depend on the machine's speed: context switches
(voluntary: the thread blocked; involuntary: it was preempted), read/write syscalls, and how many of the
process's threads ran during a step. Take `snapshot(pids)` before and after a step, then
`per_request(before, after, requests, "app")`.

Where each number comes from, and what it misses:
- Context switches: `voluntary_ctxt_switches` / `nonvoluntary_ctxt_switches` of every thread, from
  /proc/PID/task/TID/status (/proc/PID/status alone shows only the main thread's). The kernel keeps no
  per-process total that includes exited threads in /proc, so the switches of a thread that exited between
  the two snapshots are lost. The deltas are taken per thread (a thread missing from `before` counts from
  0; a thread missing from `after` is left out, not subtracted), so an exited thread makes the figure a
  little low, never wrong in sign. A JVM under steady load rarely ends threads; a pool that retires idle
  threads during a step (keep-alive timeouts) loses their switches.
- Syscalls: `syscr` / `syscw` from /proc/PID/io, process-wide (they include threads that exited).
  Measured here (kernel 6.18): they count read/readv/pread and write/writev/pwrite, on sockets too, but NOT
  recv/recvfrom/recvmsg or send/sendto/sendmsg (those bypass the VFS; rchar/wchar miss them as well).
  So they count a syscall family, not the I/O a process does: with strace, 500 sequential requests showed
  MariaDB serving every query with recvfrom + sendto (syscr = syscw = 0 per request), quarkus-vertx (Netty)
  reading with recvfrom and writing with sendto or writev (0 reads, 0.44 writes per request), and
  spring-platform (JDK sockets) using read/write (4.4 reads, 3.9 writes per request). Compare these keys
  between runs of one port, not between ports. /proc/PID/io needs ptrace access to the process (same user
  or root); when it is unreadable the syscall keys are left out.
- The JIT's share: the CPU ticks of the JIT compiler threads (by name, "C2 CompilerThre": the kernel keeps 15
  characters) over all the tree's ticks between the snapshots; a compiler thread that exited in between (the JVM
  retires idle ones) is lost, and it was idle.
- Threads that ran: a thread ran when its CPU ticks (utime+stime, fields 14 and 15 of
  /proc/PID/task/TID/stat, in 1/100 s) or its context switches grew. Ticks alone miss a thread that ran for
  less than a tick in all (measured: a thread that slept 5 ms 100 times gained 177 switches and 0 ticks);
  any thread that ran and went back to sleep has made a voluntary switch, and one that ran without ever
  sleeping has gained ticks. A thread that was only woken and found nothing to do still counts: it ran.

Cost: one pass over /proc/PID/task, two small reads (stat, status) per thread plus /proc/PID/io per
process. Measured here (2-vCPU EPYC VM shared with other work, load 1-4, Python 3.11): a snapshot of a Python
process with 250 threads takes 7-9 ms (median 8 ms, ~32 µs per thread: the opens and reads are ~6 ms of it,
stat 2.4 ms + status 3.6 ms); a started quarkus-vertx (25 threads) 0.9 ms, spring-platform (37 threads)
1.2 ms. It runs on the harness's side (the measured process is not stopped), so take one at each end of a
step, not at a sampling rate.

Pids are the root and its children, as the caller lists them (see `tree_pids`). A snapshot is None when
the root is gone (no /proc entry, or a zombie); children that vanished are skipped. Pid reuse within a
step is not detected. Standard library and harness.sampling's process tree only.
"""
from __future__ import annotations

import dataclasses
import os
import re
import time

from .sampling import tree

_VOLUNTARY = b"\nvoluntary_ctxt_switches:"
_INVOLUNTARY = b"\nnonvoluntary_ctxt_switches:"
# The JVM's JIT compiler threads, by the name the kernel keeps (15 characters: "C2 CompilerThre")
JIT_THREAD = re.compile(r"^(C1 |C2 |JVMCI )?CompilerThre")


@dataclasses.dataclass(frozen=True)
class Counters:
    at: float                   # time.monotonic() when the snapshot was taken
    voluntary: int              # sum of voluntary_ctxt_switches over the live threads of all the tree's processes
    involuntary: int            # ... nonvoluntary_ctxt_switches
    syscr: int | None           # sum of /proc/PID/io syscr over the processes; None when one was unreadable
    syscw: int | None           # ... syscw
    task_ticks: dict[int, int]  # tid -> utime + stime ticks (1/100 s)
    # tid -> (voluntary, involuntary) switches: per_request takes deltas per thread so exited threads are not
    # subtracted, and counts a thread as having run when its switches grew even if its ticks did not.
    task_switches: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    # pid -> (syscr, syscw): a child that appears or vanishes between snapshots does not skew the deltas.
    process_io: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)
    jit_tids: frozenset[int] = frozenset()   # the JIT compiler threads among task_ticks


def tree_pids(pid: int | None) -> list[int]:
    """The pid and its descendants' pids (what `snapshot` takes); [] when the process is gone."""
    return [p.pid for p in tree(pid)]


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 8192)
    except OSError:   # ESRCH: the task exited between open and read
        return None
    finally:
        os.close(fd)


def _field(status: bytes, key: bytes) -> int | None:
    i = status.find(key)
    if i < 0:
        return None
    j = status.find(b"\n", i + len(key))
    return int(status[i + len(key):j if j >= 0 else None])


def _io(pid: int) -> tuple[int, int] | None:
    data = _read(f"/proc/{pid}/io")
    if not data:
        return None
    syscr = syscw = None
    for line in data.split(b"\n"):
        if line.startswith(b"syscr:"):
            syscr = int(line[6:])
        elif line.startswith(b"syscw:"):
            syscw = int(line[6:])
    return None if syscr is None or syscw is None else (syscr, syscw)


def snapshot(pids: list[int]) -> Counters | None:
    """The counters of a process tree (`pids`: the root first, then its children); None if the root is gone."""
    if not pids:
        return None
    at = time.monotonic()
    ticks: dict[int, int] = {}
    switches: dict[int, tuple[int, int]] = {}
    process_io: dict[int, tuple[int, int]] = {}
    jit: set[int] = set()
    io_complete = True
    for n, pid in enumerate(pids):
        base = f"/proc/{pid}/task/"
        try:
            tids = os.listdir(base)
        except OSError:
            if n == 0:
                return None
            continue
        alive = False
        for tid in tids:
            stat = _read(base + tid + "/stat")
            status = _read(base + tid + "/status") if stat else None
            if not status:
                continue   # the thread exited between listdir and open (or read)
            rest = stat[stat.rfind(b")") + 2:].split()
            if rest[0] in (b"Z", b"X"):
                continue   # exited, not yet reaped: its counts are final but it no longer runs
            voluntary, involuntary = _field(status, _VOLUNTARY), _field(status, _INVOLUNTARY)
            if voluntary is None or involuntary is None:
                continue
            alive = True
            ticks[int(tid)] = int(rest[11]) + int(rest[12])   # fields 14 (utime) and 15 (stime)
            if JIT_THREAD.match(stat[stat.find(b"(") + 1:stat.rfind(b")")].decode(errors="replace")):
                jit.add(int(tid))
            switches[int(tid)] = (voluntary, involuntary)
        if not alive:
            if n == 0:
                return None   # a zombie (or all its threads exited while we looked)
            continue
        io = _io(pid)
        if io is None:
            io_complete = False
        else:
            process_io[pid] = io
    return Counters(
        at=at,
        voluntary=sum(v for v, _ in switches.values()),
        involuntary=sum(i for _, i in switches.values()),
        syscr=sum(r for r, _ in process_io.values()) if io_complete else None,
        syscw=sum(w for _, w in process_io.values()) if io_complete else None,
        task_ticks=ticks,
        task_switches=switches,
        process_io=process_io if io_complete else {},
        jit_tids=frozenset(jit),
    )


def jit_share(before: Counters | None, after: Counters | None) -> float | None:
    """The JIT compiler threads' share of the tree's CPU ticks between two snapshots (None: a snapshot is missing
    or no tick grew): near 0 once the JIT has compiled what runs."""
    if before is None or after is None:
        return None
    grown = {tid: _grown(t, before.task_ticks.get(tid)) for tid, t in after.task_ticks.items()}
    total = sum(grown.values())
    return round(sum(grown[tid] for tid in after.jit_tids if tid in grown) / total, 3) if total else None


def _grown(after: int, before: int | None) -> int:
    """How much a counter grew; a counter missing before (new thread or process), or smaller than before (its
    id was reused by a new one), counts from 0."""
    return after if before is None or after < before else after - before


def per_request(before: Counters | None, after: Counters | None, requests: int, prefix: str) -> dict:
    """Counts per request between two snapshots of the same tree, keys prefixed with `prefix` (e.g. "app",
    "db"), rounded to 2 decimals; {} when there were no requests or a snapshot is missing.

    `{prefix}_ctx_voluntary_per_request`, `{prefix}_ctx_involuntary_per_request`: context switches of the
    threads alive at `after` (those that exited in between are lost: see the module's docstring).
    `{prefix}_syscalls_read_per_request`, `{prefix}_syscalls_write_per_request`: read/write-family syscalls
    (not send/recv); left out when /proc/PID/io was unreadable.
    `{prefix}_threads_ran`: threads whose CPU ticks or context switches grew (a new thread counts when it
    has either); `{prefix}_threads`: threads at `after`. These two are counts, not per request."""
    if not requests or before is None or after is None:
        return {}
    voluntary = involuntary = 0
    ran = 0
    for tid, (v, i) in after.task_switches.items():
        old_v, old_i = before.task_switches.get(tid, (None, None))
        dv, di = _grown(v, old_v), _grown(i, old_i)
        voluntary += dv
        involuntary += di
        if dv or di or _grown(after.task_ticks.get(tid, 0), before.task_ticks.get(tid)):
            ran += 1
    if not after.task_switches:   # Counters built by hand with only the documented totals
        voluntary = after.voluntary - before.voluntary
        involuntary = after.involuntary - before.involuntary
        ran = sum(1 for tid, t in after.task_ticks.items() if _grown(t, before.task_ticks.get(tid)))
    out = {
        f"{prefix}_ctx_voluntary_per_request": round(voluntary / requests, 2),
        f"{prefix}_ctx_involuntary_per_request": round(involuntary / requests, 2),
    }
    if before.syscr is not None and after.syscr is not None:
        if after.process_io:
            old = before.process_io
            reads = sum(_grown(r, old[pid][0] if pid in old else None) for pid, (r, _) in after.process_io.items())
            writes = sum(_grown(w, old[pid][1] if pid in old else None) for pid, (_, w) in after.process_io.items())
        else:
            reads, writes = after.syscr - before.syscr, after.syscw - before.syscw
        out[f"{prefix}_syscalls_read_per_request"] = round(reads / requests, 2)
        out[f"{prefix}_syscalls_write_per_request"] = round(writes / requests, 2)
    out[f"{prefix}_threads_ran"] = ran
    out[f"{prefix}_threads"] = len(after.task_ticks)
    return out

"""Samples CPU time and resident memory of the app and the DB while a step runs (psutil), and the gauges of the
bounds on a request's path (read from /proc)."""
from __future__ import annotations

import os
import threading
import time

import psutil

INTERVAL_S = 0.25


def tree(pid: int | None) -> list[psutil.Process]:
    """The process and its descendants; [] when it is gone."""
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def cpu_seconds(procs) -> tuple[float, float]:
    """(user, system) CPU seconds of the processes: kept apart, since user-space work scales with the CPU's speed
    and kernel work with the machine's syscall and wake-up costs (the calibration measures both)."""
    user = system = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            user += t.user
            system += t.system
        except psutil.Error:
            pass
    return user, system


def rss_mb(procs) -> float:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


def threads(procs) -> int:
    total = 0
    for p in procs:
        try:
            total += p.num_threads()
        except psutil.NoSuchProcess:
            pass
    return total


class _Periodic:
    """A block during which `_sample` runs on a background thread every `interval` seconds (first at once when
    `sample_first`, else after one interval), and once more at the end."""
    interval: float
    sample_first: bool = True

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self):
        raise NotImplementedError

    def _loop(self):
        if self.sample_first and not self._stop.is_set():
            self._sample()
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


class Sampler(_Periodic):
    """Records (time, app (user, system) CPU s, DB (user, system) CPU s, app RSS MiB, app threads) every INTERVAL_S
    on a background thread."""
    interval = INTERVAL_S

    def __init__(self, app_pid: int | None, db_pid: int | None):
        super().__init__()
        self.app, self.db = tree(app_pid), tree(db_pid)
        self.samples: list[tuple[float, float, float, float]] = []

    def _sample(self):
        self.samples.append((time.monotonic(), cpu_seconds(self.app), cpu_seconds(self.db), rss_mb(self.app),
                             threads(self.app)))

    def window(self, start: float, end: float) -> dict:
        """CPU cores used (CPU seconds / wall seconds), RSS and the most threads inside [start, end]."""
        inside = [s for s in self.samples if start <= s[0] <= end] or self.samples
        first, last = inside[0], inside[-1]
        wall = max(last[0] - first[0], 1e-9)
        rss = [s[3] for s in inside]
        app_user, app_system = last[1][0] - first[1][0], last[1][1] - first[1][1]
        db_cpu = sum(last[2]) - sum(first[2])
        return {
            "wall_s": wall,
            "app_cpu_s": app_user + app_system if self.app else None,
            "app_user_s": app_user if self.app else None,
            "app_system_s": app_system if self.app else None,
            "db_cpu_s": db_cpu if self.db else None,
            "app_cpu_cores": round((app_user + app_system) / wall, 3) if self.app else None,
            "db_cpu_cores": round(db_cpu / wall, 3) if self.db else None,
            "app_rss_mb_mean": round(sum(rss) / len(rss), 1) if self.app else None,
            "app_rss_mb_peak": round(max(rss), 1) if self.app else None,
            "app_threads_peak": max(s[4] for s in inside) if self.app else None,
        }


# --- the gauges of a request path's bounds, read from outside the JVM -----------------------------------------

COMM_LEN = 15       # Linux keeps a thread's name to 15 characters (TASK_COMM_LEN - 1); the JVM names its threads there

# Each sample reads the socket table (~10 ms of the harness's CPU) and, for a pool of platform threads, every
# thread's name (~60 ms at 5,000 threads: spring-platform's, sized): the gauges are high-water marks that hold for a
# minute, so a sample every 5 s misses nothing and costs the shared cores under 1.5 % of one.
GAUGE_INTERVAL_S = 5.0


def connections_to(pid: int, port: int) -> int | None:
    """Established TCP connections, in the network namespace of `pid`, whose remote end is `port`: the client side of
    the connections to a server on `port` (the server's own accepted sockets have `port` as their local end). None
    when the process is gone."""
    count = 0
    try:
        for table in ("tcp", "tcp6"):
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                for line in f:
                    fields = line.split(None, 4)
                    if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port:
                        count += 1
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return count


def threads_named(pid: int, prefix: str) -> int | None:
    """The process's threads whose name starts with `prefix` (cut where the kernel cuts names), None when it is
    gone: a pool of platform threads, alive (a pool keeps its idle threads for a while: a high-water mark)."""
    cut = prefix[:COMM_LEN]
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return None
    count = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                count += f.read().startswith(cut)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return count


class Gauges(_Periodic):
    """The peak of each named gauge (a function of no argument returning a count, or None) while the block runs,
    read every GAUGE_INTERVAL_S on a background thread and once at the end."""
    interval, sample_first = GAUGE_INTERVAL_S, False

    def __init__(self, gauges: dict[str, object]):
        super().__init__()
        self.gauges, self.peaks = gauges, {name: None for name in gauges}

    def _sample(self):
        for name, read in self.gauges.items():
            value = read()
            if value is not None and (self.peaks[name] is None or value > self.peaks[name]):
                self.peaks[name] = value

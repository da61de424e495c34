"""Samples CPU time and resident memory of the app and the DB while a step runs (psutil)."""
from __future__ import annotations

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


class Sampler:
    """Records (time, app (user, system) CPU s, DB (user, system) CPU s, app RSS MiB, app threads) every INTERVAL_S
    on a background thread."""

    def __init__(self, app_pid: int | None, db_pid: int | None):
        self.app, self.db = tree(app_pid), tree(db_pid)
        self.samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self):
        self.samples.append((time.monotonic(), cpu_seconds(self.app), cpu_seconds(self.db), rss_mb(self.app),
                             threads(self.app)))

    def _loop(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(INTERVAL_S)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()

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

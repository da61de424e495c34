"""The harness's own processes beside a measurement (the calibration's nginx, the generator evaluation's test
servers, the downstream nginx, Toxiproxy, the Docker engine): started with their output in a log, waited for until
they answer, stopped with TERM and, after a grace period, KILL.

    process = sideprocess.start(cmd, lambda: sideprocess.listening(port), exited=lambda code: "...", late="...")
    ...
    sideprocess.stop(process)

One that exits before it answers, or does not answer within `timeout`, is stopped and the caller's message raised.
`group`: it leads a session of its own (Ctrl-C in the terminal reaches the harness only, which stops it), and stop()
signals the whole group. One known by the pid file it wrote, which outlives the harness process that started it
(`just compose-up`'s downstream, dockerd), is found by pid_from() and stopped by stop_pid().
Low-level: imports only errors and sampling.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Callable, Iterator

import psutil

from .errors import Fatal
from .sampling import tree


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """A readiness check: the TCP port takes a connection."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def answers(url: str, timeout: float = 2.0) -> bool:
    """A readiness check: `url` answers below 400."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
        return True
    except OSError:
        return False


def start(cmd: list[str], ready: Callable[[], bool], exited: Callable[[int], str], late: str, timeout: float = 10.0,
          poll_s: float = 0.02, log: Path | None = None, group: bool = True, **popen) -> subprocess.Popen:
    """Starts `cmd` (stdout and stderr into `log`, rewritten, when given) and waits until `ready()`; stopped, then
    Fatal(exited(its code)) when it ends first, Fatal(late) when `timeout` s pass."""
    with open(log, "w") if log else contextlib.nullcontext() as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if log else None,
                                   stdin=subprocess.DEVNULL, start_new_session=group, **popen)
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None:
            if ready():
                return process
            if time.monotonic() > deadline:
                raise Fatal(late)
            time.sleep(poll_s)
        raise Fatal(exited(process.returncode))
    except BaseException:
        stop(process, group)
        raise


def stop(process: subprocess.Popen, group: bool = True, grace_s: float = 10.0) -> None:
    """TERM (to its group with `group`), KILL after `grace_s`; reaped. Nothing when it has ended."""
    def send(sig):
        with contextlib.suppress(ProcessLookupError):
            (os.killpg if group else os.kill)(process.pid, sig)
    if process.poll() is None:
        send(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            send(signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def running(cmd: list[str], ready: Callable[[], bool], exited: Callable[[int], str], late: str,
            **kwargs) -> Iterator[subprocess.Popen]:
    """start() for the duration of a block; stopped on the way out, also on Ctrl-C or an error."""
    process = start(cmd, ready, exited, late, **kwargs)
    try:
        yield process
    finally:
        stop(process, kwargs.get("group", True))


def pid_from(pid_file: Path, name: str) -> int | None:
    """The pid in a pid file, when that process is alive and its name has `name` in it (else the file is stale:
    the pid is someone else's now)."""
    try:
        pid = int(pid_file.read_text().strip())
        return pid if name in psutil.Process(pid).name() else None
    except (OSError, ValueError, psutil.Error):
        return None


def stop_pid(pid: int, grace_s: float, kill: bool = True) -> bool:
    """Stops a process known by its pid alone (not necessarily this process's child): TERM, then up to `grace_s`
    for it and its descendants to end; with `kill` those left are killed and waited for as long again. True when
    none is left."""
    procs = tree(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    left = _wait(procs, grace_s)
    if left and kill:
        for p in left:
            with contextlib.suppress(psutil.Error):
                p.kill()
        left = _wait(left, grace_s)
    return not left


def _wait(procs: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """Those of `procs` still running after at most `seconds`. A zombie has ended: reaped when it is ours."""
    deadline = time.monotonic() + seconds
    while True:
        left = []
        for p in procs:
            with contextlib.suppress(OSError):
                os.waitpid(p.pid, os.WNOHANG)
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.status() != psutil.STATUS_ZOMBIE:
                    left.append(p)
        if not left or time.monotonic() > deadline:
            return left
        procs = left
        time.sleep(0.05)

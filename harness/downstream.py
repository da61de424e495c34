"""The downstream service of `GET /feed`: nginx with the echo module (downstream/nginx.conf), on 127.0.0.1.

    with downstream.running(latency_ms=50) as ds:     # or up()/down(), also across processes (pid file)
        ... ports.start(port, ..., extra_env=ds.env()) ...
        ds.cpu_seconds(), ds.requests_served()

`GET /item?email=E&i=N` answers `{"email":"E","i":N}` (application/json) after `latency_ms` (echo_sleep: a timer
in nginx's event loop, no thread); `&delay_ms=D` overrides the latency for one request. The server runs in its own
prefix under build/downstream/<port>/ (config, pid file, logs), never as the system's nginx service, with
`daemon off` under this process (a recipe that returns leaves it running: `down()` stops it by its pid file).

Low-level: imports only paths, errors, sampling and sideprocess.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import shutil
import urllib.request
from pathlib import Path
from typing import Iterator

import psutil

from . import sampling, sideprocess
from .errors import Fatal
from .paths import BUILD, ROOT

TEMPLATE = ROOT / "downstream" / "nginx.conf"
DEFAULT_PORT = 8090
ECHO_MODULE_PATHS = [Path("/usr/lib/nginx/modules/ngx_http_echo_module.so"),
                     Path("/usr/share/nginx/modules/ngx_http_echo_module.so")]
WORKERS = 1                   # one event loop: the lightest footprint on a 2-core box; timers, not threads
WORKER_CONNECTIONS = 20_000   # 10,000+ concurrent client connections, each needs one
NOFILE_WANTED = 65_536


def default_port(env=os.environ) -> int:
    return int(env.get("DOWNSTREAM_PORT", DEFAULT_PORT))


def prefix(port: int) -> Path:
    return BUILD / "downstream" / str(port)


@dataclasses.dataclass
class Downstream:
    """A running downstream nginx."""
    port: int
    latency_ms: float
    pid: int                  # the nginx master
    prefix: Path
    access_log: Path | None   # one line per request when enabled: `msec email i status request_time`

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment for a port: where it finds the downstream."""
        return {"DOWNSTREAM_URL": self.url}

    def processes(self) -> list[psutil.Process]:
        return sampling.tree(self.pid)

    def cpu_seconds(self) -> float:
        """User + system CPU of the master and its workers so far (difference two readings per window)."""
        return sum(sampling.cpu_seconds(self.processes()))

    def requests_served(self) -> int:
        """nginx's request counter (stub_status `requests`), this reading included: the difference between two
        readings is the requests in between plus one (the earlier reading itself)."""
        return requests_served(self.port)

    def stop(self) -> None:
        down(self.port)


def _nginx() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not found:
        raise Fatal("nginx is missing: run `scripts/install-tools.sh` (installs nginx-light and "
                    "libnginx-mod-http-echo from Debian's packages)")
    return found


def _echo_module() -> Path:
    for path in ECHO_MODULE_PATHS:
        if path.exists():
            return path
    raise Fatal("nginx's echo module is missing: run `scripts/install-tools.sh` (libnginx-mod-http-echo)")


def _nofile() -> int:
    """Raises this process's soft RLIMIT_NOFILE towards NOFILE_WANTED, within the hard limit (nginx inherits it);
    returns the same figure for worker_rlimit_nofile."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard_cap = NOFILE_WANTED if hard == resource.RLIM_INFINITY else hard
    want = max(soft, min(NOFILE_WANTED, hard_cap))
    if want > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want


def latency_seconds(latency_ms: float) -> str:
    """echo_sleep's argument: seconds with at most 3 decimals (whole milliseconds)."""
    if latency_ms < 0 or latency_ms != int(latency_ms) or latency_ms > 999_999:
        raise Fatal(f"LATENCY_MS={latency_ms}: the downstream adds whole milliseconds (0 to 999999)")
    return f"{int(latency_ms) // 1000}.{int(latency_ms) % 1000:03d}"


def render(port: int, latency_ms: float, access_log: bool, workers: int = WORKERS, also_on: str | None = None) -> Path:
    """Writes the configuration into the port's prefix; returns its path. `also_on`: a second address to listen on
    besides loopback (Docker's bridge, for ports in containers)."""
    where = prefix(port)
    (where / "tmp").mkdir(parents=True, exist_ok=True)
    nofile = _nofile()
    values = {
        "PREFIX": str(where), "PORT": str(port), "LATENCY_S": latency_seconds(latency_ms),
        "WORKERS": str(workers), "RLIMIT_NOFILE": str(nofile),
        "WORKER_CONNECTIONS": str(min(WORKER_CONNECTIONS, nofile - 64)),
        "ECHO_MODULE": str(_echo_module()),
        "ACCESS_LOG": f"{where / 'access.log'} downstream" if access_log else "off",
        # ports in containers (compose.yaml's host.docker.internal) reach the host on Docker's bridge address
        "EXTRA_LISTEN": f"listen {also_on}:{port} backlog=4096;" if also_on and also_on != "127.0.0.1" else "",
    }
    text = TEMPLATE.read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    conf = where / "nginx.conf"
    conf.write_text(text)
    return conf


def requests_served(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        lines = r.read().decode().splitlines()
    # "Active connections: N" / "server accepts handled requests" / " A H R" / ...
    return int(lines[2].split()[2])


def up(latency_ms: float = 0, port: int | None = None, access_log: bool = False,
       workers: int = WORKERS, also_on: str | None = None) -> Downstream:
    """Starts the downstream (restarting ours if it already runs on that port) and waits until it answers; it
    listens on loopback and, when named, on `also_on` too."""
    port = default_port() if port is None else port
    down(port)
    if sideprocess.listening(port):
        raise Fatal(f"port {port} is busy: stop what listens there (`ss -ltnp 'sport = :{port}'`) or choose "
                    f"another with DOWNSTREAM_PORT")
    conf = render(port, latency_ms, access_log, workers, also_on)
    where = prefix(port)
    log = where / "nginx.out"
    if access_log:
        (where / "access.log").write_text("")
    process = sideprocess.start(
        [_nginx(), "-p", str(where), "-c", str(conf), "-e", str(where / "error.log")],
        lambda: sideprocess.answers(f"http://127.0.0.1:{port}/item?email=a@b&i=0&delay_ms=0"), log=log,
        exited=lambda code: f"the downstream nginx exited at start (code {code}): "
                            f"{_tail(log) or _tail(where / 'error.log')}",
        late=f"the downstream nginx did not answer on port {port} within 10 s: see {where / 'error.log'}")
    return Downstream(port, latency_ms, process.pid, where, where / "access.log" if access_log else None)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return " | ".join(path.read_text().strip().splitlines()[-3:])
    return ""


def down(port: int | None = None) -> bool:
    """Stops our nginx on that port (found by its pid file); True when one was running."""
    port = default_port() if port is None else port
    pid = sideprocess.pid_from(prefix(port) / "nginx.pid", "nginx")
    if pid is None:
        return False
    sideprocess.stop_pid(pid, 5)              # nginx: TERM = fast shutdown (master and workers)
    return True


@contextlib.contextmanager
def running(latency_ms: float = 0, port: int | None = None, access_log: bool = False,
            workers: int = WORKERS) -> Iterator[Downstream]:
    """The downstream for the duration of a block; stopped on exit, Ctrl-C and errors included."""
    ds = up(latency_ms, port, access_log, workers)
    try:
        yield ds
    finally:
        down(ds.port)


class AroundJvm:
    """The downstream of a scenario's JVMs: up at 0 ms around each JVM (it starts and warms up against it), moved
    to a cell's latency with `at` (the port's client reconnects), stopped with the JVM; listening on `also_on` too
    when named (Docker's bridge)."""

    def __init__(self, also_on: str | None = None):
        self.also_on, self.nginx = also_on, None

    @contextlib.contextmanager
    def around(self, **extra_env: str) -> Iterator[dict]:
        """Yields the JVM's extra environment: the downstream's address and `extra_env`."""
        self.nginx = up(0, also_on=self.also_on)
        try:
            yield {**self.nginx.env(), **extra_env}
        finally:
            down(self.nginx.port)

    def at(self, latency_ms: float) -> Downstream:
        self.nginx = up(latency_ms, port=self.nginx.port, also_on=self.also_on)
        return self.nginx


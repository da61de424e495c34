"""BENCH_ENV=compose: the DB and the ports in containers (compose.yaml), driven by `docker compose`.

The same settings as a local run reach the containers through compose.yaml's BENCH_* variables (CPU sets,
memory, JVM options, pool size, published port). The DB runs in compose, published on 127.0.0.1:DB_PORT,
so the rest of the harness treats it as an external DB (use_compose_db()).

A whole run: `with compose.Stack(settings):` brings MySQL and its seed up once (then the DB ceiling,
seeding check and tokens work as with any external DB); start() per port adds that port's container and
its stop() removes it. start() without a Stack brings the DB up with the port and stop() takes all down.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from datetime import datetime, timezone

from . import ports
from .errors import Fatal
from .paths import LOGS, ROOT


def enabled(env=os.environ) -> bool:
    return env.get("BENCH_ENV", "local") == "compose"


def compose_files(env=os.environ) -> list[str]:
    """compose.yaml, or BENCH_COMPOSE_FILES (e.g. "compose.yaml compose.mariadb.yaml")."""
    return shlex.split(env.get("BENCH_COMPOSE_FILES", "compose.yaml"))


def docker_compose() -> list[str]:
    """The Compose CLI: the `docker compose` plugin, else a standalone docker-compose."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise Fatal("BENCH_ENV=compose needs Docker Compose v2 (`docker compose version` failed): install the "
                "compose plugin, or unset BENCH_ENV to run locally")


def compose_env(settings: dict, env=os.environ) -> dict:
    """The process environment plus compose.yaml's variables, filled from the run's settings."""
    out = dict(env)
    out.update({
        "BENCH_CPUS_APP": settings["cpus"]["app"],
        "BENCH_CPUS_DB": settings["cpus"]["db"],
        "BENCH_JVM_OPTIONS": " ".join(settings["jvm"]["options"]),
        "BENCH_DB_POOL_SIZE": str(settings["db"]["pool_size"]),
        "BENCH_LOAD_PORT": str(settings["load"]["port"]),
    })
    # Container memory limits: bench.toml's [containers] when it has one, else compose.yaml's defaults.
    for role, limit in settings.get("containers", {}).items():
        out[f"BENCH_MEMORY_{role.upper()}"] = str(limit)
    return out


def use_compose_db(env=os.environ) -> None:
    """Points the harness's DB access (harness.db) at the compose DB published on the loopback."""
    env["BENCH_DB"] = "external"
    env["DB_HOST"] = "127.0.0.1"


def _run(args: list[str], env: dict, log=None, timeout: float | None = None, check: bool = True):
    cmd = [*docker_compose(), *(a for f in compose_files(env) for a in ("-f", f)), *args]
    out = log if log is not None else subprocess.PIPE
    result = subprocess.run(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE,
                            text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise Fatal(f"`{' '.join(cmd)}` failed (code {result.returncode})"
                    + (f": {result.stderr.strip()[-500:]}" if log is None else f": see {log.name}"))
    return result


class Stack:
    """The compose DB (db + db-seed) for a whole run; `docker compose down --volumes` at the end."""

    active = False

    def __init__(self, settings: dict):
        self.env = compose_env(settings)

    def __enter__(self):
        db_port = int(self.env.get("DB_PORT", "3306"))
        if ports.port_busy("127.0.0.1", db_port):
            raise Fatal(f"port {db_port} is busy on this host, and compose publishes the DB there: stop what "
                        f"listens (e.g. `just db-down`), or choose another with DB_PORT")
        LOGS.mkdir(parents=True, exist_ok=True)
        Stack.active = True
        try:
            with open(LOGS / "compose-db.log", "w") as log:
                # db-seed is run, not `up --wait`ed: --wait counts a one-shot's exit as a failure unless
                # another started service depends on its completion (docker/compose#10596).
                _run(["up", "-d", "--wait", "db"], self.env, log=log, timeout=600)
                _run(["run", "--rm", "--build", "db-seed"], self.env, log=log, timeout=900)
        except BaseException:
            self.__exit__()
            raise
        use_compose_db()
        return self

    def __exit__(self, *exc):
        Stack.active = False
        with open(LOGS / "compose-db.log", "a") as log:
            _run(["--profile", "*", "down", "--volumes", "--remove-orphans"], self.env, log=log, check=False,
                 timeout=300)


class _Container:
    """Stands in for a Popen in ports.wait_first_200: poll() is None while the port's container runs."""

    def __init__(self, owner: "Running"):
        self.owner, self.returncode, self._checked = owner, None, 0.0

    def poll(self):
        if self.returncode is None and time.monotonic() - self._checked > 1.0:
            self._checked = time.monotonic()
            state = self.owner.inspect()
            if state and not state.get("Running", False):
                self.returncode = state.get("ExitCode", 1)
        return self.returncode


class Running:
    """A port started by compose: the interface of ports.Running (url, startup_seconds, idle_rss_mb, pid,
    log, stop()), with pid None (the JVM is PID 1 of its container)."""

    pid = None

    def __init__(self, port: ports.Port, env: dict, log, url: str):
        self.port, self.env, self.log, self.url = port, env, log, url
        self.owns_stack = not Stack.active
        self.process = _Container(self)
        self.startup_seconds: float | None = None
        self.idle_rss_mb: float | None = None
        self.container_id: str | None = None

    def inspect(self) -> dict | None:
        if not self.container_id:
            ids = _run(["--profile", self.port.name, "ps", "-q", "--all", self.port.name], self.env).stdout.split()
            self.container_id = ids[0] if ids else None
        if not self.container_id:
            return None
        out = subprocess.run(["docker", "inspect", "-f", "{{json .State}}", self.container_id],
                             capture_output=True, text=True)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def rss_mb(self) -> float | None:
        """VmRSS of the container's PID 1 (the JVM), as a local run reads the java process's RSS."""
        out = _run(["--profile", self.port.name, "exec", "-T", self.port.name, "cat", "/proc/1/status"],
                   self.env, check=False)
        for line in out.stdout.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return None

    def stop(self) -> None:
        with open(self.log, "a") as log:
            log.write("\n== docker compose logs\n")
            log.flush()
            _run(["--profile", self.port.name, "logs", "--no-color", "db-seed", self.port.name], self.env,
                 log=log, check=False, timeout=60)
            if self.owns_stack:
                _run(["--profile", self.port.name, "down", "--volumes", "--remove-orphans"], self.env,
                     log=log, check=False, timeout=300)
            else:  # the Stack's DB stays for the next port
                _run(["--profile", self.port.name, "rm", "--stop", "--force", self.port.name], self.env,
                     log=log, check=False, timeout=120)


def start(port: ports.Port, settings: dict, token: str, timeout: float = 600.0) -> Running:
    """`docker compose --profile NAME up -d --build --wait` (MySQL, its seed, the port), then the first
    valid 200 on the published port. startup_seconds counts from the container's start, as a local run
    counts from `java`'s: image builds and the DB's initialisation are not in it."""
    env = compose_env(settings)
    http_port = int(settings["load"]["port"])
    db_port = int(env.get("DB_PORT", "3306"))
    for busy, what in ((http_port, "BENCH_LOAD_PORT"), *(() if Stack.active else ((db_port, "DB_PORT"),))):
        if ports.port_busy("127.0.0.1", busy):
            raise Fatal(f"port {busy} is busy on this host, and compose publishes there: stop what listens "
                        f"(e.g. `just db-down`), or choose another with {what}")
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{port.name}.log"
    running = Running(port, env, log, f"http://127.0.0.1:{http_port}/")
    try:
        with open(log, "w") as out:
            _run(["--profile", port.name, "up", "-d", "--build", "--wait", *([port.name] if Stack.active else [])],
                 env, log=out, timeout=timeout)
        ports.wait_first_200(running, token, timeout=120.0)
        answered = datetime.now(timezone.utc)
        state = running.inspect() or {}
        running.startup_seconds = (answered - _parse_time(state["StartedAt"])).total_seconds() \
            if state.get("StartedAt") else None
        time.sleep(1.0)  # as a local run: let start-up work settle before reading idle RSS
        running.idle_rss_mb = running.rss_mb()
    except BaseException:
        running.stop()
        raise
    return running


def _parse_time(text: str) -> datetime:
    """Docker's RFC 3339 times carry nanoseconds; fromisoformat takes at most microseconds."""
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00")


def environment() -> dict:
    """What the report says about where a compose run ran."""
    info = {"mode": "compose", "compose_files": compose_files()}
    try:
        info["compose_version"] = subprocess.run([*docker_compose(), "version", "--short"],
                                                 capture_output=True, text=True).stdout.strip()
        engine = subprocess.run(["docker", "version", "-f", "{{.Server.Version}}"], capture_output=True, text=True)
        info["engine_version"] = engine.stdout.strip() if engine.returncode == 0 else None
    except Fatal:
        info["compose_version"] = None
    return info

"""BENCH_ENV=compose: the DB and the ports in containers (compose.yaml), driven by `docker compose`.

The same settings as a local run reach the containers through compose.yaml's BENCH_* variables (CPU sets,
memory, JVM options, pool size, published port). The DB runs in compose, published on 127.0.0.1:DB_PORT,
so the rest of the harness treats it as an external DB (use_compose_db()).

A whole run: `with compose.Stack(settings):` brings MySQL and its seed up once (then the DB ceiling,
seeding check and tokens work as with any external DB); start() per port adds that port's container and
its stop() removes it. start() without a Stack brings the DB up with the port and stop() takes all down.

Where no image registry is reachable, compose.offline.yaml swaps compose.yaml's three registry images for images
made from Debian's packages (scripts/offline-images.sh). The Docker engine is started here when it is installed
and not running (engine()), and then stopped by stop_engine(), as `just compose-down` and `just test` do.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import time
from datetime import datetime, timezone

import psutil

from . import downstream, port_facts, ports, sampling, sideprocess, tokens
from .errors import Fatal
from .paths import BUILD, LOGS, ROOT
from .settings import identifier

# What this module starts and uses: the engine's pid file and log, the Compose CLI scripts/install-docker.sh
# builds, the image whose pull decides between the registry and compose.offline.yaml
ENGINE_DIR = BUILD / "docker"
COMPOSE_CLI = ROOT / "tools" / "bin" / "docker-compose"
REGISTRY_PROBE_IMAGE = "mysql:8.4.11"
OFFLINE_FILE = "compose.offline.yaml"


def host_port_variable(name: str) -> str:
    """compose.yaml's variable for a port's published host port: BENCH_HOST_PORT_SPRING_VIRTUAL and so on."""
    return identifier("BENCH_HOST_PORT", name).upper()


def host_port_env(env=os.environ) -> dict[str, str]:
    """Each port's published host port when several run side by side: ports.toml's host_port, unless
    BENCH_HOST_PORT_<NAME> moves it."""
    return {host_port_variable(name): env.get(host_port_variable(name), str(number))
            for name, number in port_facts.host_ports().items()}


def enabled(env=os.environ) -> bool:
    return env.get("BENCH_ENV", "local") == "compose"


def compose_files(env=os.environ) -> list[str]:
    """BENCH_COMPOSE_FILES (e.g. "compose.yaml compose.mariadb.yaml"), else compose.yaml, plus compose.offline.yaml
    where no registry is reachable (offline())."""
    if "BENCH_COMPOSE_FILES" in env:
        return shlex.split(env["BENCH_COMPOSE_FILES"])
    return ["compose.yaml", *([OFFLINE_FILE] if offline(env) else [])]


def offline(env=os.environ) -> bool:
    """BENCH_COMPOSE_OFFLINE=1 or 0 decides. Unset, a pull of compose.yaml's database image does (the pull is the
    first thing `up` would do; when it fails, no registry is reachable), and the answer is kept in
    BENCH_COMPOSE_OFFLINE for the rest of the run and the processes it starts."""
    if env.get("BENCH_COMPOSE_OFFLINE", "") not in ("0", "1"):
        present = subprocess.run(["docker", "image", "inspect", REGISTRY_PROBE_IMAGE], capture_output=True)
        try:
            pulled = present.returncode == 0 or subprocess.run(
                ["docker", "pull", "-q", REGISTRY_PROBE_IMAGE], capture_output=True, timeout=120).returncode == 0
        except subprocess.TimeoutExpired:
            pulled = False
        if not pulled:
            print(f"compose: {REGISTRY_PROBE_IMAGE} cannot be pulled (no registry reachable): adding {OFFLINE_FILE} "
                  "(images from Debian's packages)", flush=True)
        env["BENCH_COMPOSE_OFFLINE"] = "0" if pulled else "1"
    return env["BENCH_COMPOSE_OFFLINE"] == "1"


def docker_compose() -> list[str]:
    """The Compose CLI: the `docker compose` plugin, else the one scripts/install-docker.sh built, else a standalone
    docker-compose on PATH."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if COMPOSE_CLI.exists():
        return [str(COMPOSE_CLI)]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise Fatal("BENCH_ENV=compose needs Docker Compose v2 (`docker compose version` failed): run "
                "scripts/install-docker.sh (it builds one into tools/bin/), or unset BENCH_ENV to run locally")


def engine() -> None:
    """The Docker engine, answering: started here (dockerd in the background) when it is installed and not running.
    --iptables=false: the engine leaves the host's netfilter alone, so loopback benchmarks after a compose run see
    no connection tracking they did not have before. Published ports then go through docker-proxy, as connections
    from the host's loopback do anyway, and containers reach nothing beyond their bridge (offline images need
    nothing more)."""
    if not shutil.which("docker"):
        raise Fatal("the docker CLI is missing: run scripts/install-docker.sh (Debian: apt-get install docker.io)")
    global _started_here
    if _engine_answers():
        return
    dockerd = shutil.which("dockerd")
    if not dockerd:
        raise Fatal("Docker Engine is not installed: run scripts/install-docker.sh (Debian: apt-get install docker.io)")
    ENGINE_DIR.mkdir(parents=True, exist_ok=True)
    log_path = ENGINE_DIR / "dockerd.log"
    sideprocess.start([dockerd, "--iptables=false", "--ip-masq=false", "--pidfile", str(ENGINE_DIR / "dockerd.pid")],
                      _engine_answers, log=log_path, timeout=60, poll_s=0.5,
                      exited=lambda code: f"dockerd exited at start (code {code}): see {log_path}",
                      late=f"dockerd did not answer within 60 s: see {log_path}")
    _started_here = True


_started_here = False      # engine() started dockerd in this process: Stack stops it on the way out


def _engine_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


def stop_engine() -> bool:
    """Stops the dockerd engine() started (found by its pid file); an engine started otherwise is left alone."""
    pid_file = ENGINE_DIR / "dockerd.pid"
    pid = sideprocess.pid_from(pid_file, "dockerd")
    if pid is None:
        return False
    if not sideprocess.stop_pid(pid, 60, kill=False):
        raise Fatal(f"dockerd (pid {pid}) did not stop within 60 s: see {ENGINE_DIR / 'dockerd.log'}")
    pid_file.unlink(missing_ok=True)
    return True


def prepare(selected: list[ports.Port], env=os.environ) -> None:
    """What `up` needs: Docker and the Compose CLI installed, the engine answering, the ports' jars built and,
    offline, the Debian images."""
    subprocess.run([str(ROOT / "scripts" / "install-docker.sh")], check=True)
    engine()
    docker_compose()
    ports.build(selected)
    if OFFLINE_FILE in compose_files(env):
        subprocess.run([str(ROOT / "scripts" / "offline-images.sh")], check=True)


def bridge_address() -> str:
    """The host's address on Docker's default bridge: where host.docker.internal (host-gateway) leads. Engine 20.10
    names no gateway in the bridge's IPAM config, so the bridge interface's own IPv4 address is read then."""
    out = subprocess.run(["docker", "network", "inspect", "bridge", "-f", "{{json .}}"], capture_output=True, text=True)
    if out.returncode == 0:
        bridge = json.loads(out.stdout)
        for config in (bridge.get("IPAM") or {}).get("Config") or []:
            if config.get("Gateway"):
                return config["Gateway"]
        interface = (bridge.get("Options") or {}).get("com.docker.network.bridge.name", "docker0")
        for address in psutil.net_if_addrs().get(interface, []):
            if address.family == socket.AF_INET:
                return address.address
    raise Fatal("Docker's default bridge has no gateway address (`docker network inspect bridge`)")


def compose_env(settings: dict, env=os.environ) -> dict:
    """The process environment plus compose.yaml's variables, filled from the run's settings."""
    out = dict(env)
    out.update({
        "BENCH_CPUS_APP": settings["cpus"]["app"],
        "BENCH_CPUS_DB": settings["cpus"]["db"],
        "BENCH_JVM_OPTIONS": " ".join(settings["jvm"]["options"]),
        "BENCH_DB_POOL_SIZE": str(settings["db"]["pool_size"]),
    })
    # a benchmark runs one port at a time, on [load] port
    out.update({host_port_variable(name): str(settings["load"]["port"]) for name in ports.PORTS})
    # Without the buildx plugin (Debian 12's docker.io has none), Compose builds with the engine's classic builder,
    # Engine 20.10's default, which takes FROM images from the local store (the offline images)
    if "DOCKER_BUILDKIT" not in out and not _has_buildx():
        out["DOCKER_BUILDKIT"] = "0"
    # Container memory limits: bench.toml's [containers] when it has one, else compose.yaml's defaults.
    for role, limit in settings.get("containers", {}).items():
        out[f"BENCH_MEMORY_{role.upper()}"] = str(limit)
    return out


def _has_buildx() -> bool:
    return subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0


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
        self.settings, self.env = settings, compose_env(settings)

    def __enter__(self):
        db_port = int(self.env.get("DB_PORT", "3306"))
        if ports.port_busy("127.0.0.1", db_port):
            raise Fatal(f"port {db_port} is busy on this host, and compose publishes the DB there: stop what "
                        f"listens (e.g. `just db-down`), or choose another with DB_PORT")
        prepare([])                                 # decides on compose.offline.yaml in os.environ
        self.env = compose_env(self.settings)
        LOGS.mkdir(parents=True, exist_ok=True)
        Stack.active = True
        try:
            with open(LOGS / "compose-db.log", "w") as log:
                # db-seed is run, not `up --wait`ed: --wait counts a one-shot's exit as a failure unless
                # another started service depends on its completion (a known Compose limitation).
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
        if _started_here:
            stop_engine()


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
    log, stop()); pid is the container's JVM (its PID 1) as seen from the host, once start() has it."""

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
        running.pid = state.get("Pid") or None   # the JVM (PID 1 inside) as this host sees it: CPU is sampled there
        time.sleep(1.0)  # as a local run: let start-up work settle before reading idle RSS
        running.idle_rss_mb = running.rss_mb()
    except BaseException:
        running.stop()
        raise
    return running


def db_pid() -> int | None:
    """The compose database's server as this host sees it (its container's PID 1), for CPU sampling."""
    out = subprocess.run(["docker", "ps", "-q", "--filter", "label=com.docker.compose.project=bench",
                          "--filter", "label=com.docker.compose.service=db"], capture_output=True, text=True)
    ids = out.stdout.split()
    if out.returncode != 0 or not ids:
        return None
    pid = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", ids[0]], capture_output=True, text=True)
    return int(pid.stdout.strip()) if pid.returncode == 0 and pid.stdout.strip().isdigit() else None


def proxy_cpu_seconds() -> float:
    """CPU seconds of the docker-proxy processes so far: with --iptables=false every published port's traffic
    (generator -> port, harness -> database) is copied by one of them in user space, a cost a local run has not."""
    return sum(sampling.cpu_seconds(p for p in psutil.process_iter(["name"]) if p.info["name"] == "docker-proxy"))


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


# --- `just compose-up NAME|all` and `just compose-down` -----------------------------------------------------------

def up(selected: list[ports.Port], settings: dict, access_log: bool = False, env=os.environ) -> dict[str, str]:
    """The database, its seed and the named ports in containers, each waited for until healthy (`up --wait`): a
    single port on [load] port (8080), several on their own host ports (host_port_env); GET /feed's downstream on
    the host, listening on Docker's bridge too. Returns each port's URL."""
    prepare(selected, env)
    run_env = compose_env(settings, env)
    if len(selected) > 1:
        run_env.update(host_port_env(env))
    urls = {p.name: f"http://127.0.0.1:{run_env[host_port_variable(p.name)]}/" for p in selected}
    db_port = int(run_env.get("DB_PORT", "3306"))
    for number, what in [(db_port, "DB_PORT"), *((int(u.rsplit(":", 1)[1].rstrip("/")), host_port_variable(n))
                                                 for n, u in urls.items())]:
        if ports.port_busy("127.0.0.1", number):
            raise Fatal(f"port {number} is busy on this host, and compose publishes there: stop what listens "
                        f"(e.g. `just db-down`, `just compose-down`), or choose another with {what}")
    try:
        downstream.up(0, access_log=access_log, also_on=bridge_address())
        LOGS.mkdir(parents=True, exist_ok=True)
        profiles = [a for p in selected for a in ("--profile", p.name)]
        with open(LOGS / "compose-up.log", "w") as log:
            _run([*profiles, "up", "-d", "--build", "--wait"], run_env, log=log, timeout=1800)
        # healthy means listening; ready means the first valid token's 200 (its row read through the pool)
        token = tokens.load()[0]
        for port in selected:
            running = Running(port, run_env, LOGS / "compose-up.log", urls[port.name])
            ports.wait_first_200(running, token, timeout=180.0)
    except BaseException:
        # a port that never got healthy, a database that never got ready, Ctrl-C: nothing of the project stays up
        print("compose: bringing everything down again (logs in results/logs/compose-up.log)", flush=True)
        down(settings, env=env)
        raise
    return urls


def leftovers() -> list[str]:
    """The project's containers, networks and volumes Docker still holds (compose.yaml's `name: bench`)."""
    found = []
    for kind in ("container", "network", "volume"):
        listing = ["docker", kind, "ls", *(["--all"] if kind == "container" else []), "-q",
                   "--filter", "label=com.docker.compose.project=bench"]
        out = subprocess.run(listing, capture_output=True, text=True)
        found += [f"{kind} {item}" for item in out.stdout.split()]
    return found


def down(settings: dict, stop_engine_too: bool = True, env=os.environ) -> list[str]:
    """Removes the project's containers, networks and volumes (every profile), stops the downstream `up` started
    and the engine engine() started; returns what Docker still holds of the project (nothing, normally)."""
    downstream.down()
    if not shutil.which("docker") or not _engine_answers():
        return []
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / "compose-down.log", "w") as log:
        _run(["--profile", "*", "down", "--volumes", "--remove-orphans"], compose_env(settings, env), log=log,
             check=False, timeout=300)
    left = leftovers()
    if stop_engine_too:
        stop_engine()
    return left

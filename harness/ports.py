"""The ports of ports.toml: how each is built, started, reached and stopped."""
from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from . import port_facts, sampling
from .errors import Fatal
from .paths import LOGS, ROOT

JDK25_DEFAULT = Path("/usr/lib/jvm/temurin-25-jdk-amd64")


@dataclasses.dataclass(frozen=True)
class Port(port_facts.Facts):
    """A port of ports.toml, where its module and its jar are."""

    @property
    def module_dir(self) -> Path:
        return ROOT / self.family / self.module

    @property
    def jar_path(self) -> Path:
        return ROOT / self.jar

    @property
    def profile_args(self) -> tuple[str, ...]:
        """Maven's arguments for the profile its jar is built with (none: the module's default build)."""
        return ("-P", self.maven_profile) if self.maven_profile else ()


@dataclasses.dataclass(frozen=True)
class Variant:
    """A port's code on another runtime or build, for a scenario that compares them (pinning: JDK 21 with
    Connector/J 8.0; startup: the jar with an AOT cache; memory: inside a memory cgroup, the heap sized from its
    limit): which JDK runs which jar, with which JVM options, behind which command prefix. Without one, a port runs
    its own jar on the JDK 25 with the [jvm] options."""
    name: str
    jdk_home: Path
    jar: Path
    jvm_options: tuple[str, ...] = ()           # after the [jvm] options
    options: tuple[str, ...] | None = None      # instead of the [jvm] options
    prefix: tuple[str, ...] = ()                # before the whole command (e.g. joining a cgroup, then exec)


def from_facts(facts: dict[str, port_facts.Facts]) -> dict[str, Port]:
    return {name: Port(**{field.name: getattr(f, field.name) for field in dataclasses.fields(f)})
            for name, f in facts.items()}


PORTS = from_facts(port_facts.PORTS)


def select(name: str, scenario: str | None = None) -> list[Port]:
    """`all`, one port's name, or several joined by commas (e.g. quarkus-vertx,spring-virtual), in PORTS' order.
    With a scenario, `all` leaves out a port whose ports.toml `scenarios` does not name it."""
    if name == "all":
        return [p for p in PORTS.values() if scenario is None or port_facts.runs_in(p.name, scenario)]
    names = [n.strip() for n in name.split(",") if n.strip()]
    for n in names or [name]:
        if n not in PORTS:
            raise Fatal(f"unknown port '{n}': choose one of {', '.join(PORTS)}, or all (several: joined by commas)")
    return [p for p in PORTS.values() if p.name in names]


def jcmd(pid: int, *args: str, jdk: Path | None = None, timeout: float = 60, lists_classes: bool = False) -> str:
    """One jcmd command against a running JVM (with the JDK that runs it, JDK 25's by default): its output, or
    Fatal with it when the command failed (`lists_classes`: an output of class names, where "Exception" and "Error"
    are names, so only the exit status says it failed)."""
    out = subprocess.run([str((jdk or java_home()) / "bin" / "jcmd"), str(pid), *args], capture_output=True,
                         text=True, timeout=timeout)
    text = (out.stdout + out.stderr).strip()
    if out.returncode != 0 or (not lists_classes and re.search(r"fail|exception|error|could not", text, re.I)):
        raise Fatal(f"jcmd {args[0]} failed on pid {pid}: {text[-300:]}")
    return text


def java_home() -> Path:
    """A JDK 25: JAVA_HOME if it is one, else Temurin 25 at its Debian path."""
    for candidate in filter(None, [os.environ.get("JAVA_HOME"), str(JDK25_DEFAULT)]):
        java = Path(candidate) / "bin" / "java"
        if java.exists() and java_major(java) >= 25:
            return Path(candidate)
    raise Fatal("a JDK 25 is needed: install one (e.g. Temurin 25) and set JAVA_HOME to it")


def java_major(java: Path) -> int:
    out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    return int(match.group(1)) if match else 0


def java_version(jdk: Path | None = None) -> str:
    """The runtime line of `java -version` of `jdk` (JDK 25's by default)."""
    out = subprocess.run([str((jdk or java_home()) / "bin" / "java"), "-version"], capture_output=True, text=True).stderr
    return out.splitlines()[1].strip() if len(out.splitlines()) > 1 else out.strip()


def maven(family: str, *args: str, quiet: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAVA_HOME=str(java_home()))
    # -ntp: no download progress (a fresh machine's first build would print thousands of lines)
    cmd = [str(ROOT / "mvnw"), "-B", "-ntp", "-f", f"{family}/pom.xml", *(["-q"] if quiet else []), *args]
    return subprocess.run(cmd, cwd=ROOT, env=env)


def is_stale(port: Port) -> bool:
    """True when any source or pom of the port's module is newer than its jar."""
    if not port.jar_path.exists():
        return True
    built = port.jar_path.stat().st_mtime
    sources = [port.module_dir / "pom.xml", *(port.module_dir / "src" / "main").rglob("*")]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


def build(ports: list[Port], force: bool = False) -> None:
    """The stale ports' modules, one Maven run per family and profile (a port with a maven_profile is its module
    built again with that profile, into a target directory of its own)."""
    modules: dict[tuple[str, tuple[str, ...]], set[str]] = {}
    for port in ports:
        if force or is_stale(port):
            modules.setdefault((port.family, port.profile_args), set()).add(port.module)
    for (family, profile), mods in modules.items():
        what = f"{family} ({', '.join(sorted(mods))}{f', Maven profile {profile[-1]}' if profile else ''})"
        print(f"build: {what}", file=sys.stderr)
        if maven(family, "-DskipTests", *profile, "-pl", ",".join(sorted(mods)), "package").returncode != 0:
            raise Fatal(f"the build of {what} failed (output above); fix it, then `just build`")


def port_busy(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def app_env(port: Port, settings: dict, http_port: int, extra_env: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(port.env)
    env.update(extra_env or {})
    env["PORT"] = str(http_port)
    env.setdefault("DB_POOL_SIZE", str(settings["db"]["pool_size"]))
    env["JAVA_HOME"] = str(java_home())
    return env


class Running:
    """A started port: its process group, log, startup time and RSS at idle."""

    def __init__(self, port: Port, process: subprocess.Popen, log: Path, url: str):
        self.port, self.process, self.log, self.url = port, process, log, url
        self.startup_seconds: float | None = None
        self.idle_rss_mb: float | None = None
        self.started: float | None = None      # time.monotonic() just before the process was created

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM to the process group, SIGKILL after `timeout` s (longer where the JVM writes on exit: an AOT
        cache)."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:
                pass


def start(port: Port, settings: dict, token: str, http_port: int | None = None,
          timeout: float = 90.0, foreground: bool = False, extra_env: dict | None = None,
          variant: Variant | None = None, wait: bool = True) -> Running | int:
    """Starts the port's jar (or a variant's jar on its JDK) and waits for its first valid 200 (the startup time;
    `wait=False`: returns at once, for a caller that times the start itself)."""
    http_port = http_port or int(settings["load"]["port"])
    host = "127.0.0.1"
    if port_busy(host, http_port):
        raise Fatal(f"port {http_port} is busy: stop what listens there (`ss -ltnp 'sport = :{http_port}'`) "
                    f"or choose another with BENCH_LOAD_PORT")
    jdk, jar = (variant.jdk_home, variant.jar) if variant else (java_home(), port.jar_path)
    if not jar.exists():
        raise Fatal(f"{jar} is missing: run `just build {port.name}`" if variant is None
                    else f"{jar} ({port.name}, {variant.name}) is missing: build it first")
    base = variant.options if variant and variant.options is not None else settings["jvm"]["options"]
    cmd = [str(jdk / "bin" / "java"), *base, *(variant.jvm_options if variant else ()), "-jar", str(jar)]
    cpus = settings["cpus"]["app"]
    if cpus and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpus, *cmd]
    if variant and variant.prefix:
        cmd = [*variant.prefix, *cmd]
    env = app_env(port, settings, http_port, extra_env)
    env["JAVA_HOME"] = str(jdk)
    if foreground:
        return subprocess.call(cmd, env=env, cwd=ROOT)
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{port.name}.log"
    began = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    running = Running(port, process, log, f"http://{host}:{http_port}/")
    running.started = began
    if not wait:
        return running
    try:
        wait_first_200(running, token, timeout)
    except BaseException:
        running.stop()
        raise
    running.startup_seconds = time.monotonic() - began
    time.sleep(1.0)  # let start-up work settle before reading idle RSS
    running.idle_rss_mb = sampling.rss_mb(sampling.tree(process.pid))
    return running


def wait_first_200(running: Running, token: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    session = requests.Session()
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            raise Fatal(f"{running.port.name} exited at start (code {running.process.returncode}): "
                        f"see {running.log.relative_to(ROOT)}")
        try:
            r = session.get(running.url, headers={"Authorization": f"Bearer {token}"}, timeout=2)
            if r.status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    raise Fatal(f"{running.port.name} gave no 200 within {timeout:.0f} s: see {running.log.relative_to(ROOT)}")

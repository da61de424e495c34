"""Each port's facts, read from ports.toml (the one place they are written): its build, model and server, and the
bounds on its request path with the setting that sizes each. Data only, so the measuring code and the report
alike read it; harness/ports.py builds and starts what it names."""
from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from .paths import ROOT

FILE = ROOT / "ports.toml"


@dataclasses.dataclass(frozen=True)
class Facts:
    name: str
    family: str                                  # the Maven aggregator: spring or quarkus
    module: str                                  # the Maven module inside it
    jar: str                                     # what `java -jar` runs, relative to the repo
    model: str                                   # the concurrency model, e.g. "virtual threads"
    server: str                                  # a key of SERVERS
    host_port: int                               # published through Compose when several run side by side
    env: tuple[tuple[str, str], ...] = ()        # extra environment, e.g. the Spring profile
    request_threads: int | None = None           # a fixed pool of request threads held for a request's whole wait
    request_threads_setting: str | None = None
    downstream_pool: int | None = None           # what bounds GET /feed's calls in flight at the defaults
    downstream_pool_setting: str | None = None   # the setting that changes it (None: none without code)


@dataclasses.dataclass(frozen=True)
class Server:
    """A server's defaults for many connections (no port changes them)."""
    name: str
    limit: str
    backlog: str
    idle_timeout: str
    max_connections: int | None = None           # beyond it the server stops accepting; None: no limit
    max_connections_setting: str | None = None   # the setting that raises the limit (as an environment variable)


def load(path: Path = FILE) -> tuple[dict[str, Facts], dict[str, Server]]:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    facts = {name: Facts(name, **{**values, "env": tuple(values.get("env", {}).items())})
             for name, values in data["ports"].items()}
    return facts, {key: Server(**values) for key, values in data["servers"].items()}


PORTS, SERVERS = load()


def order() -> list[str]:
    """Every table's and chart's order of the ports."""
    return list(PORTS)


def host_ports() -> dict[str, int]:
    return {name: f.host_port for name, f in PORTS.items()}


def thread_ports() -> list[str]:
    """The ports that hold a request thread of a fixed pool for each request's whole wait."""
    return [name for name, f in PORTS.items() if f.request_threads]


def client_pools() -> dict[str, tuple[int, str | None]]:
    """Per port with one: the bound on GET /feed's calls in flight at its defaults, and the setting that sizes it."""
    return {name: (f.downstream_pool, f.downstream_pool_setting) for name, f in PORTS.items() if f.downstream_pool}


def with_model(model: str) -> list[str]:
    return [name for name, f in PORTS.items() if f.model == model]

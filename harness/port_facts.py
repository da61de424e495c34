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
    title: str = ""                              # in a Java engineer's words, e.g. "Spring MVC on virtual threads"
    env: tuple[tuple[str, str], ...] = ()        # extra environment, e.g. the Spring profile
    request_threads: int | None = None           # a fixed pool of request threads held for a request's whole wait
    request_threads_setting: str | None = None
    request_threads_override: str | None = None  # the framework's own name for it, which wins where both are set
    request_threads_name: str | None = None      # the name its threads start with ({port}: the HTTP port)
    downstream_pool: int | None = None           # what bounds GET /feed's calls in flight at the defaults
    downstream_pool_setting: str | None = None   # the setting that changes it (None: none without code)
    downstream_pool_kind: str = "client connections"    # what that pool counts, in words
    downstream_pool_parallel_only: bool = False  # the pool runs parallel calls only (sequential: the request thread)
    compared_with: str | None = None             # the port with the same framework and data access, another model
    stack: str | None = None                     # what sets its stack apart (e.g. "no ORM"), said where it is ranked
    variant_of: str | None = None                # the port it repeats with the part `stack` names changed
    scenarios: tuple[str, ...] | None = None     # the scenarios `all` runs it in (None: every one)
    maven_profile: str | None = None             # the Maven profile its jar is built with (its own target dir)
    variant_answer: str | None = None            # a variant's ratio in the front page's words ({relation}: "x% less
                                                 # CPU per request than")


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
    facts = {name: Facts(name, **{**values, "env": tuple(values.get("env", {}).items()),
                                  **({"scenarios": tuple(values["scenarios"])} if "scenarios" in values else {})})
             for name, values in data["ports"].items()}
    return facts, {key: Server(**values) for key, values in data["servers"].items()}


PORTS, SERVERS = load()


def order() -> list[str]:
    """Every table's and chart's order of the ports."""
    return list(PORTS)


def reference() -> str:
    """The port relative figures divide by: the first in ports.toml, Spring MVC on platform threads, the status quo the
    question starts from (what changes if I move to virtual threads, or to WebFlux?)."""
    return order()[0]


def model_pairs() -> list[tuple[str, str]]:
    """(port, the port it is compared with): pairs whose difference is the concurrency model, not the stack."""
    return [(name, f.compared_with) for name, f in PORTS.items() if f.compared_with]


def variant_pairs(among=None) -> list[tuple[str, str]]:
    """(variant, the port it repeats): pairs whose difference is the part of the stack the variant changes; with
    `among` (names), only the pairs of which both are there."""
    return [(name, f.variant_of) for name, f in PORTS.items()
            if f.variant_of and (among is None or (name in among and f.variant_of in among))]


def runs_in(name: str, scenario: str) -> bool:
    """Whether `all` runs the port in the scenario."""
    facts = PORTS.get(name)
    return not facts or facts.scenarios is None or scenario in facts.scenarios


def labelled(name: str) -> str:
    """The port's name, with what sets its stack apart where there is something: "quarkus-vertx (no ORM, ...)"."""
    facts = PORTS.get(name)
    return f"{name} ({facts.stack})" if facts and facts.stack else name


def downstream_bound(name: str) -> str | None:
    """The bound on GET /feed's calls in flight at the port's defaults, in words: "its 8 executor threads"."""
    facts = PORTS.get(name)
    return f"its {facts.downstream_pool:,} {facts.downstream_pool_kind}" if facts and facts.downstream_pool else None


def host_ports() -> dict[str, int]:
    return {name: f.host_port for name, f in PORTS.items()}


def thread_ports() -> list[str]:
    """The ports that hold a request thread of a fixed pool for each request's whole wait."""
    return [name for name, f in PORTS.items() if f.request_threads]


def request_threads(name: str, env: dict) -> int | None:
    """The port's fixed pool of request threads in a run with environment `env`: the framework's own setting, else
    the port's, else the default; None where the model holds no thread of a fixed pool."""
    facts = PORTS.get(name)
    if not facts or not facts.request_threads:
        return None
    given = next((env[s] for s in (facts.request_threads_override, facts.request_threads_setting) if s and env.get(s)),
                 None)
    return int(given) if given else facts.request_threads


def client_pools() -> dict[str, tuple[int, str | None]]:
    """Per port with one: the bound on GET /feed's calls in flight at its defaults, and the setting that sizes it."""
    return {name: (f.downstream_pool, f.downstream_pool_setting) for name, f in PORTS.items() if f.downstream_pool}


def with_model(model: str) -> list[str]:
    return [name for name, f in PORTS.items() if f.model == model]

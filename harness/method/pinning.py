"""The pinning scenario's ports and runtimes, as its run, its report and `just profile`'s jdk21-cj8 name them."""
from __future__ import annotations

import dataclasses

from .. import port_facts

REFERENCE = "spring-platform"                 # the same jar on Tomcat's platform threads: seed 000's comparison
VIRTUAL = tuple(n for n in port_facts.with_model("virtual threads") if port_facts.runs_in(n, "pinning"))
SCENARIO_PORTS = (REFERENCE, *VIRTUAL)


@dataclasses.dataclass(frozen=True)
class Runtime:
    name: str                 # in file names and records
    label: str                # in the records
    short: str                # in the chart's legend


OLD = Runtime("jdk21-cj8", "JDK 21 + Connector/J 8.0", "JDK 21 + CJ 8")     # the pinning-jdk21 profile's jars
NEW = Runtime("jdk25-cj9", "JDK 25 + Connector/J 9", "JDK 25 + CJ 9")       # the port's own build on JDK 25
RUNTIMES = (OLD, NEW)

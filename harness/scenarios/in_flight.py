"""in-flight: thousands of requests waiting at once, the regime the virtual-threads-against-reactive debate is about.

GET /feed?calls=K with the downstream (harness/downstream.py) answering after a few seconds: by Little's law a rate of
N / latency keeps N requests in flight. Per port and iteration one JVM (warmed up on /feed at 0 ms, the CPU-bound
path), its client's bound on calls in flight sized above the most requests in flight (the setting each framework
documents: ports.toml's downstream_pool_setting; Tomcat's threads are left at their default: that bound is the
platform-thread model's own), then one cell per in-flight count: nginx at the latency, one step at N / latency.
Per cell: whether the rule holds, p99 above the downstream latency, RSS and heap per request in flight, threads;
with class_histogram, what the live heap holds while the requests wait (a second step at the same rate, a
GC.class_histogram one latency and a half into it: a full GC, so only live objects count)."""
from __future__ import annotations

import contextlib
import dataclasses
import re
import subprocess
import threading
import time

from .. import downstream as downstream_mod, driver, port_facts, ports
from ..errors import Fatal
from ..method.record import Step
from ..method.spans import ms
from ..session import Context

HEAP_USED = re.compile(r"used (\d+)K")
CLASS_ROW = re.compile(r"^\s*\d+:\s+(?P<instances>\d+)\s+(?P<bytes>\d+)\s+(?P<name>\S+)")
CLASS_TOTAL = re.compile(r"^Total\s+(?P<instances>\d+)\s+(?P<bytes>\d+)")
TOP_CLASSES = 15


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [in-flight]."""
    in_flight: list[int]            # requests in flight per cell (rate = in_flight / latency)
    latency_ms: float               # the downstream's answer time
    timeout_ms: int                 # the ports' downstream timeout (DOWNSTREAM_TIMEOUT_MS): above the latency
    calls: int                      # K calls per request, in parallel
    connections: int                # generator connections: above the most requests in flight
    bound_margin: float             # each client's bound = this x the most calls in flight
    class_histogram: bool = False   # per cell, the live heap's classes while the requests wait


def client_bound(plan: Plan, port: str) -> dict[str, int]:
    """The port's setting that bounds its calls in flight (ports.toml), sized to bound_margin x the most calls in
    flight; {} where the port has none."""
    setting = port_facts.PORTS[port].downstream_pool_setting
    return {setting: int(plan.bound_margin * max(plan.in_flight) * plan.calls)} if setting else {}


class InFlight(driver.Scenario):
    root = None                   # the port's target at its root

    def __init__(self):
        self.downstream = downstream_mod.AroundJvm()

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [{"in_flight": n} for n in plan.in_flight]

    @contextlib.contextmanager
    def regime(self, jvm: driver.Jvm):
        env = {k: str(v) for k, v in client_bound(jvm.plan, jvm.port.name).items()}
        with self.downstream.around(DOWNSTREAM_TIMEOUT_MS=str(jvm.plan.timeout_ms), **env) as extra_env:
            yield {"extra_env": extra_env}

    def fields(self, jvm: driver.Jvm) -> dict:
        return {"client_bound": client_bound(jvm.plan, jvm.port.name)}

    def started(self, jvm: driver.Jvm) -> None:
        super().started(jvm)
        self.root = jvm.target
        jvm.target = dataclasses.replace(self.root, url=self.root.url.rstrip("/") + f"/feed?calls={jvm.plan.calls}")

    @contextlib.contextmanager
    def cell_regime(self, jvm: driver.Jvm, cell: dict):
        if cell["coords"]["in_flight"] == jvm.plan.in_flight[0]:    # once per JVM: the warm-up ran at 0 ms
            nginx = self.downstream.at(jvm.plan.latency_ms)
            jvm.target = dataclasses.replace(jvm.target, sides={"nginx": nginx.cpu_seconds})
        yield

    def added_latency_ms(self, jvm: driver.Jvm, cell: dict) -> float:
        return jvm.plan.latency_ms

    def step_kwargs(self, jvm: driver.Jvm, cell: dict) -> dict:
        return {"connections": jvm.plan.connections}

    def common_rate(self, jvm: driver.Jvm, cell: dict) -> float:
        """Little's law: N requests in flight at N / latency per second."""
        return round(cell["coords"]["in_flight"] * 1000 / jvm.plan.latency_ms)

    def measure_cell(self, jvm: driver.Jvm, cell: dict) -> None:
        """The declared phases (the step at N / latency), then its figures per request in flight."""
        super().measure_cell(jvm, cell)
        n = cell["coords"]["in_flight"]
        steps = [Step.from_json(s) for s in cell["steps"] if s["phase"] == "common"]
        if not steps:
            return
        s = steps[-1]
        heap = heap_used_mb(jvm.running.pid)
        idle = jvm.record.get("idle_rss_mb")
        cell.update(held=s.passed, p99_above_latency_ms=s.p99 and round(s.p99 - jvm.plan.latency_ms, 1),
                    rss_kib_per_in_flight=round((s.app_rss_mb_peak - idle) * 1024 / n, 1)
                    if s.app_rss_mb_peak and idle else None,
                    heap_used_mb=heap, heap_kib_per_in_flight=heap and round(heap * 1024 / n, 1),
                    threads=s.app_threads_peak)
        jvm.save()
        jvm.say(f"{n} in flight: {'holds' if s.passed else 'fails'} the rule, p99 {ms(s.p99)} ms, "
                f"{cell['rss_kib_per_in_flight']} KiB RSS per request in flight, {s.app_threads_peak} threads")
        if jvm.plan.class_histogram and s.passed:
            self.histogram(jvm, cell, n)

    def histogram(self, jvm: driver.Jvm, cell: dict, n: int) -> None:
        """A step at the cell's rate, not judged or kept; one latency and a half into it, with about n requests
        waiting, the live heap's classes (GC.class_histogram: a full GC first), kept as the cell's
        class_histogram."""
        wait_s = jvm.plan.latency_ms / 1000
        step = threading.Thread(target=jvm.target.rate, daemon=True,
                                args=(self.common_rate(jvm, cell), 3 * wait_s, "histogram"),
                                kwargs={"slo_ms": cell.get("slo_ms"), **self.step_kwargs(jvm, cell)})
        step.start()
        time.sleep(1.5 * wait_s)
        found = live_classes(jvm.running.pid)
        step.join()
        jvm.target.drain(cell.get("slo_ms"))
        if found:
            cell["class_histogram"] = {**found, "live_kib_per_in_flight": round(found["total_kib"] / n, 1)}
            top = ", ".join(f"{name} {kib:,.0f} KiB" for name, _, kib in found["classes"][:3])
            jvm.say(f"{n} in flight: live heap {found['total_kib'] / 1024:,.0f} MiB ({top}, ...)")
        jvm.save()


def heap_used_mb(pid: int | None) -> float | None:
    """The JVM's used heap now (jcmd GC.heap_info), None where it cannot answer (dying, or too loaded to answer
    within the timeout: as memory.native_memory treats it)."""
    try:
        found = HEAP_USED.search(ports.jcmd(pid, "GC.heap_info", timeout=30)) if pid else None
    except (Fatal, subprocess.TimeoutExpired):
        return None
    return found and round(int(found[1]) / 1024, 1)


def class_histogram(text: str, top: int = TOP_CLASSES) -> dict | None:
    """`jcmd PID GC.class_histogram` -> the live heap's total KiB and its `top` classes as [name, instances, KiB]."""
    rows, total = [], None
    for line in text.splitlines():
        if m := CLASS_ROW.match(line):
            rows.append([m["name"], int(m["instances"]), round(int(m["bytes"]) / 1024, 1)])
        elif m := CLASS_TOTAL.match(line.strip()):
            total = round(int(m["bytes"]) / 1024, 1)
    return {"total_kib": total, "classes": rows[:top]} if rows and total else None


def live_classes(pid: int | None) -> dict | None:
    try:
        return class_histogram(ports.jcmd(pid, "GC.class_histogram", timeout=60, lists_classes=True)) if pid else None
    except (Fatal, subprocess.TimeoutExpired):
        return None


def run(ctx: Context, selected: list[ports.Port]) -> None:
    driver.run(ctx, InFlight(), ctx.plan(Plan), selected)


"""many-users: one rate every port sustains, min(rate_cap, mst_fraction x the lowest baseline MST), spread over
1,000, 5,000 and 10,000 keep-alive connections that openloop uses in turn, as many distinct users would; the
connection count is the only thing that changes. Per port and iteration a fresh JVM, warmed up at the rate, then
the counts in ascending order, each a step judged by the one rule (loopback), the app's open files and accept queue
watched. About 100 s per port and iteration (bench.toml [many-users])."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import resource
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlparse

import psutil

from .. import driver, ports
from ..errors import Fatal
from ..method.many_users import listed
from ..method.record import Step
from ..session import Context, baseline_msts, choose_rate

PHASE = "connections"
WATCH_INTERVAL_S = 0.5
GENERATOR_FD_MARGIN = 64      # openloop's own files besides its sockets


@dataclasses.dataclass(frozen=True, kw_only=True)
class Plan(driver.Lifecycle):
    """bench.toml [many-users] (iterations, step_seconds and the lifecycle: driver.Lifecycle)."""
    connections: list[int]
    rate_cap: int
    mst_fraction: float
    passes: float
    fd_margin: int


def checked(plan: Plan) -> Plan:
    if not plan.connections or min(plan.connections) < 1 or plan.iterations < 1:
        raise Fatal("bench.toml [many-users]: connections, iterations >= 1")
    return dataclasses.replace(plan, connections=sorted(plan.connections))


# --- pure logic (unit-tested) ------------------------------------------------------------------------------------

def hold_seconds(connections: int, rate: float, minimum: float, passes: float) -> float:
    """How long a count is held: at least `minimum`, and `passes` requests per connection."""
    return float(max(minimum, math.ceil(passes * connections / rate)))


def parse_listen(ss_output: str, port: int) -> tuple[int, int] | None:
    """(accept queue now, its limit) of the listening socket on `port`, from `ss -ltnH`: for a listener,
    Recv-Q is the connections waiting to be accepted and Send-Q the backlog given to listen()."""
    for fields in map(str.split, ss_output.splitlines()):
        if len(fields) >= 4 and fields[0] == "LISTEN" and fields[3].rsplit(":", 1)[-1] == str(port):
            return int(fields[1]), int(fields[2])
    return None


def parse_netstat(text: str, keys=("ListenOverflows", "ListenDrops")) -> dict[str, int]:
    """The kernel's TcpExt counters from /proc/net/netstat (a header line, then a value line)."""
    lines = [line.split()[1:] for line in text.splitlines() if line.startswith("TcpExt:")]
    values = dict(zip(lines[0], lines[1])) if len(lines) >= 2 else {}
    return {k: int(values[k]) for k in keys if k in values}


# --- measuring ----------------------------------------------------------------------------------------------------

def listen_state(port: int) -> tuple[tuple[int, int] | None, float]:
    """The listening socket's (accept queue, backlog) from `ss -ltnH`, and the CPU seconds ss used (wait4: the
    generator's CPU is this process's children's, so what ss costs during a step is subtracted there)."""
    try:
        process = subprocess.Popen(["ss", "-ltnH", f"sport = :{port}"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None, 0.0
    out = process.stdout.read()
    process.stdout.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return parse_listen(out, port), usage.ru_utime + usage.ru_stime


def _proc(path: str) -> str:
    """A file under /proc ("" when it cannot be read)."""
    with contextlib.suppress(OSError):
        return Path("/proc", path).read_text()
    return ""


def system_limits() -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    somaxconn, syn, local = ([int(v) for v in _proc(f"sys/net/{name}").split()] or None
                             for name in ("core/somaxconn", "ipv4/tcp_max_syn_backlog", "ipv4/ip_local_port_range"))
    # generator_nofile: openloop raises its soft limit to this hard limit itself
    return {"somaxconn": somaxconn and somaxconn[0], "tcp_max_syn_backlog": syn and syn[0],
            "ip_local_port_range": local, "generator_nofile": {"soft": soft, "hard": hard}}


def enough_files(who: str, limit: int, need: int) -> None:
    if limit < need:
        raise Fatal(f"{who} may open {limit} files but needs about {need}: `ulimit -Hn {need}` before `just bench`, "
                    "or fewer [many-users] connections")


def ensure_app_fds(pid: int, need: int) -> dict:
    """The JVM's open-files limit, raised to its hard one when too low for the largest count (the JDK does that itself
    on Linux, -XX:+MaxFDLimit; this makes sure, the same for every port): no connection is refused for our reason."""
    proc = psutil.Process(pid)
    soft, hard = proc.rlimit(psutil.RLIMIT_NOFILE)
    raised = soft < need <= hard
    if raised:
        proc.rlimit(psutil.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    enough_files("the JVM", soft, need)
    return {"soft": soft, "hard": hard, "raised_by_harness": raised}


@contextlib.contextmanager
def watched(pid: int, http_port: int):
    """Peaks of the app's file descriptors and of its accept queue, every WATCH_INTERVAL_S, and what ss cost."""
    proc, stop, seen = psutil.Process(pid), threading.Event(), {"fds": 0, "queue": 0, "ss_cpu_s": 0.0}

    def loop():
        while not stop.is_set():
            with contextlib.suppress(psutil.Error):
                seen["fds"] = max(seen["fds"], proc.num_fds())
            state, cpu = listen_state(http_port)
            seen["ss_cpu_s"] += cpu
            if state:
                seen["queue"] = max(seen["queue"], state[0])
            stop.wait(WATCH_INTERVAL_S)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def measure(ctx: Context, target, http_port: int, connections: int, rate: float, seconds: float) -> Step:
    """One count: the load over `connections` keep-alive connections, judged by the rule, the app watched."""
    proc = psutil.Process(target.app_pid)
    fds_before, threads_before = proc.num_fds(), proc.num_threads()
    kernel_before = parse_netstat(_proc("net/netstat"))
    with watched(target.app_pid, http_port) as watch:
        step = target.rate(rate, seconds, PHASE, slo_ms=ctx.rule.slo_ms(), connections=connections)
    kernel_after = parse_netstat(_proc("net/netstat"))
    step.app_threads_peak = max(step.app_threads_peak or 0, threads_before)
    # the generator's CPU is this process's children's: take out the watch's own `ss` runs (they overlap the step)
    if step.generator_cpu_cores is not None and step.seconds:
        cpu_s = max(0.0, step.generator_cpu_cores * step.seconds - watch["ss_cpu_s"])
        step.generator_cpu_cores = round(cpu_s / step.seconds, 3)
        step.generator_cpu_us_per_request = round(cpu_s / max(step.requests, 1) * 1e6, 1)
    step.extra.update({
        "watch_ss_cpu_s": round(watch["ss_cpu_s"], 3), "app_threads_before": threads_before,
        "app_fds_before": fds_before, "app_fds_peak": max(watch["fds"], fds_before),
        # sockets the app had accepted at the peak, beyond what it held before the step
        "app_connections_peak": max(0, watch["fds"] - fds_before), "accept_queue_peak": watch["queue"],
        # system-wide kernel counters: SYNs or handshakes dropped because an accept queue was full
        "listen_overflows": {k: kernel_after[k] - kernel_before[k] for k in kernel_after if k in kernel_before},
    })
    return step


def http_port(jvm: driver.Jvm) -> int:
    return urlparse(jvm.target.url).port or 80


@dataclasses.dataclass
class ManyUsers(driver.Scenario):
    """One fixed rate for every port; a cell per connection count: its declared phases, then one watched step."""
    rate: int
    basis: str
    limits: dict

    def cells(self, plan: Plan, jvm: driver.Jvm) -> list[dict]:
        return [{"connections": n} for n in plan.connections]

    def fields(self, jvm: driver.Jvm) -> dict:
        return dict(plan=dataclasses.asdict(jvm.plan), rate=self.rate, rate_basis=self.basis,
                    slo_ms=jvm.ctx.rule.slo_ms(), system=self.limits, app_nofile=None, listen_backlog=None)

    def started(self, jvm: driver.Jvm) -> None:
        record = jvm.record
        record["app_nofile"] = ensure_app_fds(jvm.running.pid, max(jvm.plan.connections) + jvm.plan.fd_margin)
        listen, _ = listen_state(http_port(jvm))
        record["listen_backlog"] = listen[1] if listen else None
        jvm.save()
        jvm.say(f"up in {record['startup_s']} s; backlog {record['listen_backlog']}, "
                f"nofile {record['app_nofile']['soft']}")

    def warmup_rate(self, jvm: driver.Jvm) -> float:
        return self.rate

    def measure_cell(self, jvm: driver.Jvm, cell: dict) -> None:
        n, plan = cell["coords"]["connections"], jvm.plan
        driver.run_cell(jvm, self, cell)      # the declared phases: the pause (the previous count's connections closed)
        step = measure(jvm.ctx, jvm.target, http_port(jvm), n, self.rate,
                       hold_seconds(n, self.rate, plan.step_seconds, plan.passes))
        cell["steps"].append(step.to_json(histogram=False))
        jvm.save()
        errors = {k: v for k, v in step.errors.items() if v}
        jvm.say(f"{n:,} connections, {step.seconds:g} s: {step.line().split(' ', 1)[1]}; opened "
                f"{step.extra.get('connections_opened')}, held {step.extra['app_connections_peak']}")


def run(ctx: Context, selected: list[ports.Port]) -> None:
    plan = checked(ctx.plan(Plan))
    rate, basis = choose_rate(plan.rate_cap, plan.mst_fraction, baseline_msts(ctx.results))
    limits = system_limits()
    enough_files("openloop", limits["generator_nofile"]["hard"], max(plan.connections) + GENERATOR_FD_MARGIN)
    print(f"{ctx.scenario}: {rate:,} req/s ({basis}); connections {listed(plan.connections)}", flush=True)
    driver.run(ctx, ManyUsers(rate, basis, limits), plan, selected)

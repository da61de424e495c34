"""many-users: at one fixed request rate, the same load spread over 1,000, 5,000 and 10,000 keep-alive
connections (open model: openloop hands each due request to the connection idle longest, so every connection
is used in turn, as many distinct users would). Per port and connection count: p50/p99, errors by kind,
connections the generator opened and the app held, the accept queue, app RSS and threads at their peak, app
CPU per request. Each port runs on a fresh JVM, warmed up at the same rate on the baseline's connections, then
the counts in ascending order in that JVM.

`SCENARIO=many-users just bench NAME|all`; settings in bench.toml [many_users].
"""
from __future__ import annotations

import dataclasses
import math
import os
import resource
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import psutil

from .. import bench, ports, report
from ..errors import Fatal
from ..sampling import Sampler
from . import common, section

NAME = "many_users"
DEFAULTS = {
    "iterations": 1,
    # Connection counts, measured in this order in one JVM per port.
    "connections": [1000, 5000, 10000],
    # The rate: the smaller of rate_cap and mst_fraction x the lowest baseline MST of all ports (RESULTS.md's
    # run set), so that every port sustains it and the connection count is the only thing that changes.
    "rate_cap": 2000,
    "mst_fraction": 0.5,
    # Each count is held at least step_seconds, and long enough that every connection carries `passes`
    # requests (N / rate seconds per pass): 10,000 connections at 1,000 req/s need 10 s per pass.
    "step_seconds": 15,
    "passes": 2,
    # Before the counts: this long at the same rate on the baseline's connections ([load] connections).
    "warmup_seconds": 20,
    # After a count: time for the app to close the generator's connections before the next count.
    "settle_seconds": 3,
    # File descriptors the JVM needs besides the load's connections (jars, DB pool, epoll, logs).
    "fd_margin": 1000,
}
WATCH_INTERVAL_S = 0.5

# What each server does with many connections, by default (none of the ports changes these). The render
# shows it beside the measured listen backlog. Sources: Spring Boot 4.1.0's configuration metadata
# (spring-boot-tomcat-4.1.0.jar, spring-boot-reactor-netty-4.1.0.jar), Tomcat 11's HTTP connector reference
# and org.apache.coyote.http11.Constants.DEFAULT_CONNECTION_TIMEOUT, Quarkus 3.27.1's configuration model
# (quarkus-vertx-http-3.27.1.jar: quarkus.http.accept-backlog, limits.max-connections, idle-timeout),
# Vert.x 4.5 NetServerOptions.DEFAULT_ACCEPT_BACKLOG = -1 (not set: Netty's default) and Netty 4.1/4.2
# DefaultServerSocketChannelConfig (backlog = NetUtil.SOMAXCONN, read from /proc/sys/net/core/somaxconn).
SERVER_DEFAULTS = {
    "tomcat": ("Tomcat 11 (NIO)", "8,192 (`server.tomcat.max-connections`); beyond it Tomcat stops accepting",
               "100 (`server.tomcat.accept-count`)",
               "60 s (`keep-alive-timeout` unset: Tomcat's connection timeout, 60,000 ms)"),
    "netty": ("Reactor Netty", "none", "Netty's default: the kernel's `somaxconn`",
              "none (`server.netty.idle-timeout` unset: \"an infinite timeout is used\")"),
    "vertx": ("Vert.x HTTP server (Quarkus)", "none (`quarkus.http.limits.max-connections` unset)",
              "`quarkus.http.accept-backlog` = -1: Netty's default, the kernel's `somaxconn`",
              "30 min (`quarkus.http.idle-timeout`)"),
}


def server_of(name: str) -> str | None:
    """Which HTTP server a port runs on, from its module in harness/ports.py."""
    port = ports.PORTS.get(name)
    if port is None:
        return None
    if port.family == "spring":
        return "tomcat" if port.module == "mvc" else "netty"
    return "vertx" if port.family == "quarkus" else None


@dataclasses.dataclass(frozen=True)
class Config:
    iterations: int
    connections: list[int]
    rate_cap: int
    mst_fraction: float
    step_seconds: float
    passes: float
    warmup_seconds: float
    settle_seconds: float
    fd_margin: int

    @classmethod
    def from_settings(cls, settings: dict) -> "Config":
        values = section.load(settings, NAME, DEFAULTS)
        cfg = cls(**values)
        if not cfg.connections or min(cfg.connections) < 1 or cfg.iterations < 1:
            raise Fatal(f"bench.toml [{NAME}]: connections must be a non-empty list of counts >= 1, iterations >= 1")
        return dataclasses.replace(cfg, connections=sorted(cfg.connections))


# --- pure logic (unit-tested) --------------------------------------------------------------------------------

def choose_rate(cap: int, fraction: float, msts: dict[str, int]) -> tuple[int, str]:
    """The common rate: min(cap, fraction x the lowest baseline MST), and how it was chosen."""
    if not msts:
        return cap, "the fixed cap (no baseline MSTs in results/)"
    lowest = min(msts, key=msts.get)
    scaled = bench.round_rate(fraction * msts[lowest])
    if scaled >= cap:
        return cap, f"the fixed cap ({fraction:.0%} of the lowest baseline MST, {lowest}'s {msts[lowest]:,}/s, is higher)"
    return scaled, f"{fraction:.0%} of the lowest baseline MST ({lowest}: {msts[lowest]:,}/s)"


def hold_seconds(connections: int, rate: float, minimum: float, passes: float) -> float:
    """How long a count is held: at least `minimum`, and `passes` requests per connection."""
    return float(max(minimum, math.ceil(passes * connections / rate)))


def parse_listen(ss_output: str, port: int) -> tuple[int, int] | None:
    """(accept queue now, its limit) of the listening socket on `port`, from `ss -ltnH`: for a listener,
    Recv-Q is the connections waiting to be accepted and Send-Q the backlog given to listen()."""
    for line in ss_output.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "LISTEN" and fields[3].rsplit(":", 1)[-1] == str(port):
            return int(fields[1]), int(fields[2])
    return None


def parse_netstat(text: str, keys=("ListenOverflows", "ListenDrops")) -> dict[str, int]:
    """The kernel's TcpExt counters from /proc/net/netstat (a header line, then a value line)."""
    lines = [line.split() for line in text.splitlines() if line.startswith("TcpExt:")]
    if len(lines) < 2:
        return {}
    values = dict(zip(lines[0][1:], lines[1][1:]))
    return {k: int(values[k]) for k in keys if k in values}


def fd_need(connections: int, margin: int) -> int:
    return connections + margin


# --- measuring -----------------------------------------------------------------------------------------------

def listen_state(port: int) -> tuple[tuple[int, int] | None, float]:
    """The listening socket's (accept queue, backlog) from `ss -ltnH`, and the CPU seconds ss used. The
    generator's CPU is measured as this process's children's, so what ss costs during a step is subtracted
    there: wait4 gives the child's own usage."""
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


def netstat() -> dict[str, int]:
    try:
        return parse_netstat(Path("/proc/net/netstat").read_text())
    except OSError:
        return {}


def system_limits() -> dict:
    def read(path):
        try:
            return Path(path).read_text().split()
        except OSError:
            return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    somaxconn = read("/proc/sys/net/core/somaxconn")
    syn = read("/proc/sys/net/ipv4/tcp_max_syn_backlog")
    ports = read("/proc/sys/net/ipv4/ip_local_port_range")
    return {"somaxconn": int(somaxconn[0]) if somaxconn else None,
            "tcp_max_syn_backlog": int(syn[0]) if syn else None,
            "ip_local_port_range": [int(p) for p in ports] if ports else None,
            # openloop raises its soft limit to this hard limit itself
            "generator_nofile": {"soft": soft, "hard": hard}}


def ensure_app_fds(pid: int, need: int) -> dict:
    """The JVM's open-files limit, raised to its hard limit when the soft one is too low for the largest
    count (the JDK does that itself on Linux, -XX:+MaxFDLimit; this only makes sure, the same for every
    port), so no connection is refused for a reason of ours."""
    proc = psutil.Process(pid)
    soft, hard = proc.rlimit(psutil.RLIMIT_NOFILE)
    raised = False
    if soft < need <= hard:
        proc.rlimit(psutil.RLIMIT_NOFILE, (hard, hard))
        soft, raised = hard, True
    if soft < need:
        raise Fatal(f"the JVM may open {soft} files but the largest count needs about {need}: raise the hard "
                    f"limit (`ulimit -Hn {need}` before `just bench`) or lower [{NAME}] connections")
    return {"soft": soft, "hard": hard, "raised_by_harness": raised}


class Watch:
    """Peaks of the app's threads and file descriptors and of its accept queue, every WATCH_INTERVAL_S."""

    def __init__(self, pid: int, http_port: int):
        self.proc, self.http_port = psutil.Process(pid), http_port
        self.threads = self.fds = self.queue = 0
        self.ss_cpu: list[tuple[float, float]] = []     # (when ss was reaped, its CPU seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self):
        try:
            self.threads = max(self.threads, self.proc.num_threads())
            self.fds = max(self.fds, self.proc.num_fds())
        except psutil.Error:
            pass
        state, cpu = listen_state(self.http_port)
        self.ss_cpu.append((time.monotonic(), cpu))
        if state:
            self.queue = max(self.queue, state[0])

    def ss_cpu_between(self, start: float, end: float) -> float:
        return sum(cpu for when, cpu in self.ss_cpu if start <= when <= end)

    def _loop(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(WATCH_INTERVAL_S)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measure(ctx: common.Context, target: bench.Target, http_port: int, connections: int, rate: float,
            seconds: float) -> dict:
    """One count: the load spread over `connections` keep-alive connections, with the app watched."""
    proc = psutil.Process(target.app_pid)
    fds_before, threads_before = proc.num_fds(), proc.num_threads()
    kernel_before = netstat()
    with Sampler(target.app_pid, target.db_pid) as sampler, Watch(target.app_pid, http_port) as watch:
        began = time.monotonic()
        result = ctx.gen.run_rate(target.url, rate, seconds, connections, ctx.settings["cpus"]["generator"])
        ended = time.monotonic()
    # the generator's CPU is this process's children's: take out the watch's own `ss` runs
    result.generator_cpu_s = round(max(0.0, result.generator_cpu_s - watch.ss_cpu_between(began, ended)), 3)
    step = bench.add_resources(result, sampler)
    kernel_after = netstat()
    step["failure"] = bench.failure(step, ctx.settings["load"]["slo_p99_ms"])
    step["passed"] = step["failure"] is None
    step.update({
        "app_threads_before": threads_before, "app_threads_peak": max(watch.threads, threads_before),
        "app_fds_before": fds_before, "app_fds_peak": max(watch.fds, fds_before),
        # sockets the app had accepted at the peak, beyond what it held before the step
        "app_connections_peak": max(0, watch.fds - fds_before),
        "accept_queue_peak": watch.queue,
        # system-wide kernel counters: SYNs or handshakes dropped because an accept queue was full
        "listen_overflows": {k: kernel_after[k] - kernel_before[k] for k in kernel_after if k in kernel_before},
    })
    return step


def run(ctx: common.Context, selected) -> None:
    cfg = Config.from_settings(ctx.settings)
    rate, basis = choose_rate(cfg.rate_cap, cfg.mst_fraction, common.baseline_msts())
    limits = system_limits()
    need = fd_need(max(cfg.connections), 64)
    if limits["generator_nofile"]["hard"] < need:
        raise Fatal(f"openloop needs about {need} open files for {max(cfg.connections):,} connections but the hard "
                    f"limit is {limits['generator_nofile']['hard']}: `ulimit -Hn {need}` before `just bench`")
    print(f"{ctx.scenario}: {rate:,} req/s ({basis}) over {', '.join(f'{n:,}' for n in cfg.connections)} connections",
          flush=True)
    for iteration in range(1, cfg.iterations + 1):
        for port in section.rotation(list(selected), iteration):
            run_port(ctx, cfg, port, iteration, rate, basis, limits)


def run_port(ctx: common.Context, cfg: Config, port, iteration: int, rate: int, basis: str, limits: dict) -> None:
    load = ctx.settings["load"]
    path = ctx.path(port, f"-{iteration}")
    record = ctx.new_record(port, iteration=iteration, config=dataclasses.asdict(cfg), rate=rate, rate_basis=basis,
                            system=limits, slo_p99_ms=load["slo_p99_ms"], steps=[])
    say = lambda text: print(f"[{ctx.scenario} {port.name} #{iteration}] {text}", flush=True)  # noqa: E731
    try:
        with ctx.port(port) as (running, target):
            http_port = urlparse(target.url).port or 80
            record["startup_s"] = running.startup_seconds and round(running.startup_seconds, 2)
            record["idle_rss_mb"] = running.idle_rss_mb and round(running.idle_rss_mb, 1)
            record["app_nofile"] = ensure_app_fds(running.pid, fd_need(max(cfg.connections), cfg.fd_margin))
            listen, _ = listen_state(http_port)
            record["listen_backlog"] = listen[1] if listen else None
            ctx.save(record, path)
            say(f"up in {record['startup_s']} s; listen backlog {record['listen_backlog']}, "
                f"open-files limit {record['app_nofile']['soft']}")
            with Sampler(target.app_pid, target.db_pid) as sampler:
                warm = ctx.gen.run_rate(target.url, rate, cfg.warmup_seconds, load["connections"],
                                        ctx.settings["cpus"]["generator"])
            w = bench.add_resources(warm, sampler)
            w.pop("histogram", None)
            record["warmup"] = w
            say(f"warm-up {rate}/s on {load['connections']} connections, {cfg.warmup_seconds:g} s: "
                f"p99 {w['latency_ms'].get('p99', 0):.2f} ms")
            for n in cfg.connections:
                time.sleep(cfg.settle_seconds)
                seconds = hold_seconds(n, rate, cfg.step_seconds, cfg.passes)
                step = measure(ctx, target, http_port, n, rate, seconds)
                record["steps"].append(step)
                ctx.save(record, path)
                errors = {k: v for k, v in step["errors"].items() if v}
                say(f"{n:,} connections, {seconds:g} s: opened {step.get('connections_opened')}, app held "
                    f"{step['app_connections_peak']}, p99 {step['latency_ms'].get('p99', 0):.2f} ms, errors "
                    f"{errors or 0}, threads {step['app_threads_peak']}, RSS {step.get('app_rss_mb_peak')} MiB")
        record["status"] = "complete"
    finally:
        ctx.save(record, path)


# --- RESULTS.md ------------------------------------------------------------------------------------------------

def _step(record: dict, connections: int) -> dict | None:
    return next((s for s in record.get("steps", []) if s.get("connections") == connections), None)


def _errors_cell(steps: list[dict]) -> str:
    kinds = sorted({k for s in steps for k, v in s["errors"].items() if v})
    if not kinds:
        return "0"
    return "; ".join(f"{k} {section.cell([s['errors'].get(k, 0) for s in steps])}" for k in kinds)


def render(results: Path) -> list[str]:
    runs, _ = report.run_set(common.load_runs(results))
    if not runs:
        return []
    first = next(iter(runs.values())).records[0]
    cfg, env = first["config"], first["environment"]
    system = first.get("system", {})
    counts = sorted({s["connections"] for p in runs.values() for r in p.records for s in r.get("steps", [])})
    iterations = max(len(p.records) for p in runs.values())
    out = ["## Many concurrent users", "",
           f"`SCENARIO=many-users just bench all`: one fixed rate, **{first['rate']:,} req/s** ({first['rate_basis']}), "
           f"spread over {', '.join(f'{n:,}' for n in counts)} keep-alive connections (openloop hands each due "
           f"request to the connection idle longest, so every connection is used in turn). Per port a fresh JVM, "
           f"{cfg['warmup_seconds']:g} s of warm-up at the same rate on {env['settings']['connections']} connections, "
           f"then the counts in ascending order in that JVM, each held max({cfg['step_seconds']:g} s, "
           f"{cfg['passes']:g} × N / rate) so every connection carries at least {cfg['passes']:g} request(s). "
           f"Latency from each request's intended send time; a request that waits for a connection, or for the "
           f"server to accept one, is charged for it. RSS and threads are the peaks during the count (RSS rarely "
           f"shrinks, so a later count includes what an earlier one grew). "
           + (f"Median of {iterations} runs, min–max in brackets. " if iterations > 1 else "One run. ")
           + f"Generator: {env.get('generator', '?').split(' (')[0]}, {env['settings'].get('generator_threads', 1)} thread.", ""]
    if env.get("quick"):
        out += ["> **QUICK=1 smoke run: these numbers are not results.**", ""]
    for n in counts:
        out += [f"**{n:,} connections**", "",
                "| port | p50 (ms) | p99 (ms) | errors by kind | connections opened (generator) | app file descriptors added (peak) "
                "| accept queue (peak) | app RSS peak (MiB) | app threads (peak) | app CPU (µs/req) |",
                "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for name, p in runs.items():
            steps = [s for r in p.records if (s := _step(r, n))]
            if not steps:
                continue
            out.append(
                f"| {name} | {section.cell([s['latency_ms'].get('p50') for s in steps], report.ms)} "
                f"| {section.cell([s['latency_ms'].get('p99') for s in steps], report.ms)} | {_errors_cell(steps)} "
                f"| {section.cell([s.get('connections_opened') for s in steps])} "
                f"| {section.cell([s.get('app_connections_peak') for s in steps])} "
                f"| {section.cell([s.get('accept_queue_peak') for s in steps])} "
                f"| {section.cell([s.get('app_rss_mb_peak') for s in steps])} "
                f"| {section.cell([s.get('app_threads_peak') for s in steps])} "
                f"| {section.cell([s.get('app_cpu_us_per_request') for s in steps])} |")
        out.append("")
    out += ["Where a server refuses or queues connections, by default (no port changes these), with the listen "
            "backlog measured on the running port (`ss -ltn`: Send-Q of the listening socket, capped by the "
            f"kernel's `somaxconn` = {system.get('somaxconn')}):", "",
            "| port | server | connection limit | accept queue (listen backlog): default | measured | idle keep-alive timeout |",
            "|---|---|---|---|---:|---|"]
    for name, p in runs.items():
        server = SERVER_DEFAULTS.get(server_of(name) or "", ("?", "?", "?", "?"))
        backlog = section.cell([r.get("listen_backlog") for r in p.records])
        out.append(f"| {name} | {server[0]} | {server[1]} | {server[2]} | {backlog} | {server[3]} |")
    nofile = sorted({r.get("app_nofile", {}).get("soft") for p in runs.values() for r in p.records} - {None})
    gen_nofile = system.get("generator_nofile", {})
    overflow = sum(s.get("listen_overflows", {}).get("ListenOverflows", 0) for p in runs.values() for r in p.records
                   for s in r.get("steps", []))
    out += ["", "How a refusal shows: past its connection limit a server stops accepting, new connections wait in the "
            "accept queue, and once that is full the kernel drops the handshake and the client retries it (after "
            "1 s, 3 s, ...): connect errors, timeouts, or latency in the table above. Limits of ours, checked so that "
            "nothing is refused because of them: open files "
            f"{', '.join(map(str, nofile)) or '?'} for the JVM, {gen_nofile.get('hard', '?')} for the generator; "
            f"ephemeral ports {system.get('ip_local_port_range')}; SYN backlog {system.get('tcp_max_syn_backlog')}. "
            f"The kernel's ListenOverflows counter (handshakes dropped because an accept queue was full; "
            f"system-wide) rose by {overflow:,} during these counts. Sources of the defaults: Spring Boot 4.1.0's configuration metadata, Tomcat 11's connector "
            "reference, Quarkus 3.27.1's configuration model (`quarkus.http.accept-backlog`, "
            "`quarkus.http.limits.max-connections`, `quarkus.http.idle-timeout`), Vert.x's "
            "`NetServerOptions.DEFAULT_ACCEPT_BACKLOG` (-1: not set) and Netty's `DefaultServerSocketChannelConfig` "
            "(backlog = `NetUtil.SOMAXCONN`).", "",
            f"Raw: `{results.parent.name}/{results.name}/{', '.join(sorted({r['run_id'] for p in runs.values() for r in p.records}))}/`.", ""]
    return out

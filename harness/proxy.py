"""A known round-trip latency between a port and the database, from a userspace proxy: Toxiproxy
(github.com/Shopify/toxiproxy, built into tools/bin/ by scripts/install-tools.sh), since this kernel has no
netem. Scenarios use it as

    with proxy.latency_proxy(5) as p:
        with ctx.port(port, extra_env=p.env()) as (running, target):
            ...
            p.set_latency(20)          # live, on the open connections too (no reconnect, same JVM)

Where the latency goes: the whole `latency_ms` on the *downstream* stream (database -> port), jitter 0. Every
database round trip (a query, a prepare, a ping) is one request up and one answer down, so delaying the answers
by latency_ms adds exactly latency_ms to each round trip, in whole milliseconds (Toxiproxy's resolution; an
even upstream/downstream split could not express 1 ms). Toxiproxy delays each chunk by `latency` from the
moment it arrived, so the delay does not accumulate: it is a delay line, not a bandwidth limit.

`measure_cost` measures the proxy itself (added latency against the target, and its CPU per query) so that a
report can show it beside the numbers taken through it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import statistics
import subprocess
import time
from contextlib import closing
from pathlib import Path
from typing import Iterator

import psutil
import requests

from . import db, sampling, sideprocess
from .errors import Fatal
from .paths import LOGS, ROOT

TOXIPROXY = ROOT / "tools" / "bin" / "toxiproxy-server"
PROXY_NAME = "db"
TOXIC_NAME = "db_latency"
TOXIC_STREAM = "downstream"   # the answers: one per round trip (see above)


@dataclasses.dataclass
class Proxy:
    """A running latency proxy in front of the database."""
    host: str                 # where the ports should connect (DB_HOST)
    port: int                 # (DB_PORT)
    latency_ms: float         # what it adds to every database round trip
    pid: int                  # toxiproxy-server, for CPU sampling
    api: str                  # Toxiproxy's HTTP API
    upstream: str             # the database it forwards to, host:port

    def env(self) -> dict[str, str]:
        """Environment for ports.start(..., extra_env=...) / ctx.port(port, extra_env=...)."""
        return {"DB_HOST": self.host, "DB_PORT": str(self.port)}

    def set_latency(self, latency_ms: float) -> None:
        """Changes the added round-trip latency live: open connections get it too (no reconnect needed)."""
        r = requests.post(f"{self.api}/proxies/{PROXY_NAME}/toxics/{TOXIC_NAME}",
                          json={"attributes": {"latency": whole_ms(latency_ms), "jitter": 0}}, timeout=10)
        _check(r, "update the latency toxic")
        self.latency_ms = latency_ms

    def cpu_seconds(self) -> float:
        """User + system CPU the proxy has used so far."""
        return sum(sampling.cpu_seconds(sampling.tree(self.pid)))

    def client_connections(self) -> int:
        """Established connections from clients (the port's pool) to the proxy's listening port."""
        try:
            conns = psutil.Process(self.pid).net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            return 0
        return sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == self.port)


def whole_ms(latency_ms: float) -> int:
    if latency_ms < 0 or latency_ms != int(latency_ms):
        raise Fatal(f"a proxy latency of {latency_ms} ms: Toxiproxy adds whole milliseconds (0, 1, 5, ...); "
                    f"fix the latencies in bench.toml [slow-db] or BENCH_SLOW_DB_LATENCIES_MS")
    return int(latency_ms)


def ensure_built() -> Path:
    """tools/bin/toxiproxy-server at the pinned version, built with Go on first use (scripts/install-tools.sh)."""
    result = subprocess.run([str(ROOT / "scripts" / "install-tools.sh"), "toxiproxy"])
    if result.returncode != 0 or not TOXIPROXY.exists():
        raise Fatal("toxiproxy-server could not be built (see above): install Go 1.23+ and run "
                    "`scripts/install-tools.sh toxiproxy`")
    return TOXIPROXY


def version() -> str:
    out = subprocess.run([str(TOXIPROXY), "-version"], capture_output=True, text=True).stdout.strip()
    return out.rsplit(" ", 1)[-1] if out else "unknown"


def _check(r: requests.Response, what: str) -> None:
    if r.status_code >= 300:
        raise Fatal(f"toxiproxy refused to {what}: {r.status_code} {r.text.strip()[:200]}")


@contextlib.contextmanager
def latency_proxy(latency_ms: float, cpus: str | None = None) -> Iterator[Proxy]:
    """toxiproxy-server on a free loopback port (pinned to `cpus` with taskset when given), one proxy to the
    database (harness.db.config()) that adds `latency_ms` to every round trip; everything stopped on the way
    out, also on Ctrl-C or an error."""
    latency = whole_ms(latency_ms)
    binary = ensure_built()
    cfg = db.config()
    upstream = f"{cfg['host']}:{cfg['port']}"
    api_port = sideprocess.free_port()
    cmd = [str(binary), "-host", "127.0.0.1", "-port", str(api_port)]
    if cpus and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpus, *cmd]
    LOGS.mkdir(parents=True, exist_ok=True)
    api, see = f"http://127.0.0.1:{api_port}", "see results/logs/toxiproxy.log"
    # LOG_LEVEL=warn: at info it logs every accepted connection, which is noise and CPU in a measurement
    with sideprocess.running(cmd, lambda: sideprocess.answers(f"{api}/version", timeout=1), poll_s=0.05,
                             log=LOGS / "toxiproxy.log", env=dict(os.environ, LOG_LEVEL="warn"),
                             exited=lambda code: f"toxiproxy-server exited at start (code {code}): {see}",
                             late=f"toxiproxy-server did not answer within 10 s: {see}") as process:
        r = requests.post(f"{api}/proxies", json={"name": PROXY_NAME, "listen": "127.0.0.1:0",
                                                  "upstream": upstream, "enabled": True}, timeout=10)
        _check(r, f"create a proxy to {upstream}")
        listen_host, listen_port = r.json()["listen"].rsplit(":", 1)
        r = requests.post(f"{api}/proxies/{PROXY_NAME}/toxics",
                          json={"name": TOXIC_NAME, "type": "latency", "stream": TOXIC_STREAM, "toxicity": 1.0,
                                "attributes": {"latency": latency, "jitter": 0}}, timeout=10)
        _check(r, "add the latency toxic")
        yield Proxy(listen_host, int(listen_port), latency_ms, process.pid, api, upstream)


# --- the proxy's own cost -----------------------------------------------------------------------------------

def _timed_selects(host: str, port: int, count: int) -> list[float]:
    """Milliseconds of `count` sequential `SELECT 1` round trips on one connection (after one untimed)."""
    with closing(db.connect(host=host, port=port)) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchall()
        times = []
        for _ in range(count):
            began = time.perf_counter()
            cur.execute("SELECT 1")
            cur.fetchall()
            times.append((time.perf_counter() - began) * 1000)
    return times


def _summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"queries": len(times), "p50_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
            "min_ms": round(ordered[0], 3), "max_ms": round(ordered[-1], 3)}


def measure_cost(proxy: Proxy, latencies_ms: list[float], seconds_each: float = 2.0, min_queries: int = 20) -> dict:
    """The proxy's own cost, from sequential `SELECT 1`s with pymysql: directly against the database, then
    through the proxy at 0 ms and at each latency. Per latency: the round trip's p50/p99, what the proxy added
    beyond the direct round trip against its target (added_ms - latency_ms is the proxy's own latency), and its
    CPU per query. Leaves the proxy at the latency it had."""
    cfg = db.config()
    began_at = proxy.latency_ms

    def count(latency: float) -> int:
        return max(min_queries, int(seconds_each * 1000 / max(latency, 0.5)))

    direct = _summary(_timed_selects(cfg["host"], cfg["port"], count(0)))
    rows = []
    try:
        for latency in [0, *sorted(x for x in latencies_ms if x)]:
            proxy.set_latency(latency)
            cpu0, began = proxy.cpu_seconds(), time.monotonic()
            times = _timed_selects(proxy.host, proxy.port, count(latency))
            cpu, wall = proxy.cpu_seconds() - cpu0, time.monotonic() - began
            # CPU time comes in 10-ms clock ticks, and at high latency the Go runtime's timer wake-ups dominate:
            # the per-query figure means most at 0 ms (thousands of queries); cores shows the idle-ish cost
            row = {"latency_ms": latency, **_summary(times), "proxy_cpu_s": round(cpu, 3),
                   "proxy_cpu_cores": round(cpu / wall, 3)}
            row["added_ms"] = round(row["p50_ms"] - direct["p50_ms"], 3)
            row["overhead_ms"] = round(row["added_ms"] - latency, 3)      # beyond the target: the proxy's own
            row["proxy_cpu_us_per_query"] = round(cpu / (len(times) + 1) * 1e6, 1)
            rows.append(row)
    finally:
        proxy.set_latency(began_at)
    return {"method": "sequential SELECT 1 on one pymysql connection, p50 per round trip; direct vs through the proxy",
            "toxiproxy": version(), "toxic": {"type": "latency", "stream": TOXIC_STREAM, "jitter_ms": 0},
            "direct": direct, "through_proxy": rows}

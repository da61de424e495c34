"""Three hosts on one machine: the multi-host layout of docs/deployment.md, with Linux network namespaces.

The test builds its own little network: a bridge in the root namespace (the generator host, 10.213.0.1)
and two namespaces joined to it by veth pairs, the DB host (10.213.0.2, MariaDB on a scratch data
directory) and the port host (10.213.0.3, quarkus-vertx). From the root namespace it seeds the DB over
the network, runs the conformance suite against the port and a QUICK bench with BENCH_APP=external and
BENCH_DB=external. Traffic goes only to the addresses of the namespaces created here; everything is
bounded in time, and the namespaces, bridge and processes are removed at the end whatever happens.
Needs root (ip netns); fails with the reason otherwise.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests

from harness import ports, settings as settings_mod, tokens
from harness.paths import ROOT

NETWORK = ipaddress.ip_network("10.213.0.0/24")
GENERATOR, DB_HOST, APP_HOST = "10.213.0.1", "10.213.0.2", "10.213.0.3"
# The lightest port by default (every port takes DB_HOST the same way); MULTIHOST_PORT picks another.
PORT = ports.PORTS[os.environ.get("MULTIHOST_PORT", "quarkus-vertx")]
HTTP_PORT = 8080


def sh(*cmd: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and run.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` failed: {run.stderr.strip() or run.stdout.strip()}")
    return run


@dataclasses.dataclass
class Hosts:
    tag: str
    db_ns: str
    app_ns: str
    bridge: str
    processes: list = dataclasses.field(default_factory=list)

    def spawn(self, ns: str, cmd: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
        with open(log, "w") as out:
            process = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=out, stderr=subprocess.STDOUT,
                                       env=env, cwd=ROOT, start_new_session=True)
        self.processes.append(process)
        return process


def reachable(host: str, port: int) -> bool:
    assert ipaddress.ip_address(host) in NETWORK  # never anything else
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_for(what: str, condition, timeout: float, process: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and process.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    pytest.fail(f"{what} within {timeout:.0f} s" + (f" (exited {process.returncode})" if process and
                                                    process.poll() is not None else "") + f"\n{tail}")


@pytest.fixture(scope="module")
def hosts():
    if os.geteuid() != 0:
        pytest.fail("the multi-host test builds its hosts with `ip netns`, which needs root: run it as root")
    if not shutil.which("ip"):
        pytest.fail("`ip` (iproute2) is missing: apt-get install iproute2")
    in_use = sh("ip", "-4", "-o", "addr", "show").stdout + sh("ip", "-4", "route", "show").stdout
    if "10.213.0." in in_use:
        pytest.fail(f"{NETWORK} is already in use on this machine (left by an earlier run?): "
                    f"`ip -4 addr` shows it; remove it, then run again")
    tag = str(os.getpid() % 100000)
    h = Hosts(tag, f"bench-db-{tag}", f"bench-app-{tag}", f"bbr{tag}")
    veths = {h.db_ns: (f"bdb{tag}", DB_HOST), h.app_ns: (f"bap{tag}", APP_HOST)}
    try:
        made = subprocess.run(["ip", "netns", "add", h.db_ns], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.fail(f"cannot create a network namespace here (`ip netns add`): {made.stderr.strip()}")
        sh("ip", "netns", "add", h.app_ns)
        sh("ip", "link", "add", h.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{GENERATOR}/24", "dev", h.bridge)
        sh("ip", "link", "set", h.bridge, "up")
        for ns, (veth, address) in veths.items():
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}n")
            sh("ip", "link", "set", f"{veth}n", "netns", ns)
            sh("ip", "link", "set", veth, "master", h.bridge, "up")
            sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", f"{veth}n")
            sh("ip", "-n", ns, "link", "set", f"{veth}n", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield h
    finally:
        for process in h.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                except ProcessLookupError:
                    pass
        # any process still inside a namespace (there should be none) goes with it
        for ns in (h.db_ns, h.app_ns):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # takes its veth peers along
        subprocess.run(["ip", "link", "del", h.bridge], capture_output=True)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert h.db_ns not in left and h.app_ns not in left, f"namespaces left behind: {left}"


@pytest.fixture(scope="module")
def database(hosts):
    """MariaDB on the DB host, on a scratch data directory, seeded over the network from the generator."""
    for tool in ("mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing: `scripts/install-tools.sh` installs MariaDB from Debian's packages")
    datadir = Path(tempfile.mkdtemp(prefix="bench-mh-db-"))
    socket_path = datadir / "mysqld.sock"
    try:
        sh("mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
           "--auth-root-authentication-method=socket", "--skip-test-db", timeout=120)
        log = datadir / "mariadb.log"
        server = hosts.spawn(hosts.db_ns, [
            "mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root", f"--bind-address={DB_HOST}",
            "--port=3306", f"--socket={socket_path}", f"--pid-file={datadir / 'mysqld.pid'}", "--skip-name-resolve",
            "--max-connections=300", "--innodb-buffer-pool-size=256M", "--performance-schema=OFF",
            f"--log-error={log}"], datadir / "stdout.log")
        wait_for("MariaDB did not listen on the DB host", lambda: reachable(DB_HOST, 3306), 60, server, log)
        # the same user and grants as db/local.sh, through the server's socket (a file: no network)
        sql = ("CREATE DATABASE IF NOT EXISTS bench; CREATE USER IF NOT EXISTS 'bench'@'%' IDENTIFIED BY 'bench'; "
               "GRANT ALL ON bench.* TO 'bench'@'%'; GRANT PROCESS ON *.* TO 'bench'@'%';")
        sh("mariadb", "--no-defaults", f"--socket={socket_path}", "-uroot", "-e", sql)
        env = db_env()
        seed = subprocess.run([sys.executable, "-m", "harness", "db", "seed"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert seed.returncode == 0, seed.stdout + seed.stderr
        yield env
    finally:
        shutil.rmtree(datadir, ignore_errors=True)


def db_env(**extra) -> dict:
    """The generator host's view: the DB is external, on the DB host."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "DB_", "CONFORMANCE_"))}
    return env | {"BENCH_DB": "external", "DB_HOST": DB_HOST, "DB_PORT": "3306"} | extra


@pytest.fixture(scope="module")
def port_url(hosts, database):
    """quarkus-vertx on the port host, with DB_HOST pointing at the DB host."""
    if ports.is_stale(PORT):
        build = subprocess.run([sys.executable, "-m", "harness", "build", PORT.name], cwd=ROOT,
                               capture_output=True, text=True, timeout=1200)
        if build.returncode != 0 or not PORT.jar_path.exists():
            pytest.fail(f"`harness build {PORT.name}` failed:\n{(build.stdout + build.stderr)[-3000:]}")
    settings = settings_mod.load(env={})
    env = ports.app_env(PORT, settings, HTTP_PORT) | {"DB_HOST": DB_HOST, "DB_PORT": "3306"}
    cmd = [str(ports.java_home() / "bin" / "java"), *settings["jvm"]["options"], "-jar", str(PORT.jar_path)]
    log = Path(tempfile.mkdtemp(prefix="bench-mh-app-")) / f"{PORT.name}.log"
    app = hosts.spawn(hosts.app_ns, cmd, log, env=env)
    url = f"http://{APP_HOST}:{HTTP_PORT}/"
    token = tokens.load()[0]

    def answers() -> bool:
        try:
            return requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=2).status_code == 200
        except requests.RequestException:
            return False
    wait_for(f"{PORT.name} gave no 200 on the port host", answers, 120, app, log)
    yield url
    shutil.rmtree(log.parent, ignore_errors=True)


def test_the_port_host_reads_the_db_host(port_url, database):
    """The row comes from the DB host's MariaDB: the port has no other DB to read."""
    pool = tokens.load()
    answer = requests.get(port_url, headers={"Authorization": f"Bearer {pool[5]}"}, timeout=5)
    assert answer.status_code == 200 and answer.json()["email"] == tokens.email_of(pool[5])


def test_conformance_suite_passes_across_hosts(port_url, database, tmp_path):
    env = database | {"CONFORMANCE_URL": port_url, "CONFORMANCE_PORT": f"multihost-{PORT.name}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_quick_bench_across_hosts(port_url, database, tmp_path):
    """`harness bench` from the generator host against a port and a DB on other hosts, by configuration only."""
    env = database | {"QUICK": "1", "BENCH_RESULTS": str(tmp_path), "BENCH_APP": "external",
                      "BENCH_LOAD_TARGET_HOST": APP_HOST, "BENCH_LOAD_PORT": str(HTTP_PORT)}
    run = subprocess.run([sys.executable, "-m", "harness", "bench", PORT.name], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [raw] = list(tmp_path.glob(f"baseline/*/{PORT.name}-1.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete"
    assert record["calibration"]["db_ceiling_selects_per_s"]["median"] > 0   # the DB host's ceiling
    [cell] = record["cells"]                     # the one schema: the baseline's one cell
    for step in cell["steps"] + cell["closed"]:
        assert step["achieved_rps"] > 0
        assert step["errors"]["non_2xx"] == 0  # correct answers only
    for step in cell["steps"]:
        assert set(step["statuses"]) == {"200"}, step["statuses"]

"""compose.yaml and the images, proved as far as a machine without a Docker engine allows.

- compose.yaml is loaded by compose-go (tools/compose-validate: the loader and validator the `docker
  compose` CLI is built on), with the harness's settings as interpolation environment;
- each Dockerfile's steps run here (tests/harness/dockerfile.py: COPY, WORKDIR and RUN in a scratch
  directory per stage, with this machine's JDK 25 as `java`) against the real jars;
- harness/compose.py drives a stand-in `docker` that records what it is asked to do.
Nothing is skipped: a missing Go toolchain or a port that does not build fails with the reason.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest
import requests

from harness import compose, db, downstream, port_facts, ports, settings as settings_mod, tokens
from harness.db import LocalDatabase
from harness.errors import Fatal
from harness.paths import ROOT, USERS_TSV

sys.path.insert(0, str(Path(__file__).parent))
import dockerfile  # noqa: E402

VALIDATOR_SRC = ROOT / "tools" / "compose-validate"
VALIDATOR = ROOT / "tools" / "bin" / "compose-validate"
DB_SERVICES = {"db", "db-seed"}
JRE_IMAGE = "eclipse-temurin:25.0.3_9-jre-noble"


def go_binary() -> str:
    found = shutil.which("go") or next((p for p in ["/usr/local/go/bin/go"] if os.access(p, os.X_OK)), None)
    if not found:
        pytest.fail("Go is needed to build tools/compose-validate (compose-go): install Go 1.24+ "
                    "(https://go.dev/dl/) or put it on PATH")
    return found


@pytest.fixture(scope="session")
def validator() -> Path:
    sources = [p for p in VALIDATOR_SRC.iterdir() if p.is_file()]
    if not VALIDATOR.exists() or any(p.stat().st_mtime > VALIDATOR.stat().st_mtime for p in sources):
        VALIDATOR.parent.mkdir(parents=True, exist_ok=True)
        build = subprocess.run([go_binary(), "build", "-o", str(VALIDATOR), "."], cwd=VALIDATOR_SRC,
                               capture_output=True, text=True, timeout=900)
        if build.returncode != 0:
            pytest.fail(f"`go build` of tools/compose-validate failed:\n{build.stderr[-3000:]}")
    return VALIDATOR


def clean_env(**extra) -> dict:
    """The process environment without any BENCH_*/DB_*/JWT_* the caller may have set, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCH_", "DB_", "JWT_", "COMPOSE_"))}
    env.update(extra)
    return env


def load(validator, env: dict, profiles=(), files=("compose.yaml",), fmt="json", check=True):
    cmd = [str(validator), "--no-dotenv", *(a for f in files for a in ("-f", str(ROOT / f))),
           *(a for p in profiles for a in ("--profile", p)), "--format", fmt]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout) if fmt == "json" else run.stdout.split()
    return run


# --- compose.yaml --------------------------------------------------------------------------------

def test_compose_file_validates_and_starts_only_the_db_without_a_profile(validator):
    assert set(load(validator, clean_env(), fmt="services")) == DB_SERVICES


@pytest.mark.parametrize("name", list(ports.PORTS))
def test_each_port_profile_starts_exactly_that_port_and_the_db(validator, name):
    assert set(load(validator, clean_env(), profiles=[name], fmt="services")) == DB_SERVICES | {name}


def test_every_service_is_the_db_or_a_port(validator):
    every = load(validator, clean_env(), profiles=["*"], fmt="services")
    assert set(every) == DB_SERVICES | set(ports.PORTS)


def test_profile_all_starts_every_port_each_on_its_own_host_port(validator):
    project = load(validator, clean_env(), profiles=["all"])
    assert set(project["services"]) == DB_SERVICES | set(ports.PORTS)
    published = {name: project["services"][name]["ports"][0]["published"] for name in ports.PORTS}
    assert published == {name: str(number) for name, number in port_facts.host_ports().items()}
    assert len(set(published.values())) == len(published)


def test_ports_reach_the_hosts_downstream_through_the_bridge(validator):
    """GET /feed's downstream runs on the host (harness/downstream.py); a container reaches it as
    host.docker.internal, which host-gateway maps to the host's address on Docker's bridge."""
    project = load(validator, clean_env(), profiles=["all"])
    for name in ports.PORTS:
        service = project["services"][name]
        assert service["environment"]["DOWNSTREAM_URL"] == "http://host.docker.internal:8090", name
        assert "host.docker.internal=host-gateway" in service["extra_hosts"], name


def without(project: dict, *paths: tuple) -> dict:
    """The project with the given keys removed (paths of keys into the nested dicts)."""
    copy = json.loads(json.dumps(project))
    for path in paths:
        node = copy
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1], None)
    return copy


def test_offline_override_changes_only_the_registry_images(validator):
    """compose.offline.yaml: the three registry images become the Debian-made ones, the database's health check
    becomes MariaDB's (without start_interval, which Debian 12's Engine 20.10 cannot take); every other line of
    compose.yaml applies as the reader gets it."""
    online = load(validator, clean_env(), profiles=["all"])
    offline = load(validator, clean_env(), profiles=["all"], files=("compose.yaml", compose.OFFLINE_FILE))
    services = offline["services"]
    assert services["db"]["image"] == "bench-offline-mariadb:bookworm"
    assert "mariadb-admin" in " ".join(services["db"]["healthcheck"]["test"])
    assert "start_interval" in online["services"]["db"]["healthcheck"]
    assert "start_interval" not in services["db"]["healthcheck"]
    assert services["db-seed"]["build"]["args"] == {"PYTHON_IMAGE": "bench-offline-python:bookworm"}
    for name in ports.PORTS:
        args = services[name]["build"]["args"]
        assert args["JRE_IMAGE"] == "bench-offline-jre:25", name
        assert args["MODULE"] == online["services"][name]["build"]["args"]["MODULE"], name
    changed = [("services", "db", "image"), ("services", "db", "healthcheck"), ("services", "db-seed", "build", "args"),
               *(("services", name, "build", "args", "JRE_IMAGE") for name in ports.PORTS)]
    assert without(offline, *changed) == without(online, *changed)


def test_the_validator_rejects_what_compose_rejects(validator, tmp_path):
    """A typo'd key must fail: proves the checks above ran with schema validation on."""
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "schema.sql").write_text("")
    text = (ROOT / "compose.yaml").read_text().replace("    cpuset: ${BENCH_CPUS_DB", "    cpu_set: ${BENCH_CPUS_DB")
    (tmp_path / "compose.yaml").write_text(text)
    run = subprocess.run([str(validator), "--no-dotenv", "-f", str(tmp_path / "compose.yaml")],
                         env=clean_env(), capture_output=True, text=True)
    assert run.returncode != 0 and "cpu_set" in run.stderr, run.stderr


def test_mariadb_override_validates(validator):
    project = load(validator, clean_env(), profiles=["quarkus-vertx"], files=("compose.yaml", "compose.mariadb.yaml"))
    db = project["services"]["db"]
    assert db["image"].startswith("mariadb:") and "mariadb-admin" in " ".join(db["healthcheck"]["test"])
    assert set(project["services"]) == DB_SERVICES | {"quarkus-vertx"}


def test_mysql_image_is_pinned_once(validator):
    text = (ROOT / "compose.yaml").read_text()
    assert len(re.findall(r"mysql:8\.4\.\d+", text)) == 1
    assert load(validator, clean_env())["services"]["db"]["image"] == re.search(r"mysql:8\.4\.\d+", text).group(0)


def service_settings(service: dict) -> dict:
    env = service["environment"]
    return {"cpuset": service["cpuset"], "mem_limit": int(service["mem_limit"]), "java_opts": env["JAVA_OPTS"],
            "pool": env["DB_POOL_SIZE"], "published": service["ports"][0]["published"]}


def test_compose_defaults_are_bench_toml_values(validator):
    """A bare `docker compose up` configures the containers as the default local run does (each port on its own
    host port, so that `--profile all` runs them side by side; the harness publishes the one it benchmarks on
    [load] port)."""
    settings = settings_mod.load(env={})
    project = load(validator, clean_env(), profiles=["*"])
    for name in ports.PORTS:
        got = service_settings(project["services"][name])
        assert got["cpuset"] == settings["cpus"]["app"], name
        assert got["java_opts"].split() == settings["jvm"]["options"], name
        assert got["pool"] == str(settings["db"]["pool_size"]), name
        assert got["published"] == str(port_facts.host_ports()[name]), name
    assert project["services"]["db"]["cpuset"] == settings["cpus"]["db"]


def test_settings_reach_the_containers(validator):
    """compose_env(settings) -> compose.yaml: CPU sets, memory, JVM options, pool size and port per role."""
    overrides = {"BENCH_CPUS_APP": "1", "BENCH_CPUS_DB": "0", "BENCH_JVM_OPTIONS": "-Xms256m,-Xmx256m",
                 "BENCH_DB_POOL_SIZE": "24", "BENCH_LOAD_PORT": "18080"}
    settings = settings_mod.load(env=overrides)
    settings["containers"] = {"app": "768m", "db": "3g"}
    env = compose.compose_env(settings, env=clean_env())
    project = load(validator, env, profiles=["spring-virtual"])
    app = service_settings(project["services"]["spring-virtual"])
    assert app == {"cpuset": "1", "mem_limit": 768 * 2**20, "java_opts": "-Xms256m -Xmx256m", "pool": "24",
                   "published": "18080"}
    db = project["services"]["db"]
    assert db["cpuset"] == "0" and int(db["mem_limit"]) == 3 * 2**30


def test_jwt_secret_is_passed_through_only_when_set(validator):
    project = load(validator, clean_env(), profiles=["quarkus-vertx"])
    assert project["services"]["quarkus-vertx"]["environment"]["JWT_SECRET"] is None
    project = load(validator, clean_env(JWT_SECRET="s" * 40), profiles=["quarkus-vertx"])
    assert project["services"]["quarkus-vertx"]["environment"]["JWT_SECRET"] == "s" * 40


def properties(path: Path) -> dict:
    """A .properties file's keys and values (continuation lines joined)."""
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: the port is not there yet")
    text = re.sub(r"\\\n\s*", "", path.read_text())
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


# What compose.yaml adds per port for MySQL 8.4 (caching_sha2_password without TLS): the framework's own
# configuration key that must be in the port's configuration for the addition to reach the driver, the
# environment variable compose.yaml sets, and the option a test sets to REQUIRED to prove it reaches it.
DRIVER_OPTIONS = {
    "spring-platform": ("spring.datasource.url", "JDK_JAVA_OPTIONS", "-Dspring.datasource.hikari.data-source-properties.sslMode=REQUIRED"),
    "spring-virtual": ("spring.datasource.url", "JDK_JAVA_OPTIONS", "-Dspring.datasource.hikari.data-source-properties.sslMode=REQUIRED"),
    "spring-virtual-jdbc": ("spring.datasource.url", "JDK_JAVA_OPTIONS", "-Dspring.datasource.hikari.data-source-properties.sslMode=REQUIRED"),
    "spring-virtual-hikari": ("spring.datasource.url", "JDK_JAVA_OPTIONS", "-Dspring.datasource.hikari.data-source-properties.sslMode=REQUIRED"),
    "spring-webflux": ("spring.r2dbc.url", "JDK_JAVA_OPTIONS", "-Dspring.r2dbc.properties.sslMode=REQUIRED"),
    "quarkus-virtual": ("quarkus.datasource.jdbc.url", "JDK_JAVA_OPTIONS", "-Dquarkus.datasource.jdbc.additional-jdbc-properties.sslMode=REQUIRED"),
    "quarkus-reactive": ("quarkus.datasource.reactive.url", "QUARKUS_DATASOURCE_REACTIVE_MYSQL_SSL_MODE", "required"),
    "quarkus-vertx": ("quarkus.datasource.reactive.url", "QUARKUS_DATASOURCE_REACTIVE_MYSQL_SSL_MODE", "required"),
}


@pytest.mark.parametrize("name", list(ports.PORTS))
def test_ports_configure_the_driver_the_way_compose_extends(validator, name):
    """compose.yaml adds TLS/auth options through the framework's datasource configuration: the port must
    use that configuration, follow DB_HOST, and set none of those options itself (its URL would win)."""
    key, env_name, _ = DRIVER_OPTIONS[name]
    port = ports.PORTS[name]
    props = properties(port.module_dir / "src" / "main" / "resources" / "application.properties")
    assert key in props, f"{name}: {key} is not in application.properties: compose.yaml's {env_name} assumes it is"
    assert "DB_HOST" in props[key], f"{name}: {key} does not follow DB_HOST: {props[key]}"
    assert not re.search(r"(?i)ssl|publickey", props[key]), f"{name}: {key} sets TLS/auth options itself: {props[key]}"
    env = load(validator, clean_env(), profiles=[name])["services"][name]["environment"]
    assert env["DB_HOST"] == "db" and env_name in env


def first_answer(port: ports.Port, extra_env: dict, token: str, timeout: float = 120.0) -> tuple[int | str, str]:
    """Starts the port's jar on a free HTTP port against the local DB; returns the status of its first
    answer to a valid token ("exited" if it stopped first) and its log."""
    settings = settings_mod.load(env={})
    http_port = free_port()
    env = ports.app_env(port, settings, http_port) | extra_env
    cmd = [str(ports.java_home() / "bin" / "java"), *settings["jvm"]["options"], "-jar", str(port.jar_path)]
    log_path = Path(tempfile.mkdtemp()) / f"{port.name}.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        status: int | str = "no answer"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                status = "exited"
                break
            try:
                status = requests.get(f"http://127.0.0.1:{http_port}/", timeout=10,
                                      headers={"Authorization": f"Bearer {token}"}).status_code
                break
            except requests.ConnectionError:
                time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    text = log_path.read_text(errors="replace")
    shutil.rmtree(log_path.parent)
    return status, text


@pytest.fixture(scope="module")
def local_db():
    with LocalDatabase():
        yield tokens.load()[0]


@pytest.mark.parametrize("name", list(ports.PORTS))
def test_compose_driver_options_reach_the_driver(validator, local_db, name):
    """No MySQL 8.4 here, but the local MariaDB (no TLS) shows where the options go: with compose.yaml's
    options the port answers 200; with the same key set to require TLS, its driver refuses to connect."""
    port = ports.PORTS[name]
    build_jar(port)
    _, env_name, requiring = DRIVER_OPTIONS[name]
    compose_env = load(validator, clean_env(), profiles=[name])["services"][name]["environment"]
    status, log = first_answer(port, {env_name: compose_env[env_name]}, local_db)
    assert status == 200, log[-3000:]
    # The only difference from the run above is that option's value, so a refusal proves it reaches the
    # driver (Spring and Agroal log "SSL ... required"; the Vert.x ports answer 500 without a log line).
    status, log = first_answer(port, {env_name: requiring}, local_db)
    assert status not in (200, "no answer"), (status, log[-3000:])


# --- the images: each Dockerfile's steps, run here -------------------------------------------------

def build_jar(port: ports.Port) -> None:
    if port.jar_path.exists() and not ports.is_stale(port):
        return
    run = subprocess.run([sys.executable, "-m", "harness", "build", port.name], cwd=ROOT,
                         capture_output=True, text=True, timeout=1200)
    if run.returncode != 0 or not port.jar_path.exists():
        pytest.fail(f"`harness build {port.name}` failed, so its image cannot be checked:\n"
                    f"{(run.stdout + run.stderr)[-3000:]}")


def manifest(jar: Path) -> dict:
    with zipfile.ZipFile(jar) as z:
        text = z.read("META-INF/MANIFEST.MF").decode()
    text = re.sub(r"\r?\n ", "", text)
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def assert_class_path_complete(app_dir: Path, jar: str) -> None:
    entries = manifest(app_dir / jar).get("Class-Path", "").split()
    assert entries, f"{jar} has no Class-Path"
    missing = [e for e in entries if not (app_dir / e).exists()]
    assert not missing, f"{jar}'s Class-Path entries missing from the image: {missing[:5]}"


@pytest.mark.parametrize("name", ["spring-platform", "spring-webflux", "spring-virtual-hikari"])
def test_spring_dockerfile_steps(validator, tmp_path, name):
    port = ports.PORTS[name]
    build_jar(port)
    # compose.yaml's build arguments for the port (JAR where a Maven profile built the jar elsewhere)
    args = {k: v for k, v in load(validator, clean_env(), profiles=[name])["services"][name]["build"]["args"].items()
            if k != "JRE_IMAGE"}
    image = dockerfile.build(ROOT / "spring" / "Dockerfile", ROOT / "spring", tmp_path, {**args, "JRE_IMAGE": JRE_IMAGE})
    assert ("JAR" in args) == (port.maven_profile is not None)
    assert image.entrypoint == ["sh", "-c", "exec java $JAVA_OPTS -jar application.jar"]
    app = image.path(image.workdir)
    assert (app / "application.jar").is_file() and (app / "lib").is_dir()
    assert_class_path_complete(app, "application.jar")
    assert manifest(app / "application.jar")["Main-Class"].startswith("bench.")


@pytest.mark.parametrize("module", ["virtual", "reactive", "vertx"])
def test_quarkus_dockerfile_steps(tmp_path, module):
    port = next(p for p in ports.PORTS.values() if p.family == "quarkus" and p.module == module)
    build_jar(port)
    image = dockerfile.build(ROOT / "quarkus" / "Dockerfile.jvm", ROOT / "quarkus", tmp_path,
                             {"MODULE": module, "JRE_IMAGE": JRE_IMAGE})
    assert image.entrypoint == ["sh", "-c", "exec java $JAVA_OPTS -jar /deployments/quarkus-run.jar"]
    app = image.path("/deployments")
    for part in ["quarkus-run.jar", "lib/boot", "lib/main", "app", "quarkus/quarkus-application.dat"]:
        assert (app / part).exists(), f"{part} is not in the image"
    assert_class_path_complete(app, "quarkus-run.jar")


def test_seed_dockerfile_steps_make_the_local_users(tmp_path):
    """db/Dockerfile's COPY set (through .dockerignore) suffices, and its generation step writes the same
    users file as the local DB's. Its pip step is checked for what it installs, not run (no network)."""
    image = dockerfile.build(ROOT / "db" / "Dockerfile", ROOT, tmp_path, {}, python=sys.executable,
                             ignore=ROOT / ".dockerignore", skip_run=lambda cmd: "pip install" in cmd)
    wanted = {"faker", "pymysql"}
    pins = [line for line in (ROOT / "harness" / "requirements.txt").read_text().splitlines()
            if line.split("==")[0].lower() in wanted]
    assert len(pins) == 2, pins
    assert image.entrypoint == ["python", "db/compose_seed.py"]
    app = image.path("/bench")
    db.ensure_users_file()
    assert (app / "build" / "users.tsv").read_bytes() == USERS_TSV.read_bytes()
    # the seed script's imports resolve inside the image's tree
    check = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.'); import db.compose_seed"],
                           cwd=app, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# --- harness/compose.py against a stand-in docker ----------------------------------------------------

FAKE_DOCKER = r'''#!/usr/bin/env python3
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "env": {k: v for k, v in os.environ.items() if k.startswith("BENCH_")}}) + "\n")
if args[:2] == ["compose", "version"]:
    print("2.99.0"); sys.exit(0)
if args[0] == "version":
    print("29.0.0"); sys.exit(0)
if args[0] == "info":          # the engine answers: compose.engine() starts no dockerd
    sys.exit(0)
if args[:2] == ["image", "inspect"] or args[0] == "pull":
    sys.exit(0 if os.environ.get("FAKE_REGISTRY") == "1" else 1)
if args[0] == "inspect":
    print(json.dumps({"Running": True, "StartedAt": "2026-01-01T00:00:00.123456789Z"})); sys.exit(0)
if args[0] == "compose":
    if "up" in args and os.environ.get("FAKE_UP_FAILS") == "1":
        print("container bench-quarkus-vertx-1 is unhealthy"); sys.exit(1)
    if "up" in args and "quarkus-vertx" in args:
        # the "container": an HTTP server on the published port answering 200 to the token
        server = subprocess.Popen([sys.executable, os.environ["FAKE_APP"], os.environ["BENCH_HOST_PORT_QUARKUS_VERTX"]],
                                  start_new_session=True)
        open(os.environ["FAKE_DOCKER_LOG"] + ".pid", "w").write(str(server.pid))
    elif "ps" in args:
        print("c0ffee")
    elif "exec" in args:
        print("Name:\tjava\nVmRSS:\t  204800 kB")
    elif ("down" in args or "rm" in args) and os.path.exists(os.environ["FAKE_DOCKER_LOG"] + ".pid"):
        os.killpg(int(open(os.environ["FAKE_DOCKER_LOG"] + ".pid").read()), 15)
        os.remove(os.environ["FAKE_DOCKER_LOG"] + ".pid")
    sys.exit(0)
sys.exit(1)
'''

FAKE_APP = r'''import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.headers.get("Authorization") == "Bearer T0KEN"
        self.send_response(200 if ok else 401); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    (tmp_path / "app.py").write_text(FAKE_APP)
    log = tmp_path / "docker.log"
    for key in [k for k in os.environ if k.startswith(("BENCH_", "COMPOSE_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    monkeypatch.setenv("FAKE_APP", str(tmp_path / "app.py"))
    monkeypatch.setenv("DB_PORT", str(free_port()))
    monkeypatch.setenv("BENCH_COMPOSE_OFFLINE", "0")
    monkeypatch.setattr(compose, "LOGS", tmp_path / "logs")
    for key in ("BENCH_DB", "DB_HOST"):  # use_compose_db() sets them: recorded here so they are restored
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    return lambda: [json.loads(line) for line in log.read_text().splitlines()]


def start_and_check(settings):
    running = compose.start(ports.PORTS["quarkus-vertx"], settings, token="T0KEN", timeout=60)
    try:
        assert running.url == f"http://127.0.0.1:{settings['load']['port']}/"
        assert running.pid is None and running.idle_rss_mb == 200.0 and running.startup_seconds > 0
        assert running.log.exists()
    finally:
        running.stop()


def test_compose_start_and_stop_drive_docker_compose(fake_docker):
    settings = settings_mod.load(env={"BENCH_LOAD_PORT": str(free_port()), "BENCH_CPUS_APP": "1"})
    start_and_check(settings)
    calls = fake_docker()
    up = next(c for c in calls if "up" in c["args"])
    assert up["args"] == ["compose", "-f", "compose.yaml", "--profile", "quarkus-vertx", "up", "-d", "--build", "--wait"]
    assert up["env"]["BENCH_CPUS_APP"] == "1"
    assert up["env"]["BENCH_JVM_OPTIONS"] == " ".join(settings["jvm"]["options"])
    assert calls[-1]["args"][-3:] == ["down", "--volumes", "--remove-orphans"]
    info = compose.environment()
    assert info["mode"] == "compose" and info["compose_version"] == "2.99.0"


def test_compose_stack_keeps_the_db_between_ports(fake_docker):
    settings = settings_mod.load(env={"BENCH_LOAD_PORT": str(free_port())})
    with compose.Stack(settings):
        assert os.environ["BENCH_DB"] == "external" and os.environ["DB_HOST"] == "127.0.0.1"
        start_and_check(settings)
        start_and_check(settings)
    args = [c["args"][3:] for c in fake_docker() if c["args"][0] == "compose" and "version" not in c["args"]]
    assert args[:2] == [["up", "-d", "--wait", "db"], ["run", "--rm", "--build", "db-seed"]]
    ups = [a for a in args if "up" in a]
    assert ups[1:] == [["--profile", "quarkus-vertx", "up", "-d", "--build", "--wait", "quarkus-vertx"]] * 2
    assert sum(a[-4:] == ["rm", "--stop", "--force", "quarkus-vertx"] for a in args) == 2
    assert args[-1] == ["--profile", "*", "down", "--volumes", "--remove-orphans"]


@pytest.mark.parametrize("registry", ["1", "0"])
def test_offline_file_is_added_only_when_the_database_image_cannot_be_pulled(fake_docker, monkeypatch, registry):
    monkeypatch.delenv("BENCH_COMPOSE_OFFLINE")
    monkeypatch.setenv("FAKE_REGISTRY", registry)
    files = compose.compose_files()
    assert files == (["compose.yaml"] if registry == "1" else ["compose.yaml", compose.OFFLINE_FILE])
    # the answer is kept for the rest of the run and the processes it starts: one probe
    assert os.environ["BENCH_COMPOSE_OFFLINE"] == ("0" if registry == "1" else "1")
    compose.compose_files()
    assert sum(c["args"][:2] == ["image", "inspect"] for c in fake_docker()) == 1


def test_compose_files_named_explicitly_win(fake_docker, monkeypatch):
    monkeypatch.setenv("BENCH_COMPOSE_FILES", "compose.yaml compose.mariadb.yaml")
    monkeypatch.setenv("BENCH_COMPOSE_OFFLINE", "1")
    assert compose.compose_files() == ["compose.yaml", "compose.mariadb.yaml"]


def test_up_that_fails_brings_everything_down_again(fake_docker, monkeypatch):
    """A port that never gets healthy: one clear error, and the project's containers, the downstream and the engine
    started for it are removed again."""
    calls = []
    monkeypatch.setattr(compose, "prepare", lambda selected, env=None: None)
    monkeypatch.setattr(compose, "bridge_address", lambda: "127.0.0.1")
    monkeypatch.setattr(downstream, "up", lambda *a, **k: calls.append("downstream up"))
    monkeypatch.setattr(downstream, "down", lambda *a, **k: calls.append("downstream down"))
    monkeypatch.setattr(compose, "stop_engine", lambda: calls.append("engine stopped"))
    monkeypatch.setenv("FAKE_UP_FAILS", "1")
    monkeypatch.setenv("BENCH_HOST_PORT_QUARKUS_VERTX", str(free_port()))
    settings = settings_mod.load(env={"BENCH_LOAD_PORT": str(free_port())})
    with pytest.raises(Fatal, match="failed"):
        compose.up([ports.PORTS["quarkus-vertx"]], settings, env=os.environ)
    args = [c["args"][3:] for c in fake_docker() if c["args"][0] == "compose" and "version" not in c["args"]]
    assert args[-1] == ["--profile", "*", "down", "--volumes", "--remove-orphans"]
    assert calls == ["downstream up", "downstream down", "engine stopped"]


def test_up_refuses_a_busy_host_port_before_starting_anything(fake_docker, monkeypatch):
    monkeypatch.setattr(compose, "prepare", lambda selected, env=None: None)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        settings = settings_mod.load(env={"BENCH_LOAD_PORT": str(busy.getsockname()[1])})
        with pytest.raises(Fatal, match=f"port {busy.getsockname()[1]} is busy"):
            compose.up([ports.PORTS["quarkus-vertx"]], settings, env=os.environ)
    assert not [c for c in fake_docker() if c["args"][0] == "compose" and "up" in c["args"]]


def test_ports_are_chosen_by_name_all_or_a_comma_list():
    assert [p.name for p in ports.select("spring-virtual,quarkus-vertx")] == ["spring-virtual", "quarkus-vertx"]
    assert len(ports.select("all")) == len(ports.PORTS) and [p.name for p in ports.select("quarkus-vertx")] == ["quarkus-vertx"]
    with pytest.raises(Fatal, match="unknown port 'spring-virtul'"):
        ports.select("quarkus-vertx,spring-virtul")


def test_a_missing_engine_is_one_line_saying_what_to_install(monkeypatch, tmp_path):
    """No docker CLI at all, then a CLI whose engine does not answer and no dockerd to start: each a Fatal naming
    the install script, and nothing started."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Fatal, match=r"docker CLI is missing: run scripts/install-docker.sh"):
        compose.engine()
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\nexit 1\n")       # `docker info` fails: no engine answers
    docker.chmod(0o755)
    with pytest.raises(Fatal, match=r"Docker Engine is not installed: run scripts/install-docker.sh"):
        compose.engine()
    assert compose._started_here is False

# Six JVM ports of one endpoint (JWT -> MySQL -> JSON), measured at constant request rates.
# Every recipe is a thin verb over the Python harness (harness/); settings live in bench.toml.

set dotenv-load
set shell := ["bash", "-euo", "pipefail", "-c"]

python := ".venv/bin/python"
harness := python + " -m harness"

# List the recipes
default:
    @just --list --unsorted

# Benchmark one port (or `all`) in a scenario (baseline by default; slow-db, many-users, queries, pinning, faults, downstream, memory, startup, in-flight) and update RESULTS.md; QUICK=1 for a smoke run
[group('bench')]
bench NAME SCENARIO=env("SCENARIO", ""): _venv _tools
    {{harness}} bench {{NAME}} {{SCENARIO}}

# Each port of bench.toml [remedies] again in SCENARIO (or only the PORTS named) with its framework's documented setting for that regime: rows of their own beside the defaults
[group('bench')]
remedies SCENARIO *PORTS: _venv _tools
    {{harness}} remedies {{SCENARIO}} {{PORTS}}

# CPU profile of one port at RATE req/s (default [baseline] common_rate) after the warm-up, or VARIANT cold|aot|cold-aot|jdk21-cj8; PATH another endpoint (e.g. 'feed?calls=3', the downstream up at LATENCY_MS); DB_LATENCY_MS through Toxiproxy: flame graph, JFR, CPU split
[group('bench')]
profile NAME RATE="" VARIANT="warm" PATH="" LATENCY_MS="0" DB_LATENCY_MS="0": _venv _tools
    {{harness}} profile {{NAME}} '{{RATE}}' '{{VARIANT}}' '{{PATH}}' '{{LATENCY_MS}}' '{{DB_LATENCY_MS}}'

# Measure this machine (DB ceiling, CPU speed, wake-up, syscall, loopback, generator cost) in under a minute; compare with the published run
[group('bench')]
calibrate: _venv _tools
    {{harness}} calibrate

# Regenerate RESULTS.md and its charts from the raw results in results/
[group('bench')]
report: _venv
    {{harness}} report

# Measure the load-generator candidates against the five bars of docs/method.md (about 8 minutes)
[group('bench')]
eval-generators: _venv _tools
    @scripts/install-tools.sh eval
    {{harness}} eval-generators

# Run the tests: every port's framework tests and the conformance suite, the same suite on the six ports in containers (Compose), then the harness's own tests
[group('test')]
test: _venv
    #!/usr/bin/env bash
    set -euo pipefail
    scripts/install-tools.sh packages
    scripts/install-docker.sh packages
    # What only the later steps need is made beside `verify all`, at idle priority (nice 19: the tests keep the CPU
    # whenever they want it): the Compose CLI and the offline images' file systems (verify-compose; made even where a
    # registry would serve compose.yaml's images), openloop's release binary and its tests, Toxiproxy (the slow-db
    # tests). A failure there costs only time: each later step makes what it lacks itself.
    mkdir -p build
    set -m    # the background step in a process group of its own, ended with this recipe
    ( rc=0
      nice -n 19 scripts/install-docker.sh || rc=1
      nice -n 19 scripts/offline-images.sh --tars || rc=1
      (cd tools/openloop && nice -n 19 cargo build --release --quiet --locked \
        && nice -n 19 cargo test --release --locked --quiet --no-run) || rc=1
      nice -n 19 scripts/install-tools.sh toxiproxy || rc=1
      exit $rc ) > build/test-prepare.log 2>&1 &
    prepare=$!
    trap 'kill -- -$prepare 2>/dev/null || true' EXIT
    {{harness}} verify all
    wait $prepare || echo "warning: a build beside the first step failed (build/test-prepare.log); the next steps try again" >&2
    {{harness}} verify-compose
    cargo test --release --locked --quiet --manifest-path tools/openloop/Cargo.toml
    {{python}} -m pytest -q -p no:cacheprovider tests/harness

# Run the conformance suite against one port (or `all`), started from its packaged jar
[group('test')]
check NAME="all": _venv _tools
    {{harness}} check {{NAME}}

# Build one port (or `all`) with the Maven wrapper; only what changed since the last build
[group('dev')]
build NAME="all": _venv
    {{harness}} build {{NAME}}

# Start one port in the foreground on the local database (Ctrl-C stops it)
[group('dev')]
run NAME: _venv _tools
    {{harness}} run {{NAME}}

# Start the local MariaDB (installed from Debian's packages when missing) with the 100,000 users
[group('db')]
db-up: _venv
    {{harness}} db up

# Stop the local MariaDB (its data stays in .data/)
[group('db')]
db-down: _venv
    {{harness}} db down

# Start the downstream of GET /feed: nginx on 127.0.0.1:DOWNSTREAM_PORT (8090), each answer after LATENCY_MS
[group('downstream')]
downstream-up LATENCY_MS="0": _venv _tools
    {{harness}} downstream up {{LATENCY_MS}}

# Stop the downstream nginx started by downstream-up (found by its pid file under build/downstream/)
[group('downstream')]
downstream-down: _venv
    {{harness}} downstream down

# The database and one port (or `all`: on 8081-8086) in containers through compose.yaml (compose.offline.yaml added where no registry answers), each waited for until healthy; installs Docker and starts its engine when needed
[group('compose')]
compose-up NAME: _venv _tools
    {{harness}} compose up {{NAME}}

# Remove the project's containers, networks and volumes; stop the downstream and the Docker engine that compose-up started
[group('compose')]
compose-down: _venv
    {{harness}} compose down

# Write the token pool (one HS256 token per user) to build/tokens/ unless it is there already
[group('db')]
tokens: _venv
    {{harness}} tokens

# Remove build outputs, the token pool, the local database's data and the virtual environment
[group('dev')]
clean:
    -{{harness}} db down
    rm -rf build .data .venv spring/*/target quarkus/*/target

# The harness's virtual environment, with the pinned requirements
_venv:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ ! -x {{python}} ] || ! cmp -s harness/requirements.txt .venv/requirements.txt; then
      python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: Python 3.11+ is needed for the harness"; exit 1; }
      python3 -m venv .venv
      .venv/bin/pip install -q --disable-pip-version-check -r harness/requirements.txt
      cp harness/requirements.txt .venv/requirements.txt
    fi

# The native tools runs need: MariaDB, wrk, sysbench and nginx with its echo module from Debian's packages
_tools:
    @scripts/install-tools.sh

"""slow-db: the latency proxy against the real database, a QUICK scenario run of one real port through it, and
the cap classification (pure)."""
import dataclasses
import json
import os
import subprocess
import sys
import time
from contextlib import closing

import psutil
import pytest

from harness import db, proxy, settings as settings_mod
from harness.paths import ROOT
from harness.scenarios import slow_db
from harness.scenarios.slow_db import CapInputs, classify_cap
from harness.verify import LocalDatabase

PORT = "quarkus-vertx"   # the quickest to start; every port runs the same scenario code
HTTP_PORT = "18087"


# --- what capped a port ---------------------------------------------------------------------------------------

def caps(**overrides) -> CapInputs:
    base = dict(mst_rps=1000, bounded=True, generator_behind=False, busy_cores=1.0, cpu_set_cores=2,
                pool_cap_rps=10_000, thread_cap_rps=None, generator_cap_rps=100_000)
    return CapInputs(**(base | overrides))


def test_the_default_pool_at_20_ms_is_capped_by_the_pool():
    # 16 connections / 20 ms = 800 req/s: an MST of 720 is the pool, even with the CPU busy
    assert classify_cap(caps(mst_rps=720, pool_cap_rps=16 / 0.020, busy_cores=1.9)) == "pool"


def test_the_pool_is_the_cap_when_the_failing_rate_came_near_it_though_the_mst_is_a_step_below():
    # 5 ms, pool 16: 3,109 req/s at most; 2,800 failed, 2,200 passed (the search's step): the pool, not 'other'
    inputs = caps(mst_rps=2200, failing_rps=2800, pool_cap_rps=3109, busy_cores=1.1)
    assert classify_cap(inputs) == "pool"
    assert classify_cap(dataclasses.replace(inputs, failing_rps=None)) == "other"
    entry = {"cap_inputs": dataclasses.asdict(dataclasses.replace(inputs, failing_rps=None)),
             "mst": {"first_failing_rps": 2800}}
    assert slow_db.cap_of(entry) == "pool"     # records made before failing_rps existed


def test_tomcat_threads_cap_spring_platform_before_a_larger_pool():
    assert classify_cap(caps(mst_rps=3600, pool_cap_rps=256 / 0.050, thread_cap_rps=200 / 0.050)) == "threads"


def test_a_busy_cpu_set_is_the_cap_when_no_pool_or_thread_limit_is_near():
    assert classify_cap(caps(mst_rps=4000, busy_cores=1.8)) == "CPU"
    assert classify_cap(caps(mst_rps=4000, busy_cores=1.2)) == "other"


def test_the_generator_is_blamed_when_it_fell_behind_with_cpu_to_spare_or_ran_out_of_connections():
    assert classify_cap(caps(generator_behind=True, mst_rps=4000, busy_cores=1.2)) == "generator"
    assert classify_cap(caps(mst_rps=1000, generator_cap_rps=1200)) == "generator"


def test_a_generator_behind_on_a_busy_cpu_set_was_starved_so_the_cpu_is_the_cap():
    assert classify_cap(caps(generator_behind=True, mst_rps=5000, busy_cores=1.64)) == "CPU"


def test_no_failing_rate_means_no_cap_was_reached():
    assert classify_cap(caps(bounded=False, busy_cores=None)) == "not reached"


def test_round_trips_per_request_from_a_request_alone():
    assert slow_db.round_trips(51.0, 0.9, 50) == 1
    assert slow_db.round_trips(101.2, 0.9, 50) == 2       # spring-webflux: a COM_PING on every release
    assert slow_db.round_trips(0.5, 0.9, 5) == 1
    assert slow_db.round_trips(9.46, 1.72, 5) == 1        # a young JVM's noise only adds: 1.55 is still one
    assert slow_db.round_trips(13.93, 3.52, 5) == 2


def test_plan_orders_latencies_down_and_the_default_pool_first_and_takes_subsets_from_the_environment():
    settings = settings_mod.load(env={"BENCH_SLOW_DB_LATENCIES_MS": "5,20", "BENCH_SLOW_DB_POOL_SIZES": "300,16"})
    p = slow_db.plan(settings)
    assert p.latencies_ms == [20, 5] and p.pool_sizes == [16, 300] and p.default_pool == 16
    assert slow_db.cpu_list_size("0-1,4") == {0, 1, 4}
    # a rate every port sustains: 60 % of what 16 connections give a 2-round-trip port at 20 ms
    assert slow_db.common_rate(p, 20, 0.2) == 240
    assert slow_db.common_rate(p, 1, 0.2) == p.common_rate_max
    # the SLO leaves room for the two database waits an idle port shows at p99
    assert slow_db.slo_ms(50, 1, 20, p.slo_round_trips) == 50 + p.slo_round_trips * 20


def test_the_cpu_guess_adds_the_proxys_cpu_to_each_request():
    # 10,000 req/s alone is 100 µs of the 1-core set per request; 100 µs of proxy CPU halves it
    assert slow_db.cpu_guess(10_000, 100, 1, 1.0) == pytest.approx(5_000)
    assert slow_db.cpu_guess(10_000, 0, 2, 0.8) == pytest.approx(8_000)


def test_a_fractional_latency_is_refused_with_one_line():
    from harness.errors import Fatal
    with pytest.raises(Fatal, match="whole milliseconds"):
        slow_db.plan(settings_mod.load(env={"BENCH_SLOW_DB_LATENCIES_MS": "0.5"}))


# --- the proxy ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def database():
    with LocalDatabase(settings_mod.load()["cpus"]["db"]):
        yield


def _min_select_ms(conn, count=5) -> float:
    times = []
    with conn.cursor() as cur:
        for _ in range(count):
            began = time.perf_counter()
            cur.execute("SELECT 1")
            assert cur.fetchall() == ((1,),)
            times.append((time.perf_counter() - began) * 1000)
    return min(times)


def test_the_proxy_adds_its_latency_to_every_round_trip_changes_it_live_and_leaves_nothing(database):
    with proxy.latency_proxy(5) as px:
        assert px.env() == {"DB_HOST": "127.0.0.1", "DB_PORT": str(px.port)} and px.port != db.config()["port"]
        with closing(db.connect(host=px.host, port=px.port)) as conn:
            assert px.client_connections() == 1
            assert _min_select_ms(conn) >= 5          # every round trip went through the 5-ms toxic
            px.set_latency(20)                        # the same, open connection gets the new latency
            assert _min_select_ms(conn, 3) >= 20
        pid, port = px.pid, px.port
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    from harness.ports import port_busy
    assert not port_busy("127.0.0.1", port)


# --- the scenario, end to end -------------------------------------------------------------------------------------

def test_a_quick_slow_db_run_goes_through_the_proxy_and_writes_a_complete_record(tmp_path):
    env = dict(os.environ, QUICK="1", SCENARIO="slow-db", BENCH_RESULTS=str(tmp_path), BENCH_LOAD_PORT=HTTP_PORT)
    env.pop("LOADGEN", None)
    run = subprocess.run([sys.executable, "-m", "harness", "bench", PORT], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    [raw] = list(tmp_path.glob(f"slow-db/*/{PORT}.json"))
    record = json.loads(raw.read_text())
    assert record["status"] == "complete" and record["scenario"] == "slow-db" and record["environment"]["quick"]
    cost = record["proxy_cost"]
    assert [row["latency_ms"] for row in cost["through_proxy"]] == [0, 5]
    assert cost["through_proxy"][1]["p50_ms"] >= 5 and cost["through_proxy"][0]["proxy_cpu_us_per_query"] > 0
    [jvm] = record["runs"]
    assert jvm["status"] == "complete" and jvm["pool_size"] == 16 and jvm["proxy_connections"] >= 1
    [entry] = jvm["latencies"]
    assert entry["latency_ms"] == 5
    # a request alone took at least the added round trip: the port's query went through the proxy
    assert entry["sequential_ms"] >= 5 and entry["db_round_trips_per_request"] == 1
    steps = [entry["common"], *entry["probes"]]
    for step in steps:
        assert step["achieved_rps"] > 0 and step["app_threads_peak"] > 0 and step["busy_cores"] > 0
        assert step["proxy_cpu_us_per_request"] > 0      # the proxy carried the port's traffic
    common = entry["common"]
    assert set(common["statuses"]) == {"200"} and sum(common["errors"].values()) == 0 and common["histogram"]
    assert common["latency_ms"]["p50"] >= 5
    # the SLO leaves room for two database waits at this latency: 50 ms + 2 x 5 ms
    assert entry["mst"]["probes"] and entry["mst"]["slo_p99_ms"] == entry["slo_p99_ms"] == 60
    assert entry["cap"] in {"CPU", "threads", "pool", "generator", "other", "not reached"}
    assert set(entry["cap_inputs"]) == set(CapInputs.__dataclass_fields__)
    lines = "\n".join(slow_db.render(tmp_path / "slow-db"))
    assert "## Slow database" in lines and "### +5 ms per database round trip" in lines
    assert f"| {PORT} | 1 |" in lines and "The proxy's own cost" in lines and "QUICK=1" in lines

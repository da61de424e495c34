"""Unit tests of the many-users and queries scenarios' own logic and sections (no server, no load)."""
import json

import pytest

from harness.errors import Fatal
from harness import settings as settings_mod
from harness.scenarios import many_users, queries, section


# --- section settings ------------------------------------------------------------------------------------------

DEFAULTS = {"a": 1, "b": [1, 2], "c": 0.5}


DEMO_TOML = """
[load]
rate = 1
[demo]
a = 2
[demo.quick]
a = 3
b = [9]
"""


def test_section_quick_table_is_laid_over_only_in_quick_mode(tmp_path):
    path = tmp_path / "bench.toml"
    path.write_text(DEMO_TOML)
    assert section.load(settings_mod.load(path, env={}), "demo", DEFAULTS) == {"a": 2, "b": [1, 2], "c": 0.5}
    assert (section.load(settings_mod.load(path, env={"QUICK": "1"}), "demo", DEFAULTS)
            == {"a": 3, "b": [9], "c": 0.5})


def test_section_environment_override_beats_the_quick_table(tmp_path):
    path = tmp_path / "bench.toml"
    path.write_text(DEMO_TOML)
    settings = settings_mod.load(path, env={"QUICK": "1", "BENCH_DEMO_A": "7"})
    assert section.load(settings, "demo", DEFAULTS)["a"] == 7


def test_section_unknown_key_is_one_clear_error():
    with pytest.raises(Fatal, match="unknown key.*typo"):
        section.load({"quick": False, "demo": {"typo": 1}}, "demo", DEFAULTS)


def test_rotation_starts_each_iteration_one_later():
    assert section.rotation([1, 2, 3], 1) == [1, 2, 3]
    assert section.rotation([1, 2, 3], 2) == [2, 3, 1]
    assert section.rotation([1, 2, 3], 4) == [1, 2, 3]
    assert section.rotation([], 2) == []


def test_cell_shows_median_and_range_only_when_values_differ():
    assert section.cell([5]) == "5"
    assert section.cell([5, 5]) == "5"
    assert section.cell([1, 5, 3]) == "3 (1–5)"
    assert section.cell([None]) == "–"


# --- many-users ----------------------------------------------------------------------------------------------

def test_rate_is_the_cap_or_a_fraction_of_the_lowest_baseline_mst():
    assert many_users.choose_rate(2000, 0.5, {})[0] == 2000
    rate, basis = many_users.choose_rate(2000, 0.5, {"a": 5000, "b": 2400, "c": 8800})
    assert rate == 1200 and basis == "50% of the lowest baseline MST (b: 2,400/s)"
    assert many_users.choose_rate(2000, 0.5, {"a": 9000})[0] == 2000


def test_each_count_is_held_long_enough_for_every_connection_to_be_used():
    assert many_users.hold_seconds(1000, 1200, 15, 2) == 15
    assert many_users.hold_seconds(10000, 1200, 15, 2) == 17     # 2 x 10,000 / 1,200 = 16.7 -> 17
    assert many_users.hold_seconds(10000, 500, 3, 1) == 20


SS = """\
LISTEN 0      250    127.0.0.1:3306 0.0.0.0:*
LISTEN 3      100            *:18080       *:*
LISTEN 7      4096           *:8080       *:*
LISTEN 0      4096      [::1]:9090      [::]:*
"""


def test_listen_socket_queue_and_backlog_from_ss():
    assert many_users.parse_listen(SS, 8080) == (7, 4096)      # not 18080's line
    assert many_users.parse_listen(SS, 18080) == (3, 100)
    assert many_users.parse_listen(SS, 9090) == (0, 4096)
    assert many_users.parse_listen(SS, 1234) is None


def test_kernel_listen_counters_from_proc_net_netstat():
    text = ("TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPHPHits\nTcpExt: 0 386 390 12\n"
            "IpExt: InNoRoutes\nIpExt: 0\n")
    assert many_users.parse_netstat(text) == {"ListenOverflows": 386, "ListenDrops": 390}
    assert many_users.parse_netstat("") == {}


def test_every_port_has_its_servers_defaults():
    from harness.ports import PORTS
    assert {name: many_users.server_of(name) for name in PORTS} == {
        "spring-platform": "tomcat", "spring-virtual": "tomcat", "spring-webflux": "netty",
        "quarkus-virtual": "vertx", "quarkus-reactive": "vertx", "quarkus-vertx": "vertx"}
    assert all(many_users.server_of(name) in many_users.SERVER_DEFAULTS for name in PORTS)


def test_open_files_limit_is_checked_on_the_real_process():
    import os
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    got = many_users.ensure_app_fds(os.getpid(), min(soft, 64))
    assert got == {"soft": soft, "hard": hard, "raised_by_harness": False}
    if hard != resource.RLIM_INFINITY:
        with pytest.raises(Fatal, match="ulimit -Hn"):
            many_users.ensure_app_fds(os.getpid(), hard + 1)


def test_config_rejects_an_empty_connection_list():
    with pytest.raises(Fatal):
        many_users.Config.from_settings({"quick": False, "many_users": {"connections": []}})
    cfg = many_users.Config.from_settings({"quick": False, "many_users": {"connections": [5000, 1000]}})
    assert cfg.connections == [1000, 5000]


# --- queries -------------------------------------------------------------------------------------------------

def test_common_rate_keeps_the_queries_per_second_equal():
    assert [queries.common_rate(n, 1000) for n in (1, 5, 20)] == [1000, 200, 50]


def test_slo_adds_the_database_waits():
    assert queries.slo_ms(50, 20, 5, 2) == 250
    assert queries.slo_ms(50, 20, 5, 0) == 50
    assert queries.slo_ms(50, 20, 0, 2) == 50


def test_pool_limit():
    assert queries.pool_limit(20, 5, 16) == pytest.approx(160)
    assert queries.pool_limit(1, 5, 16) == pytest.approx(3200)
    assert queries.pool_limit(5, 0, 16) is None
    assert queries.pool_limit(1, 5, 16, trips=2) == pytest.approx(1600)   # spring-webflux: COM_PING on release


def test_scale_from_one_point_assumes_the_fixed_part_equals_one_query():
    assert queries.scale({1: 3000}, 5) == pytest.approx(1000)
    assert queries.scale({1: 3000}, 1) == pytest.approx(3000)


def test_scale_from_two_points_follows_the_fitted_line():
    # a request costs 0.2 ms + N x 0.1 ms: 3,333/s at N=1, 1,429/s at N=5 -> 455/s at N=20
    known = {1: 1 / 0.0003, 5: 1 / 0.0007}
    assert queries.scale(known, 20) == pytest.approx(1 / 0.0022)


def test_scale_with_a_non_increasing_cost_falls_back_to_the_nearest_point():
    assert queries.scale({1: 1000, 5: 1200}, 5) == pytest.approx(1200)


def test_first_guess_prefers_the_same_n_on_loopback_and_stays_under_the_pool_limit():
    found = {(0.0, 1): 2000, (0.0, 20): 400}
    assert queries.first_guess(1, 5.0, 16, found, None) == 2000
    assert queries.first_guess(20, 5.0, 16, found, None) == pytest.approx(0.9 * 160)
    assert queries.first_guess(1, 5.0, 16, found, None, trips=2) == pytest.approx(0.9 * 1600)
    assert queries.first_guess(1, 0.0, 16, {}, 3000) == 3000
    assert queries.first_guess(5, 0.0, 16, {(0.0, 1): 3000}, 9999) == pytest.approx(1000)
    assert queries.first_guess(1, 0.0, 16, {}, None) == queries.UNKNOWN_GUESS_QPS


def test_queries_config_refuses_n_outside_the_contract():
    with pytest.raises(Fatal, match="1 <= N <= 20"):
        queries.Config.from_settings({"quick": False, "queries": {"queries": [1, 21]}})


# --- the sections, from raw records --------------------------------------------------------------------------

ENV = {"generator": "openloop 0.1 (tools/openloop)", "settings": {"connections": 64, "generator_threads": 1},
       "quick": False, "git_commit": "abc"}


def lat(p50, p99):
    return {"p50": p50, "p99": p99}


def users_record(port, iteration, p99, errors=None):
    step = lambda n: {"connections": n, "latency_ms": lat(1.0, p99), "connections_opened": n,  # noqa: E731
                      "errors": {"non_2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0, **(errors or {})},
                      "app_connections_peak": n, "accept_queue_peak": 0, "app_rss_mb_peak": 300.0,
                      "app_threads_peak": 40, "app_cpu_us_per_request": 200.0, "listen_overflows": {}}
    return {"port": port, "scenario": "many-users", "run_id": "20260101T000000Z", "iteration": iteration,
            "status": "complete", "environment": ENV, "rate": 1200, "rate_basis": "1,200/s = 50 % of ...",
            "config": dict(many_users.DEFAULTS), "system": {"somaxconn": 4096, "generator_nofile": {"hard": 20000}},
            "listen_backlog": 100 if port.startswith("spring-p") else 4096, "app_nofile": {"soft": 20000},
            "steps": [step(1000), step(5000)]}


def write(folder, records):
    for r in records:
        path = folder / r["run_id"] / f"{r['port']}-{r['iteration']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def test_many_users_section_has_a_row_per_port_and_count_from_the_records(tmp_path):
    write(tmp_path, [users_record("spring-platform", 1, 4.0, {"timeout": 12}), users_record("spring-platform", 2, 6.0),
                     users_record("quarkus-vertx", 1, 2.0), users_record("quarkus-vertx", 2, 2.0)])
    text = "\n".join(many_users.render(tmp_path))
    assert text.startswith("## Many concurrent users")
    assert "**1,000 connections**" in text and "**5,000 connections**" in text
    assert "| spring-platform | 1.00 | 5.00 (4.00–6.00) | timeout 6 (0–12) |" in text
    assert "| quarkus-vertx | 1.00 | 2.00 | 0 |" in text
    assert "1,200 req/s" in text and "Median of 2 runs" in text
    assert "8,192" in text                                     # Tomcat's default connection limit, named
    assert many_users.render(tmp_path / "none") == []


def queries_record(port, mst_by_cell):
    def cell(latency, n):
        return {"n": n, "slo_p99_ms": 50 + n * latency, "pool_limit_rps": queries.pool_limit(n, latency, 16),
                "common": {"latency_ms": lat(0.5, 1.5 * n), "app_cpu_us_per_request": 100.0 * n,
                           "proxy_cpu_us_per_request": 20.0 if latency else None},
                "mst": {"rps": mst_by_cell[(latency, n)], "first_failing_rps": 140 if not mst_by_cell[(latency, n)] else None}}
    return {"port": port, "scenario": "queries", "run_id": "20260101T000000Z", "iteration": 1, "status": "complete",
            "environment": ENV, "config": dict(queries.DEFAULTS), "pool_size": 16, "base_slo_p99_ms": 50,
            "latencies": [{"latency_ms": latency, "proxy": {"tool": "toxiproxy 2.12.0"} if latency else None,
                           "queries": [cell(latency, n) for n in (1, 5, 20)]} for latency in (0.0, 5.0)]}


def test_queries_section_shows_mst_p99_and_the_pool_limit(tmp_path):
    msts = {(0.0, 1): 3000, (0.0, 5): 1100, (0.0, 20): 300, (5.0, 1): 2500, (5.0, 5): 600, (5.0, 20): 0}
    write(tmp_path, [queries_record("spring-webflux", msts)])
    text = "\n".join(queries.render(tmp_path))
    assert text.startswith("## N sequential queries per request")
    assert "| port | loopback, N=1 | loopback, N=5 | loopback, N=20 | 5 ms, N=1 | 5 ms, N=5 | 5 ms, N=20 |" in text
    assert "| spring-webflux | 3,000 | 1,100 | 300 | 2,500 | 600 | < 140 |" in text   # every probe failed, down to 140
    assert "| *pool limit 16 / (N × latency)* | – | – | – | 3,200 | 640 | 160 |" in text
    assert "| spring-webflux | 1.50 | 7.50 | 30.0 | 1.50 | 7.50 | 30.0 |" in text     # p99 at the common rate
    assert "N=20: 50/s" in text and "toxiproxy 2.12.0" in text


def test_queries_section_marks_an_mst_no_probe_bounded_as_a_lower_bound(tmp_path):
    msts = {(0.0, 1): 3000, (0.0, 5): 1100, (0.0, 20): 300, (5.0, 1): 2500, (5.0, 5): 600, (5.0, 20): 140}
    record = queries_record("quarkus-vertx", msts)
    record["latencies"][0]["queries"][1]["mst"]["bounded"] = False     # loopback N=5: every probe passed
    write(tmp_path, [record])
    assert "| quarkus-vertx | 3,000 | ≥ 1,100 | 300 | 2,500 | 600 | 140 |" in "\n".join(queries.render(tmp_path))

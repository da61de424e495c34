"""Unit tests of the queries scenario: its plan, its own logic, a whole run against a simulated port (the rule, the
confirmed search and the records), and the Section (tables, decisions, verdict) generated from records (no server,
no load)."""
import ast
import contextlib
import dataclasses
import json
import types
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from harness import driver, ports, settings as settings_mod
from harness.errors import Fatal
from harness.method import plan as plan_mod
from harness.method import caps, runset, schema
from harness.method import queries as queries_method
from harness.method.record import Step
from harness.method.rule import Rule
from harness.method.search import SearchPlan
from harness.method.warmup import WarmupPlan
from harness.report.sections import queries as queries_report
from harness.scenarios import queries
from harness.session import Context, rounds
from harness.target import Target

ROOT = Path(__file__).resolve().parents[2]
RULE = Rule(p99_ms=50, round_trips_per_wait=2, min_achieved=0.99)


def plan_from(env):
    return queries.checked(plan_mod.section(settings_mod.load(env=env), "queries", queries.Plan))


# --- the plan: bench.toml [queries] is its schema ----------------------------------------------------------------

def test_plan_reads_bench_toml_with_three_iterations_and_the_quick_table_over_it():
    full = plan_from({})
    assert full.iterations >= 3
    assert queries.jvms(full) == [(0.0, [1, 5]), (5.0, [5, 20])]
    quick = plan_from({"QUICK": "1"})
    assert quick.iterations == 1 and quick.step_seconds < full.step_seconds


def test_full_run_estimate_is_the_one_written_in_bench_toml():
    full = plan_from({})
    typical = queries.estimate_seconds(full, 6, 40) / 60
    best = queries.estimate_seconds(full, 6, 20) / 60
    assert 55 <= typical <= 65 and 45 <= best <= 52          # bench.toml says "about 60 min (49 ...)"
    text = (ROOT / "bench.toml").read_text()
    assert "about 60 min" in text and "49 min" in text
    more = dataclasses.replace(full, loopback_queries=[1, 5, 20])
    assert queries.estimate_seconds(more, 6, 40) > queries.estimate_seconds(full, 6, 40)


GOOD = {"iterations": 3, "loopback_queries": [5, 1], "latency_ms": 5, "latency_queries": [20, 5],
        "common_queries_per_s": 1000, "step_seconds": 3, "probe_seconds": 2, "warmup_fraction": 0.5,
        "warmup_baseline_fraction": 0.3,
        "mst_first_guess": 0.8, "mst_max_probes": 3, "mst_floor_rps": 20, "pause_seconds": 0.3,
        "cold_probe": True, "drain_after_warmup": True, "warm_probe": False,
        "cell_phases": ["pause", "probe", "drain", "common", "search"], "between_probes": "pause-or-drain",
        "histogram_phases": []}


def section(**changes):
    return queries.checked(plan_mod.section({"queries": {**GOOD, **changes}}, "queries", queries.Plan))


def test_plan_sorts_the_ns_and_refuses_what_the_contract_or_the_proxy_cannot_do():
    p = section()
    assert p.loopback_queries == [1, 5] and p.latency_queries == [5, 20] and isinstance(p.latency_ms, float)
    with pytest.raises(Fatal, match="1 <= N <= 20"):
        section(latency_queries=[1, 21])
    with pytest.raises(Fatal, match="both empty"):
        section(loopback_queries=[], latency_queries=[])
    with pytest.raises(Fatal, match="whole milliseconds"):
        section(latency_ms=2.5)
    assert queries.jvms(section(latency_queries=[])) == [(0.0, [1, 5])]
    # keys now handled by [rule] and [search] are gone: an old bench.toml fails loudly
    for old in ({"slo_round_trips": 2}, {"mst_growth": 1.2}, {"warmup_seconds": 10}):
        with pytest.raises(Fatal, match="unknown key"):
            plan_mod.section({"queries": {**GOOD, **old}}, "queries", queries.Plan)


def relative_imports(path: str) -> set[str]:
    """"module:names" of a module's relative imports, the module resolved from the harness package."""
    tree = ast.parse((ROOT / path).read_text())
    base = path.removesuffix(".py").split("/")
    return {".".join(base[:len(base) - n.level] + ([n.module] if n.module else [])).removeprefix("harness")
            .lstrip(".") + ":" + ",".join(a.name for a in n.names)
            for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}


def test_module_imports_only_the_method_and_the_measuring_layer():
    imported = relative_imports("harness/scenarios/queries.py")
    text = " ".join(imported)
    for forbidden in ("bench", "report", "common", "section", "baseline", "slow_db", "many_users", "faults",
                      "pinning", "charts", "table"):
        assert f":{forbidden}" not in text and not any(i.startswith(forbidden) for i in imported), forbidden
    assert "DEFAULTS" not in (ROOT / "harness/scenarios/queries.py").read_text()


def test_the_report_part_imports_no_measuring_module():
    imported = relative_imports("harness/report/sections/queries.py")
    allowed = ("method", "port_facts", "paths", "settings", "errors", "report")
    assert imported and all(i.split(":")[0].split(".")[0] in allowed for i in imported), imported
    assert all(i.split(":")[0] != "" or set(i.split(":")[1].split(",")) <= set(allowed) for i in imported), imported


# --- pure logic --------------------------------------------------------------------------------------------------

def test_common_rate_keeps_the_queries_per_second_equal():
    assert [queries.common_rate(n, 1000) for n in (1, 5, 20)] == [1000, 200, 50]


def test_slo_is_the_rule_with_the_n_waits_added():
    assert RULE.slo_ms(20 * 5.0) == 250
    assert RULE.slo_ms(20 * 0.0) == 50


def test_pool_limit():
    assert queries_method.pool_limit(20, 5, 16) == pytest.approx(160)
    assert queries_method.pool_limit(1, 5, 16) == pytest.approx(3200)
    assert queries_method.pool_limit(5, 0, 16) is None
    assert queries_method.pool_limit(20, 5, 16, trips=2) == pytest.approx(80)   # spring-webflux: COM_PING on release


def test_url_for_adds_the_query_parameter():
    assert queries.url_for("http://127.0.0.1:8080/", 5) == "http://127.0.0.1:8080/?queries=5"
    assert queries.url_for("http://h/?a=1", 20) == "http://h/?a=1&queries=20"


def _step(**cores):
    return Step(phase="mst", target_rps=100, achieved_rps=100, connections=8, seconds=3, requests=300, errors={},
                statuses={}, latency_ms={"p99": 1.0}, generator="x", app_cpu_cores=cores.get("app"),
                db_cpu_cores=cores.get("db"), generator_cpu_cores=cores.get("gen"),
                extra={"proxy_cpu_cores": cores["proxy"]} if "proxy" in cores else {})


def test_cpu_utilisation_per_cpu_set():
    shared = {"app": "0-1", "db": "0-1", "generator": "0-1"}
    assert caps.cpu_utilisation(_step(app=1.0, db=0.5, gen=0.1, proxy=0.2), shared) == pytest.approx(0.9)
    split = {"app": "2-3", "db": "0-1", "generator": "4"}
    assert caps.cpu_utilisation(_step(app=1.9, db=0.4, gen=0.1), split) == pytest.approx(0.95)
    assert caps.cpu_utilisation(_step(app=0.2, db=1.0, gen=0.1, proxy=0.6), split) == pytest.approx(0.8)
    assert caps.cpu_utilisation(_step(), shared) is None


# --- a whole run against a simulated port -------------------------------------------------------------------------

@dataclasses.dataclass
class Behaviour:
    """A port whose request costs fixed + per_lookup µs of CPU (70 % app, 30 % DB) on 2 cores, whose driver takes
    `trips` round trips per lookup, and that meets its SLO up to min(90 % of the CPU, 95 % of the pool's limit)."""
    fixed_us: float
    per_lookup_us: float
    trips: int = 1
    cap_override: dict | None = None      # (latency, N) -> capacity, e.g. below the search's floor

    def cost(self, n):
        return self.fixed_us + n * self.per_lookup_us

    def capacity(self, n, latency, pool=16):
        if self.cap_override and (latency, n) in self.cap_override:
            return self.cap_override[(latency, n)]
        cpu = 0.9 * 2e6 / self.cost(n)
        limit = queries_method.pool_limit(n, latency, pool, self.trips)
        return min(cpu, 0.95 * limit) if limit else cpu


class World:
    latency = 0.0


@dataclasses.dataclass
class FakeTarget:
    url: str
    behaviour: Behaviour
    world: World
    rule: Rule
    calls: list
    count_statements: bool = True
    sides: dict = dataclasses.field(default_factory=dict)
    warm_up = Target.warm_up
    closed_gen = None                    # no closed-loop stage in the warm-up: the fake's CPU is steady at once

    def drain(self, slo_ms=None, max_seconds=None):
        return 0.0                       # the fake port keeps no queue

    def _n(self):
        return int(parse_qs(urlparse(self.url).query).get("queries", ["1"])[0])

    def _step(self, phase, rate, achieved, p99, connections):
        n = self._n()
        cores = achieved * self.behaviour.cost(n) / 1e6
        return Step(phase=phase, target_rps=rate, achieved_rps=achieved, connections=connections, seconds=3,
                    requests=int(achieved * 3), errors={}, statuses={"200": int(achieved * 3)},
                    latency_ms={"p50": p99 / 2, "p99": p99}, generator="fake", generator_cpu_cores=0.04,
                    app_cpu_cores=round(0.7 * cores, 3), db_cpu_cores=round(0.3 * cores, 3),
                    app_cpu_us_per_request=0.7 * self.behaviour.cost(n),
                    db_cpu_us_per_request=0.3 * self.behaviour.cost(n),
                    kernel={"db_questions_per_request": float(n)})

    def rate(self, rate, seconds, phase="step", slo_ms=None, connections=None, url=None, extra=()):
        n, lat = self._n(), self.world.latency
        self.calls.append((phase, n, lat, rate, slo_ms))
        ok = rate <= self.behaviour.capacity(n, lat)
        base = 2 + n * lat * self.behaviour.trips
        s = self._step(phase, rate, rate if ok else 0.9 * rate, base if ok else 10 * (50 + 2 * n * lat), 64)
        s.slo_ms = self.rule.slo_ms() if slo_ms is None else slo_ms
        s.failure = self.rule.failure(target_rps=rate, achieved_rps=s.achieved_rps, errors=0, p99_ms=s.p99,
                                      generator_behind=False, slo_ms=s.slo_ms)
        for name, cpu in self.sides.items():     # as Target measures a side process: its CPU over the step
            used = -cpu() + cpu()
            s.extra.update({f"{name}_cpu_cores": round(used / seconds, 3),
                            f"{name}_cpu_us_per_request": round(used / max(s.requests, 1) * 1e6, 1)})
        return s

    def closed(self, connections, seconds, phase="closed"):
        n, lat = self._n(), self.world.latency
        self.calls.append((phase, n, lat, None, None))
        return self._step(phase, None, 1.1 * self.behaviour.capacity(n, lat), 100.0, connections)


class FakeProxy:
    def __init__(self, world):
        self.world, self.cpu = world, 0.0

    def env(self):
        return {"DB_HOST": "127.0.0.1", "DB_PORT": "1"}

    def set_latency(self, latency):
        self.world.latency = latency

    def cpu_seconds(self):
        self.cpu += 0.05
        return self.cpu


class FakeContext(Context):
    behaviours: dict = {}
    calls: list = []
    checked: list = []
    starts: list = []                    # (port, proxied) of each JVM, in the order started

    @contextlib.contextmanager
    def port(self, port, extra_env=None, variant=None):
        world = self._world
        self.starts.append((port.name, bool(extra_env)))
        if not extra_env:
            world.latency = 0.0
        yield (types.SimpleNamespace(startup_seconds=1.0, idle_rss_mb=100.0),
               FakeTarget("http://127.0.0.1:8080/", self.behaviours[port.name], world, self.rule, self.calls))


def run_simulated(tmp_path, monkeypatch, behaviours, iterations=3, quick=False):
    settings = settings_mod.load(env={"QUICK": "1"} if quick else {})
    settings["queries"]["iterations"] = iterations
    world = World()
    checked = []
    monkeypatch.setattr(driver.time, "sleep", lambda s: None)
    monkeypatch.setattr(queries.tokens, "load", lambda: ["token"])
    monkeypatch.setattr(queries, "correctness_check", lambda url, pool, count: checked.append((url, world.latency)))
    monkeypatch.setattr(queries.proxy_mod, "version", lambda: "2.12.0")

    @contextlib.contextmanager
    def latency_proxy(latency, cpus=None):
        world.latency = latency
        yield FakeProxy(world)
    monkeypatch.setattr(queries.proxy_mod, "latency_proxy", latency_proxy)
    monkeypatch.setattr(queries, "sequential_ms",
                        lambda url, token: 1.0 + world.latency * behaviours[ctx.starts[-1][0]].trips)
    env = {"quick": quick, "git_commit": "abc", "generator": "fake", "cpus": settings["cpus"],
           "pool_size": settings["db"]["pool_size"],
           "settings": {k: settings[k] for k in ("rule", "search", "warmup", "load", "db", "cpus", "queries")}}
    ctx = FakeContext("queries", settings, Rule.from_settings(settings),
                      plan_mod.section(settings, "search", SearchPlan),
                      plan_mod.section(settings, "warmup", WarmupPlan),
                      None, None, env, None, "20990101T000000Z", tmp_path)
    ctx.behaviours, ctx.calls, ctx.starts, ctx._world = behaviours, [], [], world
    selected = [ports.PORTS[name] for name in behaviours]
    queries.run(ctx, selected)
    return ctx, checked


VERTX = Behaviour(fixed_us=100, per_lookup_us=30)
WEBFLUX = Behaviour(fixed_us=300, per_lookup_us=80, trips=2)


def test_a_run_confirms_every_mst_judged_by_the_rule_with_the_n_waits(tmp_path, monkeypatch):
    ctx, checked = run_simulated(tmp_path, monkeypatch, {"quarkus-vertx": VERTX, "spring-webflux": WEBFLUX})
    files = sorted(p.name for p in (tmp_path / "queries" / "20990101T000000Z").glob("*.json"))
    assert files == [f"{p}-{lat}-{i}.json" for p in ("quarkus-vertx", "spring-webflux") for lat in ("0.0", "5.0")
                     for i in (1, 2, 3)]
    # per port and iteration the loopback JVM, then the proxied one
    assert ctx.starts == [(port.name, proxied) for _, port in rounds([ports.PORTS["quarkus-vertx"],
                                                                       ports.PORTS["spring-webflux"]], 3)
                          for proxied in (False, True)]
    # every N answered its rows before any load, the proxied JVM's at 0 ms
    assert {(u.split("=")[-1], lat) for u, lat in checked} == {("1", 0.0), ("5", 0.0), ("20", 0.0)}
    for path in (tmp_path / "queries" / "20990101T000000Z").glob("*.json"):
        record = json.loads(path.read_text())
        behaviour = {"quarkus-vertx": VERTX, "spring-webflux": WEBFLUX}[record["port"]]
        assert record["status"] == "complete" and record["scenario"] == "queries" and record["pool_size"] == 16
        lat = record["jvm"]["latency_ms"]
        assert lat in (0.0, 5.0)
        if lat:
            assert record["round_trips_per_lookup"] == behaviour.trips
            assert record["proxy"]["tool"] == "toxiproxy 2.12.0"
        assert record["warmup"]["settled"]
        for c in record["cells"]:
            n = c["coords"]["n"]
            assert c["slo_ms"] == RULE.slo_ms(n * lat)
            assert all(s["slo_ms"] == c["slo_ms"] and "histogram" not in s for s in c["steps"])
            assert c["steps"][0]["phase"] == "common" and c["steps"][0]["target_rps"] == 1000 // n
            m = c["mst"]
            cap = behaviour.capacity(n, lat)
            assert m["confirmed"] and m["bounded"], (record["port"], lat, n, m)
            assert m["rps"] <= cap < m["first_failing_rps"]
            assert m["rps"] >= 0.85 * cap                  # within the search's bracket of the capacity
            assert sum(1 for s in c["steps"] if s["target_rps"] == m["rps"] and s["passed"]) >= 2
            if lat:
                assert c["pool_limit_rps"] == pytest.approx(queries_method.pool_limit(n, lat, 16, behaviour.trips), 0.01)
                assert all("proxy_cpu_cores" in s for s in c["steps"])
    # the proxied JVM warmed up at 0 ms and measured its cells at 5 ms
    proxied = [c for c in ctx.calls if c[0] in ("common", "mst", "confirm") and c[1] == 20]
    assert proxied and all(c[2] == 5.0 for c in proxied)
    assert any(c[0] == "warmup" and c[2] == 0.0 for c in ctx.calls)


def rendered(tmp_path):
    rs = runset.select(runset.load(tmp_path / "queries"), "queries")
    return queries_report.render(rs, tmp_path / "charts")


def test_section_generates_tables_chart_decisions_and_verdict_from_the_records(tmp_path, monkeypatch):
    run_simulated(tmp_path, monkeypatch, {"quarkus-vertx": VERTX, "spring-webflux": WEBFLUX})
    s = rendered(tmp_path)
    text = "\n".join(s.body)
    assert s.anchor == "queries" and "| port | N=1 MST (req/s) ✗ first failing | cap at N=1 |" in text
    assert "*pool limit 16 / (N × 5 ms)* | *640* |  | *160* |" in text
    assert "spring-webflux takes 2 round trips per lookup" in text
    assert "queries-mst-vs-n.png" in text and (tmp_path / "charts" / "queries-mst-vs-n.png").exists()
    assert "none passed" not in text and "not confirmed" not in text
    # caps named by caps.classify with their margins
    assert "| CPU (CPU 0." in text and "| pool (pool 0." in text
    loopback, slow = s.decisions
    # on loopback CPU decides, as in the baseline: the app CPU per request of the common steps at the largest N
    assert "loopback" in loopback.regime
    assert loopback.decided_by == "app CPU per request at N = 5 and 200 req/s, lower first (≈: ranges overlap)"
    assert loopback.choice == "quarkus-vertx > spring-webflux" and loopback.settings == "defaults"
    assert "5 ms" in slow.regime and slow.decided_by.startswith("the pool: 16 / (N × round trips × 5 ms)")
    assert slow.choice.startswith("quarkus-vertx (above every other") and "DB_POOL_SIZE" in slow.settings
    verdict = " ".join(s.verdict)
    assert "Loopback, N = 5: the confirmed MST runs from" in verdict
    assert "quarkus-vertx is above spring-webflux" in verdict
    assert "On loopback CPU decides: by app CPU per request at N = 5 and 200 req/s (the runs whose common step " \
           "passed) the ports order quarkus-vertx > spring-webflux" in verdict
    assert "spring-webflux takes 2 database round trips per lookup at 5 ms" in verdict
    assert "divides the median MST by" in " ".join(s.findings) and "divides" not in verdict     # the section's
    assert any("| common |" in line for line in s.appendix)
    # the common rate: the same lookups per second for every N, p99 and CPU per request beside each other
    assert "| quarkus-vertx | 20 | 50 | 51.0 | 102 | 490 | 210 | 333 | 20.0 | 3/3 |" in s.appendix


def test_a_cell_where_no_rate_passed_says_so_never_zero(tmp_path, monkeypatch):
    stuck = dataclasses.replace(WEBFLUX, cap_override={(5.0, 20): 15})      # below the floor of 20/s
    run_simulated(tmp_path, monkeypatch, {"quarkus-vertx": VERTX, "spring-webflux": stuck}, iterations=1)
    s = rendered(tmp_path)
    text = "\n".join(s.body)
    row = next(line for line in text.splitlines() if line.startswith("| spring-webflux |") and "none" in line)
    assert "none passed ≥ 20/s" in row and "| 0 |" not in row
    assert any("spring-webflux at 5 ms, N = 20: no rate ≥ 20/s passed in 1 of 1 iteration(s)" in v
               for v in s.verdict)
    slow = s.decisions[1]
    assert slow.choice.startswith("quarkus-vertx (above every other")      # < floor lies below every MST found


def unconfirmed_record(port, iteration, rps, bounded=True, confirmed=True, latency=5.0, n=20):
    steps = [{"phase": "common", "target_rps": 50, "achieved_rps": 50, "latency_ms": {"p50": 50, "p99": 120},
              "passed": True, "app_cpu_cores": 0.1, "db_cpu_cores": 0.05, "generator_cpu_cores": 0.02}]
    steps += [{"phase": p, "target_rps": rps, "achieved_rps": rps, "latency_ms": {"p99": 120}, "passed": True,
               "app_cpu_cores": 0.1, "db_cpu_cores": 0.05, "generator_cpu_cores": 0.02} for p in ("mst", "confirm")]
    mst = {"rps": rps, "confirmed": confirmed, "bounded": bounded, "first_failing_rps": rps + 10 if bounded else None,
           "slo_ms": 250.0, "estimate_rps": rps, "probes": [], "reason": None if confirmed else "no rate passed twice"}
    base = {"port": port, "scenario": "queries", "run_id": "20990101T000000Z", "iteration": iteration,
            "status": "complete", "environment": {"git_commit": "a", "settings": {}}}
    record = schema.new(base, {"latency_ms": latency}, pool_size=16, round_trips_per_lookup=1,
                        cpus={"app": "0-1", "db": "0-1", "generator": "0-1"})
    record["cells"].append(schema.cell({"n": n}, status="complete", steps=steps, mst=mst, slo_ms=250.0,
                                       pool_limit_rps=160.0, floor_rps=20, common_rps=50))
    return record


def write(folder, records):
    for r in records:
        path = folder / "queries" / r["run_id"] / f"{r['port']}-{r['iteration']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(r))


def test_bounds_and_unconfirmed_searches_are_shown_as_such_and_never_ranked(tmp_path):
    write(tmp_path, [unconfirmed_record("quarkus-vertx", 1, 130), unconfirmed_record("quarkus-vertx", 2, 140),
                     unconfirmed_record("quarkus-vertx", 3, 150, confirmed=False),
                     unconfirmed_record("spring-virtual", 1, 120, bounded=False),
                     unconfirmed_record("spring-virtual", 2, 130)])
    s = rendered(tmp_path)
    text = "\n".join(s.body)
    assert "| quarkus-vertx | 135 (130–140) ✗ 145 (140–150); 1/3 not confirmed |" in text
    assert "| spring-virtual | ≥ 125 (120–130) ✗ 140 |" in text
    assert "| not reached (pool 0.78, CPU 0.09) |" in text              # a ≥ reached no limit: none is named
    assert "quarkus-vertx 5 ms N = 20 #3: 150/s passed once (no rate passed twice)" in text
    # a bound enters no tie: vertx's range does not lie above it, so nothing is "above every other"
    assert "above every other" not in s.decisions[0].choice
    assert s.decisions[0].decided_by.startswith("no one limit explains")     # pool in 1, not reached in 1
    assert not any("reach" in v for v in s.verdict if "spring-virtual" in v.split("reach")[-1])


def test_a_search_that_ran_out_of_steps_names_the_lowest_rate_it_tried_and_ranks_nothing(tmp_path):
    truncated = unconfirmed_record("spring-webflux", 1, 0, bounded=False, confirmed=False)
    truncated["cells"][0]["mst"].update(probes=[[2100, False, "mst", "p99 over the SLO"]],
                                                   first_failing_rps=2100)
    write(tmp_path, [truncated, unconfirmed_record("quarkus-vertx", 1, 130)])
    s = rendered(tmp_path)
    row = next(line for line in s.body if line.startswith("| spring-webflux |"))
    assert "none passed ≥ 2,100/s" in row
    assert any("no rate ≥ 2,100/s passed in 1 of 1" in v for v in s.verdict)
    # the MST lies somewhere below 2,100/s: not a 0 to rank against
    assert s.decisions[0].choice == "quarkus-vertx (the only port with a comparable MST here)"


def test_an_empty_run_set_makes_no_section(tmp_path):
    assert queries_report.render(runset.select([], "queries"), tmp_path) is None


def test_the_cap_comes_from_the_confirmed_msts_that_give_the_figure(tmp_path):
    """spring-virtual loopback N=1: only the unconfirmed run #3 (left out of the figure) had the generator stop its
    search; the cap shown beside 2 confirmed MSTs, and the decision row's count, are theirs, never "generator"."""
    records = [unconfirmed_record("spring-virtual", i, rps, latency=0.0, n=1) for i, rps in ((1, 130), (2, 140))]
    third = unconfirmed_record("spring-virtual", 3, 120, confirmed=False, latency=0.0, n=1)
    third["cells"][0]["mst"]["limit"] = "generator behind its schedule"
    write(tmp_path, records + [third])
    s = rendered(tmp_path)
    row = next(line for line in s.body if line.startswith("| spring-virtual |"))
    assert "1/3 not confirmed" in row and "generator" not in row
    assert "generator" not in s.decisions[0].decided_by
    # the generator stopped one of the confirmed MSTs: the other's limit is named, and how many it stopped
    records[0]["cells"][0]["mst"]["limit"] = "generator behind its schedule"
    write(tmp_path, records)
    s = rendered(tmp_path)
    row = next(line for line in s.body if line.startswith("| spring-virtual |"))
    assert "| pool (pool 0.84, CPU 0.09); the generator stopped 1 of 2 |" in row
    # it stopped every confirmed MST: the cap is the generator's
    records[1]["cells"][0]["mst"]["limit"] = "generator behind its schedule"
    write(tmp_path, records)
    s = rendered(tmp_path)
    assert "| generator (" in next(line for line in s.body if line.startswith("| spring-virtual |"))


def test_a_median_over_the_slo_at_the_lowest_rate_tried_fails_every_rate_and_ranks_below(tmp_path):
    """Half the requests over the p99 SLO at a rate far below the pool's limit: a lower rate cannot pass, so the
    port lies below every MST found, though its search stopped above the floor."""
    slow = unconfirmed_record("spring-webflux", 1, 0, bounded=False, confirmed=False)
    cell = slow["cells"][0]
    cell["mst"].update(probes=[[38, False, "mst", "p99 over the SLO"], [25, False, "mst", "p99 over the SLO"]],
                       first_failing_rps=25)
    cell["steps"] = cell["steps"][:1] + [
        {"phase": "mst", "target_rps": rate, "achieved_rps": rate, "latency_ms": {"p50": p50, "p99": 295},
         "passed": False} for rate, p50 in ((38, 240), (25, 260))]
    write(tmp_path, [slow, unconfirmed_record("quarkus-vertx", 1, 130)])
    s = rendered(tmp_path)
    assert any("no rate ≥ 25/s passed in 1 of 1 iteration(s) (first failing 25/s); p50 at the lowest rate tried "
               "260 ms, over the p99 SLO of 250 ms" in v for v in s.verdict)
    assert s.decisions[0].choice.startswith("quarkus-vertx (above every other")
    # the same search with a median under the SLO says nothing of lower rates: not ranked
    cell["steps"][-1]["latency_ms"]["p50"] = 200
    write(tmp_path, [slow])
    assert rendered(tmp_path).decisions[0].choice == "quarkus-vertx (the only port with a comparable MST here)"


def test_a_search_with_rates_passed_once_only_never_reads_as_none_passed(tmp_path):
    flaky = unconfirmed_record("quarkus-virtual", 1, 0, bounded=False, confirmed=False)
    flaky["cells"][0]["mst"].update(probes=[[140, True, "mst", None], [160, False, "mst", "p99 over the SLO"],
                                            [140, False, "confirm", "p99 over the SLO"]], first_failing_rps=160)
    write(tmp_path, [flaky, unconfirmed_record("quarkus-vertx", 1, 130)])
    s = rendered(tmp_path)
    assert any("quarkus-virtual at 5 ms, N = 20: no rate passed twice in 1 of 1 iteration(s) (the highest passing "
               "once: 140/s)" in v for v in s.verdict)
    assert not any("quarkus-virtual at 5 ms, N = 20: no rate ≥" in v for v in s.verdict)

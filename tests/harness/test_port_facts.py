"""Each port's facts live in ports.toml alone: a port added there reaches the ports, the report's order and
colours, and the Compose host ports, with no other change."""
from harness import compose, port_facts, ports
from harness import report
from harness.report import charts
from harness.paths import ROOT

TOY = """
[ports.toy-virtual]
family = "toy"
module = "app"
jar = "toy/app/target/toy.jar"
model = "virtual threads"
server = "netty"
host_port = 8088
downstream_pool = 64
downstream_pool_setting = "TOY_POOL_SIZE"
"""


def test_a_new_port_in_the_table_reaches_every_reader(monkeypatch, tmp_path):
    table = tmp_path / "ports.toml"
    table.write_text(port_facts.FILE.read_text() + TOY)
    facts, servers = port_facts.load(table)
    known = len(port_facts.PORTS)
    assert list(facts)[:known] == list(port_facts.PORTS) and list(facts)[known] == "toy-virtual"
    monkeypatch.setattr(port_facts, "PORTS", facts)
    monkeypatch.setattr(ports, "PORTS", ports.from_facts(facts))
    assert [p.name for p in ports.select("all")][-1] == "toy-virtual"
    assert ports.select("toy-virtual")[0].jar_path == ROOT / "toy/app/target/toy.jar"
    assert port_facts.host_ports()["toy-virtual"] == 8088
    assert compose.host_port_env({})["BENCH_HOST_PORT_TOY_VIRTUAL"] == "8088"
    assert port_facts.client_pools()["toy-virtual"] == (64, "TOY_POOL_SIZE")
    assert "toy-virtual" in port_facts.with_model("virtual threads")
    assert charts.color("toy-virtual") not in [charts.color(name) for name in list(facts)[:known]]
    # the report shows the toy's records in the table's order: last
    ids = set(report.published(ROOT / "results")["baseline"])       # one set, possibly in parts
    records = [r for r in report.loaded(ROOT / "results" / "baseline") if r["run_id"] in ids]
    toy = [dict(r, port="toy-virtual") for r in records if r["port"] == "quarkus-vertx"]
    shown = report._select(records + toy, same_code=report.same_measurement(ROOT / "results"))
    assert list(shown.by_label)[-1] == "toy-virtual" and len(shown.by_label) == len({r["port"] for r in records}) + 1


def test_a_variant_runs_under_all_only_in_the_scenarios_it_names():
    variant, of = port_facts.variant_pairs()[0]
    assert port_facts.PORTS[variant].scenarios and port_facts.PORTS[of].scenarios is None
    in_baseline = [p.name for p in ports.select("all", "baseline")]
    assert variant in in_baseline and of in in_baseline
    elsewhere = next(s for s in ("queries", "faults", "memory") if s not in port_facts.PORTS[variant].scenarios)
    assert variant not in [p.name for p in ports.select("all", elsewhere)]
    assert of in [p.name for p in ports.select("all", elsewhere)]
    assert variant in [p.name for p in ports.select("all")]                  # builds and conformance: every port
    assert [p.name for p in ports.select(variant)] == [variant]               # named alone: any scenario


def test_the_defaults_predict_the_limit_of_the_bound_each_request_holds():
    """Little's law on each port's default bounds: spring-platform's 8 executor threads hold one per parallel call
    (8 / (3 x 0.2 s)), its sequential calls wait on Tomcat's 200 request threads (200 / (3 x 0.05 s)); quarkus-vertx's
    5 connections per host; spring-virtual's JDK client has no bound."""
    from harness.report.sections import downstream
    limit, bound = downstream.predicted_limit("spring-platform", (200.0, 3, "parallel"))
    assert round(limit, 1) == 13.3 and bound == "its 8 executor threads"
    limit, bound = downstream.predicted_limit("spring-platform", (50.0, 3, "sequential"))
    assert round(limit) == 1333 and bound == "Tomcat's 200 request threads"
    limit, bound = downstream.predicted_limit("quarkus-vertx", (200.0, 10, "parallel"))
    assert limit == 2.5 and bound == "its 5 client connections per host"
    assert downstream.predicted_limit("spring-virtual", (200.0, 3, "parallel")) is None

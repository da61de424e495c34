"""The default generator against a real port on the real database, with a short stall: a port frozen for 1 s
must be charged for every request it held back (coordinated omission), within 15 % of the open-model truth."""
import time

import pytest

from harness import generator_eval, loadgen, ports, settings as settings_mod, tokens
from harness.db import LocalDatabase

PORT = "quarkus-vertx"
RATE, SECONDS, STALL_AT, STALL_S = 2000, 8, 3.0, 1.0


@pytest.fixture(scope="module")
def running():
    settings = settings_mod.load(env={"BENCH_LOAD_PORT": "18085"})
    with LocalDatabase(settings["cpus"]["db"]):
        tokens.ensure()
        ports.build([ports.PORTS[PORT]])
        app = ports.start(ports.PORTS[PORT], settings, tokens.load()[0], http_port=18085)
        try:
            yield app
        finally:
            app.stop()


def test_a_stalled_port_is_charged_for_every_request_it_held_back(running):
    gen = loadgen.open_model(env={})
    assert isinstance(gen, loadgen.Openloop)
    gen.run_rate(running.url, RATE, 5, 64, None)  # warm-up
    service = loadgen.closed_loop().run(running.url, 64, 3, None).achieved_rps
    base = gen.run_rate(running.url, RATE, 3, 64, None).latency_ms["p50"]
    start = time.monotonic_ns() + 500_000_000
    stall: dict = {"window_start": start / 1e9}
    generator_eval.freeze_later(running.pid, start / 1e9 + STALL_AT, STALL_S, stall)
    r = gen.run_rate(running.url, RATE, SECONDS, 64, None, extra=("--start-at-monotonic-ns", str(start)))
    truth = generator_eval.stall_truth(RATE, SECONDS, stall["stall_at_s"], stall["stall_s"], service, base)
    assert r.errors == {"non_2xx": 0, "connect": 0, "read": 0, "write": 0, "timeout": 0}
    assert r.requests == RATE * SECONDS, "every scheduled request is answered and counted, the stalled ones too"
    for p in ("p99", "p99.9"):
        assert generator_eval.within(r.latency_ms[p], truth[p]), (p, r.latency_ms[p], truth)
    # the requests held back waited for a free connection: the generator says so in its send lateness
    assert r.send_lag_ms["max"] > 500 and not r.generator_behind

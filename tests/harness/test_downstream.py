"""harness/downstream.py against a real nginx (Debian's nginx-light + echo module) on a free port: the body, the
latency and its per-request override, what it refuses, and that nothing is left running."""
import json
import shutil
import socket
import time
import urllib.error
import urllib.request

import psutil
import pytest

from harness import downstream


_used: list[int] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        _used.append(s.getsockname()[1])
        return _used[-1]


@pytest.fixture(autouse=True)
def remove_prefixes():
    """Each test's nginx prefix (build/downstream/<port>/) goes with it."""
    yield
    while _used:
        shutil.rmtree(downstream.prefix(_used.pop()), ignore_errors=True)


def get(url):
    began = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read().decode(), time.monotonic() - began
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode(), time.monotonic() - began


def test_item_echoes_email_and_index_after_the_latency():
    port = free_port()
    with downstream.running(latency_ms=40, port=port, access_log=True) as ds:
        status, ctype, body, seconds = get(f"{ds.url}/item?email=terence.murphy0%40example.com&i=7")
        assert (status, ctype) == (200, "application/json")
        assert body == '{"email":"terence.murphy0@example.com","i":7}'
        assert json.loads(body) == {"email": "terence.murphy0@example.com", "i": 7}
        assert 0.040 <= seconds < 0.5, seconds
        status, _, body, seconds = get(f"{ds.url}/item?email=a.b@example.com&i=0&delay_ms=0")
        assert (status, body) == (200, '{"email":"a.b@example.com","i":0}') and seconds < 0.035, seconds
        status, _, _, seconds = get(f"{ds.url}/item?email=a@b&i=1&delay_ms=150")
        assert status == 200 and seconds >= 0.150
        served = ds.requests_served()
        get(f"{ds.url}/item?email=a@b&i=2&delay_ms=0")
        assert ds.requests_served() == served + 2  # the item and the earlier reading
        assert ds.cpu_seconds() >= 0.0
        assert len(ds.access_log.read_text().splitlines()) >= 4


@pytest.mark.parametrize("query", ["email=a%22b@x&i=1", "email=a%5Cb@x&i=1", "email=%C3%A9@x&i=1", "email=&i=1",
                                   "email=a@b&i=01", "email=a@b&i=-1", "email=a@b&i=x", "email=a@b",
                                   "email=a@b&i=1&delay_ms=x"])
def test_anything_that_would_need_escaping_or_is_not_a_number_is_400(query):
    port = free_port()
    with downstream.running(0, port=port) as ds:
        status, ctype, body, _ = get(f"{ds.url}/item?{query}")
        assert status == 400 and ctype == "application/json" and json.loads(body)["error"], (status, body)


def test_nothing_is_left_running_after_the_block_even_on_error():
    port = free_port()
    with pytest.raises(RuntimeError):
        with downstream.running(0, port=port) as ds:
            pids = [p.pid for p in ds.processes()]
            assert len(pids) >= 2  # master and worker
            raise RuntimeError("boom")
    assert not any(psutil.pid_exists(pid) and "nginx" in psutil.Process(pid).name() for pid in pids)
    assert downstream.down(port) is False


def test_up_restarts_ours_with_another_latency():
    port = free_port()
    try:
        downstream.up(0, port)
        ds = downstream.up(80, port)
        assert get(f"{ds.url}/item?email=a@b&i=0")[3] >= 0.080
    finally:
        assert downstream.down(port) is True

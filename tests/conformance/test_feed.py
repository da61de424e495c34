"""GET /feed?calls=K (README, "The contract"): the user's row and K downstream answers, over HTTP against a running
port and the downstream nginx that `just check` starts (harness/downstream.py, access log on, so every downstream
request is counted here). The cases that need another downstream (50 ms latency, slower than the timeout, down)
restart it on the same port and put the default one back afterwards."""
import json
import os
import statistics
import time

import pytest

from harness import db, downstream, tokens
from harness.paths import UNKNOWN_TOKENS

TIMEOUT_S = int(os.environ.get("DOWNSTREAM_TIMEOUT_MS", "2000")) / 1000
# ports in containers reach the downstream on Docker's bridge: a restarted nginx must listen there again
ALSO_ON = os.environ.get("CONFORMANCE_DOWNSTREAM_ALSO_ON") or None


@pytest.fixture(scope="module")
def ds_port():
    port = os.environ.get("CONFORMANCE_DOWNSTREAM_PORT")
    if not port:
        pytest.skip("no downstream: run the suite with `just check NAME` (it starts one)")
    return int(port)


@pytest.fixture(scope="module")
def feed_url(url):
    return url.rstrip("/") + "/feed"


def feed(http, feed_url, token, query="", timeout=15):
    return http.get(feed_url + query, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)


def expected_body(row: dict, calls: int) -> str:
    """The one serialisation every port must produce: keys in order, no spaces, the items in call order."""
    user = {k: row[k] for k in ("email", "first", "last", "city", "county", "age")}
    items = [{"email": row["email"], "i": i} for i in range(calls)]
    return json.dumps({"user": user, "items": items}, separators=(",", ":"), ensure_ascii=False)


class AccessLog:
    """The downstream's access log: one line `msec email i status request_time` per request it answered."""

    def __init__(self, port: int):
        self.path = downstream.prefix(port) / "access.log"
        self.offset = self._size()

    def _size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def new_lines(self, expect: int | None = None, settle: float = 0.3) -> list[list[str]]:
        """Lines written since the last call; waits for `expect` of them (nginx logs just after it answers),
        then `settle` seconds more so that an extra request would show."""
        deadline = time.monotonic() + 5
        while expect is not None and time.monotonic() < deadline and len(self._raw()) < expect:
            time.sleep(0.02)
        time.sleep(settle)
        raw = self._raw()
        self.offset += sum(len(line.encode()) + 1 for line in raw)
        return [line.split() for line in raw]

    def _raw(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read().decode()
        return data.splitlines() if data.endswith("\n") else data.splitlines()[:-1]


def unquote(email: str) -> str:
    return email.replace("%40", "@")


def wait_until_answering(http, feed_url, token, seconds=5.0):
    """After the downstream restarted, the port's pooled connections to the old nginx are closed: clients notice
    that at different times, so the first /feed may be a 502. Wait (bounded) for one 200."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if feed(http, feed_url, token, "?calls=1").status_code == 200:
            return
        time.sleep(0.1)
    pytest.fail("the port did not answer /feed with 200 within 5 s after the downstream restarted")


@pytest.mark.parametrize("calls", [1, 3, 10])
def test_feed_body_is_the_row_and_the_items_in_order(http, feed_url, ds_port, cursor, pool, calls):
    log = AccessLog(ds_port)
    for token in pool[100 + calls:100 + calls + 5]:
        email = tokens.email_of(token)
        response = feed(http, feed_url, token, f"?calls={calls}")
        assert response.status_code == 200, response.text[:300]
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        assert response.content.decode() == expected_body(db.user_row(cursor, email), calls)
    lines = log.new_lines(expect=5 * calls)
    assert len(lines) == 5 * calls, lines


def test_feed_default_is_three_calls(http, feed_url, ds_port, cursor, pool):
    log = AccessLog(ds_port)
    token = pool[120]
    response = feed(http, feed_url, token)
    assert response.status_code == 200, response.text[:300]
    assert response.content.decode() == expected_body(db.user_row(cursor, tokens.email_of(token)), 3)
    assert len(log.new_lines(expect=3)) == 3


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_each_feed_makes_exactly_k_downstream_requests(http, feed_url, ds_port, cursor, pool, mode):
    """Counted at the downstream: K requests per /feed, each with the token's email and one index 0..K-1."""
    log = AccessLog(ds_port)
    for n, token in enumerate(pool[200:220]):
        calls = 1 + n % 10
        response = feed(http, feed_url, token, f"?calls={calls}&mode={mode}")
        assert response.status_code == 200, response.text[:300]
        lines = log.new_lines(expect=calls, settle=0.05)
        assert len(lines) == calls, (calls, lines)
        assert {unquote(line[1]) for line in lines} == {tokens.email_of(token)}, lines
        assert sorted(int(line[2]) for line in lines) == list(range(calls)), lines
        assert all(line[3] == "200" for line in lines), lines


@pytest.mark.parametrize("value", ["0", "11", "-1", "abc", "", "1.5", "3x", "99999999999999999999", "3&calls=4"],
                         ids=["zero", "above 10", "negative", "word", "empty", "decimal", "trailing junk", "huge",
                              "repeated"])
def test_bad_calls_get_400_and_no_downstream_call(http, feed_url, ds_port, pool, value):
    log = AccessLog(ds_port)
    response = feed(http, feed_url, pool[5], f"?calls={value}")
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    assert response.json() == {"error": "invalid_calls"}
    assert log.new_lines(settle=0.05) == []


def test_calls_without_value_gets_400(http, feed_url, pool):
    response = feed(http, feed_url, pool[5], "?calls")
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.json() == {"error": "invalid_calls"}


@pytest.mark.parametrize("value", ["", "bogus", "SEQUENTIAL", "sequential&mode=parallel"])
def test_bad_mode_gets_400(http, feed_url, pool, value):
    response = feed(http, feed_url, pool[5], f"?mode={value}")
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.json() == {"error": "invalid_mode"}


@pytest.mark.parametrize("query", ["?calls=abc", "?calls=3", "", "?mode=bogus"])
def test_bad_token_is_401_before_400(http, feed_url, ds_port, query):
    log = AccessLog(ds_port)
    response = http.get(feed_url + query, headers={"Authorization": "Bearer hello"}, timeout=10)
    assert response.status_code == 401, (response.status_code, response.text[:300])
    assert response.headers.get("WWW-Authenticate", "").lower().startswith("bearer"), response.headers
    assert response.json().get("error"), response.text
    assert log.new_lines(settle=0.05) == []


def test_missing_token_is_401(http, feed_url):
    response = http.get(feed_url, timeout=10)
    assert response.status_code == 401, (response.status_code, response.text[:300])


def test_unknown_user_is_404_with_no_downstream_call(http, feed_url, ds_port):
    log = AccessLog(ds_port)
    for token in UNKNOWN_TOKENS.read_text().split()[:3]:
        response = feed(http, feed_url, token, "?calls=5")
        assert response.status_code == 404, response.text[:300]
        assert response.json() == {"error": "not_found"}
    assert log.new_lines(settle=0.3) == []


# --- with another downstream: restarted on the same port, the default one put back afterwards -------------

@pytest.fixture
def restore_downstream(ds_port, http, feed_url, pool):
    yield
    downstream.up(0, ds_port, access_log=True, also_on=ALSO_ON)
    wait_until_answering(http, feed_url, pool[6])


def timed(http, feed_url, token, query):
    began = time.monotonic()
    response = feed(http, feed_url, token, query)
    return response, time.monotonic() - began


def test_parallel_calls_overlap(http, feed_url, ds_port, cursor, pool, restore_downstream):
    """50 ms per downstream answer: K=5 in parallel takes about one latency, well under two; sequential five."""
    downstream.up(50, ds_port, access_log=True, also_on=ALSO_ON)
    wait_until_answering(http, feed_url, pool[6])
    token = pool[300]
    for _ in range(10):  # warm up this code path at this latency
        feed(http, feed_url, token, "?calls=5")
    parallel = []
    for _ in range(10):
        response, seconds = timed(http, feed_url, token, "?calls=5")
        assert response.status_code == 200, response.text[:300]
        parallel.append(seconds)
    sequential = []
    for _ in range(3):
        response, seconds = timed(http, feed_url, token, "?calls=5&mode=sequential")
        assert response.status_code == 200, response.text[:300]
        assert response.content.decode() == expected_body(db.user_row(cursor, tokens.email_of(token)), 5)
        sequential.append(seconds)
    print(f"\nK=5 at 50 ms: parallel median {statistics.median(parallel) * 1000:.0f} ms "
          f"(min {min(parallel) * 1000:.0f}), sequential min {min(sequential) * 1000:.0f} ms")
    assert statistics.median(parallel) < 0.100, parallel
    assert min(parallel) >= 0.050, parallel
    assert min(sequential) >= 0.250, sequential


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
def test_downstream_slower_than_the_timeout_is_502_in_bounded_time(http, feed_url, ds_port, pool, mode,
                                                                    restore_downstream):
    downstream.up(int(TIMEOUT_S * 1000) + 3000, ds_port, access_log=True, also_on=ALSO_ON)
    for calls in (1, 10):
        response, seconds = timed(http, feed_url, pool[7], f"?calls={calls}&mode={mode}")
        assert response.status_code == 502, (response.status_code, response.text[:300])
        assert response.headers["Content-Type"].startswith("application/json"), response.headers
        assert response.json() == {"error": "downstream"}
        assert TIMEOUT_S * 0.9 <= seconds <= TIMEOUT_S + 1.5, f"{seconds:.2f} s with a {TIMEOUT_S} s timeout"


def test_downstream_down_is_502_in_bounded_time(http, feed_url, ds_port, pool, restore_downstream):
    downstream.down(ds_port)
    for query in ("?calls=1", "?calls=10", "?calls=3&mode=sequential"):
        response, seconds = timed(http, feed_url, pool[8], query)
        assert response.status_code == 502, (response.status_code, response.text[:300])
        assert response.json() == {"error": "downstream"}
        assert seconds <= TIMEOUT_S + 1.5, f"{seconds:.2f} s"


def test_feed_works_again_after_the_downstream_is_back(http, feed_url, ds_port, cursor, pool):
    token = pool[9]
    wait_until_answering(http, feed_url, token)
    response = feed(http, feed_url, token, "?calls=4")
    assert response.status_code == 200, response.text[:300]
    assert response.content.decode() == expected_body(db.user_row(cursor, tokens.email_of(token)), 4)

"""The endpoint contract of README.md, checked over HTTP against a running port and the real DB."""
import base64
import json
import random
import time

import pytest

from harness import db, hostile, tokens
from harness.paths import BUILD, UNKNOWN_TOKENS

ROW_KEYS = ["email", "first", "last", "city", "county", "age"]
NOW = int(time.time())


def get(http, url, authorization=None):
    headers = {} if authorization is None else {"Authorization": authorization}
    return http.get(url, headers=headers, timeout=10)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict, claims: dict, signature: bytes = b"") -> str:
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(claims).encode()), b64url(signature)])


def valid_claims(email="terence.murphy0@example.com", **extra):
    return {"email": email, "iat": NOW - 60, "exp": NOW + 3600} | extra


def assert_json_error(response):
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    body = response.json()
    assert isinstance(body, dict) and "error" in body, response.text
    assert "Exception" not in response.text and "\tat " not in response.text


def assert_unauthorized(response):
    assert response.status_code == 401, (response.status_code, response.text[:300])
    assert response.headers.get("WWW-Authenticate", "").lower().startswith("bearer"), response.headers
    assert_json_error(response)


def test_valid_tokens_return_exactly_their_row(http, url, cursor, pool):
    for token in random.Random(7).sample(pool, 50):
        response = get(http, url, f"Bearer {token}")
        assert response.status_code == 200, response.text[:300]
        assert response.headers["Content-Type"].startswith("application/json")
        pairs = json.loads(response.text, object_pairs_hook=list)
        assert [k for k, _ in pairs] == ROW_KEYS, pairs
        assert dict(pairs) == db.user_row(cursor, tokens.email_of(token))


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
def test_scheme_is_case_insensitive(http, url, pool, scheme):
    response = get(http, url, f"{scheme} {pool[1]}")
    assert response.status_code == 200, response.text[:300]
    assert response.json()["email"] == tokens.email_of(pool[1])


def test_unknown_email_is_404(http, url):
    for token in UNKNOWN_TOKENS.read_text().split()[:3]:
        response = get(http, url, f"Bearer {token}")
        assert response.status_code == 404, response.text[:300]
        assert_json_error(response)


@pytest.mark.parametrize("email", ["' OR '1'='1", "x@example.com' OR 1=1 -- ", "\"; DROP TABLE users; --",
                                   "terence.murphy0@example.com' UNION SELECT * FROM users --"])
def test_sql_looking_email_is_just_a_string(http, url, cursor, email):
    response = get(http, url, f"Bearer {tokens.sign(valid_claims(email))}")
    assert response.status_code == 404, response.text[:300]
    assert_json_error(response)
    cursor.execute("SELECT COUNT(*) FROM users")
    assert cursor.fetchone()[0] == db.USER_COUNT


def hostile_tokens():
    """(case, Authorization header value); every one must be answered 401 (harness/hostile.py: the faults scenario
    mixes the same values into its load)."""
    return hostile.hostile_tokens(NOW)


@pytest.mark.parametrize("case,authorization", hostile_tokens(), ids=[c for c, _ in hostile_tokens()])
def test_hostile_tokens_get_401(http, url, case, authorization):
    assert_unauthorized(get(http, url, authorization))


def test_missing_header_gets_401(http, url):
    assert_unauthorized(get(http, url))


def test_huge_header_is_refused_without_5xx(http, url):
    response = get(http, url, "Bearer " + "a" * 16 * 1024)
    assert response.status_code in (401, 431), (response.status_code, response.text[:300])


COUNTERS = ("Queries", "Questions", "Com_select", "Com_stmt_prepare", "Com_stmt_close")


def cost_per_request(http, url, cursor, sample, params=None) -> dict:
    """The statements each request costs the DB, read from the server's counters (TechEmpower's verifier).

    `Queries` counts every statement including COM_STMT_PREPARE/CLOSE, which `Questions` leaves out on
    MariaDB: a client that prepares and closes per request shows up there."""
    for token in sample[:20]:  # warm the pool's connections and statement caches first
        http.get(url, params=params, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    before = db.status_counters(cursor, COUNTERS)
    for token in sample:
        response = http.get(url, params=params, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert response.status_code == 200, response.text[:300]
    after = db.status_counters(cursor, COUNTERS)
    # Our own SHOW GLOBAL STATUS counts as one statement.
    return {k: (after[k] - before[k] - (1 if k in ("Queries", "Questions") else 0)) / len(sample) for k in COUNTERS}


def test_each_200_costs_one_select(http, url, cursor, pool, port_name):
    sample = random.Random(11).sample(pool, 500)
    per_request = cost_per_request(http, url, cursor, sample)
    out = BUILD / "conformance"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{port_name}.json").write_text(json.dumps(
        {"port": port_name, "requests": len(sample), "statements_per_request": round(per_request["Queries"], 3),
         "selects_per_request": round(per_request["Com_select"], 3),
         "prepares_per_request": round(per_request["Com_stmt_prepare"], 3)}))
    print(f"\n{port_name}: per request " + ", ".join(f"{k} {v:.3f}" for k, v in per_request.items()))
    assert 0.98 <= per_request["Com_select"] <= 1.02, f"{per_request['Com_select']:.3f} SELECTs per request, expected 1"
    assert per_request["Queries"] <= 1.02, f"{per_request['Queries']:.3f} statements per request, expected 1 (one SELECT, nothing else)"


# --- exact match: the body is the stored row, and only the stored spelling finds it ----------------------

@pytest.mark.parametrize("variant", [str.upper, str.capitalize, lambda e: e + " ", lambda e: e + "  "],
                         ids=["upper case", "capitalized", "trailing space", "two trailing spaces"])
def test_only_the_exact_stored_email_finds_the_row(http, url, cursor, pool, variant):
    """A validly signed token whose email differs from a stored one only in letter case or trailing spaces
    names no user: 404 from every port (never the token's spelling in a 200, never the stored row)."""
    email = tokens.email_of(pool[2])
    assert db.user_row(cursor, email) is not None
    response = get(http, url, f"Bearer {tokens.sign(valid_claims(variant(email)))}")
    assert response.status_code == 404, (response.status_code, response.text[:300])
    assert_json_error(response)


# --- ?queries=N: N sequential lookups inside one request, the row returned once --------------------------

def with_queries(http, url, token, queries):
    query = "" if queries is None else f"?queries={queries}"
    return http.get(url.rstrip("/") + "/" + query, headers={"Authorization": f"Bearer {token}"}, timeout=10)


@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_queries_returns_the_row_once(http, url, cursor, pool, n):
    token = pool[3 + n]
    response = with_queries(http, url, token, n)
    assert response.status_code == 200, response.text[:300]
    assert response.headers["Content-Type"].startswith("application/json")
    pairs = json.loads(response.text, object_pairs_hook=list)
    assert [k for k, _ in pairs] == ROW_KEYS, pairs
    assert dict(pairs) == db.user_row(cursor, tokens.email_of(token))


@pytest.mark.parametrize("value", ["0", "21", "-1", "abc", "", "1.5", "5x", "99999999999999999999", "1&queries=2"],
                         ids=["zero", "above 20", "negative", "word", "empty", "decimal", "trailing junk", "huge",
                              "repeated"])
def test_bad_queries_get_400(http, url, pool, value):
    response = with_queries(http, url, pool[4], value)
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    assert response.json() == {"error": "invalid_queries"}


def test_bad_token_is_401_whatever_queries_says(http, url):
    response = http.get(url.rstrip("/") + "/?queries=abc", headers={"Authorization": "Bearer hello"}, timeout=10)
    assert_unauthorized(response)


def test_queries_n_costs_n_selects(http, url, cursor, pool):
    """Every one of the N lookups reaches the database (no session or first-level cache answers it)."""
    per_request = cost_per_request(http, url, cursor, random.Random(13).sample(pool, 100), params={"queries": 5})
    assert 4.98 <= per_request["Com_select"] <= 5.02, f"{per_request['Com_select']:.3f} SELECTs per request, expected 5"
    assert per_request["Queries"] <= 5.02, f"{per_request['Queries']:.3f} statements per request, expected 5"

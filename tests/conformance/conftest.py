"""The black-box conformance suite: the same HTTP cases for every port, against the real database.

Run by `just check NAME` (which starts the port), or by hand against a running port:
    CONFORMANCE_URL=http://127.0.0.1:8080/ CONFORMANCE_PORT=my-port .venv/bin/pytest tests/conformance
"""
import os
from contextlib import closing

import pytest
import requests

from harness import db, tokens


@pytest.fixture(scope="session")
def url():
    target = os.environ.get("CONFORMANCE_URL")
    if not target:
        pytest.fail("CONFORMANCE_URL is not set: run the suite with `just check NAME`")
    return target


@pytest.fixture(scope="session")
def port_name():
    return os.environ.get("CONFORMANCE_PORT", "unnamed")


@pytest.fixture(scope="session")
def http():
    with requests.Session() as session:
        yield session


@pytest.fixture(scope="session")
def cursor():
    with closing(db.connect()) as conn, conn.cursor() as cur:
        yield cur


@pytest.fixture(scope="session")
def pool():
    return tokens.load()

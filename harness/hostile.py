"""Hostile Authorization header values and the status each must get: one list, used by the conformance suite
(tests/conformance/test_contract.py: one request each) and by the faults scenario (mixed into a constant-rate
stream with openloop's --mix-authorization)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import warnings

from . import tokens
from .paths import UNKNOWN_TOKENS

UNAUTHORIZED = 401
NOT_FOUND = 404
UNKNOWN_USERS = 3      # well-signed tokens of users that do not exist (build/tokens/unknown.txt): 404


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict, claims: dict, signature: bytes = b"") -> str:
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(claims).encode()), b64url(signature)])


def hostile_tokens(now: int | None = None) -> list[tuple[str, str]]:
    """(case, Authorization header value); every one must be answered 401."""
    now = int(time.time()) if now is None else now
    secret = tokens.secret().encode()

    def claims(email="terence.murphy0@example.com", **extra):
        return {"email": email, "iat": now - 60, "exp": now + 3600} | extra

    good = tokens.sign(claims())
    header_b64, payload_b64, signature_b64 = good.split(".")

    def hs256_with_header(header):
        signing_input = f"{b64url(json.dumps(header).encode())}.{payload_b64}".encode()
        return signing_input.decode() + "." + b64url(hmac.new(secret, signing_input, hashlib.sha256).digest())

    other_payload = b64url(json.dumps(claims("elliott.howell1@example.com")).encode())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # PyJWT warns about the short key of the (hostile) HS512 token
        return [
            ("alg none", "Bearer " + forge({"alg": "none", "typ": "JWT"}, claims())),
            ("alg none with signature", "Bearer " + forge({"alg": "none"}, claims(), b"x")),
            ("HS512 same secret", "Bearer " + tokens.sign(claims(), algorithm="HS512")),
            ("HS384 same secret", "Bearer " + tokens.sign(claims(), algorithm="HS384")),
            ("RS256 header, HMAC signature", "Bearer " + hs256_with_header({"alg": "RS256", "typ": "JWT"})),
            ("wrong secret", "Bearer " + tokens.sign(claims(), key="another-secret-of-at-least-256-bits-long!!")),
            ("expired", "Bearer " + tokens.sign(claims(iat=now - 7200, exp=now - 3600))),
            ("not yet valid", "Bearer " + tokens.sign(claims(nbf=now + 3600))),
            ("missing exp", "Bearer " + tokens.sign({"email": "terence.murphy0@example.com", "iat": now})),
            ("missing email", "Bearer " + tokens.sign({"iat": now, "exp": now + 3600})),
            ("numeric email", "Bearer " + tokens.sign(claims(12345))),
            ("null email", "Bearer " + tokens.sign(claims(None))),
            ("list email", "Bearer " + tokens.sign(claims(["terence.murphy0@example.com"]))),
            ("object email", "Bearer " + tokens.sign(claims({"email": "terence.murphy0@example.com"}))),
            ("payload swapped, signature kept", f"Bearer {header_b64}.{other_payload}.{signature_b64}"),
            ("signature stripped", f"Bearer {header_b64}.{payload_b64}."),
            ("two parts", f"Bearer {header_b64}.{payload_b64}"),
            ("garbage base64", "Bearer !!!!.@@@@.####"),
            ("not a JWT", "Bearer hello"),
            ("empty token", "Bearer "),
            ("scheme only", "Bearer"),
            ("Basic scheme", "Basic " + base64.b64encode(b"user:password").decode()),
            ("token without scheme", good),
            ("JSON header garbage", "Bearer " + b64url(b"{not json") + "." + payload_b64 + "." + signature_b64),
        ]


def header_lines(now: int | None = None) -> list[tuple[str, str, int]]:
    """(case, Authorization line, expected status): the hostile values (401) and well-signed tokens of unknown
    users (404), one line each as openloop's --mix-authorization reads them (trimmed; "Bearer " and "Bearer" are
    one line once trimmed, kept once)."""
    out: list[tuple[str, str, int]] = []
    seen = set()
    for case, value in hostile_tokens(now):
        value = value.strip()
        if value and value not in seen:
            seen.add(value)
            out.append((case, value, UNAUTHORIZED))
    for i, token in enumerate(UNKNOWN_TOKENS.read_text().split()[:UNKNOWN_USERS]):
        out.append((f"unknown email {i + 1}", f"Bearer {token}", NOT_FOUND))
    return out

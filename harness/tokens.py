"""The token pool: one HS256 token per user (so every token maps to a real row), deterministic."""
from __future__ import annotations

import os

import jwt

from .paths import TOKENS, TOKENS_DIR, UNKNOWN_TOKENS, USERS_TSV
from . import db

DEFAULT_SECRET = "this-is-the-default-benchmark-secret-of-at-least-256-bits"
# Fixed times keep the pool byte-for-byte reproducible: issued 2026-01-01, valid until 2100-01-01.
ISSUED_AT = 1767225600
EXPIRES_AT = 4102444800
UNKNOWN_COUNT = 10


def secret() -> str:
    return os.environ.get("JWT_SECRET", DEFAULT_SECRET)


def sign(claims: dict, key: str | None = None, algorithm: str = "HS256", headers: dict | None = None) -> str:
    return jwt.encode(claims, key or secret(), algorithm=algorithm, headers=headers)


def token_for(email, **extra) -> str:
    return sign({"email": email, "iat": ISSUED_AT, "exp": EXPIRES_AT} | extra)


def generate() -> None:
    db.ensure_users_file()
    TOKENS_DIR.mkdir(parents=True, exist_ok=True)
    with open(USERS_TSV, encoding="utf-8") as users, open(TOKENS, "w") as out:
        for line in users:
            out.write(token_for(line.split("\t", 1)[0]) + "\n")
    with open(UNKNOWN_TOKENS, "w") as out:
        for i in range(UNKNOWN_COUNT):
            out.write(token_for(f"nobody{i}@unknown.example.com") + "\n")
    # Record which secret signed the pool, so a changed JWT_SECRET regenerates it.
    (TOKENS_DIR / "secret.sha256").write_text(_fingerprint())


def _fingerprint() -> str:
    import hashlib
    return hashlib.sha256(secret().encode()).hexdigest()


def ensure() -> None:
    stamp = TOKENS_DIR / "secret.sha256"
    if not TOKENS.exists() or not stamp.exists() or stamp.read_text() != _fingerprint():
        print("tokens: writing 100,000 tokens to build/tokens/tokens.txt")
        generate()


def load(path=TOKENS) -> list[str]:
    ensure()
    return path.read_text().split()


def email_of(token: str) -> str:
    return jwt.decode(token, options={"verify_signature": False})["email"]

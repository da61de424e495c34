"""What a profile's split.json holds and how its paths read: the CPU categories `just profile` splits into, the
agreement that makes a split trustworthy, the default variant's name (read by harness/profile.py and the report)."""
from __future__ import annotations

from pathlib import Path

from ..paths import ROOT

AGREEMENT_TOLERANCE = 0.15
WARM = "warm"                  # the default: after the one warm-up
CATEGORIES = ["HTTP server", "HTTP client", "framework", "JWT", "ORM/mapping", "driver", "pool", "JSON",
              "kernel", "JIT", "GC", "other"]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

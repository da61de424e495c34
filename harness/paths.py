"""Where things live. Generated files go under build/ and .data/, both git-ignored."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
USERS_TSV = BUILD / "users.tsv"
TOKENS_DIR = BUILD / "tokens"
TOKENS = TOKENS_DIR / "tokens.txt"
UNKNOWN_TOKENS = TOKENS_DIR / "unknown.txt"
RESULTS = ROOT / "results"
LOGS = RESULTS / "logs"
# BENCH_SETTINGS: another settings file (a copy of bench.toml with a scenario declared in it, as the tests do)
SETTINGS = Path(os.environ.get("BENCH_SETTINGS") or ROOT / "bench.toml")

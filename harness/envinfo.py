"""The environment recorded beside every number: machine, software versions, settings, commit."""
from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess

import psutil

from . import compose, db, ports
from .paths import ROOT

COMMON_SECTIONS = ("rule", "load", "search", "warmup", "db", "jvm", "cpus")


def _cpu_model() -> str:
    """/proc/cpuinfo's model name, else the platform's processor, else its machine (the calibration's too)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _os_name() -> str:
    try:
        release = dict(line.rstrip().split("=", 1) for line in open("/etc/os-release") if "=" in line)
        return release.get("PRETTY_NAME", "").strip('"')
    except OSError:
        return platform.system()


def _git(*args) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _pom_value(path, pattern) -> str:
    try:
        match = re.search(pattern, (ROOT / path).read_text(), re.S)
        return match.group(1) if match else "unknown"
    except OSError:
        return "unknown"


def framework_versions() -> dict:
    return {
        "spring_boot": _pom_value("spring/mvc/pom.xml", r"spring-boot-starter-parent</artifactId>\s*<version>([^<]+)"),
        "quarkus": _pom_value("quarkus/virtual/pom.xml", r"<quarkus.platform.version>([^<]+)"),
    }


# what does not change a measurement: results, the report and the prose
NOT_CODE = (":!results", ":!RESULTS.md", ":!RESULTS-appendix.md", ":!README.md", ":!docs", ":!*.md")


def code_commit() -> str:
    """The newest commit that changed anything a measurement runs (not results/, RESULTS*.md or the docs), "-dirty"
    when such a file differs from it: a commit of results alone does not split run sets (harness/method/runset.py),
    so a documented remedy run after its defaults were published stays beside them."""
    commit = _git("log", "-1", "--format=%h", "--abbrev=12", "--", ".", *NOT_CODE)
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE))
    return commit + ("-dirty" if dirty else "")


def capture(settings: dict, generator, closed_generator, scenario: str = "baseline") -> dict:
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "--short=12", "HEAD") + ("-dirty" if dirty else ""),
        "code_commit": code_commit(),
        "mode": os.environ.get("BENCH_ENV", "local"),
        **({"compose": compose.environment()} if compose.enabled() else {}),
        "cpu_model": _cpu_model(),
        "cores": psutil.cpu_count(logical=True),
        "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "os": _os_name(),
        "kernel": platform.release(),
        "jdk": ports.java_version(),
        "db": db.version(),
        "db_location": "external" if db.is_external() else "local (db/local.sh)",
        "frameworks": framework_versions(),
        "generator": generator.describe(),
        "closed_loop_generator": closed_generator.describe() if closed_generator else "none",
        "cpus": settings["cpus"],
        "jvm_options": settings["jvm"]["options"],
        "pool_size": settings["db"]["pool_size"],
        "scenario": scenario,
        # the common sections and the scenario's own: what the run-set fingerprint compares
        "settings": {k: settings[k] for k in (*COMMON_SECTIONS, scenario) if k in settings},
        "quick": settings["quick"],
    }

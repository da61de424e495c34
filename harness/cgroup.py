"""A memory limit applied the way a container runtime applies it: a cgroup with a hard memory limit (swap
included), which the process joins before it execs the JVM, so the JVM's container support reads the limit and
sizes its heap from it (-XX:MaxRAMPercentage). cgroup v2 (memory.max) or v1 (memory.limit_in_bytes; this VM's
kernel mounts v1), under the hierarchy's root; the group is removed on the way out."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from .errors import Fatal

ROOT = Path("/sys/fs/cgroup")


def version(root: Path = ROOT) -> int | None:
    """2 (unified), 1 (a v1 memory controller) or None (no memory controller we can use)."""
    if (root / "cgroup.controllers").exists():
        return 2 if "memory" in (root / "cgroup.controllers").read_text().split() else None
    return 1 if (root / "memory" / "memory.limit_in_bytes").exists() else None


def _counter(text: str, key: str) -> int | None:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


class MemoryLimit:
    """`with MemoryLimit("bench-quarkus-vertx", 256) as group:` then start the process with `group.prefix`."""

    def __init__(self, name: str, limit_mb: int, root: Path = ROOT):
        self.limit_bytes = limit_mb * 2**20
        self.version = version(root)
        if self.version is None:
            raise Fatal(f"no cgroup memory controller under {root}: the memory scenario needs one (root, cgroup v1 "
                        f"or v2 with the memory controller enabled)")
        self.path = root / name if self.version == 2 else root / "memory" / name

    def _write(self, name: str, value) -> None:
        (self.path / name).write_text(str(value))

    def __enter__(self) -> "MemoryLimit":
        if self.path.exists():
            self._empty()
            self.path.rmdir()
        try:
            self.path.mkdir()
            if self.version == 2:
                self._write("memory.max", self.limit_bytes)
                if (self.path / "memory.swap.max").exists():
                    self._write("memory.swap.max", 0)
            else:
                self._write("memory.limit_in_bytes", self.limit_bytes)
                if (self.path / "memory.memsw.limit_in_bytes").exists():   # memory + swap, never above it
                    self._write("memory.memsw.limit_in_bytes", self.limit_bytes)
        except OSError as e:
            raise Fatal(f"cannot create the memory cgroup {self.path} ({e}): the memory scenario runs as root") from e
        return self

    def __exit__(self, *exc) -> None:
        self._empty()
        try:
            self.path.rmdir()
        except OSError:
            pass

    @property
    def prefix(self) -> tuple[str, ...]:
        """A command prefix: the shell joins the group, then execs the rest (same pid, so the JVM is inside)."""
        return ("sh", "-c", f'echo $$ > {self.path / "cgroup.procs"} && exec "$@"', "sh")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def _empty(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.05)

    def oom_kills(self) -> int | None:
        """Processes the kernel killed in this group for want of memory."""
        try:
            if self.version == 2:
                return _counter((self.path / "memory.events").read_text(), "oom_kill")
            return _counter((self.path / "memory.oom_control").read_text(), "oom_kill")
        except OSError:
            return None

    def peak_mb(self) -> float | None:
        """The most memory the group was charged (page cache included, as a container's limit counts it)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return round(int((self.path / name).read_text()) / 2**20, 1)
        except (OSError, ValueError):
            return None

"""Runs a Dockerfile's steps without a Docker engine, to prove them as far as a machine without one can.

Each stage gets a scratch directory standing for its filesystem (starting empty: the base image is not
pulled); ARG, FROM, WORKDIR, COPY (from the build context, through .dockerignore, or --from a stage) and
RUN (with `sh -c` in the stage's working directory, this machine's JDK 25 first on PATH as the image's
`java`) do what they do in a build; ENV, EXPOSE, USER and ENTRYPOINT are recorded. Anything else fails.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from harness import ports


@dataclasses.dataclass
class Stage:
    root: Path
    workdir: str = "/"
    entrypoint: list | None = None
    user: str | None = None
    env: dict = dataclasses.field(default_factory=dict)

    def path(self, inside: str) -> Path:
        return self.root / inside.lstrip("/")


def instructions(text: str):
    """(INSTRUCTION, rest) per logical line: comments dropped, backslash continuations joined."""
    text = re.sub(r"^\s*#.*\n", "", text, flags=re.M)
    text = re.sub(r"\\\n", " ", text)
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            yield word.upper(), rest.strip()


def ignored(ignore_file: Path | None):
    """A predicate for paths relative to the context, from a .dockerignore (patterns and ! exceptions)."""
    if ignore_file is None or not ignore_file.exists():
        return lambda rel: False
    rules = [(line.startswith("!"), line.lstrip("!").strip("/")) for line in
             (l.strip() for l in ignore_file.read_text().splitlines()) if line and not line.startswith("#")]

    def check(rel: str) -> bool:
        out = False
        for negate, pattern in rules:
            parts = rel.split("/")
            if any(fnmatch.fnmatch("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1)):
                out = not negate
        return out
    return check


def copy(sources: list[Path], dest: Path, many: bool, skip=lambda p: False) -> None:
    for src in sources:
        if src.is_dir():
            for f in sorted(src.rglob("*")):
                if f.is_file() and not skip(f):
                    target = dest / f.relative_to(src)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, target)
        else:
            target = dest / src.name if many or str(dest).endswith("/") or dest.is_dir() else dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def build(dockerfile: Path, context: Path, scratch: Path, args: dict, python: str | None = None,
          ignore: Path | None = None, skip_run=lambda cmd: False) -> Stage:
    """Runs the Dockerfile's steps; returns the last stage (its root stands for the image's filesystem)."""
    global_args: dict[str, str] = {}   # ARGs before the first FROM: usable in FROM lines only
    scope = global_args                 # after a FROM: that stage's own ARGs
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    is_ignored = ignored(ignore)
    rel = lambda p: str(Path(p).relative_to(context))  # noqa: E731
    path_env = os.pathsep.join(filter(None, [str(ports.java_home() / "bin"),
                                             str(Path(python).parent) if python else None, os.environ["PATH"]]))

    def expand(s: str, values: dict) -> str:
        out = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), m.group(0)), s)
        unresolved = re.findall(r"\$\{(\w+)\}", out)
        assert not unresolved, f"{dockerfile.name}: build argument(s) {unresolved} not set"
        return out

    for word, rest in instructions(dockerfile.read_text()):
        if word == "ARG":
            name, _, default = rest.partition("=")
            # a default may name the ARGs declared before it, as Docker expands it
            scope[name] = args.get(name, expand(default, scope) if default else global_args.get(name, ""))
            assert scope[name], f"{dockerfile.name}: ARG {name} has no value (pass it as a build argument)"
        elif word == "FROM":
            parts = expand(rest, global_args).split()
            stage = Stage(scratch / f"stage{len(stages)}")
            stage.root.mkdir(parents=True)
            stages[parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else str(len(stages))] = stage
            scope = {}
        elif word == "WORKDIR":
            stage.workdir = expand(rest, scope)
            stage.path(stage.workdir).mkdir(parents=True, exist_ok=True)
        elif word == "COPY":
            words = shlex.split(expand(rest, scope))
            flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--"))
            *srcs, dest = [w for w in words if not w.startswith("--")]
            if "from" in flags:
                origin = stages[flags["from"]]
                found = {s: [origin.path(s)] if origin.path(s).exists() else [] for s in srcs}
                skip = lambda p: False  # noqa: E731
            else:
                def kept(p: Path) -> bool:  # a directory is sent if anything inside it is
                    return any(not is_ignored(rel(f)) for f in p.rglob("*") if f.is_file()) if p.is_dir() \
                        else not is_ignored(rel(p))
                found = {s: [p for p in map(Path, sorted(glob.glob(str(context / s)))) if kept(p)] for s in srcs}
                skip = lambda p: is_ignored(rel(p))  # noqa: E731
            missing = [s for s, f in found.items() if not f]
            assert not missing, f"{dockerfile.name}: COPY sources missing (or excluded by .dockerignore): {missing}"
            sources = [p for f in found.values() for p in f]
            dest_path = stage.path(dest if dest.startswith("/") else f"{stage.workdir}/{dest}")
            copy(sources, dest_path, many=len(sources) > 1 or dest.endswith("/"), skip=skip)
        elif word == "RUN":
            command = expand(rest, scope)
            if skip_run(command):
                continue
            run = subprocess.run(["sh", "-c", command], cwd=stage.path(stage.workdir), capture_output=True, text=True,
                                 env=dict(os.environ, PATH=path_env), timeout=600)
            assert run.returncode == 0, f"{dockerfile.name}: RUN {command} failed:\n{(run.stdout + run.stderr)[-3000:]}"
        elif word == "ENTRYPOINT":
            stage.entrypoint = json.loads(rest)
        elif word == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                stage.env[key] = value
        elif word == "USER":
            stage.user = rest
        elif word == "EXPOSE":
            pass
        else:
            raise AssertionError(f"{dockerfile.name}: {word} is not handled by this check")
    return stage

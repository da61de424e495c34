"""The harness's layers, read from its source: the method at the bottom (records, rules, judges), the measuring
modules and the report beside each other above it (neither imports the other), the commands on top; no import
circle; an import inside a function says why; the scenario modules hold measuring code only."""
import ast
import re
from pathlib import Path

import pytest

from harness.paths import ROOT

HARNESS = ROOT / "harness"
# data and the registry of scenario names (it loads a scenario module by name only when asked)
BOTTOM = {"harness.errors", "harness.paths", "harness.settings", "harness.port_facts", "harness.scenarios"}
COMMANDS = {"harness.__main__", "harness.bench", "harness.verify", "harness.profile", "harness.generator_eval"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(HARNESS.rglob("*.py"))}


def imports(name: str) -> list[tuple[str, int, bool]]:
    """(imported harness module, line, inside a function) for each import of module `name`."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        found += [(t, node.lineno, id(node) in inside) for t in targets if t in MODULES]
    return found


def layer(name: str) -> str:
    if name in BOTTOM or name.startswith("harness.method"):
        return "method"
    if name == "harness.report" or name.startswith("harness.report."):
        return "report"
    if name in COMMANDS or name == "harness":
        return "command"
    return "measuring"


ALLOWED = {"method": {"method"}, "measuring": {"method", "measuring"}, "report": {"method", "report"},
           "command": {"method", "measuring", "report", "command"}}


def test_no_module_imports_from_a_higher_or_a_side_layer():
    wrong = [(name, target, line) for name in MODULES for target, line, _ in imports(name)
             if layer(target) not in ALLOWED[layer(name)]]
    assert not wrong, wrong


def test_the_import_graph_has_no_circle():
    graph = {name: {t for t, _, inner in imports(name) if not inner and t != name} for name in MODULES}
    # a package's __init__ is imported by its submodules' own import: only edges between modules count
    graph = {n: {t for t in ts if not n.startswith(t + ".")} for n, ts in graph.items()}
    state: dict[str, int] = {}

    def visit(node, trail):
        if state.get(node) == 1:
            pytest.fail("import circle: " + " -> ".join(trail[trail.index(node):] + [node]))
        if state.get(node) == 2:
            return
        state[node] = 1
        for target in sorted(graph[node]):
            visit(target, trail + [node])
        state[node] = 2
    for name in sorted(graph):
        visit(name, [])


def test_an_import_inside_a_function_says_why():
    silent = []
    for name in MODULES:
        lines = MODULES[name].read_text().splitlines()
        for _, line, inner in imports(name):
            if inner and "#" not in lines[line - 1] and not lines[line - 2].strip().startswith("#"):
                silent.append(f"{MODULES[name].relative_to(ROOT)}:{line}")
    assert not silent, silent


def long_literals(path: Path) -> int:
    """String literals of more than six words, docstrings aside."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    count = 0
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            count += len(" ".join(v.value for v in n.values if isinstance(v, ast.Constant)).split()) > 6
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs | inner:
            count += len(n.value.split()) > 6
    return count


def test_the_scenario_modules_hold_measuring_code_only():
    paths = sorted((HARNESS / "scenarios").glob("*.py"))
    assert not [p.name for p in paths if p.name != "__init__.py" and layer(module_name(p)) != "measuring"]
    too_long = {p.name: n for p in paths if (n := len(p.read_text().splitlines())) > 350}
    assert not too_long, too_long
    sentences = {p.name: long_literals(p) for p in paths}
    assert sum(sentences.values()) <= 15, sentences


def test_no_issue_numbers_or_dates_in_the_code_or_the_settings():
    found = [f"{p.relative_to(ROOT)}:{i}" for p in [*HARNESS.rglob("*.py"), *HARNESS.rglob("*.md"), ROOT / "bench.toml",
                                                     ROOT / "ports.toml", ROOT / "README.md"]
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"issue [0-9]+|2026-1[12]-|\b20[0-9]{6}T[0-9]{6}Z\b", line)]
    assert not found, found


def test_the_readme_is_a_map():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250 and max(map(len, lines)) <= 200
    for target in re.findall(r"\]\(([^)#]+)", "\n".join(lines)):     # every relative link names a file that exists
        assert target.startswith("http") or (ROOT / target).exists(), target

"""The prose written by hand that RESULTS.md includes (docs/verdict.md, docs/configuration.md, the sections'
passages in harness/report/text/) holds no measured figure: a number with a unit there is a declared setting or a
documented default, listed below with its source, so a measurement changing can never leave a stale number in it.
Measured figures live in the generated tables and sentences; notes about particular runs in docs/findings.md, which
RESULTS.md links and never includes."""
import re

from harness.paths import ROOT

INCLUDED = [ROOT / "docs" / "verdict.md", ROOT / "docs" / "configuration.md",
            *sorted((ROOT / "harness" / "report" / "text").glob("*.md"))]

# number + unit, e.g. "2,000 req/s", "16 KiB", "0.5x"
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(µs|ms|req/s|MiB|KiB|GiB|%|x)(?![\w/])")

DECLARED = {
    ("500", "ms"): "HikariCP lends a connection idle for over 500 ms only after isValid() (its documented default)",
    ("16", "KiB"): "the conformance suite's oversized Authorization header (tests/conformance)",
    ("200", "ms"): "the downstream latency the remedies are sized for (bench.toml [remedies])",
    ("2,000", "req/s"): "the rate the remedies are sized for (bench.toml [remedies])",
    ("512", "MiB"): "the fixed heap of every port (bench.toml [jvm])",
    ("250", "MiB"): "the JDK's threshold between its 25 % and 50 % default heap shares",
    ("25", "%"): "the JDK's default MaxRAMPercentage",
    ("50", "%"): "the JDK's default heap share below about 250 MiB",
    ("75", "%"): "the memory scenario's heap share (bench.toml [memory] max_ram_percentage)",
    ("1,000", "req/s"): "the AOT cache's training rate (bench.toml [startup] training_rate)",
    ("2", "x"): "the overload factor (bench.toml [faults] overload_factor)",
    ("0.5", "x"): "the rate after overload (bench.toml [faults] recover_factor)",
    ("0", "ms"): "loopback: no latency added (bench.toml [pinning] latencies_ms)",
}


def test_the_included_prose_holds_only_declared_figures():
    found = {(path.relative_to(ROOT).as_posix(), m.group(1), m.group(2))
             for path in INCLUDED for m in FIGURE.finditer(path.read_text())}
    undeclared = sorted(f for f in found if f[1:] not in DECLARED)
    assert not undeclared, undeclared


def test_the_included_prose_names_no_machine_by_an_internal_name():
    named = [(path.name, word) for path in INCLUDED for word in ("M1", "M2", "seed article")
             if re.search(rf"\b{word}\b", path.read_text())]
    assert not named, named


def test_the_findings_are_linked_not_included():
    text = (ROOT / "RESULTS.md").read_text()
    assert "](docs/findings.md)" in text
    first = (ROOT / "docs" / "findings.md").read_text().split("\n\n")[2]      # a paragraph of the notes
    assert first[:80] not in text

"""What each scenario's part of the report gives the whole: its section and its rows of the decision table."""
from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Decision:    # a row of the decision table at the top of RESULTS.md
    regime: str          # e.g. "CPU-bound on loopback (database answers in µs)"
    decided_by: str      # what decided the result, e.g. "CPU per request"
    choice: str          # the ports the data supports, e.g. "quarkus-vertx (above all others)"
    settings: str        # the settings to change, or "defaults"
    evidence: str = ""   # an anchor in RESULTS.md, e.g. "#baseline" (empty: the section's own, set by the report)


@dataclasses.dataclass
class Section:
    title: str
    anchor: str                                   # the heading's anchor, for links
    body: list[str]                               # Markdown lines under the heading
    appendix: list[str] = dataclasses.field(default_factory=list)     # step tables, in RESULTS-appendix.md
    decisions: list[Decision] = dataclasses.field(default_factory=list)
    verdict: list[str] = dataclasses.field(default_factory=list)      # generated sentences, numbers from JSON
    findings: list[str] = dataclasses.field(default_factory=list)     # the same kind, read in the section only
    warnings: list[str] = dataclasses.field(default_factory=list)     # printed above the section
    other_machine: bool = False                   # measured on another machine than the baseline (report.py)


TEXT = Path(__file__).parent / "text"


def text(name: str) -> str:
    """A passage of a section that does not depend on the figures, kept as Markdown in harness/report/text/ (a
    format placeholder such as {rate} is filled by the caller): changing a sentence is not a change to code."""
    return (TEXT / f"{name}.md").read_text().rstrip("\n")

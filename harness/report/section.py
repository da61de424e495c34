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


@dataclasses.dataclass(frozen=True)
class Regime:     # a row of the front page: its matrix row (one figure per port) and its line of the decision table
    name: str                            # in a Java engineer's words, e.g. "Database 5 ms away, pool of 16"
    decides: str                         # what decides it, e.g. "the connection pool: pool ÷ round-trip time"
    figures: dict                        # port -> Spread: the figure the row compares (median (min–max))
    unit: str = ""                       # after each figure, e.g. "req/s"
    higher_is_better: bool = True
    digits: int = 0
    notes: dict = dataclasses.field(default_factory=dict)   # port -> (text, score 0..1 or None): a port without a
                                                            # comparable figure ("died", "limited by its 200 threads")
    bound: dict = dataclasses.field(default_factory=dict)   # port -> the bound that held its figure ("its pool of
                                                            # 16"): shown, never ranked as a model
    remarks: dict = dataclasses.field(default_factory=dict)  # port -> a word after its figure ("died at 2,500")
    setting: str = "defaults"            # the one setting that matters here (a setting that was run)
    evidence: str = ""                   # an anchor (empty: the section's own)
    kind: str = ""                       # what its deciding figure is: BOUND, CPU or BOX (front.TRANSFER says what
                                         # each means on a bigger machine)


BOUND, CPU, BOX = "bound", "cpu", "box"


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
    regimes: list[Regime] = dataclasses.field(default_factory=list)   # its rows of the front page's matrix
    transfer: list[str] = dataclasses.field(default_factory=list)     # what a bigger machine keeps, as measured here
                                                                      # (the front page's bigger-machine list)
    answer: list[str] = dataclasses.field(default_factory=list)       # plain sentences for the front page's answer


TEXT = Path(__file__).parent / "text"


def text(name: str) -> str:
    """A passage of a section that does not depend on the figures, kept as Markdown in harness/report/text/ (a
    format placeholder such as {rate} is filled by the caller): changing a sentence is not a change to code."""
    return (TEXT / f"{name}.md").read_text().rstrip("\n")

"""The one pass rule, stated once in bench.toml [rule] and applied by every scenario.

A constant-rate step passes when the generator kept its own schedule, >= min_achieved of the target rate was
served, with no errors, and p99 <= p99_ms plus the latency the request cannot avoid: round_trips_per_wait x the
latency added to each wait (a database round trip through the latency proxy, a downstream call). A request
alone takes one round trip per wait; at p99 an idle connection already shows two (HikariCP pings a connection
idle for over 500 ms before lending it; r2dbc-mysql pings on every release), hence the factor in bench.toml.
"""
from __future__ import annotations

import dataclasses

# Why a step failed. GENERATOR is the generator's failure, never the port's: the step says nothing of the port.
GENERATOR = "generator behind its schedule"
RATE = "rate not reached"
ERRORS = "errors"
LATENCY = "p99 over the SLO"
NO_ANSWERS = "no answers"


@dataclasses.dataclass(frozen=True)
class Rule:
    p99_ms: float
    round_trips_per_wait: float
    min_achieved: float

    @classmethod
    def from_settings(cls, settings: dict) -> "Rule":
        from .plan import section
        return section(settings, "rule", cls)

    def slo_ms(self, added_ms: float = 0.0) -> float:
        """The p99 bound for a request whose waits add `added_ms` in total (e.g. N lookups x DB latency)."""
        return round(self.p99_ms + self.round_trips_per_wait * added_ms, 3)

    def failure(self, *, target_rps: float, achieved_rps: float, errors: int, p99_ms: float | None,
                generator_behind: bool, slo_ms: float) -> str | None:
        """Why a step fails, or None when it passes."""
        if generator_behind:
            return GENERATOR
        if p99_ms is None:
            return NO_ANSWERS
        if achieved_rps < self.min_achieved * target_rps:
            return RATE
        if errors:
            return ERRORS
        if p99_ms > slo_ms:
            return LATENCY
        return None

    def describe(self) -> str:
        return (f"p99 ≤ {self.p99_ms:g} ms + {self.round_trips_per_wait:g} × the latency added to each wait, "
                f"0 errors, ≥ {self.min_achieved:.0%} of the target rate served, the generator on its schedule")

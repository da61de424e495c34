"""The one pass rule, stated once in bench.toml [rule] and applied by every scenario.

A constant-rate step passes when >= min_achieved of the target rate was served, with no errors, p99 <= p99_ms plus
the latency the request cannot avoid, and the generator kept its own schedule. A failure is blamed on what failed:
the port's whenever its own criteria fail (rate served, errors, p99), whatever the generator did, since on a box the
generator shares, saturating the cores is the port's failure; the generator's only when it alone failed: it fell
behind its schedule (or its thread was saturated) while the port's criteria held, or the rate was not served with
every connection busy while the port answered within the SLO without errors. The latency the request cannot avoid: round_trips_per_wait x the
latency added to each wait (a database round trip through the latency proxy, a downstream call). A request
alone takes one round trip per wait; at p99 an idle connection already shows two (HikariCP pings a connection
idle for over 500 ms before lending it; r2dbc-mysql pings on every release), hence the factor in bench.toml.
"""
from __future__ import annotations

import dataclasses

from .plan import section

# Why a step failed. GENERATOR: the generator alone failed (the port's criteria held): the step says nothing of the port.
GENERATOR = "generator behind its schedule"
RATE = "rate not reached"
ERRORS = "errors"
LATENCY = "p99 over the SLO"
NO_ANSWERS = "no answers"


def all_connections_busy(max_in_flight: int | None, connections: int | None) -> bool:
    """Every generator connection was in flight at once: failure()'s `connections_busy`."""
    return (max_in_flight or 0) >= (connections or float("inf"))


@dataclasses.dataclass(frozen=True)
class Rule:
    p99_ms: float
    round_trips_per_wait: float
    min_achieved: float

    @classmethod
    def from_settings(cls, settings: dict) -> "Rule":
        return section(settings, "rule", cls)

    def slo_ms(self, added_ms: float = 0.0) -> float:
        """The p99 bound for a request whose waits add `added_ms` in total (e.g. N lookups x DB latency)."""
        return round(self.p99_ms + self.round_trips_per_wait * added_ms, 3)

    def failure(self, *, target_rps: float, achieved_rps: float, errors: int, p99_ms: float | None,
                generator_behind: bool, slo_ms: float, connections_busy: bool = False) -> str | None:
        """Why a step fails, or None when it passes: the port's own criteria first, the generator only when it alone
        failed (`connections_busy`: every generator connection was in flight at once)."""
        if p99_ms is None:
            return NO_ANSWERS
        if achieved_rps < self.min_achieved * target_rps:
            return GENERATOR if connections_busy and not errors and p99_ms <= slo_ms else RATE
        if errors:
            return ERRORS
        if p99_ms > slo_ms:
            return LATENCY
        if generator_behind:
            return GENERATOR
        return None

    def judge(self, step: dict) -> str | None:
        """failure() of a constant-rate step as a record holds it (flat JSON), against the SLO it was judged by (and
        the rate its schedule offered, where arrivals were random)."""
        return self.failure(target_rps=step.get("offered_rps", step["target_rps"]), achieved_rps=step.get("achieved_rps", 0.0),
                            errors=sum((step.get("errors") or {}).values()), p99_ms=(step.get("latency_ms") or {}).get("p99"),
                            generator_behind=bool(step.get("generator_behind")), slo_ms=step["slo_ms"],
                            connections_busy=all_connections_busy(step.get("max_in_flight"), step.get("connections")))

    def describe(self) -> str:
        return (f"p99 ≤ {self.p99_ms:g} ms + {self.round_trips_per_wait:g} × the latency added to each wait, "
                f"0 errors, ≥ {self.min_achieved:.0%} of the target rate served, the generator on its schedule")

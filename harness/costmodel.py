"""The cost model of issue 18: what a port's CPU per request would be on another machine.

App CPU per request = user-space work + kernel work. User-space work scales with the CPU's single-thread speed
(calibration: sysbench cpu events/s). Kernel work is modelled as k x context switches per request x the machine's
cross-CPU wake-up cost (calibration: pipe round trip across CPUs); the switches are counts of the design, not of
the machine (harness/kernel.py), and k, kernel µs per switch per µs of wake-up, is one constant fitted over the
ports of one run (least squares through the origin). Nothing else is fitted: the prediction for another machine
takes the two calibrations and these counts.

How well it holds is reported, never tuned: the fit's own error per port on the machine it was fitted on, and,
where a second calibrated run of the same ports exists, the error of its prediction there (`predict`)."""
from __future__ import annotations

import dataclasses
import statistics


@dataclasses.dataclass(frozen=True)
class Cost:
    """One port's median cost per request at the common rate of one run."""
    port: str
    user_us: float
    system_us: float
    switches: float            # voluntary + involuntary context switches of the app per request

    @property
    def total_us(self) -> float:
        return self.user_us + self.system_us


def costs(by_label: dict[str, list[dict]]) -> list[Cost]:
    """Per port: medians over the iterations' passing common-rate steps (baseline records)."""
    out = []
    for label, records in by_label.items():
        steps = [s for r in records for s in r.get("steps", []) if s.get("phase") == "common" and s.get("passed")]
        rows = [(s["app_user_us_per_request"], s["app_system_us_per_request"],
                 s["kernel"]["app_ctx_voluntary_per_request"] + s["kernel"]["app_ctx_involuntary_per_request"])
                for s in steps if s.get("app_user_us_per_request") is not None
                and s.get("app_system_us_per_request") is not None
                and "app_ctx_voluntary_per_request" in (s.get("kernel") or {})]
        if rows:
            out.append(Cost(label, *(statistics.median(col) for col in zip(*rows))))
    return out


def fit(found: list[Cost], wakeup_us: float) -> float | None:
    """k in system_us = k x switches x wakeup_us, least squares through the origin over the ports."""
    xs = [c.switches * wakeup_us for c in found]
    denominator = sum(x * x for x in xs)
    if not found or not denominator:
        return None
    return sum(x * c.system_us for x, c in zip(xs, found)) / denominator


def predict(cost: Cost, k: float, here: dict, there: dict) -> float:
    """App CPU µs per request on the machine calibrated as `there`, from a run calibrated as `here`."""
    speed = here["cpu_single_thread_events_per_s"]["median"] / there["cpu_single_thread_events_per_s"]["median"]
    return cost.user_us * speed + k * cost.switches * there["wakeup_cross_cpu_us"]["median"]


def relative_errors(found: list[Cost], k: float, wakeup_us: float) -> dict[str, float]:
    """The fit's own error on the machine it was fitted on: (modelled - measured) / measured total, per port."""
    return {c.port: (c.user_us + k * c.switches * wakeup_us - c.total_us) / c.total_us for c in found}


def report(by_label: dict[str, list[dict]], calibration: dict | None) -> list[str]:
    """Markdown lines for RESULTS.md: the fit on this run, and which ranking depends on the kernel's costs."""
    found = costs(by_label)
    if len(found) < 2 or not calibration or "wakeup_cross_cpu_us" not in calibration:
        return []
    wakeup = calibration["wakeup_cross_cpu_us"]["median"]
    k = fit(found, wakeup)
    if k is None:
        return []
    errors = relative_errors(found, k, wakeup)
    by_total = [c.port for c in sorted(found, key=lambda c: c.total_us)]
    by_user = [c.port for c in sorted(found, key=lambda c: c.user_us)]
    share = [c.system_us / c.total_us for c in found]
    return [
        "**Cost model** (harness/costmodel.py): app CPU per request = user-space work (scales with the CPU's speed) + "
        f"k × context switches × cross-CPU wake-up ({wakeup:.1f} µs here). Fitted over the {len(found)} ports at the "
        f"common rate: k = {k:.2f} (kernel µs per switch = {k * wakeup:.1f}); the model's error per port on this "
        "machine: " + ", ".join(f"{p} {e:+.0%}" for p, e in errors.items()) + ". Kernel time is "
        f"{min(share):.0%}–{max(share):.0%} of app CPU per request here. By median app CPU per request the ports go "
        f"{' < '.join(by_total)}; by median user-space work alone (a machine where wake-ups cost nothing) "
        + ("the same order" if by_user == by_total else ' < '.join(by_user) + " (a different order: the kernel's "
           "costs decide part of this ranking)") + ". Its prediction for another machine needs a calibrated run of "
        "the same ports there (`predict`); none exists yet, so how well it transfers is not known.", ""]


def transfer(published: dict[str, list[dict]], published_cal: dict | None, yours: dict[str, list[dict]],
             yours_cal: dict | None) -> list[str]:
    """A reader's baseline beside the published one: each port's app CPU per request predicted for the reader's
    machine from the published run and the two calibrations, against what the reader's run measured."""
    if not published_cal or not yours_cal:
        return []
    mine = {c.port: c for c in costs(yours)}
    found = costs(published)
    k = fit(found, published_cal["wakeup_cross_cpu_us"]["median"]) if len(found) > 1 else None
    rows = [(c.port, predict(c, k, published_cal, yours_cal), mine[c.port].total_us)
            for c in found if c.port in mine] if k is not None else []
    if not rows:
        return []
    return ["App CPU per request at the common rate, predicted for your machine by the cost model (the published "
            "run's user-space work scaled by the CPU speeds, its context switches by your wake-up cost) against "
            "what your run measured:", "",
            "| port | predicted (µs) | measured (µs) | error |", "|---|---:|---:|---:|",
            *[f"| {port} | {p:,.0f} | {m:,.0f} | {(p - m) / m:+.0%} |" for port, p, m in rows], ""]


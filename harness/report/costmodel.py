"""The cost model: what a port's CPU per request would be on another machine.

App CPU per request = user-space work + kernel work. User-space work scales with the CPU's single-thread speed
(calibration: sysbench cpu events/s). Kernel work is modelled as k x context switches per request x the machine's
cross-CPU wake-up cost (calibration: pipe round trip across CPUs); the switches are counts of the design, not of
the machine (harness/kernel.py), and k, kernel µs per switch per µs of wake-up, is one constant fitted over the
ports of one run (least squares through the origin). Nothing else is fitted: the prediction for another machine
takes the two calibrations and these counts.

How well it holds is reported, never tuned: the fit's own error per port on the machine it was fitted on, and,
where a calibrated baseline of the same ports exists on a second machine (published.json's
"baseline-second-machine", or a reader's run), the error of its prediction there, beside the error of the naive
model (total CPU scaled by CPU speed alone) and the MST orders that hold on both machines (`cross_machine`)."""
from __future__ import annotations

import dataclasses
import statistics

from ..method import spans
from ..method.record import steps_of


@dataclasses.dataclass(frozen=True)
class Cost:
    """One port's cost per request at the common rate of one run: each figure the median over the runs whose
    common step passed."""
    port: str
    user_us: float             # the median of the runs' user-space µs per request
    system_us: float           # the median of the runs' kernel µs per request
    switches: float            # voluntary + involuntary context switches of the app per request
    total_us: float            # the median of the runs' user + kernel (the baseline table's app µs/req), not the
                               # sum of the two medians above
    runs: int = 1              # the runs behind the figures
    of: int = 0                # the common steps measured, where more than `runs` (some failed or lack a value)

    @property
    def partial(self) -> bool:
        return self.of > self.runs

    def runs_text(self) -> str:
        """The run count beside a figure ("(2 of 3 runs)") when fewer runs than measured give it, else nothing."""
        return f" ({self.runs} of {self.of} runs)" if self.partial else ""


def _total(step: dict) -> float:
    """A step's app CPU per request as the baseline table takes it (app_cpu_us_per_request), else user + kernel."""
    total = step.get("app_cpu_us_per_request")
    return total if total is not None else step["app_user_us_per_request"] + step["app_system_us_per_request"]


def costs(by_label: dict[str, list[dict]]) -> list[Cost]:
    """Per port: medians over the iterations' passing common-rate steps (baseline records), the total the median of
    each run's total, with the count of the common steps measured."""
    out = []
    for label, records in by_label.items():
        measured = [s.to_json() for r in records for s in steps_of(r, "common")]
        rows = [(s["app_user_us_per_request"], s["app_system_us_per_request"],
                 s["kernel"]["app_ctx_voluntary_per_request"] + s["kernel"]["app_ctx_involuntary_per_request"],
                 _total(s))
                for s in measured if s.get("passed") and s.get("app_user_us_per_request") is not None
                and s.get("app_system_us_per_request") is not None
                and "app_ctx_voluntary_per_request" in (s.get("kernel") or {})]
        if rows:
            out.append(Cost(label, *(statistics.median(col) for col in zip(*rows)), runs=len(rows),
                            of=len(measured)))
    return out


def fit(found: list[Cost], wakeup_us: float) -> float | None:
    """k in system_us = k x switches x wakeup_us, least squares through the origin over the ports."""
    xs = [c.switches * wakeup_us for c in found]
    denominator = sum(x * x for x in xs)
    if not found or not denominator:
        return None
    return sum(x * c.system_us for x, c in zip(xs, found)) / denominator


def user_scale(here: dict, there: dict) -> float:
    """How much longer user-space work takes on the machine calibrated as `there` than `here`: by the JVM workload
    (µs per operation) when both calibrations measured it, else by sysbench cpu (events/s), which mispredicted
    the ports' JVM work across machines by -41 % to +147 %."""
    jvm = "jvm_work_us_per_op"
    if here.get(jvm) and there.get(jvm):
        return there[jvm]["median"] / here[jvm]["median"]
    return here["cpu_single_thread_events_per_s"]["median"] / there["cpu_single_thread_events_per_s"]["median"]


def predict(cost: Cost, k: float, here: dict, there: dict) -> float:
    """App CPU µs per request on the machine calibrated as `there`, from a run calibrated as `here`."""
    return cost.user_us * user_scale(here, there) + k * cost.switches * there["wakeup_cross_cpu_us"]["median"]


def relative_errors(found: list[Cost], k: float, wakeup_us: float) -> dict[str, float]:
    """The fit's own error on the machine it was fitted on: (modelled - measured) / measured total, per port."""
    return {c.port: (c.user_us + k * c.switches * wakeup_us - c.total_us) / c.total_us for c in found}


@dataclasses.dataclass(frozen=True)
class Machine:
    """One calibrated baseline run set: the ports' records by label and the machine's calibration."""
    name: str
    by_label: dict[str, list[dict]]
    calibration: dict


def _wakeup(m: Machine) -> float:
    return m.calibration["wakeup_cross_cpu_us"]["median"]


def _speed(m: Machine) -> float:
    return m.calibration["cpu_single_thread_events_per_s"]["median"]


def predictions(source: Machine, target: Machine) -> list[tuple[str, float, float, float]]:
    """Per port measured on both: (port, the model's prediction for `target` fitted on `source`, the naive
    prediction (total CPU scaled by CPU speed alone), what `target` measured). [] when the model cannot be fitted."""
    found = costs(source.by_label)
    k = fit(found, _wakeup(source)) if len(found) > 1 else None
    measured = {c.port: c.total_us for c in costs(target.by_label)}
    if k is None:
        return []
    return [(c.port, predict(c, k, source.calibration, target.calibration),
             c.total_us * user_scale(source.calibration, target.calibration), measured[c.port])
            for c in found if c.port in measured]


def _error(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured


def _ratio_span(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def _span(values: list[float]) -> str:
    return f"{min(values):.0f}–{max(values):.0f}" if values else "–"


def _parts(c: Cost) -> str:
    """The machine table's app CPU cell: the median of the runs' totals (the baseline table's figure), with its run
    count when fewer runs than measured give it, and the user and kernel parts, each its own median (so the two
    need not add up to the total)."""
    runs = f"{c.runs} of {c.of} runs; " if c.partial else ""
    return f"{c.total_us:,.0f} ({runs}user {c.user_us:,.0f}, kernel {c.system_us:,.0f})"


def _error_span(errors: list[float]) -> str:
    return f"{min(errors):+.0%} to {max(errors):+.0%}"


def report(by_label: dict[str, list[dict]], calibration: dict | None, second: Machine | None = None) -> list[str]:
    """Markdown lines for RESULTS.md: the fit on this run, which ranking depends on the kernel's costs, and how
    well the model transfers to `second` (the same ports calibrated on another machine), when there is one."""
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
    rows = predictions(Machine("", by_label, calibration), second) if second else []
    transfer_text = (f"Fitted here, it predicted the app CPU per request that {second.name} measured with errors "
                     f"of {_error_span([_error(p, m) for _, p, _, m in rows])} (per port in the table below)."
                     if rows else "Its prediction for another machine needs a calibrated run of the same ports "
                     "there (`predict`); none exists yet, so how well it transfers is not known.")
    return [
        "**Cost model** (harness/costmodel.py): app CPU per request = user-space work (scales with the CPU's speed) + "
        f"k × context switches × cross-CPU wake-up ({wakeup:.1f} µs here). Fitted over the {len(found)} ports at the "
        f"common rate: k = {k:.2f} (kernel µs per switch = {k * wakeup:.1f}); the model's error per port on this "
        "machine: " + ", ".join(f"{c.port} {errors[c.port]:+.0%}{c.runs_text()}" for c in found) + ". Kernel time is "
        f"{min(share):.0%}–{max(share):.0%} of app CPU per request here. By median app CPU per request the ports go "
        f"{' < '.join(by_total)}; by median user-space work alone (a machine where wake-ups cost nothing) "
        + ("the same order" if by_user == by_total else ' < '.join(by_user) + " (a different order: the kernel's "
           "costs decide part of this ranking)") + ". " + transfer_text, ""]


def transfer(published: dict[str, list[dict]], published_cal: dict | None, yours: dict[str, list[dict]],
             yours_cal: dict | None) -> list[str]:
    """A reader's baseline beside the published one: each port's app CPU per request predicted for the reader's
    machine from the published run and the two calibrations, against what the reader's run measured."""
    if not published_cal or not yours_cal:
        return []
    rows = predictions(Machine("published", published, published_cal), Machine("yours", yours, yours_cal))
    if not rows:
        return []
    return ["App CPU per request at the common rate, predicted for your machine by the cost model (the published "
            "run's user-space work scaled by the CPU speeds, its context switches by your wake-up cost) against "
            "what your run measured:", "",
            "| port | predicted (µs) | measured (µs) | error |", "|---|---:|---:|---:|",
            *[f"| {port} | {p:,.0f} | {m:,.0f} | {_error(p, m):+.0%} |" for port, p, _, m in rows], ""]


def orders(first: dict[str, spans.Spread], second: dict[str, spans.Spread]
           ) -> tuple[list[str], list[str], list[str]]:
    """The pairwise MST orders of two run sets of the same ports: those that hold on both machines ("A > B"),
    those that differ ("A > B on the first, tied on the second", ...), and of those the ones reversed (A above B on
    one machine, below it on the other). Ties on both are neither."""
    ports = [p for p in first if p in second]
    held, differ, reversed_ = [], [], []
    for i, a in enumerate(ports):
        for b in ports[i + 1:]:
            one, two = spans.compare(first[a], first[b]), spans.compare(second[a], second[b])
            if one == two and one in ("=", "?"):
                continue
            hi, lo = (a, b) if ">" in (one, two) else (b, a)
            if one == two:
                held.append(f"{hi} > {lo}")
            else:
                word = {">": f"{a} > {b}", "<": f"{b} > {a}", "=": "tied",
                        "?": "unsettled (a bound or a partial figure)"}
                differ.append(f"{hi} vs {lo}: {word[one]} on the first, {word[two]} on the second")
                if {one, two} == {">", "<"}:
                    reversed_.append(differ[-1])
    return held, differ, reversed_


def cross_machine(first: Machine, second: Machine, mst_first: dict[str, spans.Spread],
                  mst_second: dict[str, spans.Spread]) -> tuple[list[str], list[str]]:
    """The baseline on two calibrated machines: RESULTS.md lines (calibrations, CPU per request measured and
    predicted each way with the model's and the naive model's errors, MSTs side by side) and the verdict's
    sentences (which MST orders hold on both, how well the model predicted)."""
    ahead, back = predictions(first, second), predictions(second, first)
    if not ahead or not back:
        return [], []
    back_by = {port: row for port, *row in back}
    mine = {c.port: c for c in costs(first.by_label)}
    theirs = {c.port: c for c in costs(second.by_label)}
    kernel = lambda m: m.calibration.get("kernel", "?")  # noqa: E731
    lines = [f"**The baseline on a second machine.** {first.name}: the machine above (kernel {kernel(first)}); "
             f"{second.name}: another machine of the same kind (kernel {kernel(second)}), calibrated in the second "
             "column of the table above. App CPU per request at the common rate measured on each (the median of the "
             "runs' user + kernel, the baseline table's figure; beside it the user and kernel parts, each its own "
             "median, so they need not add up to it), and predicted "
             "for each from the other by the cost model (fitted on the machine it predicts from) and by CPU speed "
             "alone; MSTs side by side.", ""]
    lines += ["| port | MST: " + first.name + " | MST: " + second.name + " | app µs/req: " + first.name
              + " (user, kernel: medians of each) | app µs/req: " + second.name
              + " (user, kernel: medians of each) | cs/req: " + first.name
              + " / " + second.name + " | model → " + second.name + " (error) | model → " + first.name
              + " (error) | CPU speed alone → " + second.name + " (error) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    model_errors, naive_errors = [], []
    for port, predicted, naive, measured in ahead:
        back_predicted, _, back_measured = back_by.get(port, (None, None, None))
        a, b = mine[port], theirs[port]
        errors = [_error(predicted, measured)] + ([_error(back_predicted, back_measured)] if back_predicted else [])
        model_errors += errors
        naive_errors.append(_error(naive, measured))
        lines.append(f"| {port} | {spans.span(mst_first.get(port))} | "
                     f"{spans.span(mst_second.get(port))} | "
                     f"{_parts(a)} | {_parts(b)} | "
                     f"{a.switches:.2f} / {b.switches:.2f} | {predicted:,.0f} ({errors[0]:+.0%}) | "
                     + (f"{back_predicted:,.0f} ({errors[1]:+.0%})" if back_predicted else "–")
                     + f" | {naive:,.0f} ({_error(naive, measured):+.0%}) |")
    held, differ, reversed_ = orders(mst_first, mst_second)
    worst = max(abs(e) for e in model_errors)
    # what no calibrated figure is fitted to: how uniformly the ports' measured costs moved between the machines
    moved = [theirs[port].total_us / mine[port].total_us for port, *_ in ahead]
    user = [theirs[port].user_us / mine[port].user_us for port, *_ in ahead]
    per_switch = lambda found: [c.system_us / c.switches for c in found.values() if c.switches]  # noqa: E731
    moved_text = (f"{second.name}'s measured app CPU per request is {_ratio_span(moved)}x {first.name}'s across "
                  "the ports")
    lines += ["", f"- MST orders that hold on both machines: {', '.join(held) or 'none'}.",
              f"- MST orders that differ: {'; '.join(differ) or 'none'}.",
              f"- The model's errors: {_error_span(model_errors)} (both directions); CPU speed alone: "
              f"{_error_span(naive_errors)} ({first.name} → {second.name}); {moved_text}.",
              f"- The model's two terms, measured: user-space work on {second.name} is {_ratio_span(user)}x "
              f"{first.name}'s (the CPU speeds predict {_speed(first) / _speed(second):.2f}x); kernel µs per context "
              f"switch is {_span(per_switch(mine))} on {first.name} and {_span(per_switch(theirs))} on {second.name}, "
              f"while the cross-CPU wake-up calibrates at {_wakeup(first):.1f} and {_wakeup(second):.1f} µs.", ""]
    verdict = [f"On a second machine of the same kind (CPU {_speed(second) / _speed(first):.1f}x "
               f"{first.name}'s single-thread speed, cross-CPU wake-ups {_wakeup(second) / _wakeup(first):.1f}x "
               f"its cost) the baseline's MST orders that hold on both are: {', '.join(held) or 'none'}"
               + (f"; {len(differ)} pairwise order(s) differ, "
                  + (f"{len(reversed_)} of them reversed ({'; '.join(reversed_)})" if reversed_ else
                     "none reversed (a tie, a bound or a partial figure on one of the machines)")
                  if differ else "") + ".",
               cpu_orders(mine, theirs, first.name, second.name)]
    model = (f"The cost model (user-space work × CPU speed + context switches × wake-up cost) predicted app CPU "
             f"per request on the other machine with errors of {_error_span(model_errors)}, CPU speed alone "
             f"{_error_span(naive_errors)}: "
             + ("it transfers within ±25 %, so per-request costs can be rescaled by `just calibrate`'s two "
                "figures" if worst <= 0.25 else "it does not predict within ±25 %, so per-request costs measured "
                "here do not rescale to another machine by these two figures; compare rankings, not numbers")
             + f" ({moved_text}).")
    # a model that does not predict stays out of the verdict: it is stated in the section only
    if worst <= 0.25:
        verdict.append(model)
    else:
        lines += [f"- {model}", ""]
    return lines, verdict


def cpu_orders(mine: dict[str, Cost], theirs: dict[str, Cost], first: str, second: str) -> str:
    """The ports by median app CPU per request on each machine, cheapest first: the figure that moved least."""
    ports = [p for p in mine if p in theirs]
    a = sorted(ports, key=lambda p: mine[p].total_us)
    b = sorted(ports, key=lambda p: theirs[p].total_us)
    same = "the same order on both" if a == b else f"on {second}: {' < '.join(b)}"
    return (f"By median app CPU per request at the common rate the ports go {' < '.join(a)} on {first}; {same}.")

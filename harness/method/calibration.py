"""Two machines' calibrations compared (record-level: read by the measuring commands and by the report alike):
the metrics a calibration holds, the sentences naming where two differ by more than their noise, and the table
that shows them side by side."""
from __future__ import annotations

GENERATOR_RATE = 5000          # openloop against nginx: req/s (in a metric's label, so not a setting)

# key, label, unit, which way is better, noise floor (relative), absolute tolerance. The floors come from repeated
# calibrations of one quiet VM: wake-ups and loopback moved 1.4x between runs minutes apart (10.5-15.1 µs; the
# host places the vCPUs anew), CPU speed 1.15x, the generator's CPU is counted in 10-ms ticks (±1 µs of ~20).
METRICS = [
    # 20 %: eight calibrations of one VM in one day (uptime unbroken) put the median at 14,270-19,320 selects/s,
    # and two of them, 55 min apart, 1.35x apart with ranges that a 10 % floor kept apart
    ("db_ceiling_selects_per_s", "DB ceiling (sysbench point select)", "selects/s", "higher", 0.20, 0.0),
    ("cpu_single_thread_events_per_s", "CPU speed, one thread (sysbench cpu)", "events/s", "higher", 0.15, 0.0),
    ("jvm_work_us_per_op", "JVM work, one warmed thread (HS256 verify + JSON of a row)", "µs", "lower", 0.15, 0.0),
    ("wakeup_cross_cpu_us", "Wake-up across CPUs (pipe round trip)", "µs", "lower", 0.25, 0.0),
    ("wakeup_same_cpu_us", "Wake-up on one CPU (pipe round trip)", "µs", "lower", 0.25, 0.0),
    ("syscall_ns", "System call (getppid)", "ns", "lower", 0.15, 0.0),
    ("loopback_rtt_us", "Loopback TCP round trip (1 byte)", "µs", "lower", 0.25, 0.0),
    ("generator_us_per_request", f"Generator CPU per request (openloop, {GENERATOR_RATE:,}/s to nginx)", "µs",
     "lower", 0.15, 0.0),
    # steal is near 0 on a quiet host: a difference below one percentage point is not one
    ("steal_percent", "CPU steal during the calibration", "%", "lower", 0.10, 1.0),
]


# --- comparing ----------------------------------------------------------------------------------------------

def _band(m: dict, floor: float, tolerance: float) -> tuple[float, float]:
    """[low, high] widened by max(floor, the metric's own relative spread), by that factor both ways."""
    median, low, high = m["median"], m["low"], m["high"]
    widen = 1 + max(floor, (high - low) / median if median > 0 else 0.0)
    return low / widen - tolerance, high * widen + tolerance


def _metric(x) -> bool:
    return isinstance(x, dict) and all(isinstance(x.get(k), (int, float)) for k in ("median", "low", "high"))


def differences(a: dict, b: dict) -> list[str]:
    """One sentence per metric on which calibration `a` (this machine) and `b` differ by more than their noise:
    the ranges [low, high], each widened by max(the metric's floor (10-25 %), its own relative spread), do not
    overlap (with a 10 % floor, medians 1.21x apart and tight ranges differ).
    [] when they agree. Metrics missing from either are skipped."""
    out = []
    if isinstance(a.get("cpus"), int) and isinstance(b.get("cpus"), int) and a["cpus"] != b["cpus"]:
        out.append(f"CPUs: {a['cpus']} here vs {b['cpus']}.")
    for key, label, unit, better, floor, tolerance in METRICS:
        x, y = a.get(key), b.get(key)
        if not (_metric(x) and _metric(y)):
            continue
        (lo_x, hi_x), (lo_y, hi_y) = _band(x, floor, tolerance), _band(y, floor, tolerance)
        if lo_x <= hi_y and lo_y <= hi_x:
            continue
        if key == "steal_percent":
            verdict = f"{x['median'] - y['median']:+.1f} percentage points"
        else:
            ratio = x["median"] / y["median"] if y["median"] > 0 else float("inf")
            worse = ratio < 1 if better == "higher" else ratio > 1
            factor = max(ratio, 1 / ratio) if ratio > 0 else float("inf")
            verdict = f"{factor:.1f}x {'slower' if worse else 'faster'}"
        out.append(f"{label}: {_cell(x)} vs {_cell(y)}, {verdict}.")
    return out


def _number(x: float) -> str:
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _cell(m) -> str:
    if not _metric(m):
        return "–"
    return f"{_number(m['median'])} {m.get('unit', '')} ({_number(m['low'])}–{_number(m['high'])})".replace("  ", " ")


def table(cal: dict, other: dict | None = None, other_name: str = "published",
          this_name: str = "This machine") -> list[str]:
    """Markdown lines: metric | this machine: median (low–high) | the other calibration, if given."""
    cols = ["Metric", this_name] + ([other_name] if other is not None else [])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for key, label, *_ in METRICS:
        if key in cal or (other is not None and key in other):
            row = [label, _cell(cal.get(key))] + ([_cell(other.get(key))] if other is not None else [])
            lines.append("| " + " | ".join(row) + " |")
    for key, label in (("cpus", "CPUs"), ("cpu_model", "CPU model"), ("kernel", "Kernel"),
                       ("seconds", "Calibration took (s)")):
        row = [label, str(cal.get(key, "–"))] + ([str(other.get(key, "–"))] if other is not None else [])
        lines.append("| " + " | ".join(row) + " |")
    return lines

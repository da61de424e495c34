"""The typed records every scenario writes and the report reads: a constant-rate step (flat in JSON, its `extra`
fields beside the others), an MST search, a warm-up; and their readers from a record's JSON."""
from __future__ import annotations

import dataclasses

from .constants import MIN_RATE  # noqa: F401 (why: method/constants.py)
from . import spans
from .spans import Spread, cell, num, spread



# The rate grids a search tries its rates on (an Mst records its own). The first one's step was 10 req/s below
# 1,000 and 100 above: 10-12 % at the slow cells' 80-150 req/s and at 1,000, wider than the 5 % the search bisects
# to. FINE's step is the largest 1, 2 or 5 x 10^n req/s within 2.5 % of the rate (1 req/s at least), so bisection
# reaches 5 % at every rate above 40 req/s. TENTHS goes down to 0.1 req/s, so it reaches 5 % below 40 req/s too,
# where the pool-bound downstream cells lie (8 connections / (3 x 0.2 s) = 13.3 req/s; 1 req/s there is 7-12 %);
# wrk2 takes whole req/s only (its -R), so with wrk2 the search stays on FINE.
COARSE, FINE, TENTHS = "10/100", "1-2-5", "1-2-5/0.1"
GRIDS = {COARSE: "10 req/s below 1,000 and 100 above",
         FINE: "the largest 1, 2 or 5 × 10ⁿ req/s within 2.5% of the rate, 1 req/s at least",
         TENTHS: "the largest 1, 2 or 5 × 10ⁿ req/s within 2.5% of the rate, 0.1 req/s at least"}


def grid_step(rate: float, grid: str = FINE) -> float:
    """The rate grid's step at `rate` (round_rate): the finest a search can tell two rates apart there."""
    if grid == COARSE:
        return 100 if rate >= 1000 else 10
    least = -1 if grid == TENTHS else 0
    step = 10 ** least
    for n in range(least, 7):
        for unit in (1, 2, 5):
            if unit * 10 ** n <= rate / 40:
                step = unit * 10 ** n
    return step


def round_rate(rate: float, grid: str = FINE) -> float:
    """Rates are tried on a grid (grid_step), so iterations land on comparable values; whole rates stay ints."""
    step = grid_step(rate, grid)
    if step >= 1:
        return max(1, int(round(rate / step)) * step)
    value = max(step, round(round(rate / step) * step, 1))
    return int(value) if value == int(value) else value


@dataclasses.dataclass
class Step:
    """One measured step at a constant rate (target_rps) or a closed loop (target_rps None)."""
    phase: str
    target_rps: float | None
    achieved_rps: float
    connections: int
    seconds: float
    requests: int
    errors: dict
    statuses: dict
    latency_ms: dict                       # p50 ... p99.99, max, from each request's intended send time
    generator: str
    generator_behind: bool = False
    send_lag_ms: dict | None = None
    slo_ms: float | None = None            # the rule's bound this step was judged against
    failure: str | None = None             # rule.* reason, None when it passed (closed loops: None)
    generator_cpu_cores: float | None = None
    generator_cpu_us_per_request: float | None = None
    app_cpu_cores: float | None = None
    db_cpu_cores: float | None = None
    app_cpu_us_per_request: float | None = None
    db_cpu_us_per_request: float | None = None
    app_rss_mb_mean: float | None = None
    app_rss_mb_peak: float | None = None
    app_threads_peak: int | None = None    # the app's OS threads, the most seen during the step
    kernel: dict = dataclasses.field(default_factory=dict)   # per-request kernel events and DB statements
    histogram: str | None = None           # HdrHistogram of the window (µs, base64)
    extra: dict = dataclasses.field(default_factory=dict)    # what one scenario adds (proxy CPU, intervals, ...)

    @property
    def passed(self) -> bool:
        return self.failure is None

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def p99(self) -> float | None:
        return self.latency_ms.get("p99")

    @property
    def side_cores(self) -> float:
        """Cores of a scenario's side processes (latency proxy, downstream server: `<name>_cpu_cores` in extra)."""
        return sum(v for k, v in self.extra.items() if k.endswith("_cpu_cores") and isinstance(v, (int, float)))

    @property
    def busy_cores(self) -> float | None:
        if self.app_cpu_cores is None:
            return None
        return round(sum(v or 0 for v in (self.app_cpu_cores, self.db_cpu_cores, self.generator_cpu_cores))
                     + self.side_cores, 3)

    def to_json(self, histogram: bool = True) -> dict:
        data = dataclasses.asdict(self)
        data.update(data.pop("extra"))
        data["passed"] = self.passed
        data["busy_cores"] = self.busy_cores
        if not histogram:
            data.pop("histogram")
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Step":
        names = {f.name for f in dataclasses.fields(cls)}
        known = {"phase": "step", "errors": {}, "statuses": {}, "latency_ms": {}, "generator": "?", "connections": 0,
                 "seconds": 0, "requests": 0, "achieved_rps": 0.0, "target_rps": None,
                 **{k: v for k, v in data.items() if k in names and k != "extra"}}
        extra = {k: v for k, v in data.items() if k not in names and k not in ("passed", "busy_cores")}
        if "failure" not in data and data.get("passed") is False:
            known["failure"] = "failed"
        return cls(**known, extra=extra)

    def line(self) -> str:
        p99 = self.p99
        verdict = "" if self.target_rps is None else (" -> pass" if self.passed else f" -> FAIL ({self.failure})")
        target = "closed loop" if self.target_rps is None else f"{spans.rate(self.target_rps)}/s"
        return (f"{self.phase} {target}: achieved {spans.rate(self.achieved_rps)}/s, p99 "
                f"{'-' if p99 is None else f'{p99:.2f} ms'}, errors {self.error_count}{verdict}")


@dataclasses.dataclass
class Mst:
    """A max-sustainable-throughput search. `rps` is the highest rate that passed twice (confirmed), or, when no
    rate could be confirmed within the budget, the last rate that passed once (confirmed False, `reason` says why)."""
    rps: float
    confirmed: bool
    bounded: bool                     # a failing rate above rps was found: rps is not a lower bound
    first_failing_rps: float | None   # the lowest rate above rps that failed
    slo_ms: float
    estimate_rps: int                 # where the search started (this iteration's own measurement)
    probes: list = dataclasses.field(default_factory=list)   # [rate, passed, phase, failure]
    reason: str | None = None         # why it is unconfirmed or unbounded
    limit: str | None = None          # what stopped the search from going higher (GENERATOR: the generator)
    grid: str = COARSE                # the rate grid it searched on (records before the field: the coarse one)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> "Mst | None":
        if not data:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        known = {"slo_ms": data.get("slo_p99_ms", 0.0), "estimate_rps": 0, "first_failing_rps": None,
                 "confirmed": False, **{k: v for k, v in data.items() if k in names}}
        known.setdefault("bounded", known["first_failing_rps"] is not None)
        return cls(**known)

    @property
    def passed_once(self) -> bool:
        """Some rate of the search passed (once at least), whether or not it was confirmed."""
        return bool(self.rps) or any(p[1] for p in self.probes)

    def text(self) -> str:
        """"2,300/s, first failing 2,500/s", "≥ 9,000/s", "2,300/s (NOT confirmed: ...)"."""
        if not self.rps:
            return "none passed" if not self.passed_once else f"none confirmed ({self.reason})"
        value = f"{'' if self.bounded else '≥ '}{self.rps:,}/s"
        return (value + ("" if self.confirmed else f" (NOT confirmed: {self.reason})")
                + (f", first failing {self.first_failing_rps:,}/s" if self.first_failing_rps else ""))


@dataclasses.dataclass
class Warmup:
    rate: int
    settled: bool
    seconds: float
    tolerance: float
    windows: list = dataclasses.field(default_factory=list)   # Step JSON, histograms dropped
    closed_rps: float | None = None     # the closed-loop stage's settled rate (None: the warm-up had none)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def text(self) -> str:
        return f"{'settled' if self.settled else 'did NOT settle'} after {self.seconds:.0f} s at {self.rate:,}/s"


def dig(data, *keys):
    """data[k1][k2]..., None where a level is missing."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def mst_of(record: dict) -> Mst | None:
    """A complete record's MST (an interrupted search has none): its one cell's, in the one schema."""
    if record.get("status") != "complete":
        return None
    cells = record.get("cells")
    return Mst.from_json(cells[0].get("mst") if cells else record.get("mst"))


def raw_steps(record: dict) -> list[dict]:
    """The steps (JSON) of a cell, or of every cell of a record (of either shape), in the order run."""
    steps = record["steps"] if "steps" in record else [s for c in record.get("cells") or [] for s in c.get("steps") or []]
    return steps or []


def steps_of(record: dict, phase: str | None = None) -> list[Step]:
    """The steps of a cell, or of every cell of a record, in the order run."""
    return [Step.from_json(s) for s in raw_steps(record) if phase in (None, s.get("phase"))]


def at_mst(steps: list[dict], mst: Mst | None) -> list[dict]:
    """The steps (JSON) of an MST's search or confirmation that passed at its rate."""
    return [s for s in steps if mst and mst.rps and s.get("target_rps") == mst.rps and s.get("passed")
            and s.get("phase") in ("mst", "confirm")]


def warmups_text(warmups: list[dict]) -> str:
    """Several records' warm-ups in one phrase: "2 of 3 settled, after 60 (40–150) s, at 1,500 req/s"."""
    return (f"{sum(1 for w in warmups if w.get('settled'))} of {len(warmups)} settled, after "
            f"{cell(w.get('seconds') for w in warmups)} s, at {cell(w.get('rate') for w in warmups)} req/s")


def warmup_text(w: dict | None) -> str:
    """A record's warm-up: "40 s at 1,200/s, settled"."""
    if not w:
        return "–"
    settled = "settled" if w.get("settled") else "**not settled**"
    return f"{num(w.get('seconds'))} s at {num(w.get('rate'))}/s, {settled}"


def settled_hot(record: dict) -> float | None:
    """Where the warm-up was declared settled: its last window's app CPU per request over the lowest of the JVM's
    passing search steps (its own once compiled); None where either is missing. Above SETTLED_HOT it was not warm."""
    w = record.get("warmup") or {}
    last = (w.get("windows") or [{}])[-1].get("app_cpu_us_per_request")
    later = [s.app_cpu_us_per_request for s in steps_of(record) if s.phase in ("mst", "confirm") and s.passed
             and s.app_cpu_us_per_request]
    return round(last / min(later), 2) if w.get("settled") and last and later else None


# --- MSTs over iterations -------------------------------------------------------------------------------------

def confirmed(msts) -> list[Mst]:
    return [m for m in msts if m and m.rps and m.confirmed]


def mst_spread(msts) -> Spread | None:
    """The confirmed MSTs' median (min–max); ≥ when one never met a failing rate; partial when some confirmed none;
    its ceiling the highest first failing rate (spans.apart: MSTs closer than their brackets tie)."""
    msts = [m for m in msts if m]
    found = confirmed(msts)
    failing = [m.first_failing_rps for m in found if m.first_failing_rps]
    return spread([m.rps for m in found], at_least=any(not m.bounded for m in found), of=len(msts),
                  ceiling=max(failing, default=None))

"""Charts for RESULTS.md (matplotlib, written as PNG): one line per port, error bars from the iterations' min–max,
lower bounds (≥) drawn as hollow upward triangles. The report's sections call these from their render(); the report makes the
returned paths relative to RESULTS.md."""
from __future__ import annotations

from pathlib import Path

from .. import port_facts
from ..method.spans import Spread


def _plt():
    import matplotlib  # here: a report without charts (the tests' sections) does not load matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg")
    return plt


def color(name: str):
    plt = _plt()
    base = name.split(" ")[0]
    order = port_facts.order()
    index = order.index(base) if base in order else abs(hash(base)) % 10
    return plt.cm.tab10(index % 10)


def link(title: str, path: Path | None) -> list[str]:
    return [f"![{title}]({path})", ""] if path else []


def lines(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, list[tuple[float, Spread | None]]],
          hline: tuple[float, str] | None = None, logx: bool = False, logy: bool = False,
          styles: dict[str, str] | None = None) -> Path | None:
    """One line per series through the medians; bars from min to max; ≥ values as hollow triangles."""
    series = {k: [(x, s) for x, s in v if s is not None] for k, v in series.items()}
    series = {k: v for k, v in series.items() if v}
    if not series:
        return None
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 5.2))
    for name, points in series.items():
        points.sort(key=lambda p: p[0])
        xs = [x for x, _ in points]
        mid = [s.median for _, s in points]
        c = color(name)
        # a row with settings of its own (a remedy, a runtime) shares its port's colour: square markers and a dashed
        # line tell it from the port's defaults
        variant = name != name.split(" ")[0]
        style = (styles or {}).get(name, "--" if variant else "-")
        ax.errorbar(xs, mid, yerr=[[s.median - s.low for _, s in points], [s.high - s.median for _, s in points]],
                    fmt=("s" if variant else "o") + style, color=c, capsize=3, linewidth=1.4,
                    markersize=5 if variant else 4, label=name)
        bounds = [(x, s.median) for x, s in points if s.at_least]
        if bounds:
            ax.plot([b[0] for b in bounds], [b[1] for b in bounds], "^", mfc="none", color=c, markersize=10)
    if hline:
        ax.axhline(hline[0], color="black", linestyle="--", linewidth=1, label=hline[1])
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title + ("  (hollow ▲: a lower bound, ≥)" if any(s.at_least for v in series.values() for _, s in v)
                          else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def bars(path: Path, title: str, xlabel: str, values: dict[str, Spread | None]) -> Path | None:
    """Horizontal bars (median) with min–max error bars, ports top to bottom in the given order."""
    values = {k: v for k, v in values.items() if v is not None}
    if not values:
        return None
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(values) + 1.5))
    names = list(values)
    ax.barh(names, [values[n].median for n in names], color=[color(n) for n in names],
            xerr=[[values[n].median - values[n].low for n in names], [values[n].high - values[n].median for n in names]],
            capsize=4, hatch=None)
    for i, n in enumerate(names):
        if values[n].at_least:
            ax.text(values[n].high, i, "  ≥", va="center")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.invert_yaxis()
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

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
    """A port's colour in every chart (a name that is no port: a stable colour of its own, not hash(): that changes
    with every process)."""
    plt = _plt()
    base = name.split(" ")[0]
    order = port_facts.order()
    index = order.index(base) if base in order else len(order) + sum(map(ord, base))
    return plt.cm.tab10(index % 10)


def link(title: str, path: Path | None) -> list[str]:
    return [f"![{title}]({path})", ""] if path else []


MARKERS = "osD^vPX*"      # one per port, so that series lying on each other stay apart


def marker(name: str) -> str:
    order = port_facts.order()
    base = name.split(" ")[0]
    return MARKERS[(order.index(base) if base in order else len(order) + sum(map(ord, base))) % len(MARKERS)]


def _draw(ax, name: str, points: list[tuple[float, Spread]], styles: dict[str, str] | None) -> None:
    """One series: a line through the medians, bars from min to max, ≥ values as hollow triangles."""
    points = sorted(points, key=lambda p: p[0])
    xs = [x for x, _ in points]
    c = color(name)
    # a row with settings of its own (a remedy, a runtime) shares its port's colour: square markers and a dashed
    # line tell it from the port's defaults; where the caller gives styles, a series it does not name is solid
    variant = name != name.split(" ")[0]
    style = styles.get(name, "-") if styles else "--" if variant else "-"
    ax.errorbar(xs, [s.median for _, s in points],
                yerr=[[s.median - s.low for _, s in points], [s.high - s.median for _, s in points]],
                fmt=marker(name) + style, color=c, capsize=3, linewidth=1.4, markersize=6 if variant else 5,
                mfc="none" if variant else c, label=name)
    bounds = [(x, s.median) for x, s in points if s.at_least]
    if bounds:
        ax.plot([b[0] for b in bounds], [b[1] for b in bounds], "^", mfc="none", color=c, markersize=10)


def _kept(series: dict[str, list[tuple[float, Spread | None]]]) -> dict[str, list[tuple[float, Spread]]]:
    series = {k: [(x, s) for x, s in v if s is not None] for k, v in series.items()}
    return {k: v for k, v in series.items() if v}


def _data_ticks(ax, xs: list[float]) -> None:
    """A few x values: ticks at exactly those, in plain numbers (a log axis would tick them "6×10¹")."""
    xs = sorted(set(xs))
    if 1 < len(xs) <= 10:
        ax.set_xticks(xs, [f"{x:,.0f}" if x >= 10 or x == int(x) else f"{x:g}" for x in xs])
        ax.minorticks_off()


def lines(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, list[tuple[float, Spread | None]]],
          hline: tuple[float, str] | None = None, logx: bool = False, logy: bool = False,
          styles: dict[str, str] | None = None, failed: dict[str, list[tuple[float, float]]] | None = None) \
        -> Path | None:
    """One line per series through the medians; bars from min to max; ≥ values as hollow triangles; `failed`
    (per series) drawn as ✕ apart from the lines; the legend beside the plot, never over it."""
    series = _kept(series)
    if not series:
        return None
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(10.5, 5.2))
    for name, points in series.items():
        _draw(ax, name, points, styles)
    for name, crosses in (failed or {}).items():
        if crosses:
            ax.plot([x for x, _ in crosses], [y for _, y in crosses], "x", color=color(name), markersize=9,
                    label=f"{name}: failed")
    if hline:
        ax.axhline(hline[0], color="black", linestyle="--", linewidth=1, label=hline[1])
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    _data_ticks(ax, [x for points in series.values() for x, _ in points])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title + ("  (hollow ▲: a lower bound, ≥)" if any(s.at_least for v in series.values() for _, s in v)
                          else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def panels(path: Path, title: str, xlabel: str, plots: list[tuple[str, dict[str, list[tuple[float, Spread | None]]]]],
           failed: dict[str, dict[str, list[tuple[float, float]]]] | None = None,
           hline: tuple[float, str] | None = None) -> Path | None:
    """Side by side, one panel per (ylabel, series) on a log y axis sharing the x axis; `failed` (per panel's ylabel
    prefix, per series) drawn as ✕ apart from the lines; one legend under the panels."""
    plots = [(label, _kept(series)) for label, series in plots]
    if not any(series for _, series in plots):
        return None
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(plots), figsize=(5 * len(plots), 4.6), sharex=True)
    for ax, (label, series) in zip(axes if len(plots) > 1 else [axes], plots):
        for name, points in series.items():
            _draw(ax, name, points, None)
        for name, crosses in ((failed or {}).get(label.split(" ")[0]) or {}).items():
            if crosses:
                ax.plot([x for x, _ in crosses], [y for _, y in crosses], "x", color=color(name), markersize=9)
        if hline:
            ax.axhline(hline[0], color="black", linestyle="--", linewidth=1, label=hline[1])
        ax.set_yscale("log")
        _data_ticks(ax, [x for points in series.values() for x, _ in points])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = (axes[0] if len(plots) > 1 else axes).get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 7), fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def percentiles(path: Path, title: str, series: dict[str, list[tuple]]) -> Path | None:
    """Latency (ms, log) by percentile, the x axis stretched toward the tail (1 / (1 - p)), one line per series; a
    point (p, value, low, high) carries its interval as a bar (a quantile with few requests beyond it)."""
    if not series:
        return None
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 5.2))
    ticks = sorted({p for points in series.values() for p, *_ in points})
    for name, points in series.items():
        ax.plot([100 / (100 - p) for p, v, *_ in points], [v for _, v, *_ in points], "o-", color=color(name),
                label=name, linewidth=1.4, markersize=4)
        bars = [(p, v, b[0], b[1]) for p, v, *b in points if len(b) == 2]
        if bars:
            ax.errorbar([100 / (100 - p) for p, *_ in bars], [v for _, v, *_ in bars],
                        yerr=[[v - lo for _, v, lo, _ in bars], [hi - v for _, v, _, hi in bars]], fmt="none",
                        ecolor=color(name), capsize=3, linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([100 / (100 - p) for p in ticks], [f"p{p:g}" for p in ticks])
    ax.minorticks_off()
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def heatmap(path: Path, title: str, rows: list[str], columns: list[str], texts: list[list[str]],
            scores: list[list[float | None]]) -> Path | None:
    """A table as colours: each cell's score in 0..1 within its row (1 the best, green), None grey; its text on it."""
    if not rows or not columns:
        return None
    plt = _plt()
    import numpy as np       # matplotlib's own dependency
    path.parent.mkdir(parents=True, exist_ok=True)
    grid = np.array([[np.nan if v is None else v for v in row] for row in scores], dtype=float)
    fig, ax = plt.subplots(figsize=(2.0 * len(columns) + 3.5, 0.62 * len(rows) + 1.6))
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#dddddd")
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i, row in enumerate(texts):
        for j, cell in enumerate(row):
            ax.text(j, i, cell, ha="center", va="center", fontsize=7.5, wrap=True)
    ax.set_xticks(range(len(columns)), columns, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.xaxis.tick_top()
    ax.set_title(title, fontsize=10, pad=28)
    ax.tick_params(length=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bars(path: Path, title: str, xlabel: str, values: dict[str, Spread | None]) -> Path | None:
    """Horizontal bars (median) with min–max error bars, ports top to bottom in the given order; a partial figure
    hatched, with its count."""
    values = {k: v for k, v in values.items() if v is not None}
    if not values:
        return None
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(values) + 1.5))
    names = list(values)
    bars_ = ax.barh(names, [values[n].median for n in names], color=[color(n) for n in names],
            xerr=[[values[n].median - values[n].low for n in names], [values[n].high - values[n].median for n in names]],
            capsize=4, hatch=None)
    for i, n in enumerate(names):
        # a figure not every run gave (an MST only some runs confirmed) is hatched and says its count
        note = ("≥ " if values[n].at_least else "") + (f"{values[n].n} of {values[n].of} runs" if values[n].partial else "")
        if values[n].partial:
            bars_[i].set_hatch("//")
            bars_[i].set_alpha(0.5)
        if note:
            ax.text(values[n].high, i, "  " + note, va="center", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.invert_yaxis()
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

"""The report's figures as PNG bytes, drawn with matplotlib's Agg backend (no display, no
pyplot state; safe in Dagster workers and CI).

Trends over the run history, one per headline number: judge agreement against its floor,
P@5 against the verdict bands, gate pass rates against their minimum (one panel per gate),
cost per run; a single run is drawn as a marker, and series sharing a panel are dodged
sideways with their own markers so that equal values never hide one another. And the latest
calibration grid as the history holds it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import pandas as pd

from eval_harness.calibration.intervals import interval_level
from eval_harness.calibration.report import (axis_label, draw_reference, legend_outside,
                                             zoomed_limits)
from eval_harness.calibration.verdict import VerdictBands

# matplotlib takes over a second to import, and the Dagster definitions load this module
# through the report asset: it is imported where a figure is drawn, not here.

__all__ = ["new_figure", "figure_png", "format_run_axis", "run_labels", "draw_series",
           "plot_kappa_trend", "kappa_trend_figure", "plot_p_at_5_trend", "p_at_5_trend_figure",
           "plot_gate_trend", "gate_trend_figure", "pooled_days", "plot_cost_trend",
           "plot_calibration_grid", "calibration_grid_figure"]


# ------------------------------------------------------------------------------ trends

def new_figure(title: str):
    """A matplotlib figure and its axes on the Agg backend (no display, no pyplot state)."""
    import matplotlib  # see the imports

    matplotlib.use("Agg")  # no display; safe in Dagster workers and CI
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.subplots()
    axes.set_title(title)
    axes.grid(alpha=0.3)
    return figure, axes


def figure_png(figure) -> bytes:
    """The figure as PNG bytes (no software tag, so equal plots give equal bytes)."""
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _png(figure, axes, runs: pd.DataFrame) -> bytes:
    format_run_axis(axes, runs)
    # outside the axes, so the legend never covers a point
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                fontsize="x-small")
    return figure_png(figure)


MAX_RUN_TICKS = 8


def format_run_axis(axes, runs: pd.DataFrame) -> None:
    """The x axis counts runs (one step per run, oldest left), each tick labelled with the
    day and time the run was recorded (UTC). Runs minutes apart and runs days apart both
    read at a glance; a time axis shows bare seconds ("15", "30") for the former."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator  # see the imports

    labels = run_labels(runs)
    axes.set_xlim(-0.5, len(labels) - 0.5)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=MAX_RUN_TICKS, integer=True, min_n_ticks=1))
    axes.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: labels[int(round(x))] if 0 <= round(x) < len(labels)
        and abs(x - round(x)) < 1e-9 else ""))
    years = sorted({time.year for time in pd.to_datetime(runs.index, utc=True)})
    span = "-".join(str(year) for year in dict.fromkeys((years[0], years[-1]))) if years else ""
    axes.set_xlabel(f"run, recorded at (UTC, {span})" if span else "run")


def run_labels(runs: pd.DataFrame) -> list[str]:
    """One label per run: "MM-DD\\nHH:MM", with seconds when two runs share a minute."""
    times = pd.to_datetime(runs.index, utc=True)
    for layout in ("%m-%d\n%H:%M", "%m-%d\n%H:%M:%S"):
        labels = [time.strftime(layout) for time in times]
        if len(set(labels)) == len(labels):
            return labels
    return labels


def _series(runs: pd.DataFrame, metric: str) -> pd.Series:
    """``metric`` per run, indexed by the run's position (0 = oldest; see format_run_axis)."""
    if metric not in runs:
        return pd.Series(dtype=float)
    return runs[metric].reset_index(drop=True).dropna()


# Series sharing a panel are moved this far apart sideways (in runs) and each gets its own
# marker, so two with equal values (P@5 best = default when the default weight wins; kappa =
# its bound on a degenerate interval) both stay visible instead of one hiding the other.
DODGE = 0.08
MARKERS = ("o", "s", "^", "D")


def draw_series(axes, series: Sequence[tuple[pd.Series, str, Mapping]]) -> None:
    """``(values, label, style)`` per series on one panel: each moved sideways by its own
    offset (centred on the run) and drawn with its own marker, every marker after the first
    hollow, so equal values show as markers side by side."""
    shown = [(values, label, style) for values, label, style in series if not values.empty]
    middle = (len(shown) - 1) / 2
    for i, (values, label, style) in enumerate(shown):
        hollow = {"markerfacecolor": "white"} if i else {}
        axes.plot(values.index + (i - middle) * DODGE, values.values,
                  marker=MARKERS[i % len(MARKERS)], label=label, **{**hollow, **style})


def plot_kappa_trend(runs: pd.DataFrame, *, floor: float) -> bytes | None:
    """Pooled kappa and its lower confidence bound per run, against the floor."""
    figure = kappa_trend_figure(runs, floor=floor)
    return None if figure is None else _png(figure, figure.axes[0], runs)


def kappa_trend_figure(runs: pd.DataFrame, *, floor: float):
    kappa, low = _series(runs, "kappa"), _series(runs, "kappa_ci_low")
    if kappa.empty:
        return None
    figure, axes = new_figure("Judge agreement (Cohen's kappa)")
    draw_series(axes, [(kappa, "kappa", {}), (low, "lower bound", {"linestyle": "--"})])
    axes.axhline(floor, color="tab:red", linestyle=":", label=f"floor {floor:g}")
    axes.set_ylim(min(0.0, kappa.min(), low.min() if not low.empty else 0.0) - 0.05, 1.05)
    axes.set_ylabel("kappa")
    return figure


def plot_p_at_5_trend(runs: pd.DataFrame, *, bands: VerdictBands) -> bytes | None:
    """P@5 at the calibrated and at the default weights per run, over the verdict bands."""
    figure = p_at_5_trend_figure(runs, bands=bands)
    return None if figure is None else _png(figure, figure.axes[0], runs)


def p_at_5_trend_figure(runs: pd.DataFrame, *, bands: VerdictBands):
    best, default = _series(runs, "p_at_5_best"), _series(runs, "p_at_5_default")
    if best.empty:
        return None
    figure, axes = new_figure("P@5 at the calibrated weights")
    axes.axhspan(0.0, bands.partial_success, color="tab:red", alpha=0.08, label="failure")
    axes.axhspan(bands.partial_success, bands.full_success, color="tab:orange", alpha=0.12,
                 label="partial success")
    axes.axhspan(bands.full_success, 1.0, color="tab:green", alpha=0.08, label="full success")
    draw_series(axes, [(best, "P@5 best", {}),
                       (default, "P@5 default", {"linestyle": "--"}),
                       (_series(runs, "p_at_5_ceiling"), "ceiling",
                        {"color": "grey", "linestyle": ":"})])
    axes.set_ylim(0.0, 1.0)
    axes.set_ylabel("mean P@5")
    return figure


def pooled_days(runs: pd.DataFrame) -> str:
    """What one run's gate pass rate pools: "the 3 days each run gated", or a range."""
    counts = _series(runs, "gate_day_count")
    if counts.empty:
        return "all the days each run gated"
    low, high = int(counts.min()), int(counts.max())
    if low == high:
        return f"the {low} day{'s' if low != 1 else ''} each run gated"
    return f"the {low} to {high} days each run gated"


def plot_gate_trend(runs: pd.DataFrame, *, min_pass_rates: Mapping[str, float]) -> bytes | None:
    """Each gate's pass rate per run in a panel of its own, with its minimum pass rate."""
    figure = gate_trend_figure(runs, min_pass_rates=min_pass_rates)
    if figure is None:
        return None
    format_run_axis(figure.axes[-1], runs)
    return figure_png(figure)


def gate_trend_figure(runs: pd.DataFrame, *, min_pass_rates: Mapping[str, float]):
    """Small multiples, one panel per gate on a shared run axis: gates with equal pass rates
    would hide each other on one axis. A run's pass rate pools the answers of every day it
    gated (passing / all), which the title says."""
    import matplotlib  # see the imports

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    lines = {gate: _series(runs, f"{gate}_pass_rate") for gate in min_pass_rates}
    lines = {gate: series for gate, series in lines.items() if not series.empty}
    if not lines:
        return None
    figure = Figure(figsize=(6.4, 1.0 + 1.3 * len(lines)), dpi=100)
    panels = figure.subplots(len(lines), 1, sharex=True, squeeze=False)[:, 0]
    figure.suptitle(f"Quality gate pass rates, pooled over {pooled_days(runs)}",
                    fontsize="medium")
    colours = matplotlib.colormaps["tab10"].colors
    for axes, colour, (gate, series) in zip(panels, colours, lines.items()):
        axes.plot(series.index, series.values, marker="o", color=colour, label=gate)
        minimum = min_pass_rates[gate]
        axes.axhline(minimum, color="grey", linestyle=":", label=f"min pass rate {minimum:g}")
        axes.set_title(f"{gate} (min pass rate {minimum:g})", fontsize="small", loc="left")
        axes.set_ylim(-0.05, 1.05)
        axes.set_yticks([0.0, 0.5, 1.0])
        axes.set_ylabel("pass rate", fontsize="small")
        axes.grid(alpha=0.3)
    return figure


def plot_cost_trend(runs: pd.DataFrame) -> bytes | None:
    """Provider cost (USD) per run, and what the reply cache saved."""
    cost = _series(runs, "cost_usd")
    if cost.empty:
        return None
    figure, axes = new_figure("Cost per run")
    saved = _series(runs, "cache_saved_usd")
    draw_series(axes, [(cost, "cost USD", {}),
                       (saved if (saved > 0).any() else saved.iloc[:0],
                        "saved by the cache USD", {"linestyle": "--"})])
    axes.set_ylim(bottom=0.0)
    axes.set_ylabel("USD")
    return _png(figure, axes, runs)


# ------------------------------------------------------------------------------ calibration grid

def plot_calibration_grid(grid, bands: VerdictBands) -> bytes:
    """PNG bytes of :func:`calibration_grid_figure`."""
    return figure_png(calibration_grid_figure(grid, bands))


BAND_EDGE_REACH = 0.05  # P@5 within this of a verdict band's edge: the edge stays in view
OTHER_GRID_METRICS = (("recall_at_5", "Recall@5", "--"), ("ndcg_at_10", "nDCG@10", "-."),
                      ("mrr_at_10", "MRR@10", ":"))


def calibration_grid_figure(grid, bands: VerdictBands):
    """The history's grid in two panels sharing the semantic weight axis.

    Top: P@5, the metric the verdict is about, with each weight's interval (a shaded band), in
    its verdict bands, with the ceiling, the weights in force, the default and, only when the
    decision changed the weights, the adopted best (a star); the y axis is zoomed to the P@5
    values, their intervals (so that a noise-level difference does not look like a peak) and
    any band edge within 0.05 of them (the bands outside the view are named in the legend). Bottom:
    Recall@5, nDCG@10 and MRR@10 on their own zoomed axis and without bands: they have no
    verdict, and drawn over the success band they would read as one. Legends sit outside the
    axes, so they cover no line.

    :func:`eval_harness.calibration.report.plot_p_at_5` draws a fresh
    :class:`CalibrationResult` (with the RRF reference, which the history does not keep);
    this one draws what the history holds.
    """
    import matplotlib  # see the imports

    matplotlib.use("Agg")  # no display; safe in Dagster workers and CI
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 6.0), dpi=100, layout="tight")  # room for the legends
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    figure.suptitle(f"Calibration grid ({len(grid)} weights)")
    _p_at_5_panel(top, grid, bands)
    _other_metrics_panel(bottom, grid)
    return figure


def _p_at_5_panel(axes, grid, bands: VerdictBands) -> None:
    weights, p_at_5 = grid["semantic_weight"].to_numpy(), grid["p_at_5"].to_numpy()
    lows, highs = (_column(grid, name) for name in ("p_at_5_low", "p_at_5_high"))
    # a band edge close to the data is kept in view: how far P@5 is from the next band
    edges = [edge for edge in (bands.partial_success, bands.full_success)
             if p_at_5.min() - BAND_EDGE_REACH <= edge <= p_at_5.max() + BAND_EDGE_REACH]
    # the intervals set the view too, so a noise-level difference never fills the axis
    axes.set_ylim(*zoomed_limits([*p_at_5, *lows, *highs, *edges]))
    low, high = axes.get_ylim()
    for start, stop, colour, alpha, name in (
            (0.0, bands.partial_success, "tab:red", 0.08, "failure"),
            (bands.partial_success, bands.full_success, "tab:orange", 0.12, "partial success"),
            (bands.full_success, 1.0, "tab:green", 0.08, "full success")):
        label = f"{name} {start:g}..{stop:g}"
        if stop <= low or start >= high:  # outside the view: named, not drawn
            label += " (above the axis)" if start >= high else " (below the axis)"
        axes.axhspan(start, stop, color=colour, alpha=alpha, label=label)
    axes.set_ylim(low, high)  # the spans must not widen the view
    if not all(map(math.isnan, [*lows, *highs])):  # a history from before them has none
        axes.fill_between(weights, lows, highs, color="tab:blue", alpha=0.18, linewidth=0,
                          label=_interval_label(grid))
    axes.plot(weights, p_at_5, marker="o", color="tab:blue", label="P@5")
    ceiling = float(grid["p_at_5_ceiling"].iloc[0])
    draw_reference(axes, ceiling, f"P@5 ceiling {ceiling:.3f}", color="grey", linestyle="--")
    best, default = grid[grid["is_best"]], grid[grid["is_default"]]
    axes.scatter(default["semantic_weight"], default["p_at_5"], s=90, facecolors="none",
                 edgecolors="black", zorder=3, label="default")
    decision = _recorded_decision(grid)
    if "is_in_force" in grid and decision is not None:
        in_force = grid[grid["is_in_force"].fillna(False).astype(bool)]
        axes.scatter(in_force["semantic_weight"], in_force["p_at_5"], s=70, marker="s",
                     facecolors="none", edgecolors="tab:purple", zorder=3, label="in force")
    if decision is None:  # a grid from before the decision rule: its best, as then
        axes.scatter(best["semantic_weight"], best["p_at_5"], s=140, marker="*",
                     color="tab:red", zorder=4, label="best")
    elif decision == "changed":  # the star marks a change that was made, nothing else
        axes.scatter(best["semantic_weight"], best["p_at_5"], s=140, marker="*",
                     color="tab:red", zorder=4, label="adopted (changed)")
    else:
        axes.plot([], [], " ", label="kept: no grid point beat the weights in force")
    axes.set_ylabel(axis_label("mean P@5", axes))
    axes.set_title("P@5 in its verdict bands", fontsize="medium")
    axes.grid(alpha=0.3)
    legend_outside(axes)


def _column(grid, name: str) -> list[float]:
    """A float column of the grid; NaN throughout when the history predates it."""
    if name not in grid:
        return [math.nan] * len(grid)
    return [math.nan if value is None else float(value) for value in grid[name]]


def _interval_label(grid) -> str:
    """The interval band's legend entry, with its level when the grid records alpha."""
    alphas = _column(grid, "decision_alpha")
    return f"P@5 {interval_level(alphas[0] if alphas else None)}interval (query bootstrap)"


def _recorded_decision(grid) -> str | None:
    """``changed`` / ``kept`` when the grid records its decision, else None."""
    if "decision" not in grid:
        return None
    values = [v for v in grid["decision"] if isinstance(v, str) and v]
    return values[0] if values else None


def _other_metrics_panel(axes, grid) -> None:
    weights = grid["semantic_weight"].to_numpy()
    others = [grid[column].to_numpy() for column, _, _ in OTHER_GRID_METRICS]
    for values, (_, label, style) in zip(others, OTHER_GRID_METRICS):
        axes.plot(weights, values, marker="o", linestyle=style, label=label)
    axes.set_ylim(*zoomed_limits([v for values in others for v in values]))
    axes.set_ylabel(axis_label("mean", axes))
    axes.set_title("Other ranking metrics (no verdict)", fontsize="medium")
    axes.set_xlabel("semantic weight (keyword = 1 - semantic)")
    axes.grid(alpha=0.3)
    legend_outside(axes)

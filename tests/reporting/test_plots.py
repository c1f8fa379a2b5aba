"""The report's plots answer their one question at a glance; asserted on the figure objects.

The numbers are the shape of the bundled SciFact run: P@5 of 0.165..0.170 across the grid
(ceiling 0.226, far below the 0.70 / 0.75 verdict bands) and Recall@5, nDCG@10, MRR@10
around 0.65..0.77, which on a shared axis would sit inside the "success" bands.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from eval_harness.calibration.report import axis_label, p_at_5_figure, plot_p_at_5, zoomed_limits
from eval_harness.calibration.verdict import VerdictBands
from eval_harness.reporting.plots import (
    calibration_grid_figure,
    format_run_axis,
    new_figure,
    plot_calibration_grid,
    run_labels,
)

BANDS = VerdictBands(0.75, 0.70)
WEIGHTS = [0.5, 0.6, 0.7, 0.8, 0.9]
SCIFACT_P5 = [0.1667, 0.1693, 0.1700, 0.1693, 0.1647]
# a 95% query bootstrap interval's half-width on 300 SciFact queries (per-query P@5 sd ~0.2)
HALF_WIDTH = 0.023


def grid(p_at_5=SCIFACT_P5, ceiling=0.226) -> pd.DataFrame:
    best = int(np.argmax(p_at_5))
    return pd.DataFrame({
        "semantic_weight": WEIGHTS, "keyword_weight": [1 - w for w in WEIGHTS],
        "p_at_5": p_at_5, "recall_at_5": [0.757, 0.764, 0.765, 0.758, 0.741],
        "ndcg_at_10": [0.720, 0.730, 0.723, 0.700, 0.677],
        "mrr_at_10": [0.697, 0.707, 0.696, 0.666, 0.640],
        "p_at_5_ceiling": ceiling, "is_best": [i == best for i in range(5)],
        "is_default": [w == 0.7 for w in WEIGHTS]})


def drawn(figure):
    """The figure drawn as the PNG writer draws it (Agg, its layout applied); the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # extents exist after a draw
    return canvas.get_renderer()


def line(axes, label: str):
    (found,) = [artist for artist in axes.get_lines() if artist.get_label() == label]
    return found


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


# ------------------------------------------------------------------- the calibration grid

@pytest.mark.unit
def test_grid_p_at_5_is_zoomed_to_its_values_and_says_the_axis_does_not_start_at_0():
    figure = calibration_grid_figure(grid(), BANDS)
    top, bottom = figure.axes
    low, high = top.get_ylim()
    assert low <= min(SCIFACT_P5) and high >= max(SCIFACT_P5)
    assert low > 0.0 and high - low < 0.05  # a 0..1 axis would make 0.0053 of spread flat
    # the spread of the curve fills a visible share of the panel, not 0.5 % of it
    assert (max(SCIFACT_P5) - min(SCIFACT_P5)) / (high - low) > 0.15
    assert "not 0" in top.get_ylabel() and f"{low:.3g}" in top.get_ylabel()
    other = np.concatenate([grid()[c].to_numpy()
                            for c in ("recall_at_5", "ndcg_at_10", "mrr_at_10")])
    low, high = bottom.get_ylim()
    assert low <= other.min() and high >= other.max() and high - low < 0.25


def test_verdict_bands_are_drawn_only_against_p_at_5():
    figure = calibration_grid_figure(grid(), BANDS)
    top, bottom = figure.axes
    assert len(top.patches) == 3 and len(bottom.patches) == 0  # three bands, P@5 panel only
    assert {artist.get_label() for artist in top.get_lines()} >= {"P@5"}
    assert {artist.get_label() for artist in bottom.get_lines()} == {
        "Recall@5", "nDCG@10", "MRR@10"}
    labels = [text.get_text() for text in top.get_legend().get_texts()]
    # bands (and the ceiling) outside the zoomed view are named, not silently cut off
    assert "partial success 0.7..0.75 (above the axis)" in labels
    assert "full success 0.75..1 (above the axis)" in labels
    assert "failure 0..0.7" in labels
    assert "P@5 ceiling 0.226 (above the axis)" in labels
    assert not any("success" in t.get_text() for t in bottom.get_legend().get_texts())


def test_legends_cover_no_line():
    figure = calibration_grid_figure(grid(), BANDS)
    renderer = drawn(figure)
    for axes in figure.axes:
        legend = axes.get_legend().get_window_extent(renderer)
        assert legend.x0 >= axes.get_window_extent(renderer).x1  # outside the plot area
        for artist in axes.get_lines():
            if len(artist.get_xdata()):
                assert not overlaps(legend, artist.get_window_extent(renderer)), \
                    artist.get_label()
    # the legend's text stays on the canvas (tight layout made room for it)
    figure_box = figure.bbox
    for axes in figure.axes:
        box = axes.get_legend().get_window_extent(renderer)
        assert box.x1 <= figure_box.x1 + 1


@pytest.mark.unit
def test_a_p_at_5_inside_the_bands_shows_the_thresholds_in_view():
    near = [0.705, 0.722, 0.741, 0.733, 0.716]
    figure = calibration_grid_figure(grid(near, ceiling=0.80), BANDS)
    top = figure.axes[0]
    low, high = top.get_ylim()
    assert low < BANDS.partial_success < BANDS.full_success < high  # both edges visible
    labels = [text.get_text() for text in top.get_legend().get_texts()]
    assert not any("above the axis" in label for label in labels[:3])
    assert "P@5 ceiling 0.800 (above the axis)" in labels


def test_plot_bytes_are_a_png():
    assert plot_calibration_grid(grid(), BANDS)[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------- the fresh calibration's P@5 plot

def calibration_result(p_at_5=SCIFACT_P5, rrf=0.1653, ceiling=0.226, changed=False):
    points = [SimpleNamespace(semantic_weight=w, keyword_weight=round(1 - w, 10), p_at_5=p,
                              p_at_5_low=p - HALF_WIDTH, p_at_5_high=p + HALF_WIDTH)
              for w, p in zip(WEIGHTS, p_at_5)]
    best = max(points, key=lambda point: point.p_at_5)
    decision = SimpleNamespace(changed=changed, in_force=(0.6, 0.4), adjusted_p=0.03,
                               alpha=0.05)
    return SimpleNamespace(grid=points, best=best, default=points[2], p_at_5_ceiling=ceiling,
                           rrf=SimpleNamespace(p_at_5=rrf), rrf_k=60, dataset="scifact",
                           n_queries=300, decision=decision, current_weight=0.6)


def stars(axes) -> list:
    """The star markers drawn on ``axes`` (scatter collections with the star path)."""
    import matplotlib.markers as markers

    star = markers.MarkerStyle("*").get_path()
    return [c for c in axes.collections if c.get_paths()
            and c.get_paths()[0].vertices.shape == star.vertices.shape
            and np.allclose(c.get_paths()[0].vertices / np.abs(c.get_paths()[0].vertices).max(),
                            star.vertices / np.abs(star.vertices).max())]


@pytest.mark.unit
@pytest.mark.parametrize("changed", [False, True])
def test_the_star_marks_only_a_change_made(changed):
    """The best point gets its star only when the decision adopted it; the weights in force
    are always marked."""
    (axes,) = p_at_5_figure(calibration_result(changed=changed)).axes
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "in force 0.60" in labels
    assert len(stars(axes)) == int(changed)
    assert any(label.startswith("adopted 0.70") for label in labels) == changed
    assert any(label.startswith("kept: best 0.70") for label in labels) != changed
    frame = grid().assign(decision="changed" if changed else "kept",
                          is_in_force=[w == 0.6 for w in WEIGHTS])
    top = calibration_grid_figure(frame, BANDS).axes[0]
    assert len(stars(top)) == int(changed)
    labels = [text.get_text() for text in top.get_legend().get_texts()]
    assert "in force" in labels and ("adopted (changed)" in labels) == changed


def test_p_at_5_plot_is_zoomed_with_the_legend_outside():
    figure = p_at_5_figure(calibration_result())
    (axes,) = figure.axes
    low, high = axes.get_ylim()
    assert low <= 0.1647 and high >= 0.1700 and low > 0.0 and high - low < 0.1
    assert "not 0" in axes.get_ylabel()
    renderer = drawn(figure)
    legend = axes.get_legend().get_window_extent(renderer)
    curve = line(axes, "P@5").get_window_extent(renderer)
    assert not overlaps(legend, curve)
    assert legend.x0 >= axes.get_window_extent(renderer).x1
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "ceiling 0.226 (above the axis)" in labels and "RRF k=60 0.165" in labels
    assert plot_p_at_5(calibration_result())[:4] == b"\x89PNG"


def band(axes):
    """The shaded P@5 interval band's polygon (a fill_between collection), or None."""
    from matplotlib.collections import PolyCollection

    found = [c for c in axes.collections if isinstance(c, PolyCollection)
             and c.get_label().startswith("P@5 ")]
    return found[0] if found else None


@pytest.mark.unit
def test_both_plots_shade_each_interval_and_keep_it_in_view():
    """The issue: the plot zoomed to the points alone made a noise-level peak fill the axis.
    Every interval lies inside the y range, so the spread of the points is drawn against
    their uncertainty (here it is a small share of the axis)."""
    lows = [p - HALF_WIDTH for p in SCIFACT_P5]
    highs = [p + HALF_WIDTH for p in SCIFACT_P5]
    frame = grid().assign(p_at_5_low=lows, p_at_5_high=highs, decision="kept",
                          decision_alpha=0.05, is_in_force=[w == 0.7 for w in WEIGHTS])
    fresh = p_at_5_figure(calibration_result()).axes[0]
    for axes in (calibration_grid_figure(frame, BANDS).axes[0], fresh):
        low, high = axes.get_ylim()
        assert low <= min(lows) and max(highs) <= high and low > 0.0
        assert (max(SCIFACT_P5) - min(SCIFACT_P5)) / (high - low) < 0.1  # no peak
        shaded = band(axes)
        assert shaded is not None and shaded.get_label() == "P@5 95% interval (query bootstrap)"
        vertices = shaded.get_paths()[0].vertices
        assert vertices[:, 1].min() == pytest.approx(min(lows))
        assert vertices[:, 1].max() == pytest.approx(max(highs))
        labels = [text.get_text() for text in axes.get_legend().get_texts()]
        assert "P@5 95% interval (query bootstrap)" in labels


@pytest.mark.unit
def test_a_grid_from_before_the_intervals_has_no_band():
    top = calibration_grid_figure(grid(), BANDS).axes[0]
    assert band(top) is None
    nan = grid().assign(p_at_5_low=float("nan"), p_at_5_high=float("nan"))
    assert band(calibration_grid_figure(nan, BANDS).axes[0]) is None


# ------------------------------------------------------------------------- the zoom rule

@pytest.mark.unit
def test_zoomed_limits_values_worked_out():
    # [0.2, 0.4]: span 0.2, pad 0.03 -> (0.17, 0.43)
    assert zoomed_limits([0.2, 0.4]) == pytest.approx((0.17, 0.43))
    # [0.5]: span below 0.02 -> 0.49..0.51, pad 0.003 -> (0.487, 0.513)
    assert zoomed_limits([0.5, 0.5]) == pytest.approx((0.487, 0.513))
    # [0.0, 0.9]: pad 0.135 would leave 0..1; the limits stay in the metric's range
    assert zoomed_limits([0.0, 0.9]) == pytest.approx((0.0, 1.0))
    # nothing finite to zoom on: the whole range
    assert zoomed_limits([None, float("nan")]) == (0.0, 1.0)
    figure, axes = new_figure("t")
    axes.set_ylim(0.0, 1.0)
    assert axis_label("P@5", axes) == "P@5"  # an axis from 0 needs no warning


# --------------------------------------------------------------------------- trend axes

def runs_at(times) -> pd.DataFrame:
    index = pd.DatetimeIndex(pd.to_datetime(times, utc=True), name="recorded_at")
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(len(index))],
                         "kappa": np.linspace(0.3, 0.8, len(index))}, index=index)


def tick_labels(axes, runs):
    format_run_axis(axes, runs)
    axes.figure.canvas.draw()
    return [tick.get_text() for tick in axes.get_xticklabels() if tick.get_text()]


@pytest.mark.unit
def test_runs_minutes_apart_are_labelled_with_their_time_not_bare_seconds():
    runs = runs_at(["2026-11-24 02:00:09", "2026-11-24 02:01:00", "2026-11-24 02:01:42"])
    figure, axes = new_figure("t")
    axes.plot(range(3), runs["kappa"].to_numpy())
    labels = tick_labels(axes, runs)
    # one tick per run; two runs share the minute 02:01, so every label has its seconds
    assert labels == ["11-24\n02:00:09", "11-24\n02:01:00", "11-24\n02:01:42"]
    assert "2026" in axes.get_xlabel() and "UTC" in axes.get_xlabel()


@pytest.mark.unit
def test_many_nightly_runs_get_at_most_eight_readable_ticks():
    runs = runs_at(pd.date_range("2026-10-01 02:00", periods=40, freq="D"))
    figure, axes = new_figure("t")
    axes.plot(range(40), runs["kappa"].to_numpy())
    labels = tick_labels(axes, runs)
    assert 3 <= len(labels) <= 9
    assert all(re.fullmatch(r"\d\d-\d\d\n\d\d:\d\d", label) for label in labels), labels
    assert labels[0] == "10-01\n02:00"


@pytest.mark.unit
def test_run_labels_add_seconds_only_when_needed():
    assert run_labels(runs_at(["2026-01-01 02:00", "2026-01-02 02:00"])) == [
        "01-01\n02:00", "01-02\n02:00"]
    assert run_labels(runs_at(["2026-01-01 02:00:01", "2026-01-01 02:00:30"])) == [
        "01-01\n02:00:01", "01-01\n02:00:30"]


# ------------------------------------------------------------------- every series stays visible

GATES = {"format_compliance": 0.9, "citation_coverage": 0.9, "grounding": 0.9,
         "answer_reward": 0.9}


def trend_runs() -> pd.DataFrame:
    """Three runs of the bundled demo's shape: the default weight wins (P@5 best = default)
    and two gates have the same pass rate, every run pooling three gated days."""
    runs = runs_at(["2026-11-26 13:28", "2026-11-26 13:46", "2026-11-27 02:00"])
    return runs.assign(p_at_5_best=0.17, p_at_5_default=0.17, p_at_5_ceiling=0.226,
                       format_compliance_pass_rate=0.767, citation_coverage_pass_rate=0.867,
                       grounding_pass_rate=0.633, answer_reward_pass_rate=0.633,
                       gate_day_count=3.0)


def marker_centres(axes, artist) -> np.ndarray:
    return axes.transData.transform(np.column_stack([artist.get_xdata(), artist.get_ydata()]))


@pytest.mark.unit
def test_p_at_5_best_equal_to_default_is_drawn_beside_it_not_under_it():
    """"P@5 best" hid under "P@5 default" (same values, same places)."""
    from eval_harness.reporting.plots import p_at_5_trend_figure

    figure = p_at_5_trend_figure(trend_runs(), bands=BANDS)
    axes = figure.axes[0]
    drawn(figure)
    best, default = line(axes, "P@5 best"), line(axes, "P@5 default")
    assert best.get_marker() != default.get_marker()
    apart = np.linalg.norm(marker_centres(axes, best) - marker_centres(axes, default), axis=1)
    size = best.get_markersize() * figure.dpi / 72  # the marker's width in pixels
    assert (apart >= size).all(), apart  # side by side: neither covers the other


def test_each_gate_has_a_panel_of_its_own_and_the_pooling_is_said():
    """One gate line hid under another (same values); a run's pass rate pools
    the answers of every day it gated, and the plot says so."""
    from eval_harness.reporting.plots import gate_trend_figure, plot_gate_trend

    figure = gate_trend_figure(trend_runs(), min_pass_rates=GATES)
    panels = [axes for axes in figure.axes if axes.get_lines()]
    assert len(panels) == len(GATES)
    for axes, gate in zip(panels, GATES):
        assert [artist.get_label() for artist in axes.get_lines()
                if not artist.get_label().startswith("min pass rate")] == [gate]
    assert figure.get_suptitle() == ("Quality gate pass rates, pooled over the 3 days each "
                                     "run gated")
    assert plot_gate_trend(trend_runs(), min_pass_rates=GATES).startswith(b"\x89PNG")

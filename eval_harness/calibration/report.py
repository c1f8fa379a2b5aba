"""A dataset's calibration report, ``reports/calibration-results-<dataset>.md``, and its plot
of P@5 against the semantic weight (``calibration-p5-<dataset>.png``), and the helpers the
report plots share: a y axis zoomed to the data (and saying it does not start at 0),
reference lines named when they fall outside it, legends outside the plot area.

Each dataset has its own pair of files, so calibrating one never overwrites another's.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from pathlib import Path

from eval_harness.calibration.grid import GridPoint, weight_label
from eval_harness.calibration.intervals import interval_level, interval_note, p_at_5_interval
from eval_harness.calibration.result import CalibrationResult
from eval_harness.calibration.text import decision_line, label_source_line, summary_lines
from eval_harness.files import write_file_atomically, write_report

REPORT_NAME = "calibration-results-{dataset}.md"
PLOT_NAME = "calibration-p5-{dataset}.png"
_FILE_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # ingest's dataset names


def dataset_file_stem(dataset: str) -> str:
    """``dataset`` as it can stand in a file name: as is when it is a name ingest accepts
    (letters, digits, ``_``, ``.``, ``-``); else (a live dataset's key in config.yaml may
    hold anything) the other characters become ``_``, followed by a short hash, so that two
    such names never share a file."""
    if _FILE_SAFE.match(dataset):
        return dataset
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset).strip("._-")[:40] or "dataset"
    return f"{readable}-{hashlib.sha1(dataset.encode()).hexdigest()[:8]}"


def report_file_names(dataset: str) -> tuple[str, str]:
    """The Markdown report's and the plot's file names of ``dataset``."""
    stem = dataset_file_stem(dataset)
    return REPORT_NAME.format(dataset=stem), PLOT_NAME.format(dataset=stem)


def write_calibration_report(folder: Path, result: CalibrationResult) -> tuple[Path, Path]:
    """Write the dataset's Markdown report and PNG plot into ``folder``, each atomically."""
    report_name, plot_name = report_file_names(result.dataset)
    plot = write_file_atomically(Path(folder) / plot_name, plot_p_at_5(result))
    report = write_report(Path(folder), report_name, calibration_markdown(result, plot_name))
    return report, plot


def calibration_markdown(result: CalibrationResult, plot_name: str | None = None) -> str:
    """The report: setting, grid table, reference method, uplift, cross-validation, verdict.
    ``plot_name``: the plot's file beside it (default: the dataset's)."""
    plot_name = plot_name or report_file_names(result.dataset)[1]
    lines = [
        f"# Hybrid weight calibration of `{result.dataset}`", "",
        f"Dataset `{result.dataset}`: {result.n_queries} ground-truth queries, "
        f"{result.n_documents} documents, candidate depth {result.candidate_depth}; "
        f"calibrated {result.calibrated_at:%Y-%m-%d %H:%M} UTC. Keyword weight = 1 - semantic "
        f"weight. Rankings are hybrid search's own (min-max fusion, ties by document id).", "",
        f"{label_source_line(result)}.", "",
        f"**{decision_line(result)}.**", "",
        "| semantic | keyword | P@5 | P@5 interval | Recall@5 | nDCG@10 | MRR@10 | Judged@5 | |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for point in result.grid:
        marks = [name for name, chosen in ((_best_mark(result), point == result.best),
                                           ("in force", _in_force(result, point)),
                                           ("default", point == result.default)) if chosen]
        lines.append(f"| {weight_label(point.semantic_weight)} | "
                     f"{weight_label(point.keyword_weight)} | {point.p_at_5:.4f} | "
                     f"{p_at_5_interval(point)} | {point.recall_at_5:.4f} | "
                     f"{point.ndcg_at_10:.4f} | {point.mrr_at_10:.4f} | "
                     f"{point.judged_at_5:.4f} | {', '.join(marks)} |")
    rrf = result.rrf
    lines += [f"| RRF k={result.rrf_k} | | {rrf.p_at_5:.4f} | | {rrf.recall_at_5:.4f} | "
              f"{rrf.ndcg_at_10:.4f} | {rrf.mrr_at_10:.4f} | | reference method |", "",
              f"{interval_note(result)}.", "",
              f"Judged@5: the share of a weight's top 5 that carries any label (relevant or "
              f"judged not relevant); P@5 counts an unlabelled document as not relevant, so "
              f"below calibration.min_judged ({result.min_judged:g}) it is a lower bound.", "",
              f"P@5 ceiling (mean of min(5, relevant)/5, what a perfect ranker gets on this "
              f"ground truth): **{result.p_at_5_ceiling:.4f}**; counting only relevant "
              f"documents among the candidates: {result.p_at_5_candidate_ceiling:.4f}.", ""]
    lines += [f"- {line}" for line in summary_lines(result)]
    lines += [f"- **{line}.**" for line in result.judged.lines()]
    lines += ["", f"![P@5 against the semantic weight]({plot_name})", ""]
    return "\n".join(lines)


def _best_mark(result: CalibrationResult) -> str:
    """The best grid point's mark: adopted when the decision changed the weights to it."""
    changed = result.decision.changed
    return "**best: adopted**" if changed else "best grid point (not adopted)"


def _in_force(result: CalibrationResult, point: GridPoint) -> bool:
    """Whether ``point`` holds the weights in force before the calibration."""
    semantic, keyword = result.decision.in_force
    return (math.isclose(point.semantic_weight, semantic, abs_tol=1e-9)
            and math.isclose(point.keyword_weight, keyword, abs_tol=1e-9))


def plot_p_at_5(result: CalibrationResult) -> bytes:
    """PNG bytes of :func:`p_at_5_figure`."""
    figure = p_at_5_figure(result)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def interval_label(result: CalibrationResult) -> str:
    """The legend entry of the plots' P@5 interval band."""
    return f"P@5 {interval_level(result.decision.alpha)}interval (query bootstrap)"


def p_at_5_figure(result: CalibrationResult):
    """P@5 per semantic weight with its query bootstrap interval (a band), the weights in
    force, the default, RRF and, only when the decision adopted it, the best weight (a
    star): which weight wins, and by how much. The y axis is zoomed to these values and the
    intervals (a 0..1 axis flattens differences of a few thousandths; the intervals keep a
    noise-level difference from looking like a peak); the P@5 ceiling is drawn when it falls
    inside that range, else named in the legend. The legend sits outside the plot, so it
    covers no point."""
    import matplotlib  # heavy, and only the report draws: imported when it does

    matplotlib.use("Agg")  # no display; safe in Dagster workers and CI
    from matplotlib.figure import Figure

    weights = [point.semantic_weight for point in result.grid]
    p_at_5 = [point.p_at_5 for point in result.grid]
    figure = Figure(figsize=(8.0, 4.0), dpi=110, layout="tight")  # room for the legend
    axes = figure.subplots()
    lows = [point.p_at_5_low for point in result.grid]
    highs = [point.p_at_5_high for point in result.grid]
    axes.fill_between(weights, lows, highs, color="tab:blue", alpha=0.15, linewidth=0,
                      label=interval_label(result))
    axes.plot(weights, p_at_5, marker="o", label="P@5")
    axes.axhline(result.rrf.p_at_5, linestyle=":", color="tab:green",
                 label=f"RRF k={result.rrf_k} {result.rrf.p_at_5:.3f}")
    axes.scatter([result.default.semantic_weight], [result.default.p_at_5], s=80,
                 facecolors="none", edgecolors="tab:orange", zorder=3,
                 label=f"default {weight_label(result.default.semantic_weight)}")
    in_force = [point for point in result.grid if _in_force(result, point)]
    if in_force:
        axes.scatter([in_force[0].semantic_weight], [in_force[0].p_at_5], s=70, marker="s",
                     facecolors="none", edgecolors="tab:purple", zorder=3,
                     label=f"in force {weight_label(in_force[0].semantic_weight)}")
    if result.decision.changed:  # a star only for a change
        axes.scatter([result.best.semantic_weight], [result.best.p_at_5], s=120, marker="*",
                     color="tab:red", zorder=4,
                     label=f"adopted {weight_label(result.best.semantic_weight)} "
                           f"(adjusted p {result.decision.adjusted_p:.3g})")
    else:
        axes.plot([], [], " ", label=f"kept: best {weight_label(result.best.semantic_weight)} "
                                     f"adjusted p {result.decision.adjusted_p:.2g}")
    # the intervals set the axis too: a noise-level difference must look like one
    low, high = zoomed_limits([*p_at_5, *lows, *highs, result.rrf.p_at_5])
    axes.set_ylim(low, high)
    draw_reference(axes, result.p_at_5_ceiling, f"ceiling {result.p_at_5_ceiling:.3f}",
                   color="grey", linestyle="--")
    axes.set_xlabel("semantic weight (keyword = 1 - semantic)")
    axes.set_ylabel(axis_label("mean P@5", axes))
    axes.set_title(f"Calibration of '{result.dataset}' ({result.n_queries} queries)")
    axes.grid(alpha=0.3)
    legend_outside(axes)
    return figure


# ---------------------------------------------------------------- shared by the report plots

def zoomed_limits(values, *, margin: float = 0.15, min_span: float = 0.02,
                  bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """Y limits around ``values`` with ``margin`` (a share of their span) on both sides.

    Values closer together than ``min_span`` get that span, centred on them, so a flat line
    sits in the middle rather than on an edge; the limits stay inside ``bounds`` (a metric's
    range). Non-finite values and None are ignored; with nothing left, ``bounds``.
    """
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return bounds
    low, high = min(finite), max(finite)
    if high - low < min_span:
        middle = (low + high) / 2
        low, high = middle - min_span / 2, middle + min_span / 2
    pad = (high - low) * margin
    lower, upper = max(bounds[0], low - pad), min(bounds[1], high + pad)
    return lower, upper


def axis_label(text: str, axes) -> str:
    """``text``, saying so when the y axis does not start at 0 (a zoomed axis exaggerates)."""
    low = axes.get_ylim()[0]
    return f"{text}\n(axis starts at {low:.3g}, not 0)" if low > 0 else text


def draw_reference(axes, value: float | None, label: str, **style) -> bool:
    """A horizontal reference line at ``value`` when it lies inside the y limits; else its
    value is named in the legend with where it lies ("above the axis"). True when drawn."""
    if value is None or not math.isfinite(value):
        return False
    low, high = axes.get_ylim()
    if low <= value <= high:
        axes.axhline(value, label=label, **style)
        return True
    where = "above" if value > high else "below"
    axes.plot([], [], label=f"{label} ({where} the axis)", **style)  # legend entry only
    return False


def legend_outside(axes, **options) -> None:
    """The legend to the right of the axes: it can never cover a line or a point."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                fontsize="small", **options)

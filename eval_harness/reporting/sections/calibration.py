"""Section 3: the latest calibration grid in the DuckDB history and its P@5 verdict."""

from __future__ import annotations

import math

from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.history import (
    calibrated_row,
    decision_from_grid,
    figure_from_grid,
    read_grid_history,
)
from eval_harness.calibration.intervals import format_interval, interval_level
from eval_harness.calibration.judged_at_5 import judged_summary
from eval_harness.calibration.verdict import VERDICT_LABELS, VerdictBands
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import (
    FAIL,
    PASS,
    SECTION_TITLES,
    WARN,
    Block,
    BuiltSection,
    Check,
    Figure,
    Metric,
    Paragraph,
    Section,
    Table,
    no_data,
)
from eval_harness.reporting.plots import plot_calibration_grid
from eval_harness.settings import Settings

CALIBRATION_KEYS: dict[str, Metric] = dict.fromkeys(
    ("p_at_5_best", "best_semantic_weight", "p_at_5_default", "p_at_5_ceiling", "verdict",
     "calibrated_at", "decision", "decision_adjusted_p"))
CALIBRATION_PLOT = "calibration-grid.png"
CHECK_NAME = "P@5 verdict"


def calibration_section(settings: Settings, dataset: str) -> BuiltSection:
    """The newest grid of ``dataset`` in the history: its table, plot and verdict."""
    title = SECTION_TITLES["calibration"]
    history = read_grid_history(settings.history_duckdb_path, dataset)
    if history.empty:
        hint = (f"No calibration of dataset '{dataset}' in the history "
                f"({settings.history_duckdb_path}): run `eval-harness calibrate`.")
        return no_data("calibration", hint, dict(CALIBRATION_KEYS), check=CHECK_NAME)
    grid = history[history["run_at"] == history["run_at"].max()].sort_values("semantic_weight")
    bands = VerdictBands(settings.calibration.verdict.full_success,
                         settings.calibration.verdict.partial_success)
    figure = figure_from_grid(grid, bands)  # what calibrate printed and stored
    verdict, p_at_5 = figure.verdict, figure.p_at_5
    best = calibrated_row(grid)
    default = grid[grid["is_default"]]
    ceiling = float(best["p_at_5_ceiling"])
    calibrated_at = fmt.utc(best["run_at"])
    status = {"full_success": PASS, "partial_success": WARN, "failure": FAIL}[verdict]
    sentence = figure.sentence(bands, ceiling)
    judged = judged_summary(
        dataset, grid[["semantic_weight", "keyword_weight", "judged_at_5"]]
        .astype(float).itertuples(index=False, name=None),
        min_judged=settings.calibration.min_judged,
        named={"best": float(best["semantic_weight"]),
               "in force": settings.weights_for(dataset).semantic})
    decision = decision_from_grid(grid)
    alpha = None if decision is None else decision.alpha
    decided = ("Weights: no decision recorded (a calibration from before the decision rule)"
               if decision is None else f"Weights: {decision.sentence}")
    blocks: tuple[Block, ...] = (
        Paragraph(f"**{sentence}.**"),
        Paragraph(f"**{decided}** (max-statistic paired permutation test over the grid "
                  f"against the weights in force; the weights change only when the "
                  f"adjusted p <= alpha and the gain >= min_gain"
                  + ("; on judge labels corrected by a human sample also only when the PPI "
                     "interval's lower bound clears max(0, min_gain)"
                     if decision is not None and decision.corrected else "") + ")."),
        Paragraph(f"Dataset `{dataset}`: {int(best['n_queries'])} ground-truth queries, "
                  f"candidate depth {int(best['candidate_depth'])}, calibrated "
                  f"{calibrated_at:%Y-%m-%d %H:%M} UTC. Keyword weight = 1 - semantic weight. "
                  f"P@5 interval: {interval_level(alpha)}percentile bootstrap over the "
                  f"queries, one weight at a time (the decision's test compares weights)."),
        _grid_table(grid),
        Figure(CALIBRATION_PLOT, plot_calibration_grid(grid, bands),
               "P@5 against the semantic weight with its interval (shaded) in its verdict "
               "bands (top) and the other ranking metrics, which have no verdict (bottom); "
               "both y axes are zoomed to the data, the top one to the intervals too"),
        Paragraph(f"P@5 ceiling (what a perfect ranker gets on this ground truth: mean of "
                  f"min(5, relevant) / 5): **{ceiling:.4f}**."),
        *(Paragraph(f"**{line}.**") for line in judged.lines()))
    default_p = float(default["p_at_5"].iloc[0]) if len(default) else None
    metrics: dict[str, Metric] = {
               "p_at_5_best": float(best["p_at_5"]),  # the grid's, beside the default's
               "best_semantic_weight": float(best["semantic_weight"]),
               "p_at_5_default": default_p, "p_at_5_ceiling": ceiling,
               "verdict": VERDICT_LABELS[verdict], "calibrated_at": calibrated_at.isoformat(),
               "decision": None if decision is None else decision.decision,
               "decision_adjusted_p": None if decision is None else decision.adjusted_p}
    corrected = "PPI-corrected " if figure.basis == "ppi" else ""
    labels = f", labels {figure.label_source}" if figure.label_source else ""
    check = Check(CHECK_NAME, status, f"{VERDICT_LABELS[verdict]}: {corrected}P@5 "
                  f"{p_at_5:.4f} at {figure.at}{labels}",
                  calibrated_at)
    return BuiltSection(Section("calibration", title, blocks, status), metrics, (check,))


def _grid_table(grid) -> Table:
    """One row per weight; the best, the weights in force and the default are named, the
    best in bold only when the decision adopted it (or none was recorded)."""
    rows, marked = [], set()
    lows, highs = (grid[name] if name in grid else [math.nan] * len(grid)
                   for name in ("p_at_5_low", "p_at_5_high"))
    recorded = grid["decision"] if "decision" in grid else [None] * len(grid)
    in_force = grid["is_in_force"] if "is_in_force" in grid else [False] * len(grid)
    for position, (row, decision, is_in_force, low, high) in enumerate(
            zip(grid.itertuples(index=False), recorded, in_force, lows, highs)):
        best = {"changed": "best: adopted", "kept": "best grid point (kept out)"}.get(
            decision if isinstance(decision, str) else "", "best")
        marks = [name for name, chosen in ((best, row.is_best),
                                           ("in force", _flag(is_in_force)),
                                           ("default", row.is_default)) if chosen]
        if row.is_best and best != "best grid point (kept out)":
            marked.add(position)
        rows.append((weight_label(row.semantic_weight), weight_label(row.keyword_weight),
                     f"{row.p_at_5:.4f}", format_interval(low, high), f"{row.recall_at_5:.4f}",
                     f"{row.ndcg_at_10:.4f}", f"{row.mrr_at_10:.4f}", _share(row.judged_at_5),
                     ", ".join(marks)))
    return Table(("semantic", "keyword", "P@5", "P@5 interval", "Recall@5", "nDCG@10", "MRR@10",
                  "Judged@5", ""), tuple(rows), (True,) * 8 + (False,), frozenset(marked))


def _share(value) -> str:
    """Judged@5 of a grid row; "n/a" where it was not recorded."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def _flag(value) -> bool:
    """A history cell as a bool: NULL (not recorded) is False."""
    return value is not None and value == value and bool(value)

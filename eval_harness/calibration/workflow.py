"""What a calibration writes, for ``eval-harness calibrate`` and the Dagster assets alike.

Two steps. ``eval-harness calibrate`` runs both, publishing first; in Dagster the asset
``calibration_grid`` records and ``calibrated_weights`` publishes, from the grid the DuckDB
I/O manager handed over between them.

* :func:`publish_calibration`: the ``calibrated_weights`` row recording the decision
  (:mod:`eval_harness.calibration.decision`: changed or kept, with its evidence) and, only
  when the decision is ``changed``, ``datasets.<name>.hybrid_search`` in config.yaml
  (:mod:`eval_harness.calibration.publish`), taken from the grid frame's calibrated row and
  the decision and verdict figure it carries, so both callers publish the same decision,
  weights, figure, verdict and label source for the same grid;
* :func:`record_calibration`: the grid appended to the DuckDB history and the dataset's
  report (reports/calibration-results-<dataset>.md with its plot).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import pandas as pd

from eval_harness.calibration.decision import WeightDecision
from eval_harness.calibration.history import (
    append_grid_history,
    calibrated_row,
    decision_from_grid,
    figure_from_grid,
)
from eval_harness.calibration.publish import WeightsPublished, publish_calibrated_weights
from eval_harness.calibration.report import write_calibration_report
from eval_harness.calibration.run import CalibrationResult
from eval_harness.calibration.verdict import VerdictBands, VerdictFigure
from eval_harness.settings import Settings
from eval_harness.store import StoreLocation


@dataclass(frozen=True)
class CalibrationPublished:
    """The published weights, the decision behind them and the figure their verdict was
    given on."""

    weights: WeightsPublished
    figure: VerdictFigure

    @property
    def decision(self) -> WeightDecision | None:
        return self.weights.decision


@dataclass(frozen=True)
class CalibrationRecorded:
    """Where the grid and its report went."""

    history_path: Path
    history_rows: int
    report: Path
    plot: Path


def verdict_bands(settings: Settings) -> VerdictBands:
    """The P@5 bands of config.yaml's ``calibration`` section."""
    return VerdictBands(settings.calibration.full_success, settings.calibration.partial_success)


def publish_calibration(location: StoreLocation, settings: Settings, grid: pd.DataFrame, *,
                        run_id: str) -> CalibrationPublished:
    """Publish the decision of ``grid`` (a :func:`~.history.grid_frame`): the
    ``calibrated_weights`` row, tagged ``run_id``, and, when the decision changed the
    weights, the dataset's weights in the config file of ``settings``, in one transaction of
    a new connection to ``location``. A ``kept`` decision leaves config.yaml untouched.

    The verdict and its label source are those the grid's calibrated row carries, graded
    under ``settings``' bands; a label source not recorded falls back to the row's
    ``label_source`` column, else "human".
    """
    best = calibrated_row(grid)
    figure = figure_from_grid(grid, verdict_bands(settings))  # what the verdict is given on
    with location.connection(autocommit=True) as conn:  # publish runs its own transaction
        published = publish_calibrated_weights(
            conn, settings.config_path, dataset=str(best["dataset"]),
            semantic_weight=float(best["semantic_weight"]), p_at_5=figure.p_at_5,
            verdict=figure.verdict, run_id=run_id, calibrated_at=calibrated_at(best),
            label_source=figure.label_source or str(best.get("label_source", "human")),
            decision=decision_from_grid(grid))
    return CalibrationPublished(published, figure)


def record_calibration(settings: Settings, result: CalibrationResult,
                       grid: pd.DataFrame, *,
                       history: duckdb.DuckDBPyConnection | None = None) -> CalibrationRecorded:
    """Append ``grid`` (``result``'s :func:`~.history.grid_frame`) to the DuckDB history of
    ``settings`` (``history``: that file, already opened) and write ``result``'s report under
    ``reports/``.

    Raises :class:`~.history.HistoryUnavailable` when the history cannot be written.
    """
    path = settings.history_duckdb_path
    rows = append_grid_history(path, grid, history=history)
    report, plot = write_calibration_report(settings.root / "reports", result)
    return CalibrationRecorded(path, rows, report, plot)


def calibrated_at(best: pd.Series) -> datetime:
    """A grid row's ``run_at`` as an aware datetime (grid_frame writes UTC; a frame read back
    without its time zone is taken as UTC)."""
    stamp = pd.Timestamp(best["run_at"])
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp).to_pydatetime()

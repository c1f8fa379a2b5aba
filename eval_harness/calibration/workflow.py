"""What a calibration writes, for ``eval-harness calibrate`` and the Dagster assets alike.

Two steps. ``eval-harness calibrate`` runs both (:func:`write_calibration`), publishing
first; in Dagster the asset ``calibration_grid`` records and ``calibrated_weights``
publishes, from the grid the DuckDB I/O manager handed over between them.

* :func:`publish_calibration`: the ``calibrated_weights`` row recording the decision
  (:mod:`eval_harness.calibration.decision`: changed or kept, with its evidence) and, only
  when the decision is ``changed``, ``datasets.<name>.hybrid_search`` in config.yaml
  (:mod:`eval_harness.calibration.publish`), from a :class:`~.decision.CalibrationOutcome`:
  the CLI's comes from the calibration itself, Dagster's from the stored grid
  (:func:`~.history.outcome_from_grid`), so both callers publish the same decision, weights,
  figure, verdict and label source for the same calibration;
* :func:`record_calibration`: the grid appended to the DuckDB history (the one place a
  calibration becomes a table, :func:`~.history.grid_frame`) and the dataset's report
  (reports/calibration-results-<dataset>.md with its plot).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from eval_harness.calibration.decision import CalibrationOutcome
from eval_harness.calibration.history import append_grid_history, grid_frame, open_history
from eval_harness.calibration.publish import WeightsPublished, publish_calibrated_weights
from eval_harness.calibration.report import write_calibration_report
from eval_harness.calibration.result import CalibrationResult
from eval_harness.calibration.verdict import VerdictBands
from eval_harness.settings import Settings
from eval_harness.store import StoreLocation


@dataclass(frozen=True)
class CalibrationRecorded:
    """Where the grid and its report went, and the grid as the history holds it."""

    history_path: Path
    history_rows: int
    report: Path
    plot: Path
    grid: pd.DataFrame


def verdict_bands(settings: Settings) -> VerdictBands:
    """The P@5 bands of config.yaml's ``calibration`` section."""
    return VerdictBands(settings.calibration.verdict.full_success,
                         settings.calibration.verdict.partial_success)


def write_calibration(location: StoreLocation, settings: Settings, result: CalibrationResult,
                      *, run_id: str, on_wait: Callable[[], None] | None = None
                      ) -> tuple[WeightsPublished, CalibrationRecorded]:
    """Publish ``result`` and record it (module docstring). The history file is opened
    first: when another process holds it (``on_wait()`` is called once then), that wait
    comes before anything is written, so a stop signal during it (which ends it) leaves
    nothing written."""
    with open_history(settings.history_duckdb_path, on_wait=on_wait) as history:
        published = publish_calibration(location, settings, result.outcome, run_id=run_id)
        return published, record_calibration(settings, result, history=history)


def publish_calibration(location: StoreLocation, settings: Settings,
                        outcome: CalibrationOutcome, *, run_id: str) -> WeightsPublished:
    """Publish ``outcome``'s decision: the ``calibrated_weights`` row, tagged ``run_id``,
    and, when the decision changed the weights, the dataset's weights in the config file of
    ``settings``, in one transaction of a new connection to ``location``. A ``kept``
    decision leaves config.yaml untouched."""
    with location.connection(autocommit=True) as conn:  # publish runs its own transaction
        return publish_calibrated_weights(
            conn, settings.config_path, dataset=outcome.dataset,
            semantic_weight=outcome.best_semantic, p_at_5=outcome.figure.p_at_5,
            verdict=outcome.figure.verdict, run_id=run_id,
            calibrated_at=outcome.calibrated_at, label_source=outcome.label_source,
            decision=outcome.decision)


def record_calibration(settings: Settings, result: CalibrationResult, *,
                       history: duckdb.DuckDBPyConnection | None = None
                       ) -> CalibrationRecorded:
    """Append ``result``'s grid to the DuckDB history of ``settings`` (``history``: that
    file, already opened) and write ``result``'s report under ``reports/``.

    Raises :class:`~.history.HistoryUnavailable` when the history cannot be written.
    """
    path = settings.history_duckdb_path
    grid = grid_frame(result)
    rows = append_grid_history(path, grid, history=history)
    report, plot = write_calibration_report(settings.root / "reports", result)
    return CalibrationRecorded(path, rows, report, plot, grid)

"""The run history in the embedded DuckDB file (the trend plots drawn from it are in
:mod:`eval_harness.reporting.plots`).

Every run report records its run's headline numbers in the table ``run_history`` (beside
``calibration_grid_history`` in ``history.duckdb_path``): one row per metric, in long form
``(run_id, recorded_at, dataset, metric, value)``, so a new metric needs no schema change.
Recording a run again replaces that run's rows (a re-rendered report never duplicates a
point). Only numbers are kept: a flag is stored as 0 or 1; text, None and NaN are left out.

The file is opened as :mod:`eval_harness.calibration.history` opens it (DuckDB allows one
writer at a time: lock retries with capped backoff and jitter, then
:class:`~eval_harness.calibration.history.HistoryUnavailable`), and each write is one
transaction (:mod:`eval_harness.reporting.sql` holds the statements).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import pandas as pd

from eval_harness.calibration.history import open_history
from eval_harness.reporting.sql import RUN_HISTORY_COLUMNS, replace_run_rows, run_history_rows

__all__ = ["history_values", "record_run", "read_run_history", "runs_table"]


def history_values(metrics: Mapping[str, object]) -> dict[str, float]:
    """The metrics worth a trend point: finite numbers, flags as 0/1; the rest is dropped."""
    values = {}
    for name, value in metrics.items():
        if isinstance(value, bool):
            values[name] = float(value)
        elif isinstance(value, (int, float)) and math.isfinite(value):
            values[name] = float(value)
    return values


def record_run(path: Path | str, *, run_id: str, dataset: str, recorded_at: datetime,
               metrics: Mapping[str, object]) -> int:
    """Replace the rows of ``run_id`` in ``run_history`` by ``metrics``; rows written."""
    values = history_values(metrics)
    frame = pd.DataFrame({"run_id": run_id, "recorded_at": pd.Timestamp(recorded_at),
                          "dataset": dataset, "metric": list(values),
                          "value": list(values.values())}, columns=list(RUN_HISTORY_COLUMNS))
    with open_history(Path(path)) as con:
        replace_run_rows(con, run_id, frame)
    return len(frame)


def read_run_history(path: Path | str, dataset: str | None = None) -> pd.DataFrame:
    """The recorded rows (long form), oldest first; empty when nothing was recorded."""
    path = Path(path)
    empty = pd.DataFrame(columns=list(RUN_HISTORY_COLUMNS))
    if not path.is_file():
        return empty
    with open_history(path) as con:
        rows = run_history_rows(con, dataset)
    return empty if rows is None else rows


def runs_table(history: pd.DataFrame) -> pd.DataFrame:
    """One row per run (oldest first), one column per metric, indexed by ``recorded_at``."""
    if history.empty:
        return pd.DataFrame()
    wide = history.pivot_table(index=["recorded_at", "run_id"], columns="metric",
                               values="value", aggfunc="last")
    return wide.sort_index().reset_index(level="run_id")

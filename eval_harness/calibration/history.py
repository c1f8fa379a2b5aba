"""The calibration grid as a table, and its history in the embedded DuckDB file.

Every calibration appends one row per weight to ``calibration_grid_history`` (run time,
dataset, weights, all metrics, each P@5 with its interval, the P@5 ceiling, best/default
flags, the verdict and the figure it is given on), so nightly trends can be plotted with one
query. The CLI writes it directly;
the Dagster asset writes it too and also hands the same frame to Dagster's DuckDB I/O manager
(table ``calibration_grid``, the latest grid only).

DuckDB lets one process write a database file at a time. Writers here open the file, write
in one transaction and close it at once; when another process holds the lock they retry with
capped exponential backoff and jitter (at most ``MAX_LOCK_WAIT_SECONDS`` in all), then fail
with one sentence; a stop signal ends the wait at once (:func:`eval_harness.stopping.check`).
A transaction is all-or-nothing, so a crash never leaves half a grid.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd

from eval_harness import stopping
from eval_harness.calibration.decision import WeightDecision, decision_columns, decision_from_row
from eval_harness.calibration.run import CalibrationResult
from eval_harness.calibration.sql import GRID_COLUMNS, grid_history_rows, insert_grid_rows
from eval_harness.calibration.verdict import (
    VerdictBands,
    VerdictFigure,
    figure_columns,
    figure_from_row,
)
from eval_harness.errors import UserError

MAX_LOCK_WAIT_SECONDS = 15.0


class HistoryUnavailable(UserError, RuntimeError):
    """The DuckDB history file could not be written (locked too long, or not writable)."""


def grid_frame(result: CalibrationResult) -> pd.DataFrame:
    """One row per weight of the grid, with the columns of :data:`GRID_COLUMNS`."""
    figure = figure_columns(result.figure)
    decided = decision_columns(result.decision)
    in_force = result.decision.in_force if result.decision is not None else None
    rows = [dict(point.to_dict(), run_at=result.calibrated_at, dataset=result.dataset,
                 p_at_5_ceiling=result.p_at_5_ceiling, is_best=point == result.best,
                 is_default=point == result.default, n_queries=result.n_queries,
                 candidate_depth=result.candidate_depth, verdict=result.verdict,
                 is_in_force=in_force is not None and _same_pair(point, in_force),
                 **figure, **decided)
            for point in result.grid]
    frame = pd.DataFrame(rows, columns=list(GRID_COLUMNS))
    frame["run_at"] = pd.to_datetime(frame["run_at"], utc=True)
    return frame.astype({"n_queries": "int32", "candidate_depth": "int32",
                         "verdict_n_human": "int32", "verdict_n_judged": "int32",
                         "judged_at_5": "float64",  # None (not computed) -> NaN
                         "p_at_5_low": "float64", "p_at_5_high": "float64",
                         "decision_permutations": "int32", "is_in_force": "bool",
                         "decision_n_human": "int32"})


def _same_pair(point, pair: tuple[float, float]) -> bool:
    return (abs(point.semantic_weight - pair[0]) <= 1e-9
            and abs(point.keyword_weight - pair[1]) <= 1e-9)


def decision_from_grid(frame: pd.DataFrame) -> WeightDecision | None:
    """The decision the grid's calibrated row carries; None when none was made."""
    return decision_from_row(calibrated_row(frame))


def calibrated_row(frame: pd.DataFrame) -> pd.Series:
    """The grid row of the calibrated (best) weights; ``ValueError`` unless exactly one."""
    best = frame[frame["is_best"]]
    if len(best) != 1:
        raise ValueError(f"the calibration grid marks {len(best)} rows as best; expected one "
                         f"(re-materialize calibration_grid).")
    return best.iloc[0]


def figure_from_grid(frame: pd.DataFrame, bands: VerdictBands) -> VerdictFigure:
    """The P@5 the grid's verdict is given on, with its label source (and interval, when
    corrected by a human sample), and the verdict under ``bands``
    (:func:`eval_harness.calibration.verdict.figure_from_row`)."""
    return figure_from_row(calibrated_row(frame), bands)


def append_grid_history(path: Path | str, frame: pd.DataFrame, *,
                        history: duckdb.DuckDBPyConnection | None = None) -> int:
    """Append ``frame`` (see :func:`grid_frame`) to ``calibration_grid_history``; rows written.
    ``history``: the file at ``path`` already opened (:func:`open_history`), else it is
    opened and closed here."""
    if history is not None:
        _append(history, frame)
    else:
        with open_history(Path(path)) as con:
            _append(con, frame)
    return len(frame)


def _append(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    con.begin()
    insert_grid_rows(con, frame)
    con.commit()


def read_grid_history(path: Path | str, dataset: str | None = None) -> pd.DataFrame:
    """The recorded grids, oldest first (an empty frame when nothing was recorded yet)."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=list(GRID_COLUMNS))
    with open_history(path) as con:  # a read-only open would also wait for the lock
        rows = grid_history_rows(con, dataset)
    if rows is None:
        return pd.DataFrame(columns=list(GRID_COLUMNS))
    return rows


def open_history(path: Path, *,
                 on_wait: Callable[[], None] | None = None) -> duckdb.DuckDBPyConnection:
    """A connection to the history file, once no other process holds it (see the module
    docstring); ``on_wait()`` is called once if it has to wait. A stop signal during the wait
    raises :class:`~eval_harness.stopping.Interrupted` (also inside a cooperative block:
    nothing was written by this wait)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryUnavailable(f"{path.parent}: cannot create the history folder "
                                 f"({exc.strerror}); set history.duckdb_path in "
                                 f"config.yaml.") from None
    deadline = time.monotonic() + MAX_LOCK_WAIT_SECONDS
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path))
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise HistoryUnavailable(
                    f"{path}: cannot open the DuckDB history ({exc}).") from None
            if time.monotonic() + delay > deadline:
                raise HistoryUnavailable(
                    f"{path} is locked by another process for more than "
                    f"{MAX_LOCK_WAIT_SECONDS:g} s; let it finish (DuckDB allows one writer "
                    f"at a time) and run again.") from None
            if on_wait is not None:
                on_wait()
                on_wait = None
            stopping.sleep(delay * (0.5 + random.random()))  # jitter: writers not in step
            delay = min(delay * 2, 1.0)


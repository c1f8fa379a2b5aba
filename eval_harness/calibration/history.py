"""The calibration grid as a table, and its history in the embedded DuckDB file.

Every calibration appends one row per weight to ``calibration_grid_history`` (run time,
dataset, weights, all metrics, each P@5 with its interval, the P@5 ceiling, best/default
flags, the verdict and the figure it is given on, the decision and its evidence), so nightly
trends can be plotted with one query. This module is where a calibration result becomes that
table (:func:`grid_frame`) and where a stored table becomes typed objects again
(:func:`outcome_from_grid`, :func:`decision_from_grid`, :func:`figure_from_grid`), for the
readers of stored grids: Dagster's publishing asset and P@5 check (the Dagster asset that
calibrates hands the same frame to Dagster's DuckDB I/O manager: table ``calibration_grid``,
the latest grid only) and the run report.

DuckDB lets one process write a database file at a time. Writers here open the file, write
in one transaction and close it at once; when another process holds the lock they retry with
capped exponential backoff and jitter (at most ``MAX_LOCK_WAIT_SECONDS`` in all), then fail
with one sentence; a stop signal ends the wait at once (:func:`eval_harness.stopping.check`).
A transaction is all-or-nothing, so a crash never leaves half a grid.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from eval_harness import stopping
from eval_harness.calibration.decision import CalibrationOutcome, WeightDecision
from eval_harness.calibration.result import CalibrationResult
from eval_harness.calibration.sql import GRID_COLUMNS, grid_history_rows, insert_grid_rows
from eval_harness.calibration.verdict import VerdictBands, VerdictFigure, graded_figure

MAX_LOCK_WAIT_SECONDS = 15.0
# numeric columns an older history file may lack
LATER_COLUMNS = ("judged_at_5", "p_at_5_low", "p_at_5_high")


class HistoryUnavailable(RuntimeError):
    """The DuckDB history file could not be written (locked too long, or not writable)."""


def grid_frame(result: CalibrationResult) -> pd.DataFrame:
    """One row per weight of the grid, with the columns of :data:`GRID_COLUMNS`."""
    figure = figure_columns(result.figure)
    decided = decision_columns(result.decision)
    rows = [dict(point.to_dict(), run_at=result.calibrated_at, dataset=result.dataset,
                 p_at_5_ceiling=result.p_at_5_ceiling, is_best=point == result.best,
                 is_default=point == result.default, n_queries=result.n_queries,
                 candidate_depth=result.candidate_depth, verdict=result.verdict,
                 is_in_force=_same_pair(point, result.decision.in_force),
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


def outcome_from_grid(frame: pd.DataFrame, bands: VerdictBands) -> CalibrationOutcome:
    """What the calibration that stored ``frame`` decided, as publishing writes it: its
    calibrated row, the decision and the verdict figure (graded under ``bands``) that row
    carries. A grid from before the verdict columns falls back to its ``label_source``
    column, else "human"."""
    best = calibrated_row(frame)
    figure = figure_from_row(best, bands)
    return CalibrationOutcome(
        dataset=str(best["dataset"]), best_semantic=float(best["semantic_weight"]),
        decision=decision_from_row(best), figure=figure,
        label_source=figure.label_source or str(best.get("label_source", "human")),
        calibrated_at=calibrated_at(best))


def decision_from_grid(frame: pd.DataFrame) -> WeightDecision | None:
    """The decision the grid's calibrated row carries; None for a grid from before it."""
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
    (:func:`figure_from_row`)."""
    return figure_from_row(calibrated_row(frame), bands)


def calibrated_at(best: pd.Series) -> datetime:
    """A grid row's ``run_at`` as an aware datetime (grid_frame writes UTC; a frame read back
    without its time zone is taken as UTC)."""
    stamp = pd.Timestamp(best["run_at"])
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp).to_pydatetime()


# ------------------------------------------------------------ the decision and figure columns

def decision_columns(decision: WeightDecision) -> dict[str, Any]:
    """The grid frame's decision columns (the same on every row of one calibration), from
    which the Dagster asset that publishes reads the decision back (:func:`decision_from_row`)."""
    return {"decision": decision.decision, "in_force_semantic": decision.in_force[0],
            "in_force_keyword": decision.in_force[1], "decision_gain": decision.gain,
            "decision_ci_low": decision.low, "decision_ci_high": decision.high,
            "decision_adjusted_p": decision.adjusted_p, "decision_alpha": decision.alpha,
            "decision_min_gain": decision.min_gain,
            "decision_permutations": decision.permutations,
            "decision_label_source": decision.label_source, "decision_note": decision.note,
            "decision_ppi_gain": _nan(decision.ppi_gain),
            "decision_ppi_ci_low": _nan(decision.ppi_low),
            "decision_ppi_ci_high": _nan(decision.ppi_high),
            "decision_n_human": decision.n_human or 0}


def decision_from_row(best: pd.Series) -> WeightDecision | None:
    """The decision the best row of a grid frame carries (:func:`decision_columns`); None for
    a grid from before the decision rule."""
    kind = best.get("decision")
    if not isinstance(kind, str) or kind not in ("changed", "kept"):
        return None
    note = best.get("decision_note")
    return WeightDecision(
        changed=kind == "changed",
        in_force=(float(best["in_force_semantic"]), float(best["in_force_keyword"])),
        best=(float(best["semantic_weight"]), float(best["keyword_weight"])),
        gain=float(best["decision_gain"]), low=float(best["decision_ci_low"]),
        high=float(best["decision_ci_high"]), adjusted_p=float(best["decision_adjusted_p"]),
        alpha=float(best["decision_alpha"]), min_gain=float(best["decision_min_gain"]),
        permutations=int(best["decision_permutations"]),
        label_source=str(best.get("decision_label_source") or "human"),
        note=note if isinstance(note, str) and note else None,
        **_ppi_fields(best))


def _ppi_fields(best: pd.Series) -> dict[str, Any]:
    """The PPI fields of a decision row; none for a row without them (a history written
    before them, or a decision on human labels or without a human sample)."""
    gain = best.get("decision_ppi_gain")
    if gain is None or _number(gain) is None:
        return {}
    return {"ppi_gain": float(gain), "ppi_low": float(best["decision_ppi_ci_low"]),
            "ppi_high": float(best["decision_ppi_ci_high"]),
            "n_human": int(best["decision_n_human"])}


def figure_columns(figure: VerdictFigure) -> dict[str, Any]:
    """The grid frame's ``verdict_*`` columns (the same on every row of one calibration)."""
    lo, hi = figure.interval if figure.interval is not None else (math.nan, math.nan)
    return {"verdict_p_at_5": figure.p_at_5, "verdict_label_source": figure.label_source,
            "verdict_interval_low": lo, "verdict_interval_high": hi,
            "verdict_judges_p_at_5": _nan(figure.judges_p_at_5),
            "verdict_n_human": figure.n_human or 0, "verdict_n_judged": figure.n_judged or 0,
            "verdict_semantic_weight": figure.semantic_weight,
            "verdict_keyword_weight": _nan(figure.keyword_weight),
            "verdict_weights": figure.weights}


def figure_from_row(best: pd.Series, bands: VerdictBands) -> VerdictFigure:
    """The verdict figure the calibrated row of a grid frame carries (:func:`figure_columns`)
    and the verdict under ``bands``. A row without those columns (a history written before
    them) gives its P@5, the label source unrecorded."""
    recorded = _number(best.get("verdict_semantic_weight"))
    at = ({"semantic_weight": float(best["semantic_weight"])} if recorded is None  # older
          else {"semantic_weight": recorded,
                "keyword_weight": _number(best.get("verdict_keyword_weight")),
                "weights": _text(best.get("verdict_weights"))})
    figure = _number(best.get("verdict_p_at_5"))
    if figure is None:
        return graded_figure(float(best["p_at_5"]), bands, **at,
                             label_source=_text(best.get("label_source")))
    lo, hi = _number(best.get("verdict_interval_low")), _number(best.get("verdict_interval_high"))
    ppi = lo is not None and hi is not None
    return graded_figure(figure, bands, label_source=_text(best.get("verdict_label_source")),
                         **at, interval=(lo, hi) if ppi else None,
                         judges_p_at_5=_number(best.get("verdict_judges_p_at_5")) if ppi
                         else None,
                         n_human=int(best["verdict_n_human"]) if ppi else None,
                         n_judged=int(best["verdict_n_judged"]) if ppi else None)


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _number(value: Any) -> float | None:
    """A frame cell as a float; None for a missing cell, None or NaN."""
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# ------------------------------------------------------------------------- the DuckDB file

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
    """The recorded grids, oldest first (an empty frame when nothing was recorded yet).
    A file no grid was appended to since a column was added lacks it; it reads as NaN
    (not recorded), so readers need not know the file's age."""
    path = Path(path)
    if not path.is_file():
        return pd.DataFrame(columns=list(GRID_COLUMNS))
    with open_history(path) as con:  # a read-only open would also wait for the lock
        rows = grid_history_rows(con, dataset)
    if rows is None:
        return pd.DataFrame(columns=list(GRID_COLUMNS))
    for column in LATER_COLUMNS:
        if column not in rows.columns:
            rows[column] = float("nan")
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


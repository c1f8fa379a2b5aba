"""Every SQL statement of calibration: the owner of the ``calibrated_weights`` table the RAG
system reads its weights from, and of the DuckDB grid history table. (The ground-truth reads
behind the TREC files are :mod:`eval_harness.datasets.ground_truth`'s.)

Each function runs in the caller's transaction (:mod:`.history` opens and commits the DuckDB
one).
"""

from __future__ import annotations

from datetime import datetime

import duckdb
import pandas as pd
import psycopg

from eval_harness.calibration.decision import WeightDecision

# ------------------------------------------------------------------------ calibrated weights

# What the RAG system runs to pick up every dataset's current weights (the manual shows it
# schema-qualified): the newest row per dataset; the id breaks a tie in calibrated_at.
LATEST_WEIGHTS_SQL = """
    SELECT DISTINCT ON (dataset) dataset, semantic_weight, keyword_weight, p_at_5, verdict,
           label_source, run_id, calibrated_at, decision, adjusted_p
    FROM calibrated_weights
    ORDER BY dataset, calibrated_at DESC, id DESC"""


def insert_calibrated_weights(conn: psycopg.Connection, *, dataset: str, semantic_weight: float,
                              keyword_weight: float, p_at_5: float | None, verdict: str | None,
                              label_source: str, run_id: str | None, calibrated_at: datetime,
                              decision: WeightDecision | None = None) -> int:
    """Record one calibration's weights for ``dataset`` (the weights in force after
    ``decision``) and the decision with its evidence; the new row's id."""
    evidence = (None,) * 10 if decision is None else (
        decision.decision, *decision.in_force, *decision.best, decision.gain, decision.low,
        decision.high, decision.adjusted_p, decision.alpha)
    return conn.execute(
        "INSERT INTO calibrated_weights (dataset, semantic_weight, keyword_weight, p_at_5, "
        "verdict, label_source, run_id, calibrated_at, decision, in_force_semantic, "
        "in_force_keyword, best_semantic, best_keyword, gain, ci_low, ci_high, adjusted_p, "
        "alpha) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "RETURNING id",
        (dataset, semantic_weight, keyword_weight, p_at_5, verdict, label_source, run_id,
         calibrated_at, *evidence)).fetchone()[0]


def latest_calibrated_weights(conn: psycopg.Connection) -> dict[str, dict]:
    """Every dataset's newest row of ``calibrated_weights``: {dataset: row as a dict}."""
    cursor = conn.execute(LATEST_WEIGHTS_SQL)
    names = [column.name for column in cursor.description]
    return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}


# ------------------------------------------------------------------------------ grid history

HISTORY_TABLE = "calibration_grid_history"  # in the DuckDB history file
GRID_COLUMNS = {  # column -> DuckDB type, in table order
    "run_at": "TIMESTAMPTZ", "dataset": "VARCHAR", "semantic_weight": "DOUBLE",
    "keyword_weight": "DOUBLE", "p_at_5": "DOUBLE", "recall_at_5": "DOUBLE",
    "ndcg_at_10": "DOUBLE", "mrr_at_10": "DOUBLE", "p_at_5_ceiling": "DOUBLE",
    "is_best": "BOOLEAN", "is_default": "BOOLEAN", "n_queries": "INTEGER",
    "candidate_depth": "INTEGER", "verdict": "VARCHAR",
    # the figure the verdict is given on (eval_harness.calibration.verdict); added later, so
    # a history written before them has them added, NULL on its old rows
    "verdict_p_at_5": "DOUBLE", "verdict_label_source": "VARCHAR",
    "verdict_interval_low": "DOUBLE", "verdict_interval_high": "DOUBLE",
    "verdict_judges_p_at_5": "DOUBLE", "verdict_n_human": "INTEGER",
    "verdict_n_judged": "INTEGER",
    # the weights the verdict is given at (those in force after the decision), added later:
    # NULL on older rows, which gave it at the best grid point
    "verdict_semantic_weight": "DOUBLE", "verdict_keyword_weight": "DOUBLE",
    "verdict_weights": "VARCHAR",
    # the share of the weight's top 5 carrying any label (eval_harness.calibration.judged_at_5);
    # added later too: NULL on the rows of a history written before it
    "judged_at_5": "DOUBLE",
    # the decision on the weights (eval_harness.calibration.decision), added later like the above
    "is_in_force": "BOOLEAN", "decision": "VARCHAR", "in_force_semantic": "DOUBLE",
    "in_force_keyword": "DOUBLE", "decision_gain": "DOUBLE", "decision_ci_low": "DOUBLE",
    "decision_ci_high": "DOUBLE", "decision_adjusted_p": "DOUBLE", "decision_alpha": "DOUBLE",
    "decision_min_gain": "DOUBLE", "decision_permutations": "INTEGER",
    "decision_label_source": "VARCHAR", "decision_note": "VARCHAR",
    # each weight's P@5 query bootstrap interval (level 1 - decision_alpha), added later too
    "p_at_5_low": "DOUBLE", "p_at_5_high": "DOUBLE",
    # judge labels with a human sample: the PPI-corrected gain the decision rested on too
    "decision_ppi_gain": "DOUBLE", "decision_ppi_ci_low": "DOUBLE",
    "decision_ppi_ci_high": "DOUBLE", "decision_n_human": "INTEGER"}


def insert_grid_rows(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    """Create ``calibration_grid_history`` when missing (add the columns an older one lacks)
    and insert ``frame``'s :data:`GRID_COLUMNS` (by name)."""
    columns = ", ".join(f"{name} {kind}" for name, kind in GRID_COLUMNS.items())
    con.execute(f"CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} ({columns})")
    for name, kind in GRID_COLUMNS.items():
        con.execute(f"ALTER TABLE {HISTORY_TABLE} ADD COLUMN IF NOT EXISTS {name} {kind}")
    con.register("grid_rows", frame[list(GRID_COLUMNS)])
    con.execute(f"INSERT INTO {HISTORY_TABLE} BY NAME SELECT * FROM grid_rows")


def grid_history_rows(con: duckdb.DuckDBPyConnection, dataset: str | None) -> pd.DataFrame | None:
    """The rows of ``calibration_grid_history`` (of ``dataset``; None: all), oldest first;
    None when the file has no such table yet."""
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if HISTORY_TABLE not in tables:
        return None
    return con.execute(
        f"SELECT * FROM {HISTORY_TABLE} WHERE ? IS NULL OR dataset = ? "
        f"ORDER BY run_at, dataset, semantic_weight", [dataset, dataset]).df()

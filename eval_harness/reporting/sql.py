"""Every SQL statement the run report runs itself: reads of the Postgres store (each in the
caller's transaction; the report never writes there) and the DuckDB run history table.

What other domains own is read through their functions (dataset agreement, gate summaries
and the answers' results in :mod:`eval_harness.gates.sql`, the calibration grid history), not
here.
"""

from __future__ import annotations

import duckdb
import pandas as pd

# ------------------------------------------------------------------------------ run history

RUN_HISTORY_TABLE = "run_history"  # in the DuckDB history file, beside the calibration grids
RUN_HISTORY_COLUMNS = {"run_id": "VARCHAR", "recorded_at": "TIMESTAMPTZ", "dataset": "VARCHAR",
                       "metric": "VARCHAR", "value": "DOUBLE"}


def replace_run_rows(con: duckdb.DuckDBPyConnection, run_id: str, rows: pd.DataFrame) -> None:
    """In one transaction: create ``run_history`` when missing, drop the rows of ``run_id``
    and insert ``rows`` (columns by name)."""
    columns = ", ".join(f"{name} {kind}" for name, kind in RUN_HISTORY_COLUMNS.items())
    con.execute("BEGIN TRANSACTION")
    con.execute(f"CREATE TABLE IF NOT EXISTS {RUN_HISTORY_TABLE} ({columns})")
    con.execute(f"DELETE FROM {RUN_HISTORY_TABLE} WHERE run_id = ?", [run_id])
    con.register("run_rows", rows)
    con.execute(f"INSERT INTO {RUN_HISTORY_TABLE} BY NAME SELECT * FROM run_rows")
    con.execute("COMMIT")


def run_history_rows(con: duckdb.DuckDBPyConnection, dataset: str | None) -> pd.DataFrame | None:
    """The rows of ``run_history`` (of ``dataset``; None: all), oldest first; None when the
    file has no such table yet."""
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if RUN_HISTORY_TABLE not in tables:
        return None
    return con.execute(
        f"SELECT * FROM {RUN_HISTORY_TABLE} WHERE ? IS NULL OR dataset = ? "
        f"ORDER BY recorded_at, run_id, metric", [dataset, dataset]).df()

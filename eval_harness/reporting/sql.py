"""Every SQL statement the run report runs itself: reads of the Postgres store (each in the
caller's transaction; the report never writes there) and the DuckDB run history table.

What other domains own is read through their functions (dataset agreement, gate summaries
and the answers' results in :mod:`eval_harness.gates.sql`, the calibration grid history), not
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb
import pandas as pd
import psycopg

# ------------------------------------------------------------------------------ cost

_COST_SQL = """
    SELECT api_name, model, operation, count(*), count(*) FILTER (WHERE batch),
           coalesce(sum(input_tokens), 0), coalesce(sum(cached_tokens), 0),
           coalesce(sum(output_tokens), 0), coalesce(sum(estimated_cost), 0),
           coalesce(sum(input_tokens) FILTER (WHERE batch), 0),
           coalesce(sum(least(cached_tokens, input_tokens)) FILTER (WHERE batch), 0),
           coalesce(sum(output_tokens) FILTER (WHERE batch), 0),
           coalesce(sum(estimated_cost) FILTER (WHERE batch), 0), max(created_at)
    FROM api_cost_log
    WHERE (%(run_ids)s::text[] IS NULL OR run_id = ANY(%(run_ids)s))
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
    GROUP BY api_name, model, operation"""

_HITS_SQL = """
    SELECT api_name, model, operation, sum(hits), coalesce(sum(saved_cost), 0), max(created_at)
    FROM api_cache_hit_log
    WHERE (%(run_ids)s::text[] IS NULL OR run_id = ANY(%(run_ids)s))
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
    GROUP BY api_name, model, operation"""


def _cost_params(run_ids: Sequence[str] | None, since: datetime | None) -> dict:
    return {"run_ids": None if run_ids is None else list(run_ids), "since": since}


def billed_call_rows(conn: psycopg.Connection, *, run_ids: Sequence[str] | None,
                     since: datetime | None) -> list[tuple]:
    """``api_cost_log`` per (provider, model, operation), of the runs ``run_ids`` and/or
    since ``since`` (None: no limit): ``(api, model, operation, calls, batch_calls,
    input_tokens, cached_tokens, output_tokens, cost, batch_input_tokens,
    batch_cached_tokens, batch_output_tokens, batch_cost, last_at)``."""
    return conn.execute(_COST_SQL, _cost_params(run_ids, since)).fetchall()


def cache_hit_rows(conn: psycopg.Connection, *, run_ids: Sequence[str] | None,
                   since: datetime | None) -> list[tuple] | None:
    """``api_cache_hit_log`` per (provider, model, operation), limited as
    :func:`billed_call_rows`: ``(api, model, operation, hits, saved_cost, last_at)``; None
    when the store predates migration 0005 (the table is missing)."""
    try:
        with conn.transaction():
            return conn.execute(_HITS_SQL, _cost_params(run_ids, since)).fetchall()
    except psycopg.errors.UndefinedTable:
        return None


def billed_calls_ever(conn: psycopg.Connection) -> tuple[int, float]:
    """Every billed call in ``api_cost_log``: how many, and their cost (USD)."""
    calls, cost = conn.execute(
        "SELECT count(*), coalesce(sum(estimated_cost), 0) FROM api_cost_log").fetchone()
    return calls, float(cost)


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

"""Every SQL statement the run report runs itself: reads of the Postgres store (each in the
caller's transaction; the report never writes there) and the DuckDB run history table.

What other domains own is read through their functions (dataset agreement, gate summaries,
the calibration grid history), not here. Identifiers from configuration (the answers
relation) are composed with :mod:`psycopg.sql`, never formatted in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb
import pandas as pd
import psycopg
from psycopg import sql

from eval_harness.gates.answers import TimeWindow
from eval_harness.gates.sql import (CURRENT_RESULT_JOIN, relation_sql, window_condition,
                                        window_params)
from eval_harness.gates.registry import Gate

# ------------------------------------------------------------------------------ agreement

def last_judged_at(conn: psycopg.Connection, dataset: str) -> datetime | None:
    """When the newest judge label of ``dataset`` was written (None: no label yet)."""
    return conn.execute("SELECT max(judged_at) FROM ground_truth WHERE dataset = %s",
                        (dataset,)).fetchone()[0]


# ------------------------------------------------------------------------------ quality gates

def latest_answer_at(conn: psycopg.Connection, relation: str) -> datetime | None:
    """When the newest answer in ``relation`` was created (None: no answer)."""
    return conn.execute(sql.SQL("SELECT max(created_at) FROM {}").format(
        relation_sql(relation))).fetchone()[0]


def gate_results_as_of(conn: psycopg.Connection, relation: str,
                       window: TimeWindow) -> datetime | None:
    """When the newest gate result of an answer in ``window`` was stored."""
    return conn.execute(sql.SQL(
        "SELECT max(r.evaluated_at) FROM {relation} AS a JOIN gate_results AS r "
        "ON r.answer_id = a.id WHERE {window}").format(
        relation=relation_sql(relation), window=window_condition("a", window)),
        window_params(window)).fetchone()[0]


def answers_with_result(conn: psycopg.Connection, relation: str, gate: Gate,
                        ids: Sequence[str]) -> list[tuple[str, str, float | None, dict | None]]:
    """The answers ``ids`` (in that order) with their current result for ``gate``:
    ``(id, query, score, details)``, score and details None when no current result exists."""
    if not ids:
        return []
    rows = conn.execute(sql.SQL("""
        SELECT a.id, a.query, r.score, r.details
        FROM {relation} AS a
        {current_result}
        WHERE a.id = ANY(%(ids)s)""").format(relation=relation_sql(relation),
                                             current_result=CURRENT_RESULT_JOIN),
        {"gate": gate.name, "version": gate.version, "ids": list(ids)}).fetchall()
    found = {row[0]: row for row in rows}
    return [found[answer_id] for answer_id in ids if answer_id in found]


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

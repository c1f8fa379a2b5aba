"""Every SQL statement of calibration: the Postgres reads behind the TREC files (external
ids, graded qrels) and the DuckDB grid history table.

Each function runs in the caller's transaction (:mod:`.history` opens and commits the DuckDB
one). Table names are composed with :class:`psycopg.sql.Identifier`, never formatted in.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd
import psycopg
from psycopg import sql

from eval_harness.store.corpus import Corpus

# ------------------------------------------------------------------------------ TREC files

def query_external_ids(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, str]:
    """The dataset's own ids of the ground-truth queries ``ids``: {id: external id}."""
    return dict(conn.execute("SELECT id, external_id FROM ground_truth WHERE id = ANY(%s)",
                             ([int(i) for i in ids],)).fetchall())


def external_qrels(conn: psycopg.Connection, corpus: Corpus) -> list[tuple[str, str, int]]:
    """``(query external id, document external id, grade)`` of every expected document of
    the corpus's dataset's ground truth, by query id, then document id."""
    return conn.execute(sql.SQL("""
        SELECT g.external_id, {dext}, r.grade
        FROM ground_truth g
        CROSS JOIN LATERAL unnest(g.expected_docs, g.relevance_grades) AS r(doc_id, grade)
        JOIN {d} ON {rows} AND {did} = r.doc_id
        WHERE g.dataset = %s ORDER BY g.id, r.doc_id""").format(
        dext=corpus.external_id_of("d"), d=corpus.table("d"),
        rows=corpus.rows_of_dataset("d"), did=corpus.id_of("d")),
        (corpus.dataset,)).fetchall()


# ------------------------------------------------------------------------------ grid history

HISTORY_TABLE = "calibration_grid_history"  # in the DuckDB history file
GRID_COLUMNS = {  # column -> DuckDB type, in table order
    "run_at": "TIMESTAMPTZ", "dataset": "VARCHAR", "semantic_weight": "DOUBLE",
    "keyword_weight": "DOUBLE", "p_at_5": "DOUBLE", "recall_at_5": "DOUBLE",
    "ndcg_at_10": "DOUBLE", "mrr_at_10": "DOUBLE", "p_at_5_ceiling": "DOUBLE",
    "is_best": "BOOLEAN", "is_default": "BOOLEAN", "n_queries": "INTEGER",
    "candidate_depth": "INTEGER", "verdict": "VARCHAR"}


def insert_grid_rows(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> None:
    """Create ``calibration_grid_history`` when missing and insert ``frame``'s
    :data:`GRID_COLUMNS` (by name)."""
    columns = ", ".join(f"{name} {kind}" for name, kind in GRID_COLUMNS.items())
    con.execute(f"CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} ({columns})")
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

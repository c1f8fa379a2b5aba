"""The owner of the ``datasets`` table, the register of the datasets in the store: every
statement that reads or writes it.

One row per dataset, ingested (a copy in ``l2_insights``) or live (read in place): its name,
text-search language, embedding model and dimensions, where it came from, and for a live one
the recorded corpus and ground-truth mappings. An ingest (:mod:`eval_harness.datasets.ingest`)
and an attach (:mod:`eval_harness.datasets.live`) write it; the doctor, the store commands
(:mod:`eval_harness.datasets.live_catalog`), dataset preparation (:mod:`eval_harness.datasets.prepare`)
and the search (:mod:`eval_harness.retrieval.hybrid`) read it. They all call the functions
here; no other module holds SQL that names the table (tests/test_layers.py checks it). A
statement of another table's owner that joins the register takes it from :func:`table`.

The lowest module of datasets/ that names a table: it imports no other harness module, so
every datasets module may call it. Each function runs in the caller's transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb


def table(alias: str) -> sql.Composed:
    """``datasets AS <alias>``, for a statement of another table's owner that joins it."""
    return sql.SQL("datasets AS {}").format(sql.Identifier(alias))


# ------------------------------------------------------------------------------ reads

def dataset_row(conn: psycopg.Connection, name: str) -> tuple | None:
    """``(name, language, embedding_model, embedding_dim, kind, corpus_mapping)`` of dataset
    ``name``; None when it is not in the store."""
    return conn.execute("""
        SELECT d.name, d.language::text, d.embedding_model, d.embedding_dim, d.kind,
               d.corpus_mapping
        FROM datasets d WHERE d.name = %s""", (name,)).fetchone()


def dataset_names(conn: psycopg.Connection) -> list[str]:
    """The names of the datasets in the store, sorted."""
    return [r[0] for r in conn.execute("SELECT name FROM datasets ORDER BY name")]


def dataset_kind(conn: psycopg.Connection, name: str) -> str | None:
    """``live`` or ``ingested``: how dataset ``name`` is in the store; None when it is not."""
    row = conn.execute("SELECT kind FROM datasets WHERE name = %s", (name,)).fetchone()
    return None if row is None else row[0]


def live_dataset_names(conn: psycopg.Connection) -> set[str]:
    """The datasets attached as live (read in place). A store before migration 0008 has no
    ``kind`` column, so the row is read as JSON: there every dataset is ingested."""
    return {name for (name,) in conn.execute(
        "SELECT name FROM datasets d WHERE to_jsonb(d) ->> 'kind' = 'live'")}


def attached_live_datasets(conn: psycopg.Connection) -> list[tuple]:
    """``(name, language, embedding_model, embedding_dim, corpus_mapping,
    ground_truth_mapping)`` of every dataset attached as live, by name."""
    return conn.execute(
        "SELECT name, language::text, embedding_model, embedding_dim, corpus_mapping, "
        "ground_truth_mapping FROM datasets WHERE kind = 'live' ORDER BY name").fetchall()


def live_attached_at(conn: psycopg.Connection, name: str) -> datetime | None:
    """When live dataset ``name`` was last attached (its row last changed); None when no live
    dataset of that name is attached."""
    row = conn.execute("SELECT updated_at FROM datasets WHERE name = %s AND kind = 'live'",
                       (name,)).fetchone()
    return None if row is None else row[0]


def embedding_dim_by_model(conn: psycopg.Connection, name: str, model: str) -> int | None:
    """The embedding dimensions of dataset ``name`` when its vectors are ``model``'s; None when
    it is not in the store or was embedded by another model."""
    row = conn.execute("SELECT embedding_dim FROM datasets WHERE name = %s "
                       "AND embedding_model = %s", (name, model)).fetchone()
    return None if row is None else row[0]


# ------------------------------------------------------------------------------ writes

def record_ingested_dataset(conn: psycopg.Connection, name: str, *, language: str, model: str,
                            dim: int, source_path: str) -> None:
    """Register ingested dataset ``name`` (or update its row; an unchanged row, its
    ``updated_at`` included, is not touched)."""
    conn.execute("""
        INSERT INTO datasets (name, language, embedding_model, embedding_dim, source_path)
        VALUES (%(name)s, %(lang)s::regconfig, %(model)s, %(dim)s, %(path)s)
        ON CONFLICT (name) DO UPDATE SET
            language = EXCLUDED.language, embedding_model = EXCLUDED.embedding_model,
            embedding_dim = EXCLUDED.embedding_dim, source_path = EXCLUDED.source_path,
            updated_at = now()
        WHERE (datasets.language, datasets.embedding_model, datasets.embedding_dim,
               datasets.source_path)
              IS DISTINCT FROM (EXCLUDED.language, EXCLUDED.embedding_model,
                                EXCLUDED.embedding_dim, EXCLUDED.source_path)""",
                 {"name": name, "lang": language, "model": model, "dim": dim,
                  "path": source_path})


def record_live_dataset(conn: psycopg.Connection, name: str, *, language: str, model: str,
                        dim: int, source_path: str, corpus_mapping: Mapping[str, Any],
                        ground_truth_mapping: Mapping[str, Any] | None) -> None:
    """Register live dataset ``name`` with its corpus and ground-truth mappings (or update its
    row; ``updated_at`` moves on every attach)."""
    conn.execute("""
        INSERT INTO datasets (name, language, embedding_model, embedding_dim, source_path,
                              kind, corpus_mapping, ground_truth_mapping)
        VALUES (%s, %s::regconfig, %s, %s, %s, 'live', %s, %s)
        ON CONFLICT (name) DO UPDATE SET
            language = EXCLUDED.language, embedding_model = EXCLUDED.embedding_model,
            embedding_dim = EXCLUDED.embedding_dim, source_path = EXCLUDED.source_path,
            corpus_mapping = EXCLUDED.corpus_mapping,
            ground_truth_mapping = EXCLUDED.ground_truth_mapping, updated_at = now()""",
                 (name, language, model, dim, source_path, Jsonb(corpus_mapping),
                  Jsonb(ground_truth_mapping)))

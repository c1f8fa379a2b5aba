"""The owner of the ``query_embeddings`` table, the cache of query embeddings keyed by model
and text (:func:`text_key`): every statement that reads or writes it.

Attaching a live dataset (:mod:`eval_harness.datasets.live`) and laying out the demo RAG store
(:mod:`eval_harness.datasets.demo_store`) fill it, so a rerun embeds nothing twice; the doctor
(:mod:`eval_harness.datasets.live_catalog`) reads it to say what an attach would embed and to probe
a live dataset's search plan with a real query vector. They all call the functions here; no
other module holds SQL that names the table (tests/test_layers.py checks it). The doctor may
look at a store without the harness schema: its reads here then find nothing cached.

Each function runs in the caller's transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import psycopg
from psycopg import sql


def text_key(text: str) -> str:
    """The ``query_embeddings`` key of a text: SHA-256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cached_query_embeddings(conn: psycopg.Connection, model: str,
                            texts: Sequence[str]) -> dict[str, np.ndarray]:
    """{text: embedding} of the ``texts`` whose embedding by ``model`` is cached."""
    keys = {text_key(t): t for t in texts}
    return {keys[k]: np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v,
                                dtype=np.float32)
            for k, v in conn.execute("SELECT text_sha256, embedding FROM query_embeddings "
                                     "WHERE model = %s AND text_sha256 = ANY(%s)",
                                     (model, list(keys)))}


def cache_query_embeddings(conn: psycopg.Connection, model: str,
                           vectors: dict[str, np.ndarray]) -> None:
    """Keep ``vectors`` ({text: embedding by ``model``}) in the cache (existing keys stay)."""
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO query_embeddings (model, text_sha256, text, embedding) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [(model, text_key(t), t, v) for t, v in vectors.items()])


# ------------------------------------------------------------------------------ the doctor's reads

def _cache_exists(conn: psycopg.Connection) -> bool:
    return conn.execute("SELECT to_regclass('query_embeddings') IS NOT NULL").fetchone()[0]


def count_uncached(conn: psycopg.Connection, texts: sql.Composable, model: str | None) -> int:
    """How many rows of ``texts`` (a subquery with a text column ``query``) have no vector by
    ``model`` in the cache; all of them when the store has no cache."""
    if not _cache_exists(conn):
        return conn.execute(sql.SQL("SELECT count(*) FROM ({}) t").format(texts)).fetchone()[0]
    # the cache's key (text_key): SHA-256 of the text's UTF-8 bytes, hex
    return conn.execute(sql.SQL(
        "SELECT count(*) FROM ({}) t WHERE NOT EXISTS (SELECT 1 FROM query_embeddings e "
        "WHERE e.model = %s AND e.text_sha256 = encode(sha256(convert_to(t.query, 'UTF8')), "
        "'hex'))").format(texts), (model,)).fetchone()[0]


def cached_embedding(conn: psycopg.Connection, model: str | None, text: str):
    """The cached embedding of ``text`` by ``model``; None when none is cached (or the store
    has no cache)."""
    if not _cache_exists(conn):
        return None
    row = conn.execute("SELECT embedding FROM query_embeddings WHERE model = %s AND "
                       "text_sha256 = %s", (model, text_key(text))).fetchone()
    return row[0] if row else None

"""The live datasets the store holds, read for the doctor and the store commands: those
attached in the harness schema and those only configured (their mapping checked in place),
with the relations each reads and a representative query of each.

It owns no harness table (tests/test_layers.py holds the owner map): the register of
datasets is read through :mod:`eval_harness.datasets.register` and the query-embedding
cache through :mod:`eval_harness.datasets.query_embeddings`; the doctor counts each dataset's
documents with :func:`eval_harness.datasets.ingest.documents_per_dataset`.

Reads only; each runs in the caller's transaction (the doctor's session is read-only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from eval_harness.datasets import ground_truth, query_embeddings, register
from eval_harness.datasets.corpus import Corpus
from eval_harness.datasets.live_mapping import check_mapping, embedder_model
from eval_harness.datasets.live_rows import LiveMappingError
from eval_harness.settings.datasets import DatasetConfig


@dataclass(frozen=True)
class LiveDataset:
    name: str
    attached: bool
    corpus: Corpus | None         # None: the mapping does not fit the store (see error)
    error: str | None = None
    embedder: str | None = None   # the model that embeds its queries
    # schema, relation, id, query; None: the corpus alone is mapped (or it does not fit)
    ground_truth: Mapping[str, Any] | None = None


def live_datasets(conn: psycopg.Connection, configured: Mapping[str, DatasetConfig], *,
                  attached_known: bool) -> list[LiveDataset]:
    """The live datasets attached in the harness schema (when ``attached_known``: the schema
    is current) and those configured in config.yaml but not attached yet (their mapping
    checked in place, reads only), by name."""
    found: dict[str, LiveDataset] = {}
    if attached_known:
        for name, language, model, dim, mapping, gt in register.attached_live_datasets(
                conn):
            found[name] = LiveDataset(name, True, Corpus.live(name, language, dim, mapping),
                                      embedder=model, ground_truth=gt)
    for name, cfg in configured.items():
        if not cfg.is_live or name in found:
            continue
        try:
            checked = check_mapping(conn, cfg)
        except (LiveMappingError, psycopg.Error) as exc:
            found[name] = LiveDataset(name, False, None, str(exc).strip().splitlines()[0])
            continue
        found[name] = LiveDataset(name, False, checked.corpus,
                                  embedder=embedder_model(cfg.embedder or ""),
                                  ground_truth=checked.ground_truth_record)
    return [found[name] for name in sorted(found)]


def live_relations(configured: Mapping[str, DatasetConfig],
                   live: list[LiveDataset]) -> list[str]:
    """Every RAG relation a live dataset reads, configured or attached (``schema.name``)."""
    found = [str(r) for cfg in configured.values() if cfg.live is not None
             for r in (cfg.live.corpus.relation,
                       cfg.live.ground_truth.relation if cfg.live.ground_truth else None) if r]
    for dataset in live:
        gt = dataset.ground_truth
        found += ([dataset.corpus.relation_name] if dataset.corpus else []) + (
            [f"{gt['schema']}.{gt['relation']}"] if gt else [])
    return list(dict.fromkeys(found))


def ground_truth_queries(conn: psycopg.Connection, dataset: LiveDataset, *,
                         limit: int) -> tuple[list[str], int]:
    """The first ``limit`` ground-truth query texts of ``dataset`` (by id) and how many it
    has: the harness's mirror when attached, else the live ground truth itself."""
    if dataset.attached:
        return (ground_truth.first_queries(conn, dataset.name, limit),
                ground_truth.count_queries(conn, dataset.name))
    gt = dataset.ground_truth
    if not gt:
        return [], 0
    relation = sql.Identifier(gt["schema"], gt["relation"])
    texts = [t for (t,) in conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT %s").format(
        sql.Identifier(gt["query"]), relation, sql.Identifier(gt["id"])), (limit,)) if t]
    total = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(relation)).fetchone()[0]
    return texts, total


def uncached_query_count(conn: psycopg.Connection, dataset: LiveDataset) -> int:
    """How many distinct ground-truth query texts of ``dataset`` have no vector by its
    embedder in the harness's cache (what attaching it must embed). Without the harness
    schema, nothing is cached. A dataset mapped by its corpus alone mirrors no query: attach
    embeds only its stored (generated or users') queries that have no embedding yet."""
    gt = dataset.ground_truth
    if not gt:
        if not dataset.attached:
            return 0
        texts_left = ground_truth.queries_without_embedding(conn, dataset.name)
        cached = query_embeddings.cached_query_embeddings(conn, dataset.embedder or "",
                                                          texts_left) if texts_left else {}
        return len(texts_left) - len(cached)
    texts = sql.SQL("SELECT DISTINCT {} AS query FROM {} WHERE {} IS NOT NULL").format(
        sql.Identifier(gt["query"]), sql.Identifier(gt["schema"], gt["relation"]),
        sql.Identifier(gt["query"]))
    return query_embeddings.count_uncached(conn, texts, dataset.embedder)


def _vector_text(value) -> str | None:
    if value is None:
        return None
    values = np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, np.float32)
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def probe_query(conn: psycopg.Connection, dataset: LiveDataset) -> tuple[str, str | None]:
    """The first ground-truth query's text and embedding (as pgvector text): the harness's
    mirror when attached, else the live ground truth with the cached query embedding, else
    the corpus's first vector (the plan does not depend on which vector it is)."""
    corpus = dataset.corpus
    assert corpus is not None
    text, vector = "", None
    if dataset.attached:
        row = ground_truth.first_query_with_embedding(conn, dataset.name)
        if row is not None:
            text, vector = row[0], _vector_text(row[1])
    elif dataset.ground_truth:
        gt = dataset.ground_truth
        row = conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT 1").format(
            sql.Identifier(gt["query"]), sql.Identifier(gt["schema"], gt["relation"]),
            sql.Identifier(gt["id"]))).fetchone()
        text = row[0] if row is not None else ""
        vector = _vector_text(query_embeddings.cached_embedding(conn, dataset.embedder, text))
    if vector is None:
        row = conn.execute(sql.SQL(
            "SELECT {}::text FROM {} WHERE {} AND {} IS NOT NULL LIMIT 1").format(
            corpus.embedding_column("d"), corpus.table("d"), corpus.rows_of_dataset("d"),
            corpus.embedding_column("d"))).fetchone()
        vector = row[0] if row is not None else None
    return text, vector

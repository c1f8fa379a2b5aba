"""Embedding the queries ``ground-truth`` stores, with the model that embedded the corpus."""

from __future__ import annotations

import psycopg

from eval_harness.datasets import ground_truth
from eval_harness.datasets.embeddings import (
    EmbedderUnavailable,
    check_vectors,
    embed_in_batches,
    embedder_factory,
)
from eval_harness.datasets.prepare import dataset_embedder_factory
from eval_harness.retrieval.hybrid import DatasetInfo
from eval_harness.settings import Settings


def embed_new_queries(conn: psycopg.Connection, settings: Settings,
                      info: DatasetInfo) -> str | None:
    """Give the dataset's queries without an embedding one, from its embedder (a live
    dataset's ``embedder``, else the model it was ingested with). Without a usable embedder
    they stay without one (search for them is keyword only) and one sentence says so; None
    when every query has its embedding."""
    texts = ground_truth.queries_without_embedding(conn, info.name)
    if not texts:
        return None
    cfg = settings.datasets.get(info.name)
    factory = (dataset_embedder_factory(settings, cfg) if cfg is not None and cfg.embedder
               else embedder_factory(settings, info.embedding_model))
    try:
        vectors = embed_in_batches(factory(), texts)
    except EmbedderUnavailable as exc:
        return (f"{len(texts)} queries of '{info.name}' have no embedding, so their search is "
                f"keyword only until they get one: {exc}")
    check_vectors(vectors, [t[:40] for t in texts], what="query",
                  source=f"dataset '{info.name}'", model=info.embedding_model,
                  fix="the queries are stored without embeddings (keyword-only search) "
                      "until an embedder gives them usable vectors.")
    if vectors.shape[1] != info.embedding_dim:
        return (f"the embedder gives {vectors.shape[1]}-dimensional vectors but the corpus of "
                f"'{info.name}' has {info.embedding_dim}: its {len(texts)} new queries stay "
                "without embedding (keyword-only search); name the corpus's model.")
    ground_truth.set_query_embeddings(conn, info.name, list(zip(vectors, texts)))
    return None

"""Which (query, document) pairs a dual-judge run judges, and the documents' texts.

For each ground-truth query: its ``expected_docs``, then the top ``judges.hybrid_top_k`` hits
of hybrid search at the configured weights that are not already among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import psycopg

from eval_harness.judges import queries
from eval_harness.judges.protocol import Passage
from eval_harness.retrieval.hybrid import as_vector, dataset_info, hybrid_search
from eval_harness.store.corpus import document_rows
from eval_harness.settings import Settings


@dataclass(frozen=True)
class PlannedQuery:
    query_id: int
    external_id: str
    text: str
    embedding: np.ndarray | None
    doc_ids: tuple[int, ...]
    expected: tuple[int, ...] = ()  # expected_docs when planned (doc_ids starts with them)


def plan_queries(conn: psycopg.Connection, dataset: str, settings: Settings, *,
                 limit: int | None = None) -> list[PlannedQuery]:
    """Each ground-truth query of ``dataset`` (by id, at most ``limit``) with its judged docs:
    expected_docs, then the top ``judges.hybrid_top_k`` hybrid hits not already listed."""
    dataset_info(conn, dataset, with_counts=False)  # an unknown dataset fails in one sentence
    rows = queries.ground_truth_queries(conn, dataset, limit)
    top_k, weights = settings.judges.hybrid_top_k, settings.weights_for(dataset)
    planned = []
    for query_id, external_id, text, embedding, expected in rows:
        vector = None if embedding is None else as_vector(embedding)
        hits = []
        if top_k > 0:
            semantic = weights.semantic if vector is not None else 0.0
            hits = hybrid_search(conn, dataset, query_text=text, query_embedding=vector, k=top_k,
                                 semantic_weight=semantic,
                                 keyword_weight=weights.keyword if vector is not None else 1.0,
                                 candidate_depth=weights.candidate_depth)
        doc_ids = list(dict.fromkeys([*expected, *(h.id for h in hits)]))
        planned.append(PlannedQuery(int(query_id), external_id, text, vector, tuple(doc_ids),
                                    tuple(expected)))
    return planned


def load_documents(conn: psycopg.Connection, dataset: str, doc_ids: Sequence[int], *,
                   with_embeddings: bool) -> dict[int, Passage]:
    """The documents of ``dataset``'s corpus among ``doc_ids`` as passages (with their
    embeddings if asked)."""
    corpus = dataset_info(conn, dataset, with_counts=False).corpus
    rows = document_rows(conn, corpus, list(set(doc_ids)), with_embeddings=with_embeddings)
    return {int(i): Passage(content, int(i), None if emb is None else as_vector(emb))
            for i, content, emb in rows}

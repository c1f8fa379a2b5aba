"""Which (query, document) pairs a dual-judge run judges, and the documents' texts.

A dataset with human labels (some query has ``expected_docs``): for each query its
``expected_docs``, then the top ``judges.hybrid_top_k`` hits of hybrid search at the
configured weights that are not already among them (the judges check the labels). Those hits
are ranked on the candidates ``report`` and ``calibrate`` rank
(:func:`eval_harness.retrieval.hybrid.candidate_scores`: one batched fetch for every query,
the keyword index on a ``tsvector: null`` corpus, the candidate cache on a rerun) by the one
fusion rule (:func:`eval_harness.retrieval.report.fused_runs`), so they are the top k that
``search`` and ``report`` rank at the same weights. Only a query without an embedding (its
search is keyword-only) is searched on its own (:func:`eval_harness.retrieval.hybrid.hybrid_search`).

A dataset without labels (no query has ``expected_docs``: a live ``queries`` mapping, a BEIR
folder without qrels): the judges make its ground truth, and calibration will score the top 5
of every weight of the calibration grid on it. So each query's pool is the union over every
grid weight (``calibration.grid_*`` plus ``default_weight``) of that weight's fused top 5,
ranked by the sweep's own fusion (:func:`eval_harness.retrieval.sweep.rank_top_k`) on the
candidates calibration fetches: then no top 5 of any evaluated weight holds an unjudged
document. The pool sizes per query are in the run summary.

A dataset with human labels can take the grid pool too (``judges.grid_pool: true``, or
``eval-harness judge --grid-pool`` for one run): its queries are then planned as expected_docs,
the hybrid top k, and the grid pool's documents not already listed. Human qrels usually list
only relevant documents, so many top-5 documents of the grid carry no label and P@5 there is a
lower bound (Judged@5 below ``calibration.min_judged``, :mod:`eval_harness.calibration.judged_at_5`);
with the grid pool judged, ``calibrate --labels judges`` finds every top 5 labelled. Pairs
judged before (without the option) are cache hits, so only the new documents are paid for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import psycopg

from eval_harness.retrieval.weights import configured_grid, keyword_weight_for
from eval_harness.datasets import ground_truth
from eval_harness.datasets.ground_truth import dataset_has_labels
from eval_harness.judges.protocol import ChatRequest, Passage
from eval_harness.metrics.ranking import PRECISION_CUTOFF
from eval_harness.retrieval.hybrid import as_vector, candidate_scores, dataset_info, hybrid_search
from eval_harness.retrieval.report import fused_runs
from eval_harness.retrieval.sweep import CandidateSet, rank_top_k
from eval_harness.datasets.corpus import document_rows
from eval_harness.settings import Settings
from eval_harness import stopping


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
    expected_docs, then the top ``judges.hybrid_top_k`` hybrid hits not already listed (then,
    with ``judges.grid_pool``, the grid pool's documents not listed yet); for a dataset
    without labels, the grid pool (module docstring)."""
    dataset_info(conn, dataset, with_counts=False)  # an unknown dataset fails in one sentence
    rows = ground_truth.ground_truth_queries(conn, dataset, limit)
    top_k, weights = settings.judges.hybrid_top_k, settings.weights_for(dataset)
    labelled = bool(rows) and dataset_has_labels(conn, dataset)
    pools = None
    if rows and (not labelled or settings.judges.grid_pool):
        pools = grid_pool(conn, dataset, settings, [int(r[0]) for r in rows])
    tops: dict[int, list[int]] = {}
    if labelled and top_k > 0:
        tops = hybrid_top_k(conn, dataset, settings,
                            [int(r[0]) for r in rows if r[3] is not None])
    planned = []
    for query_id, external_id, text, embedding, expected in rows:
        stopping.check()  # a stop ends the planning (seconds, not minutes)
        vector = None if embedding is None else as_vector(embedding)
        pool = () if pools is None else pools.get(int(query_id), ())
        if not labelled:
            planned.append(PlannedQuery(int(query_id), external_id, text, vector,
                                        tuple(pool), ()))
            continue
        hits = tops.get(int(query_id), [])
        if top_k > 0 and vector is None:  # keyword-only: no candidate fetch serves it
            hits = [h.id for h in hybrid_search(
                conn, dataset, query_text=text, query_embedding=None, k=top_k,
                semantic_weight=0.0, keyword_weight=1.0,
                candidate_depth=weights.candidate_depth)]
        doc_ids = list(dict.fromkeys([*expected, *hits, *pool]))
        planned.append(PlannedQuery(int(query_id), external_id, text, vector, tuple(doc_ids),
                                    tuple(expected)))
    return planned


def hybrid_top_k(conn: psycopg.Connection, dataset: str, settings: Settings,
                 query_ids: list[int]) -> dict[int, list[int]]:
    """{query id: its top ``judges.hybrid_top_k`` document ids by fused score at the weights
    ``settings`` give ``dataset``, ties by id} for ``query_ids`` (queries with an embedding),
    from one candidate fetch (the cache's entries where current) and the one fusion rule."""
    if not query_ids:
        return {}
    weights = settings.weights_for(dataset)
    fetched = candidate_scores(conn, dataset, query_ids=query_ids,
                               candidate_depth=weights.candidate_depth)
    return fused_runs(fetched, weights.semantic, weights.keyword,
                      depth=settings.judges.hybrid_top_k)


def grid_pool(conn: psycopg.Connection, dataset: str, settings: Settings,
              query_ids: list[int]) -> dict[int, list[int]]:
    """{query id: the union over every calibration grid weight of its fused top 5}, each
    list in the order the documents first appear (weights ascending, rank within a weight)."""
    depth = settings.weights_for(dataset).candidate_depth
    fetched = candidate_scores(conn, dataset, query_ids=query_ids, candidate_depth=depth)
    if not fetched:
        return {}
    candidates = CandidateSet.from_queries(
        [c.doc_ids for c in fetched], [c.semantic for c in fetched],
        [c.keyword for c in fetched], [{} for _ in fetched],
        query_ids=[c.query_id for c in fetched])
    pools: dict[int, dict[int, None]] = {c.query_id: {} for c in fetched}
    for weight in configured_grid(settings):
        tops = rank_top_k(candidates, float(weight), keyword_weight=keyword_weight_for(weight),
                          k=PRECISION_CUTOFF)
        for query_id, top in zip(candidates.query_ids, tops):
            pools[query_id].update(dict.fromkeys(int(d) for d in top))
    return {q: list(docs) for q, docs in pools.items()}


def pool_sizes(planned: Sequence[PlannedQuery]) -> dict[str, float] | None:
    """Min, median and max of the judged documents per planned query (None: no query)."""
    if not planned:
        return None
    sizes = np.array([len(p.doc_ids) for p in planned])
    return {"min": int(sizes.min()), "median": float(np.median(sizes)),
            "max": int(sizes.max())}


def load_documents(conn: psycopg.Connection, dataset: str, doc_ids: Sequence[int], *,
                   with_embeddings: bool) -> dict[int, Passage]:
    """The documents of ``dataset``'s corpus among ``doc_ids`` as passages (with their
    embeddings if asked)."""
    corpus = dataset_info(conn, dataset, with_counts=False).corpus
    rows = document_rows(conn, corpus, list(set(doc_ids)), with_embeddings=with_embeddings)
    return {int(i): Passage(content, int(i), None if emb is None else as_vector(emb))
            for i, content, emb in rows}


def relevance_requests(judge, planned: Sequence[PlannedQuery],
                       documents: Mapping[int, Passage]) -> list[ChatRequest]:
    """``judge``'s first request for every planned pair, in the run's order (a document the
    corpus no longer has is asked as an empty text, as the run asks it)."""
    return [judge.relevance_request(plan.text, documents.get(doc_id) or Passage("", doc_id))
            for plan in planned for doc_id in plan.doc_ids]

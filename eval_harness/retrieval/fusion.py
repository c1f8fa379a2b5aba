"""Score fusion for hybrid search, the one rule shared by SQL search and calibration.

For one query the candidates are the union of the top ``candidate_depth`` documents by
semantic similarity and the top ``candidate_depth`` by keyword rank. Every candidate has
both raw scores (cosine similarity, and ``ts_rank`` which is 0 when no query term matches).

    norm(x)  = (x - min) / (max - min) over the query's candidates; 0 when max == min
    fused    = w_sem * norm(semantic) + w_kw * norm(keyword)

Candidates are ranked by ``fused`` descending, ties broken by document id ascending, so a
ranking is fully deterministic. The SQL in :mod:`eval_harness.retrieval.hybrid` evaluates
exactly these float8 operations in this order, so both give bit-identical scores.
"""

from __future__ import annotations

import numpy as np


def min_max_normalise(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] over the array; a constant array (or a single value) maps to 0."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    low = scores.min()
    span = scores.max() - low
    if span == 0:
        return np.zeros_like(scores)
    return (scores - low) / span


def fuse_scores(semantic: np.ndarray, keyword: np.ndarray, semantic_weight: float,
                keyword_weight: float | None = None) -> np.ndarray:
    """Fused hybrid score per candidate; ``keyword_weight`` defaults to 1 - semantic_weight."""
    if keyword_weight is None:
        keyword_weight = 1.0 - semantic_weight
    return semantic_weight * min_max_normalise(semantic) + keyword_weight * min_max_normalise(keyword)


def rank_candidates(doc_ids: np.ndarray, fused: np.ndarray) -> np.ndarray:
    """Document ids ordered by fused score descending, then id ascending."""
    doc_ids = np.asarray(doc_ids)
    order = np.lexsort((doc_ids, -np.asarray(fused, dtype=np.float64)))
    return doc_ids[order]

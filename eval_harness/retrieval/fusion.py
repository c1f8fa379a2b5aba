"""Score fusion for hybrid search, the one rule shared by SQL search and calibration.

For one query the candidates are the union of the top ``candidate_depth`` documents by
semantic similarity and the top ``candidate_depth`` by keyword rank. Every candidate has
both raw scores (cosine similarity, and ``ts_rank`` which is 0 when no query term matches).

    norm(x)  = (x - min) / (max - min) over the query's candidates; 0 when max == min
    fused    = w_sem * norm(semantic) + w_kw * norm(keyword)

Candidates are ranked by ``fused`` descending, ties broken by document id ascending, so a
ranking is fully deterministic. The SQL in :mod:`eval_harness.retrieval.hybrid` evaluates
exactly these float8 operations in this order, so both give bit-identical scores. The
vectorised sweep (:mod:`eval_harness.retrieval.sweep`) calls :func:`min_max_normalise` and
:func:`fuse_normalised` on one row per query, so it computes the same floats.

Reciprocal rank fusion (:func:`reciprocal_rank_fusion_scores`) is the reference method that
calibration compares the weighted rule with.

No metric is ever computed over a NaN score: a NaN raw score (the cosine similarity of an
all-zero or non-finite embedding is undefined) makes the whole query's min-max row NaN, and a
NaN ranking would sort by document id alone and score near zero without a word. So
:func:`fuse_normalised` (which every fused score, the sweep's included, goes through) raises
:class:`NonFiniteScores` naming the query, when its caller names it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from eval_harness.errors import InvalidInput


class NonFiniteScores(InvalidInput):
    """A fused score is NaN; the message names the query (when known) and the likely cause."""


def min_max_normalise(scores: np.ndarray, *, present: np.ndarray | None = None,
                      min_span: float | None = None) -> np.ndarray:
    """Scale to [0, 1] over the last axis (one query's candidates, or one row per query).

        norm(x) = (x - min) / (max - min); a constant row (or a single value) maps to 0

    ``present`` (bool, same shape) marks the entries that count: the others (padding, a
    document one retriever did not return) are left out of min and max and come out as 0.
    Without it every entry counts and a NaN makes its row NaN.

    ``min_span`` switches to the ranx ``norm="min-max"`` variant used only to compare with
    ranx: divide by ``max(max - min, min_span)`` and never map a constant row to 0.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    if present is None:
        low = scores.min(axis=-1, keepdims=True)
        high = scores.max(axis=-1, keepdims=True)
    else:
        low = np.min(scores, axis=-1, keepdims=True, where=present, initial=np.inf)
        high = np.max(scores, axis=-1, keepdims=True, where=present, initial=-np.inf)
    span = high - low
    if min_span is None:
        constant = span == 0
        normalised = (scores - low) / np.where(constant, 1.0, span)
        normalised = np.where(constant, 0.0, normalised)
    else:
        normalised = (scores - low) / np.maximum(span, min_span)
    return normalised if present is None else np.where(present, normalised, 0.0)


def fuse_normalised(semantic_norm: np.ndarray, keyword_norm: np.ndarray,
                    semantic_weight: float, keyword_weight: float, *,
                    query: Hashable | Sequence[Hashable] | None = None) -> np.ndarray:
    """The weighted sum of already normalised scores, in the rule's float order.

    Raises :class:`NonFiniteScores` when a fused score is NaN. ``query`` names the query
    of a 1-D row, or holds one name per row of a 2-D matrix, for that message.
    """
    if not (np.isfinite(semantic_weight) and np.isfinite(keyword_weight)):
        raise InvalidInput(f"fusion weights must be finite numbers, got semantic "
                           f"{semantic_weight} and keyword {keyword_weight}.")
    fused = semantic_weight * semantic_norm + keyword_weight * keyword_norm
    return require_numbers(fused, query=query)


def require_numbers(fused: np.ndarray, *, query: Hashable | Sequence[Hashable] | None = None
                    ) -> np.ndarray:
    """``fused`` unchanged when no score is NaN; else :class:`NonFiniteScores` naming the
    first query (row) with one (``query``: see :func:`fuse_normalised`)."""
    fused = np.asarray(fused)
    nan = np.isnan(fused)
    if not nan.any():
        return fused
    if fused.ndim >= 2:
        row = int(np.flatnonzero(nan.reshape(fused.shape[0], -1).any(axis=1))[0])
        count = int(nan[row].sum())
        name = (f"query {query[row]!r}"  # type: ignore[index]  # 2-D: one id per row
                if query is not None else f"query row {row}")
    else:
        count = int(nan.sum())
        name = f"query {query!r}" if query is not None else "a query"
    raise NonFiniteScores(
        f"the fused hybrid score of {name} is NaN for {count} of its candidates: a semantic "
        "score is undefined (an all-zero, NaN or infinite embedding of the query or of a "
        "document) or a keyword score is not finite, so no metric is computed; store valid "
        "embeddings and run again.")


def fuse_scores(semantic: np.ndarray, keyword: np.ndarray, semantic_weight: float,
                keyword_weight: float | None = None, *,
                query: Hashable | None = None) -> np.ndarray:
    """Fused hybrid score per candidate; ``keyword_weight`` defaults to 1 - semantic_weight.

    Raises :class:`NonFiniteScores` (naming ``query`` when given) when a score is NaN.
    """
    if keyword_weight is None:
        keyword_weight = 1.0 - semantic_weight
    return fuse_normalised(min_max_normalise(semantic), min_max_normalise(keyword),
                           semantic_weight, keyword_weight, query=query)


def rank_candidates(doc_ids: np.ndarray, fused: np.ndarray) -> np.ndarray:
    """Document ids ordered by fused score descending, then id ascending."""
    doc_ids = np.asarray(doc_ids)
    order = np.lexsort((doc_ids, -np.asarray(fused, dtype=np.float64)))
    return doc_ids[order]


def reciprocal_rank_fusion_scores(semantic: np.ndarray, keyword: np.ndarray, *,
                                  k: int = 60) -> np.ndarray:
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) per candidate.

        RRF(d) = sum over retrievers r that returned d of 1 / (k + rank_r(d))

    The last axis holds one query's candidates sorted by document id; a NaN raw score means
    the retriever did not return the document. ``rank_r(d)`` is d's 1-based position among
    the documents r returned, by raw score descending, ties by doc id ascending. Rank the
    result with the rule's order (RRF descending, ties by doc id ascending).
    """
    if k < 0:
        raise ValueError(f"RRF constant k must be >= 0, got {k}.")
    semantic = np.asarray(semantic, dtype=np.float64)
    rrf = np.zeros(semantic.shape)
    for raw in (semantic, np.asarray(keyword, dtype=np.float64)):
        present = ~np.isnan(raw)
        order = np.argsort(np.where(present, -raw, np.inf), axis=-1, kind="stable")
        ranks = np.empty(order.shape, dtype=np.float64)
        np.put_along_axis(ranks, order, np.arange(1, order.shape[-1] + 1, dtype=np.float64),
                          axis=-1)
        rrf += np.where(present, 1.0 / (k + ranks), 0.0)
    return rrf

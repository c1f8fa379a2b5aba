"""The vectorised weight sweep: every query ranked at every fusion weight, and scored.

The sweep reproduces :mod:`eval_harness.retrieval.fusion` bit for bit, because it calls that
module's :func:`~.fusion.min_max_normalise` and :func:`~.fusion.fuse_normalised` on one row
per query. For every query and every semantic weight ``w`` (keyword weight ``1.0 - w``
unless given):

    ns, nk = min-max of the raw semantic / keyword scores over the query's candidates
             (0 everywhere when max == min)
    fused  = w * ns + (1.0 - w) * nk          (float64, evaluated in this order)
    ranking: fused descending, ties by document id ascending

so the ranking at each weight equals ``rank_candidates(ids, fuse_scores(sem, kw, w))``.
Instead of sorting every query at every weight, all queries are held in padded
``(n_queries, width)`` matrices whose columns are sorted by document id; the top 10 columns
per row are selected with ``np.partition`` and ties at the cut are resolved towards the
smaller column (= smaller id), which is the same order as the lexsort in ``rank_candidates``.

A second mode, ``normalisation="per_retriever"``, reproduces ranx ``fuse(norm="min-max",
method="wsum")`` instead: each retriever's scores are min-max normalised over the documents
that retriever returned, and a document it did not return counts 0 (benchmarks/calibration.py
checks P@5 against ranx at every weight).

Metrics per weight: P@5 (headline), Recall@5, nDCG@10, MRR@10, computed by
:func:`eval_harness.metrics.ranking.score_top_gains` (relevant = grade >= 1; Recall, nDCG
and P@5 ceilings use all relevant docs of the qrels, also those outside the candidate set),
and Judged@5 (:func:`eval_harness.metrics.ranking.judged_share`: the share of the top 5 that
the qrels label at all, any grade; below 1, P@5 there is a lower bound).
The statistics over the sweep (best weight, uplift, cross-validation, verdict) are in
:mod:`eval_harness.metrics.calibration`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Literal

import numpy as np

from eval_harness.metrics.ranking import (
    PRECISION_CUTOFF,
    RANKING_CUTOFF,
    QueryScores,
    ideal_dcg_at_k,
    judged_share,
    mean_p_at_k_ceiling,
    relevance_gains,
    score_top_gains,
)
from eval_harness.retrieval.fusion import (
    NonFiniteScores,
    fuse_normalised,
    min_max_normalise,
    reciprocal_rank_fusion_scores,
)
from eval_harness.retrieval.weights import DEFAULT_WEIGHTS

RANX_MIN_SPAN = 1e-9  # ranx min-max divides by max(max - min, 1e-9)
NAN_CAUSES = {"semantic": "an undefined cosine similarity (an all-zero, NaN or infinite "
                          "embedding of the query or of a document)",
              "keyword": "a keyword score that is not a number"}

Normalisation = Literal["candidates", "per_retriever"]


@dataclass(frozen=True)
class CandidateSet:
    """Every query's candidates with both raw scores and their qrels, as padded matrices.

    Row ``q`` holds query ``q``'s candidates in columns ``0 .. n_candidates[q] - 1``, sorted
    by document id ascending; the rest of the row is padding (``mask`` False, id -1, scores
    NaN, gain 0). A NaN raw score on a real candidate means "this retriever did not return
    the document"; only ``normalisation="per_retriever"`` accepts that. ``judged`` marks
    the candidates the qrels list at all (any grade, 0 included): the labelled ones. Build
    it with :meth:`from_queries` or :meth:`from_runs`.
    """

    query_ids: tuple[Any, ...]  # hashable, as given (the store's query ids in the harness)
    doc_ids: np.ndarray  # (n_queries, width) int64
    semantic: np.ndarray  # (n_queries, width) float64 raw semantic scores
    keyword: np.ndarray  # (n_queries, width) float64 raw keyword scores
    mask: np.ndarray  # (n_queries, width) bool, True on real candidates
    gains: np.ndarray  # (n_queries, width) float64 grade if grade >= 1 else 0
    n_relevant: np.ndarray  # (n_queries,) int64, relevant docs in the qrels
    ideal_dcg: np.ndarray  # (n_queries,) float64, IDCG@10 from the qrels
    judged: np.ndarray  # (n_queries, width) bool, True on candidates the qrels label

    @property
    def n_queries(self) -> int:
        return self.doc_ids.shape[0]

    @classmethod
    def from_queries(cls, doc_ids: Sequence[np.ndarray], semantic: Sequence[np.ndarray],
                     keyword: Sequence[np.ndarray], relevance: Sequence[Mapping[int, int]],
                     *, query_ids: Sequence[Hashable] | None = None) -> CandidateSet:
        """Pad per-query arrays (ids int64, raw scores float64, any order) into a set."""
        n_queries = len(doc_ids)
        query_ids = tuple(range(n_queries)) if query_ids is None else tuple(query_ids)
        if not (len(semantic) == len(keyword) == len(relevance) == len(query_ids) == n_queries):
            raise ValueError("doc_ids, semantic, keyword, relevance and query_ids must hold "
                             "one entry per query each; their lengths differ.")
        if n_queries == 0:
            raise ValueError("the candidate set has no query; calibrate on at least one.")
        lengths = np.array([len(ids) for ids in doc_ids], dtype=np.int64)
        for q in range(n_queries):
            if len(semantic[q]) != lengths[q] or len(keyword[q]) != lengths[q]:
                raise ValueError(f"query {query_ids[q]!r}: doc_ids, semantic and keyword "
                                 f"scores differ in length; give both scores per candidate.")
        return cls._from_long(
            query_ids, np.repeat(np.arange(n_queries), lengths),
            np.concatenate([np.asarray(ids, dtype=np.int64) for ids in doc_ids]),
            np.concatenate([np.asarray(s, dtype=np.float64) for s in semantic]),
            np.concatenate([np.asarray(s, dtype=np.float64) for s in keyword]), relevance)

    @classmethod
    def from_runs(cls, semantic_run: Mapping[Hashable, Mapping[int, float]],
                  keyword_run: Mapping[Hashable, Mapping[int, float]],
                  qrels: Mapping[Hashable, Mapping[int, int]]) -> CandidateSet:
        """The union of two retrievers' result lists (doc id -> raw score) for every query
        of ``qrels``. A document one retriever did not return gets a NaN raw score from it,
        so this set is for ``normalisation="per_retriever"``."""
        query_ids = tuple(qrels)
        if not query_ids:
            raise ValueError("the qrels hold no query; calibrate on at least one.")
        rows, ids, scores = zip(*(_long_format(run, query_ids)
                                  for run in (semantic_run, keyword_run)))
        n_semantic, n_keyword = ids[0].size, ids[1].size
        semantic = np.concatenate([scores[0], np.full(n_keyword, np.nan)])
        keyword = np.concatenate([np.full(n_semantic, np.nan), scores[1]])
        rows, ids = np.concatenate(rows), np.concatenate(ids)
        order = np.lexsort((ids, rows))
        rows, ids, semantic, keyword = rows[order], ids[order], semantic[order], keyword[order]
        # A document both retrievers returned appears twice in a row; merge the two entries,
        # each holding one score and one NaN (fmin ignores NaN).
        first = np.ones(rows.size, dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (ids[1:] != ids[:-1])
        starts = np.flatnonzero(first)
        if starts.size:
            semantic = np.fmin.reduceat(semantic, starts)
            keyword = np.fmin.reduceat(keyword, starts)
        return cls._from_long(query_ids, rows[starts], ids[starts], semantic, keyword,
                              [qrels[q] for q in query_ids])

    @classmethod
    def _from_long(cls, query_ids: tuple[Hashable, ...], rows: np.ndarray, flat_ids: np.ndarray,
                   semantic: np.ndarray, keyword: np.ndarray,
                   relevance: Sequence[Mapping[int, int]]) -> CandidateSet:
        """Pad one row per candidate (query row, id, raw scores) into sorted matrices."""
        n_queries = len(query_ids)
        order = np.lexsort((flat_ids, rows))  # by query, then doc id ascending
        rows, flat_ids = rows[order], flat_ids[order]
        repeated = np.flatnonzero((flat_ids[1:] == flat_ids[:-1]) & (rows[1:] == rows[:-1]))
        if repeated.size:
            raise ValueError(f"query {query_ids[rows[repeated[0]]]!r} lists document "
                             f"{flat_ids[repeated[0]]} twice; give each candidate once.")
        lengths = np.bincount(rows, minlength=n_queries)
        width = max(int(lengths.max()), RANKING_CUTOFF)
        cols = np.arange(rows.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        padded_ids = np.full((n_queries, width), -1, dtype=np.int64)
        padded_ids[rows, cols] = flat_ids
        raw = []
        for flat in (semantic, keyword):
            padded = np.full((n_queries, width), np.nan)
            padded[rows, cols] = flat[order]
            raw.append(padded)
        mask = np.arange(width) < lengths[:, None]
        both_missing = mask & np.isnan(raw[0]) & np.isnan(raw[1])
        if both_missing.any():
            q = int(np.flatnonzero(both_missing.any(axis=1))[0])
            raise ValueError(f"query {query_ids[q]!r} has a candidate without any score; "
                             f"every candidate must come from at least one retriever.")
        gains, n_relevant, ideal_dcg, judged = _align_qrels(padded_ids, lengths, relevance)
        return cls(query_ids, padded_ids, raw[0], raw[1], mask, gains, n_relevant, ideal_dcg,
                   judged)


def _long_format(run: Mapping[Hashable, Mapping[int, float]], query_ids: tuple[Hashable, ...]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    results = [run.get(query_id, {}) for query_id in query_ids]
    lengths = np.array([len(docs) for docs in results], dtype=np.int64)
    total = int(lengths.sum())
    ids = np.fromiter(chain.from_iterable(docs.keys() for docs in results), np.int64, total)
    scores = np.fromiter(chain.from_iterable(docs.values() for docs in results), np.float64,
                         total)
    return np.repeat(np.arange(len(query_ids)), lengths), ids, scores


def _align_qrels(padded_ids: np.ndarray, lengths: np.ndarray,
                 relevance: Sequence[Mapping[int, int]]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    gains = np.zeros(padded_ids.shape)
    judged_matrix = np.zeros(padded_ids.shape, dtype=bool)
    n_relevant = np.zeros(len(relevance), dtype=np.int64)
    ideal_dcg = np.zeros(len(relevance))
    for q, judged in enumerate(relevance):
        if not judged:
            continue
        judged_ids = np.fromiter(judged.keys(), dtype=np.int64, count=len(judged))
        grades = np.fromiter(judged.values(), dtype=np.float64, count=len(judged))
        grades = relevance_gains(grades)  # below grade 1: not relevant, no gain
        n_relevant[q] = np.count_nonzero(grades)
        ideal_dcg[q] = ideal_dcg_at_k(grades, k=RANKING_CUTOFF)
        row = padded_ids[q, :lengths[q]]  # sorted ids, so judged docs are found by bisection
        if row.size:
            pos = np.minimum(np.searchsorted(row, judged_ids), row.size - 1)
            found = row[pos] == judged_ids
            gains[q, pos[found]] = grades[found]
            judged_matrix[q, pos[found]] = True  # any grade: a grade-0 entry is judged too
    return gains, n_relevant, ideal_dcg, judged_matrix


def normalised_scores(candidates: CandidateSet, normalisation: Normalisation = "candidates"
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Min-max normalised semantic and keyword matrices (0 on padding).

    ``"candidates"``: the fusion.py rule, min and max over all of the query's candidates,
    0 when max == min; every candidate needs both raw scores.
    ``"per_retriever"``: the ranx ``norm="min-max"`` rule, min and max over the documents
    that retriever returned (non-NaN), divided by ``max(max - min, 1e-9)``; a candidate
    the retriever did not return scores 0 after normalisation, as ranx ``wsum`` treats a
    document missing from a run.
    """
    if normalisation not in ("candidates", "per_retriever"):
        raise ValueError(f"normalisation must be 'candidates' or 'per_retriever', "
                         f"got {normalisation!r}.")
    normalised = []
    for name, raw in (("semantic", candidates.semantic), ("keyword", candidates.keyword)):
        missing = np.isnan(raw)
        if np.any(~missing & ~candidates.mask):
            raise ValueError("the candidate set's padding holds scores; build it with "
                             "CandidateSet.from_queries or from_runs.")
        if normalisation == "candidates" and np.any(missing & candidates.mask):
            # In this mode every candidate has both scores, so a NaN is no missing document
            # but an undefined similarity; fusing it would make the query's scores NaN.
            q = int(np.flatnonzero((missing & candidates.mask).any(axis=1))[0])
            count = int((missing & candidates.mask)[q].sum())
            raise NonFiniteScores(
                f"query {candidates.query_ids[q]!r} has {count} candidates whose {name} score "
                f"is NaN, so no metric is computed: in normalisation='candidates' (the fusion "
                f"rule) every candidate has both scores and a NaN means {NAN_CAUSES[name]}; "
                f"for runs in which a retriever did not return every candidate, call "
                f"sweep_weights with normalisation='per_retriever'.")
        if np.isinf(raw).any():
            raise ValueError(f"some {name} scores are infinite; give finite raw scores.")
        if normalisation == "candidates":
            normalised.append(min_max_normalise(raw, present=candidates.mask))
        else:
            normalised.append(min_max_normalise(raw, present=candidates.mask & ~missing,
                                                min_span=RANX_MIN_SPAN))
    return normalised[0], normalised[1]


def _fused_matrix(sem_norm: np.ndarray, kw_norm: np.ndarray, padding: np.ndarray,
                  semantic_weight: float, keyword_weight: float,
                  query_ids: tuple[Hashable, ...] | None = None) -> np.ndarray:
    fused = fuse_normalised(sem_norm, kw_norm, semantic_weight, keyword_weight,
                            query=query_ids)  # raises on a NaN score, naming the query
    np.copyto(fused, -np.inf, where=padding)
    return fused


def _top_columns(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of the k highest scores, best first, ties by column ascending.

    Columns are sorted by doc id, so this is ``lexsort((ids, -scores))[:k]`` per row.
    ``np.partition`` finds each row's k-th largest score; every score above it is in, and
    of the scores equal to it only the leftmost columns fill the remaining places.
    """
    n_rows, width = scores.shape
    kth = np.partition(scores, width - k, axis=1)[:, width - k, None]
    selected = scores >= kth
    overfull = np.flatnonzero(np.count_nonzero(selected, axis=1) > k)  # ties at the cut
    if overfull.size:
        above = scores[overfull] > kth[overfull]
        at_cut = selected[overfull] & ~above
        places = k - np.count_nonzero(above, axis=1, keepdims=True)
        selected[overfull] = above | (at_cut & (np.cumsum(at_cut, axis=1) <= places))
    # exactly k per row, in row-major order; flatnonzero is ~10x faster than nonzero here
    columns = (np.flatnonzero(selected) % width).reshape(n_rows, k)  # ascending per row
    order = np.argsort(-np.take_along_axis(scores, columns, axis=1), axis=1, kind="stable")
    return np.take_along_axis(columns, order, axis=1)


def rank_top_k(candidates: CandidateSet, semantic_weight: float, *,
               keyword_weight: float | None = None, k: int = RANKING_CUTOFF,
               normalisation: Normalisation = "candidates") -> list[np.ndarray]:
    """The top-k document ids per query at one weight, exactly as the sweep ranks them.

    Equals ``rank_candidates(ids, fuse_scores(sem, kw, w))[:k]`` per query in the default
    mode; a query with fewer than k candidates returns all of them.
    """
    if keyword_weight is None:
        keyword_weight = 1.0 - semantic_weight
    sem_norm, kw_norm = normalised_scores(candidates, normalisation)
    fused = _fused_matrix(sem_norm, kw_norm, ~candidates.mask, semantic_weight, keyword_weight,
                          candidates.query_ids)
    fused = _pad_columns(fused, k)
    columns = _top_columns(fused, k)
    ids = np.take_along_axis(_pad_columns(candidates.doc_ids, k, fill=-1), columns, axis=1)
    n_kept = np.minimum(candidates.mask.sum(axis=1), k)
    return [ids[q, :n_kept[q]] for q in range(candidates.n_queries)]


def _pad_columns(matrix: np.ndarray, width: int, fill: float = -np.inf) -> np.ndarray:
    if matrix.shape[1] >= width:
        return matrix
    extra = np.full((matrix.shape[0], width - matrix.shape[1]), fill, dtype=matrix.dtype)
    return np.hstack([matrix, extra])


def _score_top_columns(candidates: CandidateSet, columns: np.ndarray) -> QueryScores:
    top_gains = np.take_along_axis(candidates.gains, columns, axis=1)
    return score_top_gains(top_gains, candidates.n_relevant, candidates.ideal_dcg)


def _judged_at_5(candidates: CandidateSet, columns: np.ndarray) -> np.ndarray:
    """Per query, Judged@5 of the ranking whose best columns are ``columns``."""
    top = columns[:, :PRECISION_CUTOFF]
    labelled = np.take_along_axis(candidates.judged, top, axis=1)  # padding is never judged
    return judged_share(labelled, candidates.mask.sum(axis=1))


@dataclass(frozen=True)
class SweepResult:
    """Mean metrics per weight (arrays aligned with ``semantic_weights``)."""

    semantic_weights: np.ndarray
    keyword_weights: np.ndarray
    p_at_5: np.ndarray  # headline metric; exact hits / (5 * n_queries)
    recall_at_5: np.ndarray
    ndcg_at_10: np.ndarray
    mrr_at_10: np.ndarray
    per_query_p_at_5: np.ndarray  # (n_weights, n_queries)
    p_at_5_ceiling: float  # mean of min(5, n_relevant) / 5 over the qrels
    p_at_5_candidate_ceiling: float  # same, counting only relevant docs among the candidates
    normalisation: Normalisation
    # mean Judged@5 per weight: the share of the top 5 the qrels label (any grade); below 1,
    # P@5 there counts unlabelled documents as not relevant, a lower bound
    judged_at_5: np.ndarray | None = None

    def index_of(self, semantic_weight: float) -> int:
        """Position of a weight on the grid; ``ValueError`` when it is not on it."""
        hits = np.flatnonzero(np.isclose(self.semantic_weights, semantic_weight,
                                         rtol=0.0, atol=1e-9))
        if hits.size == 0:
            raise ValueError(f"weight {semantic_weight} is not on the swept grid "
                             f"{self.semantic_weights.tolist()}; add it to the grid.")
        return int(hits[0])


def sweep_weights(candidates: CandidateSet, weights: Sequence[float] | np.ndarray = DEFAULT_WEIGHTS,
                  *, keyword_weights: Sequence[float] | np.ndarray | None = None,
                  normalisation: Normalisation = "candidates") -> SweepResult:
    """Rank every query at every semantic weight and score P@5, Recall@5, nDCG@10, MRR@10.

    Returns the mean of each metric per weight, the per-query P@5 matrix (for the paired
    statistics and cross-validation below), the P@5 ceilings and the mean Judged@5 per
    weight.

    ``keyword_weights`` defaults to ``1.0 - w`` per weight (fusion.py); pass them explicitly
    to mirror a tool that uses other values (ranx pairs 0.7 with 0.3, not
    ``1.0 - 0.7 = 0.30000000000000004``). See :func:`normalised_scores` for the modes.
    """
    semantic_weights = np.asarray(weights, dtype=np.float64)
    if keyword_weights is None:
        keyword_weights = 1.0 - semantic_weights
    keyword_weights = np.asarray(keyword_weights, dtype=np.float64)
    if semantic_weights.ndim != 1 or semantic_weights.shape != keyword_weights.shape \
            or semantic_weights.size == 0:
        raise ValueError("weights and keyword_weights must be non-empty 1-D and equally long.")
    if not (np.all((semantic_weights >= 0) & (semantic_weights <= 1))
            and np.all((keyword_weights >= 0) & (keyword_weights <= 1))):
        raise ValueError("every weight must lie in [0, 1].")
    sem_norm, kw_norm = normalised_scores(candidates, normalisation)
    padding = ~candidates.mask
    n_queries = candidates.n_queries
    per_query_hits = np.empty((semantic_weights.size, n_queries), dtype=np.int64)
    means = np.empty((4, semantic_weights.size))
    for i, (w_sem, w_kw) in enumerate(zip(semantic_weights, keyword_weights)):
        fused = _fused_matrix(sem_norm, kw_norm, padding, w_sem, w_kw, candidates.query_ids)
        columns = _top_columns(fused, RANKING_CUTOFF)
        scores = _score_top_columns(candidates, columns)
        per_query_hits[i] = scores.hits_at_5
        means[:, i] = (scores.recall_at_5.mean(), scores.ndcg_at_10.mean(),
                       scores.reciprocal_rank_at_10.mean(),
                       _judged_at_5(candidates, columns).mean())
    return SweepResult(
        semantic_weights=semantic_weights, keyword_weights=keyword_weights,
        p_at_5=per_query_hits.sum(axis=1) / (PRECISION_CUTOFF * n_queries),
        recall_at_5=means[0], ndcg_at_10=means[1], mrr_at_10=means[2],
        per_query_p_at_5=per_query_hits / PRECISION_CUTOFF,
        p_at_5_ceiling=mean_p_at_k_ceiling(candidates.n_relevant, k=PRECISION_CUTOFF),
        p_at_5_candidate_ceiling=mean_p_at_k_ceiling(np.count_nonzero(candidates.gains, axis=1),
                                                     k=PRECISION_CUTOFF),
        normalisation=normalisation, judged_at_5=means[3])


@dataclass(frozen=True)
class MethodResult:
    """Mean metrics of one fixed ranking method, plus per-query P@5."""

    p_at_5: float
    recall_at_5: float
    ndcg_at_10: float
    mrr_at_10: float
    per_query_p_at_5: np.ndarray


def reciprocal_rank_fusion(candidates: CandidateSet, *, k: int = 60) -> MethodResult:
    """Reciprocal rank fusion on the same candidates, scored with the sweep's metrics.

    Each candidate's score is :func:`.fusion.reciprocal_rank_fusion_scores` (ranks among
    the candidates each retriever scored, ties by doc id ascending). In the
    default set every candidate has both scores, so both ranks run over all candidates.
    The fused ranking is RRF descending, ties by doc id ascending.
    """
    padding = ~candidates.mask
    rrf = reciprocal_rank_fusion_scores(np.where(padding, np.nan, candidates.semantic),
                                        np.where(padding, np.nan, candidates.keyword), k=k)
    np.copyto(rrf, -np.inf, where=padding)
    scores = _score_top_columns(candidates, _top_columns(rrf, RANKING_CUTOFF))
    n_queries = candidates.n_queries
    return MethodResult(
        p_at_5=float(scores.hits_at_5.sum() / (PRECISION_CUTOFF * n_queries)),
        recall_at_5=float(scores.recall_at_5.mean()), ndcg_at_10=float(scores.ndcg_at_10.mean()),
        mrr_at_10=float(scores.reciprocal_rank_at_10.mean()),
        per_query_p_at_5=scores.hits_at_5 / PRECISION_CUTOFF)

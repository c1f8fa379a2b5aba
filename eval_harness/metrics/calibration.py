"""Hybrid weight calibration: a vectorised grid search over the fusion weight, and its statistics.

The sweep reproduces :mod:`eval_harness.retrieval.fusion` bit for bit. For every query and
every semantic weight ``w`` (keyword weight ``1.0 - w`` unless given):

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

Metrics per weight: P@5 (headline), Recall@5, nDCG@10, MRR@10, defined as in
:mod:`eval_harness.metrics.ranking` (relevant = grade >= 1; Recall, nDCG and P@5 ceilings
use all relevant docs of the qrels, also those outside the candidate set).

Statistics: the best weight, its uplift over the MEDRAG default 0.7 with a paired bootstrap
interval and a paired sign-flip randomization test, k-fold cross-validated P@5 (the honest
estimate, since the best weight is chosen on the same queries it is scored on), and the
P@5 verdict of story 2.9.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Literal

import numpy as np

PRECISION_CUTOFF = 5
RANKING_CUTOFF = 10  # nDCG@10 and MRR@10; the sweep ranks this many documents per query
DEFAULT_SEMANTIC_WEIGHT = 0.7  # MEDRAG default (0.7 semantic / 0.3 keyword)
RANX_MIN_SPAN = 1e-9  # ranx min-max divides by max(max - min, 1e-9)
TIE_TOLERANCE = 1e-12  # mean P@5 values closer than this are treated as a tie

Normalisation = Literal["candidates", "per_retriever"]
Verdict = Literal["full_success", "partial_success", "failure"]


# --------------------------------------------------------------------------- weight grid
def weight_grid(start: float = 0.5, stop: float = 0.9, step: float = 0.1) -> np.ndarray:
    """Semantic weights ``start, start + step, ..., stop`` (inclusive), each rounded to 10
    decimals so that the grid holds the exact doubles ``0.7`` and ``0.8``, not
    ``0.7000000000000001``. ``stop - start`` must be a whole number of steps."""
    if not (0.0 <= start <= stop <= 1.0) or not step > 0.0:
        raise ValueError(f"weight grid needs 0 <= start <= stop <= 1 and step > 0, "
                         f"got start={start}, stop={stop}, step={step}.")
    n_steps = round((stop - start) / step)
    if abs(start + n_steps * step - stop) > 1e-9:
        raise ValueError(f"stop - start = {stop - start} is not a multiple of step {step}; "
                         f"choose a step that divides the range.")
    return np.round(start + step * np.arange(n_steps + 1), 10)


DEFAULT_WEIGHTS = weight_grid()


# ------------------------------------------------------------------------- candidate set
@dataclass(frozen=True)
class CandidateSet:
    """Every query's candidates with both raw scores and their qrels, as padded matrices.

    Row ``q`` holds query ``q``'s candidates in columns ``0 .. n_candidates[q] - 1``, sorted
    by document id ascending; the rest of the row is padding (``mask`` False, id -1, scores
    NaN, gain 0). A NaN raw score on a real candidate means "this retriever did not return
    the document"; only ``normalisation="per_retriever"`` accepts that. Build it with
    :meth:`from_queries` or :meth:`from_runs`.
    """

    query_ids: tuple[Hashable, ...]
    doc_ids: np.ndarray  # (n_queries, width) int64
    semantic: np.ndarray  # (n_queries, width) float64 raw semantic scores
    keyword: np.ndarray  # (n_queries, width) float64 raw keyword scores
    mask: np.ndarray  # (n_queries, width) bool, True on real candidates
    gains: np.ndarray  # (n_queries, width) float64 grade if grade >= 1 else 0
    n_relevant: np.ndarray  # (n_queries,) int64, relevant docs in the qrels
    ideal_dcg: np.ndarray  # (n_queries,) float64, IDCG@10 from the qrels

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
        gains, n_relevant, ideal_dcg = _align_qrels(padded_ids, lengths, relevance)
        return cls(query_ids, padded_ids, raw[0], raw[1], mask, gains, n_relevant, ideal_dcg)


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
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gains = np.zeros(padded_ids.shape)
    n_relevant = np.zeros(len(relevance), dtype=np.int64)
    ideal_dcg = np.zeros(len(relevance))
    for q, judged in enumerate(relevance):
        if not judged:
            continue
        judged_ids = np.fromiter(judged.keys(), dtype=np.int64, count=len(judged))
        grades = np.fromiter(judged.values(), dtype=np.float64, count=len(judged))
        grades = np.where(grades >= 1, grades, 0.0)  # below grade 1: not relevant, no gain
        n_relevant[q] = np.count_nonzero(grades)
        ideal = np.sort(grades)[::-1][:RANKING_CUTOFF]
        ideal_dcg[q] = np.sum(ideal / _discounts(ideal.size))
        row = padded_ids[q, :lengths[q]]  # sorted ids, so judged docs are found by bisection
        if row.size:
            pos = np.minimum(np.searchsorted(row, judged_ids), row.size - 1)
            found = row[pos] == judged_ids
            gains[q, pos[found]] = grades[found]
    return gains, n_relevant, ideal_dcg


def _discounts(k: int) -> np.ndarray:
    return np.log2(np.arange(2, k + 2, dtype=np.float64))


# ------------------------------------------------------------------------------ ranking
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
            raise ValueError(f"some candidates have no {name} score; normalisation="
                             f"'candidates' needs both scores, use 'per_retriever'.")
        if np.isinf(raw).any():
            raise ValueError(f"some {name} scores are infinite; give finite raw scores.")
        normalised.append(_min_max_rows(raw, ranx_span=normalisation == "per_retriever"))
    return normalised[0], normalised[1]


def _min_max_rows(raw: np.ndarray, *, ranx_span: bool) -> np.ndarray:
    """Row-wise min-max over the non-NaN entries; NaN entries come out as 0."""
    low = np.fmin.reduce(raw, axis=1)  # fmin/fmax skip NaN
    high = np.fmax.reduce(raw, axis=1)
    span = high - low  # NaN for a row without any score
    if ranx_span:
        divisor = np.maximum(span, RANX_MIN_SPAN)
        constant = np.zeros(span.shape, dtype=bool)
    else:
        constant = ~(span > 0)  # max == min: fusion.py maps the whole query to 0
        divisor = np.where(constant, 1.0, span)
    normalised = (raw - low[:, None]) / divisor[:, None]  # fusion.py's operations
    normalised[constant] = 0.0
    # present entries are >= +0.0 (x - min is never -0.0), so fmax only turns NaN into 0
    return np.fmax(normalised, 0.0, out=normalised)


def _fused_matrix(sem_norm: np.ndarray, kw_norm: np.ndarray, padding: np.ndarray,
                  semantic_weight: float, keyword_weight: float) -> np.ndarray:
    fused = semantic_weight * sem_norm + keyword_weight * kw_norm  # fusion.py's float order
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
    fused = _fused_matrix(sem_norm, kw_norm, ~candidates.mask, semantic_weight, keyword_weight)
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


# ------------------------------------------------------------------------------ metrics
@dataclass(frozen=True)
class _QueryScores:
    """Per-query metrics of one ranking method (arrays of length n_queries)."""

    hits_at_5: np.ndarray  # int64
    recall_at_5: np.ndarray
    ndcg_at_10: np.ndarray
    reciprocal_rank_at_10: np.ndarray


def _score_top_columns(candidates: CandidateSet, columns: np.ndarray) -> _QueryScores:
    top_gains = np.take_along_axis(candidates.gains, columns, axis=1)
    relevant = top_gains > 0.0  # gains are 0 below grade 1
    hits = np.count_nonzero(relevant[:, :PRECISION_CUTOFF], axis=1)
    n_relevant = candidates.n_relevant
    recall = np.divide(hits, n_relevant, out=np.zeros(hits.shape), where=n_relevant > 0)
    dcg = np.sum(top_gains / _discounts(RANKING_CUTOFF), axis=1)
    ideal = candidates.ideal_dcg
    ndcg = np.divide(dcg, ideal, out=np.zeros(dcg.shape), where=ideal > 0)
    first = np.argmax(relevant, axis=1)
    reciprocal_rank = np.where(relevant.any(axis=1), 1.0 / (first + 1), 0.0)
    return _QueryScores(hits, recall, ndcg, reciprocal_rank)


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
    statistics and cross-validation below) and the P@5 ceilings.

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
    means = np.empty((3, semantic_weights.size))
    for i, (w_sem, w_kw) in enumerate(zip(semantic_weights, keyword_weights)):
        fused = _fused_matrix(sem_norm, kw_norm, padding, w_sem, w_kw)
        scores = _score_top_columns(candidates, _top_columns(fused, RANKING_CUTOFF))
        per_query_hits[i] = scores.hits_at_5
        means[:, i] = (scores.recall_at_5.mean(), scores.ndcg_at_10.mean(),
                       scores.reciprocal_rank_at_10.mean())
    return SweepResult(
        semantic_weights=semantic_weights, keyword_weights=keyword_weights,
        p_at_5=per_query_hits.sum(axis=1) / (PRECISION_CUTOFF * n_queries),
        recall_at_5=means[0], ndcg_at_10=means[1], mrr_at_10=means[2],
        per_query_p_at_5=per_query_hits / PRECISION_CUTOFF,
        p_at_5_ceiling=_ceiling(candidates.n_relevant),
        p_at_5_candidate_ceiling=_ceiling(np.count_nonzero(candidates.gains, axis=1)),
        normalisation=normalisation)


def _ceiling(n_relevant: np.ndarray) -> float:
    reachable = np.minimum(n_relevant, PRECISION_CUTOFF).sum()
    return float(reachable / (PRECISION_CUTOFF * n_relevant.size))


@dataclass(frozen=True)
class MethodResult:
    """Mean metrics of one fixed ranking method, plus per-query P@5."""

    p_at_5: float
    recall_at_5: float
    ndcg_at_10: float
    mrr_at_10: float
    per_query_p_at_5: np.ndarray


def reciprocal_rank_fusion(candidates: CandidateSet, *, k: int = 60) -> MethodResult:
    """Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) on the same candidates.

        RRF(d) = sum over retrievers r that returned d of 1 / (k + rank_r(d))

    ``rank_r(d)`` is d's 1-based position among the query's candidates that retriever r
    scored (non-NaN raw score), by raw score descending, ties by doc id ascending. In the
    default set every candidate has both scores, so both ranks run over all candidates.
    The fused ranking is RRF descending, ties by doc id ascending.
    """
    if k < 0:
        raise ValueError(f"RRF constant k must be >= 0, got {k}.")
    rrf = np.zeros(candidates.doc_ids.shape)
    for raw in (candidates.semantic, candidates.keyword):
        present = candidates.mask & ~np.isnan(raw)
        order = np.argsort(np.where(present, -raw, np.inf), axis=1, kind="stable")
        ranks = np.empty(order.shape, dtype=np.float64)
        np.put_along_axis(ranks, order, np.arange(1, order.shape[1] + 1, dtype=np.float64), axis=1)
        rrf += np.where(present, 1.0 / (k + ranks), 0.0)
    np.copyto(rrf, -np.inf, where=~candidates.mask)
    scores = _score_top_columns(candidates, _top_columns(rrf, RANKING_CUTOFF))
    n_queries = candidates.n_queries
    return MethodResult(
        p_at_5=float(scores.hits_at_5.sum() / (PRECISION_CUTOFF * n_queries)),
        recall_at_5=float(scores.recall_at_5.mean()), ndcg_at_10=float(scores.ndcg_at_10.mean()),
        mrr_at_10=float(scores.reciprocal_rank_at_10.mean()),
        per_query_p_at_5=scores.hits_at_5 / PRECISION_CUTOFF)


# --------------------------------------------------------------------------- statistics
def best_weight(semantic_weights: np.ndarray, p_at_5: np.ndarray, *,
                current_weight: float = DEFAULT_SEMANTIC_WEIGHT) -> float:
    """The weight with the highest mean P@5.

    Ties (within 1e-12) go to the weight closest to ``current_weight`` (the configured one,
    so a calibration does not move the config without a gain), then to the smaller weight.
    """
    semantic_weights = np.asarray(semantic_weights, dtype=np.float64)
    p_at_5 = np.asarray(p_at_5, dtype=np.float64)
    if semantic_weights.size == 0 or semantic_weights.shape != p_at_5.shape:
        raise ValueError("best_weight needs one P@5 per weight and at least one weight.")
    tied = np.flatnonzero(p_at_5 >= p_at_5.max() - TIE_TOLERANCE)
    distance = np.round(np.abs(semantic_weights[tied] - current_weight), 10)
    winner = tied[np.lexsort((semantic_weights[tied], distance))[0]]
    return float(semantic_weights[winner])


def paired_bootstrap_interval(treatment: np.ndarray, baseline: np.ndarray, *,
                              confidence: float = 0.95, n_resamples: int = 10_000,
                              seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(treatment - baseline), resampling queries.

    Queries are drawn with replacement and both systems keep the same draw (paired), as
    in Sakai (2006) / Efron & Tibshirani (1993) ch. 13. Seeded, hence reproducible.
    """
    differences = _paired_differences(treatment, baseline)
    if not 0.0 < confidence < 1.0 or n_resamples < 1:
        raise ValueError("confidence must lie in (0, 1) and n_resamples be >= 1.")
    rng = np.random.default_rng(seed)
    means = np.concatenate([
        differences[rng.integers(0, differences.size, (size, differences.size))].mean(axis=1)
        for size in _chunks(n_resamples, differences.size)])
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1.0 - alpha / 2])
    return float(low), float(high)


def paired_randomization_test(treatment: np.ndarray, baseline: np.ndarray, *,
                              n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of a paired randomization (sign-flip) test on the mean difference.

    Under H0 each query's difference is equally likely to have either sign (Smucker, Allan
    & Carterette, CIKM 2007). p = (1 + #{|permuted mean| >= |observed mean|}) / (1 + R),
    so p is never 0; identical systems give p = 1.
    """
    differences = _paired_differences(treatment, baseline)
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1.")
    observed = abs(differences.mean())
    rng = np.random.default_rng(seed)
    extreme = 0
    for size in _chunks(n_resamples, differences.size):
        signs = rng.integers(0, 2, (size, differences.size)) * 2 - 1
        permuted = np.abs(signs @ differences) / differences.size
        extreme += int(np.count_nonzero(permuted >= observed - TIE_TOLERANCE))
    return (1 + extreme) / (1 + n_resamples)


def _paired_differences(treatment: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    treatment = np.asarray(treatment, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    if treatment.shape != baseline.shape or treatment.ndim != 1 or treatment.size == 0:
        raise ValueError("paired statistics need two equally long, non-empty per-query arrays.")
    return treatment - baseline


def _chunks(n_resamples: int, n_queries: int, budget: int = 2_000_000) -> list[int]:
    size = max(1, budget // max(n_queries, 1))  # bounds memory to ~budget draws at a time
    return [min(size, n_resamples - start) for start in range(0, n_resamples, size)]


@dataclass(frozen=True)
class Uplift:
    """The best weight against the default weight, on the same queries."""

    best_weight: float
    default_weight: float
    best_p_at_5: float
    default_p_at_5: float
    absolute: float  # best - default
    relative: float | None  # absolute / default; None when the default scores 0
    ci_low: float  # paired bootstrap interval of ``absolute``
    ci_high: float
    confidence: float
    p_value: float  # paired sign-flip randomization test
    n_queries: int


def uplift_over_default(sweep: SweepResult, *, default_weight: float = DEFAULT_SEMANTIC_WEIGHT,
                        current_weight: float | None = None, confidence: float = 0.95,
                        n_resamples: int = 10_000, seed: int = 0) -> Uplift:
    """Uplift in P@5 of the best weight (see :func:`best_weight`) over ``default_weight``.

    The best weight is chosen on the same queries it is scored on, so the uplift is
    optimistic; :func:`cross_validated_p_at_5` gives the out-of-sample figure.
    ``current_weight`` (tie-break target) defaults to ``default_weight``.
    """
    current_weight = default_weight if current_weight is None else current_weight
    chosen = best_weight(sweep.semantic_weights, sweep.p_at_5, current_weight=current_weight)
    best_index, default_index = sweep.index_of(chosen), sweep.index_of(default_weight)
    best_row = sweep.per_query_p_at_5[best_index]
    default_row = sweep.per_query_p_at_5[default_index]
    best_p5 = float(sweep.p_at_5[best_index])
    default_p5 = float(sweep.p_at_5[default_index])
    absolute = best_p5 - default_p5
    low, high = paired_bootstrap_interval(best_row, default_row, confidence=confidence,
                                          n_resamples=n_resamples, seed=seed)
    p_value = paired_randomization_test(best_row, default_row, n_resamples=n_resamples,
                                        seed=seed)
    return Uplift(best_weight=chosen, default_weight=float(sweep.semantic_weights[default_index]),
                  best_p_at_5=best_p5, default_p_at_5=default_p5, absolute=absolute,
                  relative=absolute / default_p5 if default_p5 > 0 else None,
                  ci_low=low, ci_high=high, confidence=confidence, p_value=p_value,
                  n_queries=best_row.size)


@dataclass(frozen=True)
class CrossValidation:
    """k-fold cross-validated P@5: weights chosen on k-1 folds, scored on the held-out one."""

    p_at_5: float  # mean held-out P@5 over all queries
    fold_weights: tuple[float, ...]
    fold_p_at_5: tuple[float, ...]
    fold_sizes: tuple[int, ...]


def cross_validated_p_at_5(sweep: SweepResult, *, n_folds: int = 5, seed: int = 0,
                           current_weight: float = DEFAULT_SEMANTIC_WEIGHT) -> CrossValidation:
    """Choose the best weight on k-1 folds (same tie rule), score P@5 on the held-out fold.

    Queries are shuffled with ``seed`` and dealt round-robin into ``n_folds`` folds whose
    sizes differ by at most one; the pooled held-out mean weighs every query once.
    """
    per_query = sweep.per_query_p_at_5
    n_queries = per_query.shape[1]
    if not 2 <= n_folds <= n_queries:
        raise ValueError(f"n_folds must lie between 2 and the number of queries "
                         f"({n_queries}), got {n_folds}.")
    fold_of = np.empty(n_queries, dtype=np.int64)
    fold_of[np.random.default_rng(seed).permutation(n_queries)] = np.arange(n_queries) % n_folds
    weights, scores, sizes, held_out_total = [], [], [], 0.0
    for fold in range(n_folds):
        held_out = fold_of == fold
        train_p5 = per_query[:, ~held_out].mean(axis=1)
        chosen = best_weight(sweep.semantic_weights, train_p5, current_weight=current_weight)
        held_out_p5 = per_query[sweep.index_of(chosen), held_out]
        weights.append(chosen)
        scores.append(float(held_out_p5.mean()))
        sizes.append(int(held_out.sum()))
        held_out_total += float(held_out_p5.sum())
    return CrossValidation(held_out_total / n_queries, tuple(weights), tuple(scores), tuple(sizes))


def precision_verdict(p_at_5: float, *, full_success: float = 0.75,
                      partial_success: float = 0.70) -> Verdict:
    """Story 2.9 verdict: ``p_at_5 >= full_success`` is "full_success", ``partial_success
    <= p_at_5 < full_success`` "partial_success", below that "failure". Comparisons are
    exact (no rounding), so 0.7499 is partial and 0.6999 is failure."""
    if not 0.0 <= partial_success <= full_success <= 1.0:
        raise ValueError(f"verdict bands need 0 <= partial_success <= full_success <= 1, "
                         f"got {partial_success} and {full_success}.")
    if not (isinstance(p_at_5, (int, float, np.floating)) and math.isfinite(p_at_5)
            and 0.0 <= p_at_5 <= 1.0):
        raise ValueError(f"P@5 must be a number in [0, 1], got {p_at_5!r}.")
    if p_at_5 >= full_success:
        return "full_success"
    if p_at_5 >= partial_success:
        return "partial_success"
    return "failure"

"""Per-query ranking metrics, defined exactly as trec_eval and ranx define them.

Every function scores one query: ``ranked_ids`` is the system's ranking (best first) and
``relevant`` maps document id -> graded relevance from the qrels. A document counts as
relevant when its grade is >= 1; grades below 1 (0, or negative "harmful" judgments) count
as not relevant and give no gain. Documents missing from ``relevant`` are not relevant.

References:
    trec_eval measures ``P_k``, ``recall_k``, ``ndcg_cut_k``, ``recip_rank``
    (https://github.com/usnistgov/trec_eval) and ranx ``precision@k``, ``recall@k``,
    ``ndcg@k``, ``mrr@k`` (https://github.com/AmenRa/ranx). The tests compare every
    function with both on thousands of random queries.

The functions at the end score many queries at once, for the calibration sweep
(:mod:`eval_harness.retrieval.sweep`): same definitions, on matrices of gains, one row per
query; the sweep's tests check them against the per-query functions.

Degenerate input, for all per-query functions: ``k`` must be >= 1; a ranking shorter than ``k`` is
scored as if padded with non-relevant documents; an empty ranking scores 0.0 (Judged@k: 1.0,
see :func:`judged_at_k`); a query without any relevant document scores 0.0 (trec_eval and
ranx do the same). A document id
that appears twice in the top ``k`` is a caller error and raises ``ValueError``. Ties in the
system's scores must be broken before calling: these functions only see the order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RELEVANT_GRADE = 1  # trec_eval's default relevance level: grade >= 1 is relevant
PRECISION_CUTOFF = 5  # the headline P@5, and Recall@5
RANKING_CUTOFF = 10  # nDCG@10 and MRR@10


def precision_at_k(ranked_ids: Sequence[Hashable], relevant: Mapping[Hashable, int], *,
                   k: int) -> float:
    """Precision at cut-off k: the share of the first k positions holding a relevant doc.

        P@k = |{relevant docs among ranked_ids[:k]}| / k

    The denominator is always k, even when fewer than k documents were retrieved (as in
    trec_eval ``P_k`` and ranx ``precision@k``), so a system that returns 3 documents, all
    relevant, scores 0.6 at k=5.

    Examples
    --------
    >>> qrels = {"a": 2, "b": 0, "c": 1, "d": 1}   # relevant: a, c, d
    >>> precision_at_k(["b", "a", "x", "c"], qrels, k=5)   # a and c in the top 5: 2 / 5
    0.4
    >>> precision_at_k(["a", "c", "d"], qrels, k=5)         # 3 / 5, not 3 / 3
    0.6
    """
    return _hits_at_k(ranked_ids, relevant, k) / k


def recall_at_k(ranked_ids: Sequence[Hashable], relevant: Mapping[Hashable, int], *,
                k: int) -> float:
    """Recall at cut-off k: the share of the query's relevant docs found in the first k.

        Recall@k = |{relevant docs among ranked_ids[:k]}| / |{d : relevant[d] >= 1}|

    A query with no relevant document scores 0.0 (trec_eval ``recall_k`` and ranx
    ``recall@k`` both do), not NaN, so averages stay defined.

    Examples
    --------
    >>> qrels = {"a": 2, "b": 0, "c": 1, "d": 1}   # relevant: a, c, d
    >>> round(recall_at_k(["b", "a", "x", "c"], qrels, k=5), 4)   # a, c of 3: 2 / 3
    0.6667
    >>> recall_at_k(["a"], {"a": 0}, k=5)                          # nothing to find
    0.0
    """
    n_relevant = count_relevant(relevant)
    if n_relevant == 0:
        _check_k(k)
        return 0.0
    return _hits_at_k(ranked_ids, relevant, k) / n_relevant


def ndcg_at_k(ranked_ids: Sequence[Hashable], relevant: Mapping[Hashable, int], *,
              k: int) -> float:
    """Normalised discounted cumulative gain at cut-off k, with linear (graded) gain.

        DCG@k  = sum_{i=1..k} gain(ranked_ids[i]) / log2(i + 1),  gain = grade if grade >= 1
        nDCG@k = DCG@k / IDCG@k

    IDCG@k is the DCG of the ideal ranking built from the qrels (all relevant grades sorted
    descending), not from the retrieved documents: this is Järvelin & Kekäläinen (2002),
    trec_eval ``ndcg_cut_k`` and ranx ``ndcg@k`` (not the exponential ``2^grade - 1``
    gain of ranx ``ndcg_burges@k``). A query with no relevant document scores 0.0.

    Examples
    --------
    The only relevant document at rank 3: DCG = 1 / log2(4) = 0.5, IDCG = 1 / log2(2) = 1.

    >>> ndcg_at_k(["x", "y", "a"], {"a": 1}, k=10)
    0.5

    Graded, in the wrong order: DCG = 1 / log2(2) + 2 / log2(3) = 1 + 1.26186 = 2.26186,
    IDCG = 2 / log2(2) + 1 / log2(3) = 2 + 0.63093 = 2.63093, nDCG = 2.26186 / 2.63093:

    >>> round(ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, k=10), 5)
    0.85972
    """
    _check_k(k)
    top = _top_k(ranked_ids, k)
    dcg = sum(_gain(relevant.get(doc_id, 0)) / math.log2(rank + 1)
              for rank, doc_id in enumerate(top, start=1))
    ideal_gains = sorted((_gain(grade) for grade in relevant.values()), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal_gains, start=1))
    if idcg == 0.0:
        return 0.0
    return dcg / idcg


def reciprocal_rank_at_k(ranked_ids: Sequence[Hashable], relevant: Mapping[Hashable, int],
                         *, k: int) -> float:
    """Reciprocal rank of the first relevant document within the first k; MRR@k is its mean.

        RR@k = 1 / rank of the first relevant doc in ranked_ids[:k]   (ranks start at 1)
             = 0 when none of the first k is relevant

    Equals ranx ``mrr@k`` and trec_eval ``recip_rank`` on the run cut to k documents.

    Examples
    --------
    >>> qrels = {"a": 2, "b": 0, "c": 1}
    >>> reciprocal_rank_at_k(["b", "a", "c"], qrels, k=10)   # first relevant (a) at rank 2
    0.5
    >>> reciprocal_rank_at_k(["b", "a", "c"], qrels, k=1)    # b is not relevant
    0.0
    """
    for rank, doc_id in enumerate(_top_k(ranked_ids, k), start=1):
        if relevant.get(doc_id, 0) >= RELEVANT_GRADE:
            return 1.0 / rank
    return 0.0


def p_at_k_ceiling(relevant: Mapping[Hashable, int], *, k: int) -> float:
    """The highest P@k any ranking can reach for this query: min(k, n_relevant) / k.

    A query with 2 relevant documents can score at most 0.4 at k=5, however good the
    retriever; averaged over queries this bounds the reachable mean P@k.

    Examples
    --------
    >>> p_at_k_ceiling({"a": 1, "b": 3, "c": 0}, k=5)   # 2 relevant: 2 / 5
    0.4
    >>> p_at_k_ceiling({str(i): 1 for i in range(9)}, k=5)   # 9 relevant: min(5, 9) / 5
    1.0
    """
    _check_k(k)
    return min(k, count_relevant(relevant)) / k


def judged_at_k(ranked_ids: Sequence[Hashable], judged: Collection[Hashable], *,
                k: int) -> float:
    """Judged@k: the share of the documents in the first k positions that carry a label.

        Judged@k = |{d in ranked_ids[:k] : d in judged}| / min(k, len(ranked_ids))

    ``judged`` holds every document with a label for the query, whatever its grade: pass
    the qrels mapping itself (its keys), where a grade-0 entry means "judged not relevant"
    and counts as judged. Where Judged@k < 1, P@k counts the unlabelled documents as not
    relevant, so it is a lower bound on the P@k complete labels would give (Buckley &
    Voorhees 2004, "Retrieval evaluation with incomplete information").

    The denominator is the number of documents actually in the top k: a position no
    document fills cannot hide a relevant one, so a ranking shorter than k is not "less
    judged" (ir_measures ``Judged@k`` divides by k instead; the two agree whenever the
    ranking holds at least k documents). An empty ranking scores 1.0: nothing unlabelled
    is in it, and its P@k of 0 is exact.

    Examples
    --------
    >>> qrels = {"a": 2, "b": 0, "c": 1}   # b is judged, as not relevant
    >>> judged_at_k(["a", "x", "b", "y", "c", "z"], qrels, k=5)   # a, b, c of 5: 3 / 5
    0.6
    >>> judged_at_k(["x", "b"], qrels, k=5)   # two retrieved, b judged: 1 / 2, not 1 / 5
    0.5
    >>> judged_at_k([], qrels, k=5)
    1.0
    """
    top = _top_k(ranked_ids, k)
    if not top:
        return 1.0
    return sum(1 for doc_id in top if doc_id in judged) / len(top)


def count_relevant(relevant: Mapping[Hashable, int]) -> int:
    """Number of documents judged relevant (grade >= 1).

    Examples
    --------
    >>> count_relevant({"a": 2, "b": 0, "c": 1, "d": -1})   # a and c
    2
    """
    return sum(1 for grade in relevant.values() if grade >= RELEVANT_GRADE)


def mean_metrics(runs: Mapping[Any, Sequence[Hashable]],
                 qrels: Mapping[Any, Mapping[Any, int]]) -> dict[str, float]:
    """Mean P@5, Recall@5, nDCG@10 and MRR@10 over the queries of ``qrels``.

    ``runs`` maps query id -> ranked document ids. A query in ``qrels`` without a run
    scores 0 on every metric (it retrieved nothing), as in ranx. The mean is over all
    queries in ``qrels``, including those without a relevant document (which score 0);
    filter ``qrels`` first to leave them out. Raises ``ValueError`` when ``qrels`` is empty
    or ``runs`` holds a query that ``qrels`` does not know.

    Examples
    --------
    q1 finds its one relevant document at rank 1 (P@5 = 1/5, the rest 1); q2 has no run
    (all 0). Means: P@5 = (0.2 + 0) / 2, the others (1 + 0) / 2.

    >>> mean_metrics({"q1": ["a"]}, {"q1": {"a": 1}, "q2": {"b": 1}})
    {'p_at_5': 0.1, 'recall_at_5': 0.5, 'ndcg_at_10': 0.5, 'mrr_at_10': 0.5}
    """
    unknown = [query_id for query_id in runs if query_id not in qrels]
    if unknown:
        raise ValueError(f"runs hold {len(unknown)} queries missing from the qrels "
                         f"(first: {unknown[0]!r}); evaluate only queries that have qrels.")
    if not qrels:
        raise ValueError("qrels are empty: there is no query to average over.")
    totals = dict.fromkeys(METRIC_NAMES, 0.0)
    for query_id, relevant in qrels.items():
        for name, value in query_metrics(runs.get(query_id, ()), relevant).items():
            totals[name] += value
    return {name: total / len(qrels) for name, total in totals.items()}


METRIC_NAMES = ("p_at_5", "recall_at_5", "ndcg_at_10", "mrr_at_10")


def query_metrics(ranked_ids: Sequence[Any], relevant: Mapping[Any, int]) -> dict[str, float]:
    """P@5, Recall@5, nDCG@10 and MRR@10 of one query's ranking: what :func:`mean_metrics`
    averages, one query at a time (a paired comparison of two runs needs them per query).

    Examples
    --------
    The one relevant document of two at rank 2: P@5 = 1/5, Recall@5 = 1/2, RR = 1/2,
    nDCG@10 = (1 / log2(3)) / (1 + 1 / log2(3)) = 0.6309 / 1.6309 = 0.3869.

    >>> {name: round(value, 4) for name, value in
    ...  query_metrics(["x", "a", "y"], {"a": 1, "b": 1}).items()}
    {'p_at_5': 0.2, 'recall_at_5': 0.5, 'ndcg_at_10': 0.3869, 'mrr_at_10': 0.5}
    """
    return {"p_at_5": precision_at_k(ranked_ids, relevant, k=PRECISION_CUTOFF),
            "recall_at_5": recall_at_k(ranked_ids, relevant, k=PRECISION_CUTOFF),
            "ndcg_at_10": ndcg_at_k(ranked_ids, relevant, k=RANKING_CUTOFF),
            "mrr_at_10": reciprocal_rank_at_k(ranked_ids, relevant, k=RANKING_CUTOFF)}


# ------------------------------------------------------------ many queries at once (sweep)
@dataclass(frozen=True)
class QueryScores:
    """Per-query metrics of one ranking of many queries (arrays of length n_queries)."""

    hits_at_5: np.ndarray  # int64; P@5 = hits_at_5 / 5
    recall_at_5: np.ndarray
    ndcg_at_10: np.ndarray
    reciprocal_rank_at_10: np.ndarray


def score_top_gains(top_gains: np.ndarray, n_relevant: np.ndarray,
                    ideal_dcg: np.ndarray) -> QueryScores:
    """P@5 hits, Recall@5, nDCG@10 and RR@10 of many queries, as the per-query functions.

    ``top_gains`` is ``(n_queries, 10)``: the gains (:func:`relevance_gains`) of each
    query's ten best documents, best first, 0 past the end of a shorter ranking.
    ``n_relevant`` and ``ideal_dcg`` (:func:`ideal_dcg_at_k`) come from the qrels, so a
    relevant document outside the ranking still counts. A query without a relevant
    document scores 0 on every metric.

    Examples
    --------
    Query 1 ranks its one relevant document first; query 2 ranks its one at rank 3
    (nDCG = 1 / log2(4) = 0.5, RR = 1/3); query 3 has none.

    >>> top_gains = np.zeros((3, 10))
    >>> top_gains[0, 0] = top_gains[1, 2] = 1.0
    >>> scores = score_top_gains(top_gains, np.array([1, 1, 0]), np.array([1.0, 1.0, 0.0]))
    >>> scores.hits_at_5.tolist(), scores.recall_at_5.tolist()
    ([1, 1, 0], [1.0, 1.0, 0.0])
    >>> scores.ndcg_at_10.tolist(), scores.reciprocal_rank_at_10.round(4).tolist()
    ([1.0, 0.5, 0.0], [1.0, 0.3333, 0.0])
    """
    relevant = top_gains > 0.0  # gains are 0 below grade 1
    hits = np.count_nonzero(relevant[:, :PRECISION_CUTOFF], axis=1)
    recall = np.divide(hits, n_relevant, out=np.zeros(hits.shape), where=n_relevant > 0)
    dcg = np.sum(top_gains / _discounts(RANKING_CUTOFF), axis=1)
    ndcg = np.divide(dcg, ideal_dcg, out=np.zeros(dcg.shape), where=ideal_dcg > 0)
    first = np.argmax(relevant, axis=1)
    reciprocal_rank = np.where(relevant.any(axis=1), 1.0 / (first + 1), 0.0)
    return QueryScores(hits, recall, ndcg, reciprocal_rank)


def judged_share(top_judged: np.ndarray, n_ranked: np.ndarray) -> np.ndarray:
    """:func:`judged_at_k` of many queries: ``top_judged`` is ``(n_queries, k)``, True where
    the document at that rank carries a label (False past the end of a shorter ranking);
    ``n_ranked`` is how many documents each ranking holds (more than k is fine). A query
    that ranks nothing scores 1.0.

    Examples
    --------
    Query 1: 3 of its top 5 judged; query 2 ranks 2 documents, 1 judged; query 3 none.

    >>> top_judged = np.array([[1, 0, 1, 0, 1], [0, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)
    >>> judged_share(top_judged, np.array([40, 2, 0])).tolist()
    [0.6, 0.5, 1.0]
    """
    shown = np.minimum(n_ranked, top_judged.shape[1])
    judged = np.count_nonzero(top_judged, axis=1)
    return np.divide(judged, shown, out=np.ones(judged.shape), where=shown > 0)


def relevance_gains(grades: np.ndarray) -> np.ndarray:
    """Gain per judged document: its grade when relevant (>= 1), else 0.

    Examples
    --------
    >>> relevance_gains(np.array([2, 1, 0, -1])).tolist()
    [2.0, 1.0, 0.0, 0.0]
    """
    return np.where(grades >= RELEVANT_GRADE, grades, 0.0)


def ideal_dcg_at_k(gains: np.ndarray, *, k: int) -> float:
    """IDCG@k of one query from the gains of all its judged documents (the qrels).

    Examples
    --------
    Best two gains 2 and 1: 2 / log2(2) + 1 / log2(3) = 2 + 0.63093.

    >>> round(float(ideal_dcg_at_k(np.array([1.0, 0.0, 2.0]), k=2)), 5)
    2.63093
    >>> float(ideal_dcg_at_k(np.array([1.0, 0.0, 2.0]), k=1))
    2.0
    """
    ideal = np.sort(gains)[::-1][:k]
    return np.sum(ideal / _discounts(ideal.size))


def mean_p_at_k_ceiling(n_relevant: np.ndarray, *, k: int) -> float:
    """Mean of :func:`p_at_k_ceiling` over queries with ``n_relevant`` relevant documents.

    Examples
    --------
    >>> mean_p_at_k_ceiling(np.array([1, 3, 8]), k=5)   # (1 + 3 + 5) / (5 * 3)
    0.6
    """
    reachable = np.minimum(n_relevant, k).sum()
    return float(reachable / (k * n_relevant.size))


def _discounts(k: int) -> np.ndarray:
    return np.log2(np.arange(2, k + 2, dtype=np.float64))


def _hits_at_k(ranked_ids: Sequence[Hashable], relevant: Mapping[Hashable, int],
               k: int) -> int:
    _check_k(k)
    return sum(1 for doc_id in _top_k(ranked_ids, k)
               if relevant.get(doc_id, 0) >= RELEVANT_GRADE)


def _top_k(ranked_ids: Sequence[Hashable], k: int) -> list[Hashable]:
    _check_k(k)
    top = list(ranked_ids[:k])
    if len(set(top)) != len(top):
        raise ValueError("ranked_ids repeat a document within the top k; "
                         "pass each retrieved document once.")
    return top


def _gain(grade: int) -> float:
    return float(grade) if grade >= RELEVANT_GRADE else 0.0


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}.")

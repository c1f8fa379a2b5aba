"""The agreement reports: judge 1 against judge 2, and one judge against human labels."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from eval_harness.metrics.agreement.bootstrap import (DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES,
                                                      DEFAULT_SEED, bootstrap_kappa)
from eval_harness.metrics.agreement.inputs import (DEFAULT_ANCHORS, DEFAULT_THRESHOLD,
                                                   AgreementInputError, anchor_edges,
                                                   check_pairs, check_threshold,
                                                   human_label_array, index_queries,
                                                   score_array)
from eval_harness.metrics.agreement.kappa import (Weights, cell_codes, gwet_ac1_from_table,
                                                  counts_per_query, table_from_counts,
                                                  kappa_from_table, landis_koch_label,
                                                  weighted_kappa)
from eval_harness.metrics.agreement.raw_scores import (alpha_interval, spearman_correlation,
                                                       score_offset_test)
from eval_harness.metrics.agreement.results import (AgreementReport, BinaryTable,
                                                    BootstrapInterval, JudgeHumanReport,
                                                    KappaResult, QueryKappa)


def agreement_report(scores1: Sequence[float | None] | np.ndarray,
                     scores2: Sequence[float | None] | np.ndarray, *,
                     query_ids: Sequence[Hashable],
                     threshold: float = DEFAULT_THRESHOLD,
                     anchors: Sequence[float] = DEFAULT_ANCHORS,
                     weights: Weights = "quadratic",
                     n_resamples: int = DEFAULT_RESAMPLES,
                     confidence: float = DEFAULT_CONFIDENCE,
                     seed: int = DEFAULT_SEED) -> AgreementReport:
    """Agreement of two judges that scored the same (query, document) pairs.

    ``scores1[i]`` and ``scores2[i]`` are the two judges' scores in [0, 1] (``None``/NaN =
    unscored) of pair ``i``, which belongs to ``query_ids[i]``. A pair is *scored* when
    both judges scored it; only scored pairs enter any statistic, the rest are counted in
    ``n_unscored``.

    Contents:
      * ``kappa``: Cohen's kappa of the labels ``score > threshold`` over all scored pairs
        pooled (the headline; :func:`cohen_kappa`), its Landis & Koch ``interpretation``
        and ``kappa_interval`` (:func:`kappa_bootstrap_interval`);
      * ``per_query``: kappa of each query's scored pairs (often degenerate with few
        documents; ``value=None`` for a query without scored pairs);
      * ``gwet_ac1`` (:func:`gwet_ac1`) on the same labels;
      * ``krippendorff_alpha`` on the raw scores (:func:`krippendorff_alpha_interval`);
      * ``weighted_kappa`` on scores binned to the nearest of ``anchors``
        (:func:`bin_scores`, :func:`weighted_kappa`, ``weights`` quadratic by default);
      * ``spearman``: rank correlation of the raw scores (``None`` if a judge is constant);
      * ``confusion``: the 2x2 table (first = judge 1);
      * ``offset``: Wilcoxon signed-rank test of judge1 - judge2 (:func:`score_offset_test`).

    Degenerate input: empty input, mismatched lengths, scores outside [0, 1] and no pair
    scored by both judges raise :class:`AgreementInputError`; everything else is reported
    with ``None`` and a ``reason`` where a value is undefined.

    Examples
    --------
    Four pairs of two queries; judge 2 did not score the last one. The three scored pairs
    give labels 1, 0, 1 and 1, 0, 0: P_o = 2/3, P_e = 2/3 * 1/3 + 1/3 * 2/3 = 4/9,
    kappa = (6/9 - 4/9) / (5/9) = 0.4.

    >>> report = agreement_report([0.9, 0.2, 0.8, 0.1], [0.7, 0.4, 0.3, None],
    ...                           query_ids=["q1", "q1", "q2", "q2"])
    >>> report.n_scored, report.n_unscored, round(report.kappa.value, 10)
    (3, 1, 0.4)
    >>> report.interpretation, report.confusion.as_matrix()
    ('Fair Agreement', [[1, 0], [1, 1]])
    """
    first = score_array(scores1, "scores1")
    second = score_array(scores2, "scores2")
    query_index, query_list, scored = _scored_pairs(
        first, second, ("scores1", "scores2"), threshold=threshold, query_ids=query_ids,
        nothing_scored=f"None of the {first.size} pairs was scored by both judges; re-run the "
                       "judges before computing agreement.")
    n_scored = int(scored.sum())

    labels1 = (first[scored] > threshold).astype(np.int8)
    labels2 = (second[scored] > threshold).astype(np.int8)
    per_query_counts, table, kappa = _pooled_kappa(labels1, labels2, query_index[scored],
                                                   n_queries=len(query_list))
    pairs_per_query = np.bincount(query_index, minlength=len(query_list))
    binned1 = np.searchsorted(anchor_edges(anchors), first[scored], side="left")
    binned2 = np.searchsorted(anchor_edges(anchors), second[scored], side="left")

    return AgreementReport(
        n_pairs=int(first.size),
        n_scored=n_scored,
        n_unscored=int(first.size - n_scored),
        threshold=float(threshold),
        kappa=kappa,
        interpretation=landis_koch_label(kappa.value),
        kappa_interval=_query_bootstrap(per_query_counts, n_resamples=n_resamples,
                                        confidence=confidence, seed=seed),
        per_query=tuple(_query_kappa(query_id, int(pairs_per_query[q]), per_query_counts[q])
                        for q, query_id in enumerate(query_list)),
        gwet_ac1=gwet_ac1_from_table(table),
        krippendorff_alpha=alpha_interval(first[scored], second[scored]),
        weighted_kappa=weighted_kappa(binned1, binned2, n_categories=len(anchors),
                                      weights=weights),
        weighted_kappa_anchors=tuple(float(a) for a in anchors),
        weighted_kappa_weights=weights,
        spearman=spearman_correlation(first[scored], second[scored]),
        confusion=table,
        offset=score_offset_test(first[scored], second[scored]),
    )


def judge_vs_human(judge_scores: Sequence[float | None] | np.ndarray,
                   human_labels: Sequence[int | None] | np.ndarray, *,
                   query_ids: Sequence[Hashable],
                   threshold: float = DEFAULT_THRESHOLD,
                   n_resamples: int = DEFAULT_RESAMPLES,
                   confidence: float = DEFAULT_CONFIDENCE,
                   seed: int = DEFAULT_SEED) -> JudgeHumanReport:
    """Agreement of one judge with human binary labels (1 relevant, 0 not, ``None`` unlabelled).

    The judge's label is ``score > threshold``. Over pairs that have both a judge score and
    a human label::

        kappa     = Cohen's kappa (see cohen_kappa), interval by query bootstrap
        precision = TP / (TP + FP)     share of judge-relevant pairs the human calls relevant
        recall    = TP / (TP + FN)     share of human-relevant pairs the judge finds

    Degenerate input: the errors of :func:`agreement_report`, plus human labels other than
    0/1/None; ``precision`` is ``None`` when the judge calls nothing relevant, ``recall``
    is ``None`` when the human calls nothing relevant.

    Examples
    --------
    The last pair has no human label. Of the other three the judge calls two relevant
    (0.9, 0.8) and the human one of them: precision 1/2, recall 1/1; kappa as in
    :func:`agreement_report`'s example, 0.4.

    >>> report = judge_vs_human([0.9, 0.8, 0.2, 0.6], [1, 0, 0, None],
    ...                         query_ids=["q1", "q1", "q2", "q2"])
    >>> report.n_scored, report.precision, report.recall, round(report.kappa.value, 10)
    (3, 0.5, 1.0, 0.4)
    """
    scores = score_array(judge_scores, "judge_scores")
    human = human_label_array(human_labels)
    query_index, query_list, scored = _scored_pairs(
        scores, human, ("judge_scores", "human_labels"), threshold=threshold,
        query_ids=query_ids,
        nothing_scored=f"None of the {scores.size} pairs has both a judge score and a human "
                       "label; label or score some pairs first.")
    n_scored = int(scored.sum())

    judge = (scores[scored] > threshold).astype(np.int8)
    per_query_counts, table, kappa = _pooled_kappa(judge, human[scored].astype(np.int8),
                                                   query_index[scored], n_queries=len(query_list))
    return JudgeHumanReport(
        n_pairs=int(scores.size),
        n_scored=n_scored,
        n_unscored=int(scores.size - n_scored),
        threshold=float(threshold),
        kappa=kappa,
        interpretation=landis_koch_label(kappa.value),
        kappa_interval=_query_bootstrap(per_query_counts, n_resamples=n_resamples,
                                        confidence=confidence, seed=seed),
        precision=_ratio(table.both, table.both + table.first_only),
        recall=_ratio(table.both, table.both + table.second_only),
        confusion=table,
    )


def _scored_pairs(first: np.ndarray, second: np.ndarray, names: tuple[str, str], *,
                  threshold: float, query_ids: Sequence[Hashable], nothing_scored: str
                  ) -> tuple[np.ndarray, list[Hashable], np.ndarray]:
    """The checks both reports make; each pair's query index, the queries in first-seen
    order, and which pairs both sides scored. No pair scored raises ``nothing_scored``."""
    check_pairs(first, second, *names)
    check_threshold(threshold)
    query_index, query_list = index_queries(query_ids, first.size)
    scored = ~(np.isnan(first) | np.isnan(second))
    if not scored.any():
        raise AgreementInputError(nothing_scored)
    return query_index, query_list, scored


def _pooled_kappa(labels1: np.ndarray, labels2: np.ndarray, query_index: np.ndarray, *,
                  n_queries: int) -> tuple[np.ndarray, BinaryTable, KappaResult]:
    """Per-query 2x2 counts of the scored pairs, their pooled table and its kappa."""
    per_query_counts = counts_per_query(cell_codes(labels1, labels2), query_index,
                                         n_queries=n_queries)
    table = table_from_counts(per_query_counts.sum(axis=0))
    return per_query_counts, table, kappa_from_table(table)


def _query_bootstrap(per_query_counts: np.ndarray, *, n_resamples: int, confidence: float,
                     seed: int) -> BootstrapInterval:
    """The kappa interval, resampling the queries that have scored pairs."""
    return bootstrap_kappa(per_query_counts[per_query_counts.sum(axis=1) > 0],
                            n_resamples=n_resamples, confidence=confidence, seed=seed)


def _query_kappa(query_id: Hashable, n_pairs: int, counts: np.ndarray) -> QueryKappa:
    n_scored = int(counts.sum())
    if n_scored == 0:
        kappa = KappaResult(None, True, "no pair of this query was scored by both judges",
                            None, None, 0)
    else:
        kappa = kappa_from_table(table_from_counts(counts))
    return QueryKappa(query_id, n_pairs, n_scored, kappa)


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None

"""Agreement between two relevance judges, and between a judge and a human.

Judges score a (query, document) pair in [0, 1]; ``None`` or NaN means the pair was not
scored (for example, the reply did not parse). A score is *relevant* when it is strictly
greater than the threshold (0.5 by default, so exactly 0.5 is not relevant). Unscored pairs
are left out of every statistic and counted, never guessed.

The headline is Cohen's kappa over all scored pairs pooled, with a 95% interval from a
bootstrap over queries: the documents of one query are judged against the same query text,
so they are not independent and resampling single pairs would make the interval too narrow.

Coefficients that can be undefined come back as small result types whose ``value`` is
``None`` with a ``reason``; reports built here never contain NaN (``to_dict`` is valid
strict JSON). Pure statistics: no store, no Dagster.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

DEFAULT_THRESHOLD = 0.5
# The five anchors of the judge prompt: irrelevant, marginal, moderate, high, perfect.
DEFAULT_ANCHORS: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 1.0)
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0

Weights = Literal["quadratic", "linear"]

# Landis & Koch (1977) bands with the seed's wording; upper bounds are inclusive.
_LANDIS_KOCH_BANDS: tuple[tuple[float, str], ...] = (
    (0.20, "Slight Agreement"),
    (0.40, "Fair Agreement"),
    (0.60, "Moderate Agreement"),
    (0.80, "Substantial Agreement"),
    (math.inf, "Almost Perfect Agreement"),
)
# Keeps a kappa that is 0.2 up to float rounding in the "0.00-0.20" band.
_BAND_TOLERANCE = 1e-12

_PERFECT_WITHOUT_VARIATION = (
    "both judges gave one and the same label to every item, so P_e = 1 and the formula is "
    "0/0; reported as perfect agreement")
_UNDEFINED_CHANCE = "expected agreement P_e is 1 while P_o is not, so the coefficient is undefined"


class AgreementInputError(ValueError):
    """Scores or labels cannot be compared; the message names the input and what to do."""


# ---------------------------------------------------------------------------------------
# Result types


class _JsonResult:
    """Results serialise to strict JSON: undefined values are None, never NaN."""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(self)


@dataclass(frozen=True)
class KappaResult(_JsonResult):
    """A chance-corrected agreement ``(P_o - P_e) / (1 - P_e)``: Cohen's kappa, weighted
    kappa or Gwet's AC1.

    ``value`` is ``None`` when the coefficient is undefined; ``degenerate`` is True when the
    input was a special case (no variation, nothing scored) and ``reason`` says which.
    """

    value: float | None
    degenerate: bool
    reason: str | None
    observed_agreement: float | None
    expected_agreement: float | None
    n_items: int


@dataclass(frozen=True)
class AlphaResult(_JsonResult):
    """Krippendorff's alpha ``1 - D_o / D_e`` with its observed and expected disagreement."""

    value: float | None
    degenerate: bool
    reason: str | None
    observed_disagreement: float | None
    expected_disagreement: float | None
    n_units: int


@dataclass(frozen=True)
class BinaryTable(_JsonResult):
    """The 2x2 table of two binary raters (1 = relevant); "first" is judge 1 (or the judge
    in judge-vs-human), "second" is judge 2 (or the human)."""

    both: int
    first_only: int
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither

    def as_matrix(self) -> list[list[int]]:
        """Rows: first rater 0, 1; columns: second rater 0, 1 (sklearn's confusion_matrix)."""
        return [[self.neither, self.second_only], [self.first_only, self.both]]


@dataclass(frozen=True)
class BootstrapInterval(_JsonResult):
    """Percentile interval of a statistic from a cluster bootstrap over queries."""

    low: float | None
    high: float | None
    confidence: float
    n_resamples: int
    n_queries: int
    seed: int
    reason: str | None = None
    method: str = "percentile, queries resampled with replacement"


@dataclass(frozen=True)
class RankCorrelation(_JsonResult):
    """Spearman's rho between the two judges' raw scores."""

    rho: float | None
    p_value: float | None
    n: int
    reason: str | None = None


@dataclass(frozen=True)
class OffsetTest(_JsonResult):
    """Wilcoxon signed-rank test of ``judge1 - judge2``: does one judge score higher?"""

    mean_difference: float
    statistic: float | None
    p_value: float | None
    n_pairs: int
    n_nonzero: int
    reason: str | None = None


@dataclass(frozen=True)
class QueryKappa:
    query_id: Hashable
    n_pairs: int
    n_scored: int
    kappa: KappaResult


@dataclass(frozen=True)
class AgreementReport(_JsonResult):
    """Everything :func:`agreement_report` computes; ``to_dict`` is strict JSON (no NaN)."""

    n_pairs: int
    n_scored: int
    n_unscored: int
    threshold: float
    kappa: KappaResult
    interpretation: str
    kappa_interval: BootstrapInterval
    per_query: tuple[QueryKappa, ...]
    gwet_ac1: KappaResult
    krippendorff_alpha: AlphaResult
    weighted_kappa: KappaResult
    weighted_kappa_anchors: tuple[float, ...]
    weighted_kappa_weights: str
    spearman: RankCorrelation
    confusion: BinaryTable
    offset: OffsetTest


@dataclass(frozen=True)
class JudgeHumanReport(_JsonResult):
    """One judge against human labels; ``precision``/``recall`` treat the human as truth."""

    n_pairs: int
    n_scored: int
    n_unscored: int
    threshold: float
    kappa: KappaResult
    interpretation: str
    kappa_interval: BootstrapInterval
    precision: float | None
    recall: float | None
    confusion: BinaryTable


# ---------------------------------------------------------------------------------------
# Binarization and binning


def binarize_scores(scores: Sequence[float | None] | np.ndarray, *,
                    threshold: float = DEFAULT_THRESHOLD) -> list[int | None]:
    """Relevance labels from judge scores: 1 if ``score > threshold`` else 0.

    The comparison is strict (story 1.11: "Score > 0.5 = Relevant, Score <= 0.5 = Not
    Relevant"), so a score of exactly ``threshold`` is not relevant. ``None`` or NaN
    (unscored) stays ``None``; it is never turned into a label. A score outside [0, 1]
    raises :class:`AgreementInputError`.
    """
    _check_threshold(threshold)
    values = _score_array(scores, "scores")
    return [None if math.isnan(v) else int(v > threshold) for v in values.tolist()]


def bin_scores(scores: Sequence[float | None] | np.ndarray, *,
               anchors: Sequence[float] = DEFAULT_ANCHORS) -> list[int | None]:
    """Index of the nearest anchor for each score (``None`` stays ``None``).

    A score exactly halfway between two anchors goes to the lower one, in the spirit of
    the threshold rule (0.5 is not yet relevant). ``anchors`` must be at least two strictly
    increasing values.
    """
    edges = _anchor_edges(anchors)
    values = _score_array(scores, "scores")
    return [None if math.isnan(v) else int(np.searchsorted(edges, v, side="left"))
            for v in values.tolist()]


# ---------------------------------------------------------------------------------------
# Coefficients on labels


def cohen_kappa(labels1: Sequence[int] | np.ndarray,
                labels2: Sequence[int] | np.ndarray) -> KappaResult:
    """Cohen's kappa of two binary raters.

    Formula (Cohen 1960; story 1.11)::

        P_o   = (n_both + n_neither) / n
        P_e   = p1 * p2 + (1 - p1) * (1 - p2)     p_k = share rater k labels 1
        kappa = (P_o - P_e) / (1 - P_e)

    Reference: J. Cohen, "A coefficient of agreement for nominal scales", Educational and
    Psychological Measurement 20(1), 37-46, 1960.

    Degenerate input:
      * empty input or labels other than 0/1 raise :class:`AgreementInputError`;
      * both raters give one and the same label to every item: P_e = 1, the formula is
        0/0; reported as ``value=1.0`` with ``degenerate=True`` (sklearn returns NaN);
      * each rater gives a single label and the two differ: kappa is 0 by the formula,
        flagged ``degenerate=True`` because it carries no chance-corrected information;
      * any other P_e = 1 gives ``value=None`` ("undefined"); it cannot occur with valid
        binary input but is never turned into NaN.
    """
    return kappa_from_table(binary_table(labels1, labels2))


def cohen_kappa_value(labels1: Sequence[int] | np.ndarray,
                      labels2: Sequence[int] | np.ndarray) -> float:
    """Cohen's kappa as a plain float, for comparison with other implementations.

    Same formula and degenerate rules as :func:`cohen_kappa`; an undefined kappa raises
    :class:`AgreementInputError` instead of returning NaN.
    """
    result = cohen_kappa(labels1, labels2)
    if result.value is None:
        raise AgreementInputError(f"Cohen's kappa is undefined for these labels: {result.reason}.")
    return result.value


def binary_table(labels1: Sequence[int] | np.ndarray,
                 labels2: Sequence[int] | np.ndarray) -> BinaryTable:
    """The 2x2 table of two binary label sequences (see :class:`BinaryTable`)."""
    cells = _cell_codes(_label_array(labels1, "labels1"), _label_array(labels2, "labels2"))
    return _table_from_counts(np.bincount(cells, minlength=4))


def kappa_from_table(table: BinaryTable) -> KappaResult:
    """Cohen's kappa from a 2x2 table; formula and degenerate cases as :func:`cohen_kappa`."""
    if table.n == 0:
        raise AgreementInputError(
            "Cannot compute kappa on an empty table: at least one rated item is needed.")
    counts = np.array([table.neither, table.second_only, table.first_only, table.both])
    p_o, p_e = _kappa_agreements(counts)
    result = _chance_corrected(float(p_o), float(p_e), table.n)
    first_constant = table.first_only + table.both in (0, table.n)
    second_constant = table.second_only + table.both in (0, table.n)
    if not result.degenerate and first_constant and second_constant:
        return KappaResult(result.value, True,
                           "each judge gave a single label to every item and the two labels "
                           "differ; kappa is 0 by the formula",
                           result.observed_agreement, result.expected_agreement, table.n)
    return result


def gwet_ac1(labels1: Sequence[int] | np.ndarray,
             labels2: Sequence[int] | np.ndarray) -> KappaResult:
    """Gwet's AC1 of two binary raters, robust to the "high agreement, low kappa" paradox.

    Formula::

        P_a = (n_both + n_neither) / n
        pi  = (p1 + p2) / 2            mean share of label 1 over both raters
        P_e = 2 * pi * (1 - pi)        at most 0.5
        AC1 = (P_a - P_e) / (1 - P_e)

    Reference: K. L. Gwet, "Computing inter-rater reliability and its variance in the
    presence of high agreement", British Journal of Mathematical and Statistical
    Psychology 61(1), 29-48, 2008.

    Degenerate input: empty input raises :class:`AgreementInputError`. Since P_e <= 0.5,
    AC1 is defined for every non-empty input (both raters constant and equal gives 1.0).
    """
    return _gwet_ac1_from_table(binary_table(labels1, labels2))


def weighted_kappa(categories1: Sequence[int] | np.ndarray,
                   categories2: Sequence[int] | np.ndarray, *, n_categories: int,
                   weights: Weights = "quadratic") -> KappaResult:
    """Cohen's weighted kappa of two raters on ordered categories ``0 .. n_categories-1``.

    Formula, with O and E the observed and chance (outer product of the marginals) cell
    proportions and disagreement weights on the category index, k = n_categories::

        quadratic: w_ij = (i - j)^2 / (k - 1)^2      linear: w_ij = |i - j| / (k - 1)
        kappa_w   = 1 - sum(w * O) / sum(w * E)
                  = (P_o - P_e) / (1 - P_e)   with P_o = sum((1 - w) O), P_e = sum((1 - w) E)

    Weights use the category index, not the anchor's score (as in sklearn's
    ``cohen_kappa_score(weights=...)``): the anchors are ordinal labels.

    Reference: J. Cohen, "Weighted kappa", Psychological Bulletin 70(4), 213-220, 1968.

    Degenerate input: empty input or categories outside the range raise
    :class:`AgreementInputError`; both raters putting every item in the same single
    category gives 1.0 flagged ``degenerate`` (P_e = 1), as for :func:`cohen_kappa`.
    """
    if weights not in ("quadratic", "linear"):
        raise AgreementInputError(f"Unknown weights {weights!r}: use 'quadratic' or 'linear'.")
    if n_categories < 2:
        raise AgreementInputError(
            f"Weighted kappa needs at least 2 categories, got {n_categories}.")
    first = _category_array(categories1, "categories1", n_categories)
    second = _category_array(categories2, "categories2", n_categories)
    _check_same_length(first, second, "categories1", "categories2")
    n = first.size
    observed = np.zeros((n_categories, n_categories))
    np.add.at(observed, (first, second), 1.0)
    observed /= n
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    distance = np.abs(np.subtract.outer(np.arange(n_categories), np.arange(n_categories)))
    power = 2 if weights == "quadratic" else 1
    agreement_weight = 1.0 - (distance / (n_categories - 1)) ** power
    p_o = float(np.sum(agreement_weight * observed))
    p_e = float(np.sum(agreement_weight * expected))
    return _chance_corrected(p_o, p_e, n)


# ---------------------------------------------------------------------------------------
# Coefficients on raw scores


def krippendorff_alpha_interval(scores1: Sequence[float | None] | np.ndarray,
                                scores2: Sequence[float | None] | np.ndarray) -> AlphaResult:
    """Krippendorff's alpha, interval metric, of two judges' raw scores.

    With two coders per unit and d(a, b) = (a - b)^2, over the N units scored by both
    (n = 2N pairable values; units with a missing score are not pairable and drop out)::

        D_o   = 1/n * sum_u 2 (a_u - b_u)^2                  = mean((a - b)^2)
        D_e   = 1/(n (n-1)) * sum_{i != j} (v_i - v_j)^2     = 2 * var(all values, ddof=1)
        alpha = 1 - D_o / D_e

    Reference: K. Krippendorff, "Computing Krippendorff's Alpha-Reliability", Annenberg
    School for Communication departmental paper 43, 2011.

    Degenerate input: no unit scored by both judges raises :class:`AgreementInputError`;
    every value identical (D_e = 0, hence D_o = 0) gives 1.0 flagged ``degenerate``, the
    same convention as :func:`cohen_kappa`.
    """
    first = _score_array(scores1, "scores1")
    second = _score_array(scores2, "scores2")
    _check_pairs(first, second, "scores1", "scores2")
    both_scored = ~(np.isnan(first) | np.isnan(second))
    if not both_scored.any():
        raise AgreementInputError(
            "Krippendorff's alpha needs at least one pair scored by both judges; none was.")
    return _alpha_interval(first[both_scored], second[both_scored])


# ---------------------------------------------------------------------------------------
# Interval, interpretation


def kappa_bootstrap_interval(labels1: Sequence[int] | np.ndarray,
                             labels2: Sequence[int] | np.ndarray, *,
                             query_ids: Sequence[Hashable],
                             n_resamples: int = DEFAULT_RESAMPLES,
                             confidence: float = DEFAULT_CONFIDENCE,
                             seed: int = DEFAULT_SEED) -> BootstrapInterval:
    """Percentile interval for Cohen's kappa from a cluster bootstrap over queries.

    Each resample draws as many queries as there are, with replacement, keeps all pairs of
    every drawn query, and recomputes pooled kappa (with the degenerate-as-1.0 convention
    of :func:`cohen_kappa`, so every resample has a value). The interval is the
    ``(1 - confidence)/2`` and ``(1 + confidence)/2`` quantiles. Resampling queries rather
    than pairs respects that documents of one query are judged together.

    References: A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*,
    section 3.8 (hierarchical data), 1997; B. Efron and R. Tibshirani, *An Introduction to
    the Bootstrap*, chapter 13 (percentile interval), 1993.

    Degenerate input: empty input raises :class:`AgreementInputError`; with fewer than two
    queries the interval is ``low=high=None`` with a ``reason``.
    """
    cells = _cell_codes(_label_array(labels1, "labels1"), _label_array(labels2, "labels2"))
    query_index, _ = _query_index(query_ids, cells.size)
    per_query = _per_query_counts(cells, query_index)
    return _bootstrap_kappa(per_query, n_resamples=n_resamples, confidence=confidence, seed=seed)


def landis_koch_label(kappa: float | None) -> str:
    """Landis & Koch band of a kappa, worded as in story 1.11.

    < 0.00 Poor, 0.00-0.20 Slight, 0.21-0.40 Fair, 0.41-0.60 Moderate, 0.61-0.80
    Substantial, 0.81-1.00 Almost Perfect (each "... Agreement"). Upper bounds are
    inclusive, so a value between two published bands (0.205) falls in the higher one.
    ``None`` (undefined kappa) is "Undefined".

    Reference: J. R. Landis and G. G. Koch, "The measurement of observer agreement for
    categorical data", Biometrics 33(1), 159-174, 1977.
    """
    if kappa is None:
        return "Undefined"
    if kappa < 0:
        return "Poor Agreement"
    return next(label for upper, label in _LANDIS_KOCH_BANDS if kappa <= upper + _BAND_TOLERANCE)


# ---------------------------------------------------------------------------------------
# Reports


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
    """
    first = _score_array(scores1, "scores1")
    second = _score_array(scores2, "scores2")
    _check_pairs(first, second, "scores1", "scores2")
    _check_threshold(threshold)
    query_index, query_list = _query_index(query_ids, first.size)
    scored = ~(np.isnan(first) | np.isnan(second))
    n_scored = int(scored.sum())
    if n_scored == 0:
        raise AgreementInputError(
            f"None of the {first.size} pairs was scored by both judges; re-run the judges "
            "before computing agreement.")

    labels1 = (first[scored] > threshold).astype(np.int8)
    labels2 = (second[scored] > threshold).astype(np.int8)
    per_query_counts = _per_query_counts(_cell_codes(labels1, labels2), query_index[scored],
                                         n_queries=len(query_list))
    table = _table_from_counts(per_query_counts.sum(axis=0))
    kappa = kappa_from_table(table)
    pairs_per_query = np.bincount(query_index, minlength=len(query_list))
    binned1 = np.searchsorted(_anchor_edges(anchors), first[scored], side="left")
    binned2 = np.searchsorted(_anchor_edges(anchors), second[scored], side="left")

    return AgreementReport(
        n_pairs=int(first.size),
        n_scored=n_scored,
        n_unscored=int(first.size - n_scored),
        threshold=float(threshold),
        kappa=kappa,
        interpretation=landis_koch_label(kappa.value),
        kappa_interval=_bootstrap_kappa(per_query_counts[per_query_counts.sum(axis=1) > 0],
                                        n_resamples=n_resamples, confidence=confidence,
                                        seed=seed),
        per_query=tuple(_query_kappa(query_id, int(pairs_per_query[q]), per_query_counts[q])
                        for q, query_id in enumerate(query_list)),
        gwet_ac1=_gwet_ac1_from_table(table),
        krippendorff_alpha=_alpha_interval(first[scored], second[scored]),
        weighted_kappa=weighted_kappa(binned1, binned2, n_categories=len(anchors),
                                      weights=weights),
        weighted_kappa_anchors=tuple(float(a) for a in anchors),
        weighted_kappa_weights=weights,
        spearman=_spearman(first[scored], second[scored]),
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
    """
    scores = _score_array(judge_scores, "judge_scores")
    human = _human_label_array(human_labels)
    _check_pairs(scores, human, "judge_scores", "human_labels")
    _check_threshold(threshold)
    query_index, query_list = _query_index(query_ids, scores.size)
    scored = ~(np.isnan(scores) | np.isnan(human))
    n_scored = int(scored.sum())
    if n_scored == 0:
        raise AgreementInputError(
            f"None of the {scores.size} pairs has both a judge score and a human label; "
            "label or score some pairs first.")

    judge = (scores[scored] > threshold).astype(np.int8)
    per_query_counts = _per_query_counts(_cell_codes(judge, human[scored].astype(np.int8)),
                                         query_index[scored], n_queries=len(query_list))
    table = _table_from_counts(per_query_counts.sum(axis=0))
    kappa = kappa_from_table(table)
    return JudgeHumanReport(
        n_pairs=int(scores.size),
        n_scored=n_scored,
        n_unscored=int(scores.size - n_scored),
        threshold=float(threshold),
        kappa=kappa,
        interpretation=landis_koch_label(kappa.value),
        kappa_interval=_bootstrap_kappa(per_query_counts[per_query_counts.sum(axis=1) > 0],
                                        n_resamples=n_resamples, confidence=confidence,
                                        seed=seed),
        precision=_ratio(table.both, table.both + table.first_only),
        recall=_ratio(table.both, table.both + table.second_only),
        confusion=table,
    )


def score_offset_test(scores1: Sequence[float] | np.ndarray,
                      scores2: Sequence[float] | np.ndarray) -> OffsetTest:
    """Wilcoxon signed-rank test that judge 1 and judge 2 score alike (no systematic offset).

    ``d = scores1 - scores2`` per pair; ``mean_difference > 0`` means judge 1 scores higher.
    Zero differences are dropped (Wilcoxon's original ``zero_method="wilcox"``, scipy's
    default) and ``n_nonzero`` says how many remain; the test is two-sided. Differences are
    rounded to 12 decimals first so that 0.7 - 0.6 and 0.3 - 0.2 tie as intended.
    The p-value treats pairs as independent, which pairs of one query are not: read it as
    descriptive.

    Reference: F. Wilcoxon, "Individual comparisons by ranking methods", Biometrics
    Bulletin 1(6), 80-83, 1945.

    Degenerate input: empty input or unscored values raise :class:`AgreementInputError`;
    all differences zero gives ``statistic=None, p_value=None`` with a reason (the judges
    agree exactly; there is no offset to test).
    """
    first = _score_array(scores1, "scores1")
    second = _score_array(scores2, "scores2")
    _check_pairs(first, second, "scores1", "scores2")
    if np.isnan(first).any() or np.isnan(second).any():
        raise AgreementInputError(
            "The offset test needs scored pairs only; drop unscored pairs first.")
    differences = np.round(first - second, 12)
    n_nonzero = int(np.count_nonzero(differences))
    mean_difference = float(np.mean(first - second))
    if n_nonzero == 0:
        return OffsetTest(mean_difference, None, None, int(first.size), 0,
                          "every paired difference is zero: the judges score identically")
    result = stats.wilcoxon(differences, zero_method="wilcox", alternative="two-sided")
    return OffsetTest(mean_difference, _finite_or_none(result.statistic),
                      _finite_or_none(result.pvalue), int(first.size), n_nonzero)


# ---------------------------------------------------------------------------------------
# Internals


def _kappa_agreements(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P_o and P_e from cell counts ``[..., (neither, second_only, first_only, both)]``.

    Works on one table or a stack of them (the bootstrap), so both use one formula.
    """
    neither, second_only, first_only, both = (counts[..., i] for i in range(4))
    n = counts.sum(axis=-1)
    first_relevant = (first_only + both) / n
    second_relevant = (second_only + both) / n
    p_o = (both + neither) / n
    p_e = first_relevant * second_relevant + (1 - first_relevant) * (1 - second_relevant)
    return p_o, p_e


def _kappa_values(counts: np.ndarray) -> np.ndarray:
    """Kappa per stacked table; P_e = 1 (one shared label) is 1.0 as in :func:`cohen_kappa`."""
    p_o, p_e = _kappa_agreements(counts)
    no_chance_room = p_e >= 1.0
    return np.where(no_chance_room, 1.0, (p_o - p_e) / np.where(no_chance_room, 1.0, 1.0 - p_e))


def _chance_corrected(p_o: float, p_e: float, n: int) -> KappaResult:
    if p_e >= 1.0:
        if p_o >= 1.0:
            return KappaResult(1.0, True, _PERFECT_WITHOUT_VARIATION, p_o, p_e, n)
        return KappaResult(None, True, _UNDEFINED_CHANCE, p_o, p_e, n)
    return KappaResult((p_o - p_e) / (1.0 - p_e), False, None, p_o, p_e, n)


def _gwet_ac1_from_table(table: BinaryTable) -> KappaResult:
    n = table.n
    p_a = (table.both + table.neither) / n
    pi = (2 * table.both + table.first_only + table.second_only) / (2 * n)
    p_e = 2 * pi * (1 - pi)
    return KappaResult((p_a - p_e) / (1 - p_e), False, None, p_a, p_e, n)


def _alpha_interval(first: np.ndarray, second: np.ndarray) -> AlphaResult:
    n_units = int(first.size)
    d_o = float(np.mean((first - second) ** 2))
    pooled = np.concatenate([first, second])
    d_e = float(2 * np.var(pooled, ddof=1))
    if d_e == 0.0:
        return AlphaResult(1.0, True, "every score is the same value, so D_e = 0 and alpha is "
                           "0/0; reported as perfect agreement", d_o, d_e, n_units)
    return AlphaResult(1.0 - d_o / d_e, False, None, d_o, d_e, n_units)


def _spearman(first: np.ndarray, second: np.ndarray) -> RankCorrelation:
    n = int(first.size)
    if n < 3:
        return RankCorrelation(None, None, n, "rank correlation needs at least 3 scored pairs")
    for name, values in (("judge 1", first), ("judge 2", second)):
        if np.all(values == values[0]):
            return RankCorrelation(None, None, n, f"{name} gave every pair the same score, "
                                   "so rank correlation is undefined")
    result = stats.spearmanr(first, second)
    return RankCorrelation(_finite_or_none(result.statistic), _finite_or_none(result.pvalue), n)


def _bootstrap_kappa(per_query_counts: np.ndarray, *, n_resamples: int, confidence: float,
                     seed: int) -> BootstrapInterval:
    """Cluster bootstrap of pooled kappa; ``per_query_counts`` has one row per query."""
    if n_resamples < 1:
        raise AgreementInputError(f"n_resamples must be at least 1, got {n_resamples}.")
    if not 0.0 < confidence < 1.0:
        raise AgreementInputError(f"confidence must be between 0 and 1, got {confidence}.")
    n_queries = int(per_query_counts.shape[0])
    if n_queries < 2:
        return BootstrapInterval(None, None, confidence, n_resamples, n_queries, seed,
                                 "a bootstrap over queries needs at least 2 queries with "
                                 "scored pairs")
    rng = np.random.default_rng(seed)
    # times_drawn[b, q]: how often query q is in resample b (sampling with replacement).
    times_drawn = rng.multinomial(n_queries, np.full(n_queries, 1.0 / n_queries),
                                  size=n_resamples)
    resampled_counts = times_drawn @ per_query_counts
    kappas = _kappa_values(resampled_counts)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(kappas, [tail, 1.0 - tail])
    return BootstrapInterval(float(low), float(high), confidence, n_resamples, n_queries, seed)


def _query_kappa(query_id: Hashable, n_pairs: int, counts: np.ndarray) -> QueryKappa:
    n_scored = int(counts.sum())
    if n_scored == 0:
        kappa = KappaResult(None, True, "no pair of this query was scored by both judges",
                            None, None, 0)
    else:
        kappa = kappa_from_table(_table_from_counts(counts))
    return QueryKappa(query_id, n_pairs, n_scored, kappa)


def _cell_codes(labels1: np.ndarray, labels2: np.ndarray) -> np.ndarray:
    """Cell per pair: 0 neither, 1 second only, 2 first only, 3 both."""
    _check_same_length(labels1, labels2, "labels1", "labels2")
    if labels1.size == 0:
        raise AgreementInputError("No labels were given: at least one rated item is needed.")
    return 2 * labels1.astype(np.intp) + labels2.astype(np.intp)


def _per_query_counts(cells: np.ndarray, query_index: np.ndarray,
                      n_queries: int | None = None) -> np.ndarray:
    if n_queries is None:
        n_queries = int(query_index.max()) + 1
    flat = np.bincount(query_index * 4 + cells, minlength=n_queries * 4)
    return flat.reshape(n_queries, 4).astype(np.int64)


def _table_from_counts(counts: np.ndarray) -> BinaryTable:
    neither, second_only, first_only, both = (int(c) for c in counts)
    return BinaryTable(both=both, first_only=first_only, second_only=second_only,
                       neither=neither)


def _query_index(query_ids: Sequence[Hashable], n: int) -> tuple[np.ndarray, list[Hashable]]:
    """Position of each pair's query in first-seen order, and the queries in that order."""
    if len(query_ids) != n:
        raise AgreementInputError(
            f"query_ids has {len(query_ids)} entries but there are {n} pairs; "
            "give one query id per pair.")
    positions: dict[Hashable, int] = {}
    index = np.fromiter((positions.setdefault(q, len(positions)) for q in query_ids),
                        dtype=np.intp, count=n)
    return index, list(positions)


def _score_array(scores: Sequence[float | None] | np.ndarray, name: str) -> np.ndarray:
    """Scores as float64 with NaN for unscored; rejects non-numbers and values outside [0, 1]."""
    try:
        values = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise AgreementInputError(
            f"{name} must hold numbers in [0, 1] or None for unscored ({error}).") from None
    outside = ~np.isnan(values) & ((values < 0.0) | (values > 1.0))
    if outside.any():
        position = int(np.flatnonzero(outside)[0])
        raise AgreementInputError(
            f"{name}[{position}] is {float(values[position])!r}, outside [0, 1]; record an "
            "unparseable judge reply as None, not as an out-of-range score.")
    return values


def _label_array(labels: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(labels)
    if values.size and not np.isin(values, (0, 1)).all():
        bad = _plain(values[~np.isin(values, (0, 1))][0])
        raise AgreementInputError(
            f"{name} must hold binary labels 0 or 1; found {bad!r} (binarize scores first).")
    return values.astype(np.int8).ravel()


def _human_label_array(labels: Sequence[int | None] | np.ndarray) -> np.ndarray:
    """Human labels as float64 0.0/1.0 with NaN for unlabelled."""
    try:
        values = np.array([np.nan if x is None else x for x in labels], dtype=np.float64)
    except (TypeError, ValueError):
        raise AgreementInputError(
            "human_labels must hold 0, 1 or None for unlabelled pairs.") from None
    labelled = ~np.isnan(values)
    if not np.isin(values[labelled], (0.0, 1.0)).all():
        bad = float(values[labelled][~np.isin(values[labelled], (0.0, 1.0))][0])
        raise AgreementInputError(f"human_labels must hold 0, 1 or None; found {bad!r}.")
    return values


def _category_array(categories: Sequence[int] | np.ndarray, name: str,
                    n_categories: int) -> np.ndarray:
    values = np.asarray(categories)
    if values.size == 0:
        raise AgreementInputError(f"{name} is empty: at least one rated item is needed.")
    if not np.issubdtype(values.dtype, np.integer) or values.min() < 0 \
            or values.max() >= n_categories:
        raise AgreementInputError(
            f"{name} must hold category indices 0..{n_categories - 1} (see bin_scores).")
    return values.astype(np.intp).ravel()


def _anchor_edges(anchors: Sequence[float]) -> np.ndarray:
    points = np.asarray(anchors, dtype=np.float64)
    if points.size < 2 or not np.all(np.diff(points) > 0):
        raise AgreementInputError(
            f"anchors must be at least two strictly increasing scores, got {list(anchors)}.")
    return (points[:-1] + points[1:]) / 2.0


def _check_pairs(first: np.ndarray, second: np.ndarray, name1: str, name2: str) -> None:
    """Both sides describe the same, non-empty list of pairs."""
    _check_same_length(first, second, name1, name2)
    if first.size == 0:
        raise AgreementInputError(f"{name1} is empty: agreement needs at least one judged pair.")


def _check_threshold(threshold: float) -> None:
    if not 0.0 <= threshold < 1.0:
        raise AgreementInputError(
            f"threshold must be in [0, 1) so that some score can be relevant, got {threshold}.")


def _check_same_length(first: np.ndarray, second: np.ndarray, name1: str, name2: str) -> None:
    if first.shape[0] != second.shape[0]:
        raise AgreementInputError(
            f"{name1} has {first.shape[0]} entries but {name2} has {second.shape[0]}; "
            "they must describe the same pairs.")


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value, so error messages read ``2`` not ``np.int64(2)``."""
    return value.item() if isinstance(value, np.generic) else value


def _finite_or_none(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def to_jsonable(value: Any) -> Any:
    """A result (dataclass, mapping, sequence, number) as plain JSON types, NaN as ``None``.

    For results built on top of this module, so that they too never show NaN.
    """
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    """Plain JSON types; a non-finite float becomes None so a report never shows NaN."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _finite_or_none(value)
    return value

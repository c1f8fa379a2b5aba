"""Chance-corrected agreement on labels: Cohen's kappa, weighted kappa, Gwet's AC1.

All three are ``(P_o - P_e) / (1 - P_e)`` with a different chance term P_e. Binary
coefficients work on the 2x2 table of the two raters; the same cell counts, stacked one
table per query, serve the bootstrap (:mod:`.bootstrap`), so both use one formula.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from eval_harness.metrics.agreement.inputs import (AgreementInputError, category_array,
                                                   check_same_length, label_array)
from eval_harness.metrics.agreement.results import BinaryTable, KappaResult

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

    Examples
    --------
    P_o = 3/4; p1 = 2/4, p2 = 1/4, so P_e = 0.5 * 0.25 + 0.5 * 0.75 = 0.5 and
    kappa = (0.75 - 0.5) / (1 - 0.5):

    >>> result = cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0])
    >>> result.value, result.observed_agreement, result.expected_agreement
    (0.5, 0.75, 0.5)
    >>> cohen_kappa([1, 1, 1], [1, 1, 1]).value, cohen_kappa([1, 1, 1], [1, 1, 1]).degenerate
    (1.0, True)
    """
    return kappa_from_table(binary_table(labels1, labels2))


def cohen_kappa_value(labels1: Sequence[int] | np.ndarray,
                      labels2: Sequence[int] | np.ndarray) -> float:
    """Cohen's kappa as a plain float, for comparison with other implementations.

    Same formula and degenerate rules as :func:`cohen_kappa`; an undefined kappa raises
    :class:`AgreementInputError` instead of returning NaN.

    Examples
    --------
    >>> cohen_kappa_value([1, 1, 0, 0], [1, 0, 0, 0])   # worked out in cohen_kappa
    0.5
    """
    result = cohen_kappa(labels1, labels2)
    if result.value is None:
        raise AgreementInputError(f"Cohen's kappa is undefined for these labels: {result.reason}.")
    return result.value


def binary_table(labels1: Sequence[int] | np.ndarray,
                 labels2: Sequence[int] | np.ndarray) -> BinaryTable:
    """The 2x2 table of two binary label sequences (see :class:`BinaryTable`).

    Examples
    --------
    >>> binary_table([1, 1, 0, 0], [1, 0, 0, 0])
    BinaryTable(both=1, first_only=1, second_only=0, neither=2)
    """
    cells = cell_codes(label_array(labels1, "labels1"), label_array(labels2, "labels2"))
    return table_from_counts(np.bincount(cells, minlength=4))


def kappa_from_table(table: BinaryTable) -> KappaResult:
    """Cohen's kappa from a 2x2 table; formula and degenerate cases as :func:`cohen_kappa`.

    Examples
    --------
    50 items: P_o = (20 + 15) / 50 = 0.7; p1 = 25/50, p2 = 30/50, so
    P_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5 and kappa = (0.7 - 0.5) / 0.5 = 0.4.

    >>> table = BinaryTable(both=20, first_only=5, second_only=10, neither=15)
    >>> round(kappa_from_table(table).value, 10)
    0.4
    """
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

    Examples
    --------
    The paradox: the judges agree on 9 of 10 items, yet kappa is 0 because judge 1 always
    says 1 (P_e = 1 * 0.9 = 0.9 = P_o). AC1: pi = (1 + 0.9) / 2 = 0.95,
    P_e = 2 * 0.95 * 0.05 = 0.095, AC1 = (0.9 - 0.095) / 0.905.

    >>> first, second = [1] * 10, [1] * 9 + [0]
    >>> round(cohen_kappa(first, second).value, 10), round(gwet_ac1(first, second).value, 4)
    (0.0, 0.8895)
    """
    return gwet_ac1_from_table(binary_table(labels1, labels2))


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

    Examples
    --------
    Three items on categories 0..2; one near miss (1 vs 2). Quadratic weights w = d**2 / 4:
    sum(w * O) = (1/4) / 3 = 1/12; the marginals are 1/3 each and (1/3, 0, 2/3), so
    sum(w * E) = 1/3 * (5/4 * 1/3 + 5/4 * 2/3) = 5/12 and kappa_w = 1 - (1/12) / (5/12).
    Linear weights w = d / 2: 1 - (1/6) / (1/2) = 2/3.

    >>> round(weighted_kappa([0, 1, 2], [0, 2, 2], n_categories=3).value, 10)
    0.8
    >>> round(weighted_kappa([0, 1, 2], [0, 2, 2], n_categories=3, weights="linear").value, 4)
    0.6667
    """
    if weights not in ("quadratic", "linear"):
        raise AgreementInputError(f"Unknown weights {weights!r}: use 'quadratic' or 'linear'.")
    if n_categories < 2:
        raise AgreementInputError(
            f"Weighted kappa needs at least 2 categories, got {n_categories}.")
    first = category_array(categories1, "categories1", n_categories)
    second = category_array(categories2, "categories2", n_categories)
    check_same_length(first, second, "categories1", "categories2")
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


def landis_koch_label(kappa: float | None) -> str:
    """Landis & Koch band of a kappa, worded as in story 1.11.

    < 0.00 Poor, 0.00-0.20 Slight, 0.21-0.40 Fair, 0.41-0.60 Moderate, 0.61-0.80
    Substantial, 0.81-1.00 Almost Perfect (each "... Agreement"). Upper bounds are
    inclusive, so a value between two published bands (0.205) falls in the higher one.
    ``None`` (undefined kappa) is "Undefined".

    Reference: J. R. Landis and G. G. Koch, "The measurement of observer agreement for
    categorical data", Biometrics 33(1), 159-174, 1977.

    Examples
    --------
    >>> landis_koch_label(0.45), landis_koch_label(0.2), landis_koch_label(0.205)
    ('Moderate Agreement', 'Slight Agreement', 'Fair Agreement')
    >>> landis_koch_label(-0.1), landis_koch_label(None)
    ('Poor Agreement', 'Undefined')
    """
    if kappa is None:
        return "Undefined"
    if kappa < 0:
        return "Poor Agreement"
    return next(label for upper, label in _LANDIS_KOCH_BANDS if kappa <= upper + _BAND_TOLERANCE)


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


def kappa_values(counts: np.ndarray) -> np.ndarray:
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


def gwet_ac1_from_table(table: BinaryTable) -> KappaResult:
    n = table.n
    p_a = (table.both + table.neither) / n
    pi = (2 * table.both + table.first_only + table.second_only) / (2 * n)
    p_e = 2 * pi * (1 - pi)
    return KappaResult((p_a - p_e) / (1 - p_e), False, None, p_a, p_e, n)


def cell_codes(labels1: np.ndarray, labels2: np.ndarray) -> np.ndarray:
    """Cell per pair: 0 neither, 1 second only, 2 first only, 3 both."""
    check_same_length(labels1, labels2, "labels1", "labels2")
    if labels1.size == 0:
        raise AgreementInputError("No labels were given: at least one rated item is needed.")
    return 2 * labels1.astype(np.intp) + labels2.astype(np.intp)


def counts_per_query(cells: np.ndarray, query_index: np.ndarray,
                      n_queries: int | None = None) -> np.ndarray:
    if n_queries is None:
        n_queries = int(query_index.max()) + 1
    flat = np.bincount(query_index * 4 + cells, minlength=n_queries * 4)
    return flat.reshape(n_queries, 4).astype(np.int64)


def table_from_counts(counts: np.ndarray) -> BinaryTable:
    neither, second_only, first_only, both = (int(c) for c in counts)
    return BinaryTable(both=both, first_only=first_only, second_only=second_only,
                       neither=neither)

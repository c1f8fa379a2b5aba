"""Cohen's kappa, Gwet's AC1, weighted kappa and the Landis-Koch bands against independent
references: sklearn, published tables and values worked out by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agreement_samples import labels_from_table, sklearn_kappa
from eval_harness.metrics.agreement import (
    BinaryTable,
    agreement_report,
    binarize_scores,
    cohen_kappa,
    cohen_kappa_value,
    gwet_ac1,
    kappa_from_table,
    landis_koch_label,
    weighted_kappa,
)
from eval_harness.metrics.agreement.kappa import _chance_corrected

# No example database: the test run must not write into the working tree.
PROPERTY = settings(max_examples=200, deadline=None, database=None)


def test_cohen_kappa_equals_sklearn_on_thousands_of_random_label_pairs():
    rng = np.random.default_rng(20240611)
    compared = flagged = 0
    for case in range(2000):
        n = int(rng.integers(1, 40))
        prevalence1, prevalence2 = rng.random(2)
        first = (rng.random(n) < prevalence1).astype(int)
        # Second rater copies the first with some probability, so kappa spans [-1, 1].
        copy = rng.random(n) < rng.random()
        second = np.where(copy, first, (rng.random(n) < prevalence2).astype(int))
        expected = sklearn_kappa(first, second)
        ours = cohen_kappa(first, second)
        if math.isnan(expected):
            # sklearn's NaN case is one shared label everywhere: ours says perfect, flagged.
            assert len(set(first) | set(second)) == 1
            assert ours.degenerate and ours.value == 1.0 and ours.reason
            flagged += 1
        else:
            assert ours.value == pytest.approx(expected, abs=1e-12)
            if case % 10 == 0:
                assert cohen_kappa_value(first, second) == ours.value
            compared += 1
    assert compared > 1500 and flagged > 10  # both branches really exercised


binary_pairs = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1,
                        max_size=60)


@PROPERTY
@given(binary_pairs)
def test_kappa_and_ac1_are_symmetric_bounded_and_match_sklearn(pairs):
    first = [a for a, _ in pairs]
    second = [b for _, b in pairs]
    forward, backward = cohen_kappa(first, second), cohen_kappa(second, first)
    assert forward.value == pytest.approx(backward.value, abs=1e-12)
    assert forward.degenerate == backward.degenerate
    assert -1.0 <= forward.value <= 1.0
    assert gwet_ac1(first, second).value == pytest.approx(gwet_ac1(second, first).value,
                                                          abs=1e-12)
    expected = sklearn_kappa(first, second)
    if not math.isnan(expected):
        assert forward.value == pytest.approx(expected, abs=1e-12)


@pytest.mark.unit
@pytest.mark.parametrize(("table", "published"), [
    # Wikipedia, "Cohen's kappa", simple example: 50 grant proposals, readers A and B.
    #              B yes  B no
    #   A yes       20     5
    #   A no        10    15
    # p_o = 35/50 = 0.7; p_yes = 0.5 * 0.6 = 0.3, p_no = 0.5 * 0.4 = 0.2, p_e = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4 (published).
    (BinaryTable(both=20, first_only=5, second_only=10, neither=15), 0.4),
    # Wikipedia, "same percentages but different numbers": both tables have p_o = 0.60.
    #   A yes/B yes 45, A yes/B no 15, A no/B yes 25, A no/B no 15  -> kappa 0.1304
    (BinaryTable(both=45, first_only=15, second_only=25, neither=15), 0.1304),
    #   A yes/B yes 25, A yes/B no 35, A no/B yes  5, A no/B no 35  -> kappa 0.2593
    (BinaryTable(both=25, first_only=35, second_only=5, neither=35), 0.2593),
])
def test_kappa_reproduces_published_tables(table, published):
    assert round(kappa_from_table(table).value, 3) == round(published, 3)
    first, second = labels_from_table(table.both, table.first_only, table.second_only,
                                      table.neither)
    assert round(cohen_kappa(first, second).value, 3) == round(published, 3)


@pytest.mark.unit
def test_seed_example_full_agreement_is_one():
    # Story 1.11, "Kappa Calculation with Known Values": all 5 docs agree -> kappa 1.0.
    judge1 = [0.8, 0.6, 0.3, 0.9, 0.4]  # binary [1, 1, 0, 1, 0]
    judge2 = [0.7, 0.6, 0.2, 0.8, 0.4]  # binary [1, 1, 0, 1, 0]
    result = cohen_kappa(binarize_scores(judge1), binarize_scores(judge2))
    assert result.value == 1.0
    assert not result.degenerate
    report = agreement_report(judge1, judge2, query_ids=[7] * 5)
    assert report.kappa.value == 1.0
    assert report.interpretation == "Almost Perfect Agreement"


@pytest.mark.unit
def test_degenerate_kappa_is_flagged_never_nan():
    both_relevant = cohen_kappa([1, 1, 1], [1, 1, 1])
    assert (both_relevant.value, both_relevant.degenerate) == (1.0, True)
    assert "same label" in both_relevant.reason
    opposite = cohen_kappa([1, 1, 1], [0, 0, 0])
    assert (opposite.value, opposite.degenerate) == (0.0, True)
    # P_e = 1 without P_o = 1 cannot come from binary labels; the shared rule still says
    # "undefined" rather than dividing by zero.
    undefined = _chance_corrected(0.5, 1.0, 4)
    assert undefined.value is None and undefined.degenerate and "undefined" in undefined.reason


@pytest.mark.unit
def test_gwet_ac1_hand_worked():
    # Wikipedia table above (n = 50): P_a = (20 + 15)/50 = 0.7.
    # Rater 1 says yes 25 times, rater 2 30 times: pi = (25 + 30)/(2 * 50) = 0.55.
    # P_e = 2 * 0.55 * 0.45 = 0.495.  AC1 = (0.7 - 0.495)/(1 - 0.495) = 0.205/0.505 = 41/101.
    first, second = labels_from_table(20, 5, 10, 15)
    assert gwet_ac1(first, second).value == pytest.approx(41 / 101, abs=1e-12)
    # High-prevalence paradox (n = 100): both yes 90, only first 5, only second 5.
    # P_o = 0.9.  Kappa: p1 = p2 = 0.95, P_e = 0.95^2 + 0.05^2 = 0.905,
    #   kappa = (0.9 - 0.905)/(1 - 0.905) = -0.005/0.095 = -1/19.
    # AC1: pi = 0.95, P_e = 2 * 0.95 * 0.05 = 0.095, AC1 = (0.9 - 0.095)/0.905 = 161/181.
    first, second = labels_from_table(90, 5, 5, 0)
    assert cohen_kappa(first, second).value == pytest.approx(-1 / 19, abs=1e-12)
    assert gwet_ac1(first, second).value == pytest.approx(161 / 181, abs=1e-12)


@pytest.mark.parametrize("weights", ["quadratic", "linear"])
def test_weighted_kappa_equals_sklearn(weights):
    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(300):
        n = int(rng.integers(2, 50))
        first = rng.integers(0, 5, n)
        second = np.where(rng.random(n) < 0.6, first, rng.integers(0, 5, n))
        expected = sklearn_kappa(first, second, weights=weights, labels=list(range(5)))
        ours = weighted_kappa(first, second, n_categories=5, weights=weights)
        if math.isnan(expected):
            assert ours.degenerate and ours.value == 1.0
        else:
            assert ours.value == pytest.approx(expected, abs=1e-12)
            compared += 1
    assert compared > 250


@pytest.mark.unit
@pytest.mark.parametrize(("kappa", "label"), [
    (-0.01, "Poor Agreement"), (0.0, "Slight Agreement"), (0.20, "Slight Agreement"),
    (0.1 + 0.1, "Slight Agreement"), (0.21, "Fair Agreement"), (0.40, "Fair Agreement"),
    (0.41, "Moderate Agreement"), (0.61, "Substantial Agreement"),
    (0.80, "Substantial Agreement"), (0.81, "Almost Perfect Agreement"),
    (1.0, "Almost Perfect Agreement"), (None, "Undefined"),
])
def test_landis_koch_bands(kappa, label):
    assert landis_koch_label(kappa) == label

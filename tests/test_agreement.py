"""Agreement statistics against independent references: sklearn, the krippendorff package,
published tables and values worked out by hand in the comments."""

from __future__ import annotations

import json
import math
import time
import warnings

import krippendorff
import numpy as np
import pytest
import sklearn
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from eval_harness.metrics.agreement import (
    AgreementInputError,
    BinaryTable,
    agreement_report,
    bin_scores,
    binarize_scores,
    cohen_kappa,
    cohen_kappa_value,
    gwet_ac1,
    judge_vs_human,
    kappa_bootstrap_interval,
    kappa_from_table,
    krippendorff_alpha_interval,
    landis_koch_label,
    score_offset_test,
    weighted_kappa,
)
from eval_harness.metrics.agreement.kappa import _chance_corrected

# No example database: the test run must not write into the working tree.
PROPERTY = settings(max_examples=200, deadline=None, database=None)


def labels_from_table(both: int, first_only: int, second_only: int, neither: int):
    first = [1] * both + [1] * first_only + [0] * second_only + [0] * neither
    second = [1] * both + [0] * first_only + [1] * second_only + [0] * neither
    return first, second


def sklearn_kappa(first, second, **options) -> float:
    with warnings.catch_warnings(), sklearn.config_context(skip_parameter_validation=True):
        warnings.simplefilter("ignore")  # sklearn warns on the cases it returns NaN for
        return float(cohen_kappa_score(first, second, **options))


def clustered_scores(n_queries: int, docs_per_query: int, seed: int):
    """Two judges who share each query's leaning and a document's true relevance."""
    rng = np.random.default_rng(seed)
    query_leaning = np.repeat(rng.normal(0.0, 0.25, n_queries), docs_per_query)
    truth = rng.random(n_queries * docs_per_query) + query_leaning
    first = np.clip(truth + rng.normal(0.0, 0.2, truth.size), 0.0, 1.0)
    second = np.clip(truth + rng.normal(0.0, 0.2, truth.size), 0.0, 1.0)
    return first, second, np.repeat(np.arange(n_queries), docs_per_query)


# --- Cohen's kappa ------------------------------------------------------------------------


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


def test_empty_input_raises_one_clear_sentence():
    with pytest.raises(AgreementInputError, match=r"^No labels were given") as error:
        cohen_kappa([], [])
    assert isinstance(error.value, ValueError)
    assert str(error.value).count(".") == 1
    with pytest.raises(AgreementInputError, match="scores1 is empty"):
        agreement_report([], [], query_ids=[])
    with pytest.raises(AgreementInputError, match="None of the 2 pairs"):
        agreement_report([None, 0.3], [0.4, None], query_ids=["q1", "q1"])


@pytest.mark.parametrize(("call", "message"), [
    (lambda: cohen_kappa([0, 1, 2], [0, 1, 1]), "binary labels 0 or 1; found 2"),
    (lambda: cohen_kappa([0, 1], [0, 1, 1]), "labels1 has 2 entries but labels2 has 3"),
    (lambda: agreement_report([0.2, 1.5], [0.1, 0.2], query_ids=[1, 1]), r"scores1\[1\] is 1.5"),
    (lambda: agreement_report([0.2, 0.3], [0.1, 0.2], query_ids=[1]), "query_ids has 1 entries"),
    (lambda: judge_vs_human([0.2, 0.9], [0, 2], query_ids=[1, 1]), "0, 1 or None; found 2.0"),
])
def test_bad_input_is_named_in_the_error(call, message):
    with pytest.raises(AgreementInputError, match=message):
        call()


# --- Binarization ---------------------------------------------------------------------------


def test_binarization_is_strictly_greater_than_threshold_and_keeps_unscored():
    scores = [0.5, 0.5000001, 0.49, 0.51, None, float("nan"), 0.0, 1.0]
    assert binarize_scores(scores) == [0, 1, 0, 1, None, None, 0, 1]
    assert binarize_scores([0.7, 0.71], threshold=0.7) == [0, 1]


def test_exactly_half_is_a_disagreement_with_just_above_half():
    # Judge 1 says 0.5 (not relevant), judge 2 says 0.51 (relevant) on one of four pairs.
    report = agreement_report([0.5, 0.9, 0.1, 0.8], [0.51, 0.9, 0.1, 0.8], query_ids=[1] * 4)
    assert report.confusion == BinaryTable(both=2, first_only=0, second_only=1, neither=1)


def test_bin_scores_uses_nearest_anchor_with_ties_going_down():
    # Anchors 0.0, 0.3, 0.5, 0.7, 1.0 -> midpoints 0.15, 0.4, 0.6, 0.85.
    scores = [0.0, 0.15, 0.16, 0.4, 0.41, 0.6, 0.61, 0.85, 0.86, 1.0, None]
    assert bin_scores(scores) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, None]


# --- Gwet's AC1, weighted kappa, Krippendorff's alpha -----------------------------------------


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


def test_krippendorff_alpha_interval_hand_worked():
    # Units (judge1, judge2): (1.0, 0.7), (0.3, 0.3), (0.0, 0.5), (0.7, 1.0); n = 8 values.
    # D_o = 1/n * sum_u 1/(m_u - 1) * sum_{i != j in u} (v_i - v_j)^2
    #     = 1/8 * (2*0.09 + 0 + 2*0.25 + 2*0.09) = 0.86/8 = 0.1075
    # All values: 1.0 0.7 0.3 0.3 0.0 0.5 0.7 1.0; sum 4.5, mean 0.5625, sum of squares 3.41,
    #   sum (v - mean)^2 = 3.41 - 8 * 0.5625^2 = 0.87875.
    # sum_{i != j} (v_i - v_j)^2 = 2 * n * 0.87875 = 14.06; D_e = 14.06 / (8 * 7) = 0.2510714
    # alpha = 1 - 0.1075/0.2510714 = 1 - 301/703 = 402/703 = 0.571835
    result = krippendorff_alpha_interval([1.0, 0.3, 0.0, 0.7], [0.7, 0.3, 0.5, 1.0])
    assert result.value == pytest.approx(402 / 703, abs=1e-12)
    assert result.observed_disagreement == pytest.approx(0.1075, abs=1e-12)
    assert result.expected_disagreement == pytest.approx(14.06 / 56, abs=1e-12)


def test_krippendorff_alpha_matches_the_krippendorff_package_with_missing_scores():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(3, 60))
        truth = rng.random(n)
        first = np.clip(truth + rng.normal(0, rng.random() * 0.5, n), 0, 1).round(1)
        second = np.clip(truth + rng.normal(0, rng.random() * 0.5, n), 0, 1).round(1)
        first[rng.random(n) < 0.1] = np.nan
        second[rng.random(n) < 0.1] = np.nan
        both = ~(np.isnan(first) | np.isnan(second))
        if both.sum() < 1 or np.unique(np.concatenate([first[both], second[both]])).size < 2:
            continue
        expected = krippendorff.alpha(reliability_data=np.vstack([first, second]),
                                      level_of_measurement="interval")
        assert krippendorff_alpha_interval(first, second).value == pytest.approx(expected,
                                                                                 abs=1e-9)


def test_krippendorff_alpha_without_variation_is_flagged():
    result = krippendorff_alpha_interval([0.7, 0.7, None], [0.7, 0.7, 0.2])
    assert (result.value, result.degenerate, result.n_units) == (1.0, True, 2)


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


# --- Bootstrap interval ---------------------------------------------------------------------


def test_bootstrap_interval_contains_estimate_and_narrows_with_more_queries():
    widths = []
    for n_queries in (30, 600):
        first, second, query_ids = clustered_scores(n_queries, 5, seed=3)
        report = agreement_report(first, second, query_ids=query_ids)
        interval = report.kappa_interval
        assert interval.low < report.kappa.value < interval.high
        assert interval.n_queries == n_queries and interval.n_resamples == 2000
        widths.append(interval.high - interval.low)
    assert widths[1] < widths[0] / 2  # ~sqrt(20) narrower in theory


def test_bootstrap_resamples_queries_not_pairs():
    # Disagreement is a property of the query: on half the queries the judges agree on every
    # document, on the other half the second judge flips 60% of the labels. Pairs within a
    # query are dependent, so resampling single pairs (each pair its own "query") must give
    # a clearly narrower, overconfident interval than resampling queries.
    rng = np.random.default_rng(5)
    n_queries, docs = 100, 10
    labels1 = (rng.random(n_queries * docs) < 0.5).astype(int)
    hard_query = np.repeat(rng.random(n_queries) < 0.5, docs)
    flipped = hard_query & (rng.random(labels1.size) < 0.6)
    labels2 = np.where(flipped, 1 - labels1, labels1)
    query_ids = np.repeat(np.arange(n_queries), docs)
    by_query = kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids)
    by_pair = kappa_bootstrap_interval(labels1, labels2, query_ids=np.arange(labels1.size))
    assert (by_query.high - by_query.low) > 1.5 * (by_pair.high - by_pair.low)


def test_bootstrap_is_seeded_and_fast():
    first, second, query_ids = clustered_scores(1000, 5, seed=9)
    labels1, labels2 = np.array(binarize_scores(first)), np.array(binarize_scores(second))
    started = time.perf_counter()
    interval = kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids, seed=1)
    assert time.perf_counter() - started < 1.5
    assert interval == kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids, seed=1)
    assert interval != kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids, seed=2)


def test_bootstrap_of_identical_queries_collapses_to_the_point_estimate():
    # Every query has the same 2x2 table, so every resample has the same pooled proportions:
    # the resampled kappa must be exactly the point estimate (same formula in both paths).
    first, second = [1, 1, 0, 0, 1] * 20, [1, 0, 0, 1, 1] * 20
    interval = kappa_bootstrap_interval(first, second, query_ids=np.repeat(np.arange(20), 5))
    point = cohen_kappa(first, second).value
    assert interval.low == pytest.approx(point, abs=1e-12)
    assert interval.high == pytest.approx(point, abs=1e-12)


def test_bootstrap_needs_two_queries():
    interval = kappa_bootstrap_interval([1, 0, 1], [1, 0, 0], query_ids=["q", "q", "q"])
    assert interval.low is None and interval.high is None
    assert "at least 2 queries" in interval.reason


# --- Reports --------------------------------------------------------------------------------


def test_unscored_pairs_are_counted_and_left_out():
    scores1 = [0.9, None, 0.2, 0.8, float("nan"), 0.1, 0.7, 0.3]
    scores2 = [0.8, 0.9, 0.4, 0.2, 0.6, None, 0.9, 0.1]
    query_ids = ["a", "a", "a", "b", "c", "c", "d", "d"]
    report = agreement_report(scores1, scores2, query_ids=query_ids, n_resamples=200)
    assert (report.n_pairs, report.n_scored, report.n_unscored) == (8, 5, 3)
    kept = [0, 2, 3, 6, 7]
    expected = cohen_kappa([int(scores1[i] > 0.5) for i in kept],
                           [int(scores2[i] > 0.5) for i in kept])
    assert report.kappa == expected
    per_query = {q.query_id: q for q in report.per_query}
    assert (per_query["a"].n_pairs, per_query["a"].n_scored) == (3, 2)
    assert per_query["c"].n_scored == 0 and per_query["c"].kappa.value is None
    assert report.krippendorff_alpha.n_units == 5
    json.dumps(report.to_dict(), allow_nan=False)


def test_report_on_uniform_scores_is_strict_json_with_reasons():
    report = agreement_report([0.9] * 4, [0.9] * 4, query_ids=[1, 1, 2, 2], n_resamples=100)
    text = json.dumps(report.to_dict(), allow_nan=False)
    assert "NaN" not in text
    assert report.kappa.degenerate and report.kappa.value == 1.0
    assert report.spearman.rho is None and "same score" in report.spearman.reason
    assert report.offset.p_value is None and "zero" in report.offset.reason
    assert report.weighted_kappa.degenerate and report.krippendorff_alpha.degenerate


def test_report_secondary_statistics_agree_with_their_references():
    first, second, query_ids = clustered_scores(80, 5, seed=13)
    # Two decimals, as judges reply; also keeps the krippendorff package's value domain small.
    first, second = first.round(2), second.round(2)
    report = agreement_report(first, second, query_ids=query_ids, weights="linear",
                              n_resamples=200)
    binned1, binned2 = bin_scores(first), bin_scores(second)
    assert report.weighted_kappa.value == pytest.approx(
        sklearn_kappa(binned1, binned2, weights="linear", labels=list(range(5))), abs=1e-12)
    assert report.krippendorff_alpha.value == pytest.approx(
        krippendorff.alpha(reliability_data=np.vstack([first, second]),
                           level_of_measurement="interval"), abs=1e-9)
    assert report.confusion.n == report.n_scored == 400
    assert -1 <= report.spearman.rho <= 1 and report.spearman.rho > 0.5


def test_offset_test_detects_a_judge_that_scores_higher():
    rng = np.random.default_rng(17)
    second = rng.random(60) * 0.6
    first = second + 0.2 + rng.normal(0, 0.05, 60).clip(-0.15, 0.15)
    result = score_offset_test(first, second)
    assert result.mean_difference == pytest.approx(float(np.mean(first - second)))
    assert result.mean_difference > 0.1 and result.p_value < 1e-6
    assert result.n_nonzero == 60
    same = score_offset_test([0.3, 0.7, 1.0], [0.3, 0.7, 1.0])
    assert (same.statistic, same.p_value, same.mean_difference) == (None, None, 0.0)


@pytest.mark.parametrize(("kappa", "label"), [
    (-0.01, "Poor Agreement"), (0.0, "Slight Agreement"), (0.20, "Slight Agreement"),
    (0.1 + 0.1, "Slight Agreement"), (0.21, "Fair Agreement"), (0.40, "Fair Agreement"),
    (0.41, "Moderate Agreement"), (0.61, "Substantial Agreement"),
    (0.80, "Substantial Agreement"), (0.81, "Almost Perfect Agreement"),
    (1.0, "Almost Perfect Agreement"), (None, "Undefined"),
])
def test_landis_koch_bands(kappa, label):
    assert landis_koch_label(kappa) == label


def test_judge_vs_human_hand_worked():
    # Judge relevant (> 0.5) vs human:  TP 3, FP 1, FN 2, TN 4 over 10 labelled pairs;
    # one more pair has no human label and one has no judge score (both left out).
    # precision = 3/4, recall = 3/5.  P_o = 7/10; judge yes 4/10, human yes 5/10,
    # P_e = 0.4 * 0.5 + 0.6 * 0.5 = 0.5; kappa = (0.7 - 0.5)/0.5 = 0.4.
    judge = [0.9, 0.8, 0.7, 0.6, 0.2, 0.5, 0.1, 0.3, 0.0, 0.4, 0.9, None]
    human = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0, None, 1]
    query_ids = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    report = judge_vs_human(judge, human, query_ids=query_ids, n_resamples=500)
    assert (report.n_pairs, report.n_scored, report.n_unscored) == (12, 10, 2)
    assert report.precision == pytest.approx(0.75)
    assert report.recall == pytest.approx(0.6)
    assert report.kappa.value == pytest.approx(0.4, abs=1e-12)
    assert report.interpretation == "Fair Agreement"
    assert report.kappa_interval.low <= 0.4 <= report.kappa_interval.high
    json.dumps(report.to_dict(), allow_nan=False)


def test_judge_vs_human_undefined_precision_is_none():
    report = judge_vs_human([0.1, 0.2, 0.3], [1, 0, 1], query_ids=[1, 2, 3], n_resamples=50)
    assert report.precision is None and report.recall == 0.0

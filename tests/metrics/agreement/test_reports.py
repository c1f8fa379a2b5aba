"""The agreement reports (judge vs judge, judge vs human) against their references and
hand-worked values; unscored pairs are counted and left out."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest

from agreement_samples import clustered_scores, sklearn_kappa
from eval_harness.metrics.agreement import agreement_report, bin_scores, cohen_kappa, judge_vs_human

pytestmark = pytest.mark.unit


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

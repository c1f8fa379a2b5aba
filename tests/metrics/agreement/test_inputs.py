"""Agreement inputs: binarization at the threshold, the nearest-anchor bins, and one clear
sentence on empty or malformed input."""

from __future__ import annotations

import pytest

from eval_harness.metrics.agreement import (
    AgreementInputError,
    BinaryTable,
    agreement_report,
    bin_scores,
    binarize_scores,
    cohen_kappa,
    judge_vs_human,
)

pytestmark = pytest.mark.unit


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

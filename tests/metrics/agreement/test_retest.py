"""Test-retest statistics: Krippendorff's alpha against the ``krippendorff`` package, the flip
rate and its query-bootstrap interval by seeded simulation, and the degenerate cases."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from eval_harness.metrics.agreement import AgreementInputError
from eval_harness.metrics.agreement.retest import krippendorff_alpha, retest_agreement


def _random_matrix(rng: np.random.Generator, *, binary: bool) -> np.ndarray:
    units, coders = rng.integers(2, 40), rng.integers(2, 6)
    matrix = rng.random((units, coders))
    if binary:
        matrix = (matrix > rng.random()).astype(float)
    matrix[rng.random(matrix.shape) < 0.2] = np.nan
    return matrix


@pytest.mark.parametrize("binary, metric", [(False, "interval"), (True, "interval"),
                                            (True, "nominal")])
def test_alpha_matches_the_krippendorff_package(binary, metric):
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(300):
        matrix = _random_matrix(rng, binary=binary)
        ours = krippendorff_alpha(matrix, metric=metric)
        with np.errstate(all="ignore"):
            try:
                reference = krippendorff.alpha(reliability_data=matrix.T,
                                               level_of_measurement=metric)
            except ValueError:  # the package refuses one-valued data; ours says 1.0
                continue
        if ours is None or not np.isfinite(reference):
            continue
        assert ours == pytest.approx(reference, abs=1e-9)
        checked += 1
    assert checked > 200


@pytest.mark.unit
def test_a_stable_judge_has_flip_rate_0_and_alpha_1():
    scores = np.repeat(np.linspace(0.0, 1.0, 30)[:, None], 4, axis=1)
    result = retest_agreement(scores, query_ids=np.arange(30) // 3)
    assert result.flip_rate == 0.0 and result.unstable_share == 0.0
    assert result.alpha_scores == 1.0 and result.alpha_labels == 1.0
    assert (result.flip_interval.low, result.flip_interval.high) == (0.0, 0.0)
    assert (result.alpha_labels_interval.low, result.alpha_labels_interval.high) == (1.0, 1.0)


@pytest.mark.unit
def test_unscored_retests_are_left_out_not_counted_as_flips():
    scores = [[0.9, np.nan, 0.9], [0.1, 0.1, np.nan], [np.nan, 0.9, 0.1]]
    result = retest_agreement(scores, query_ids=[1, 2, 3])
    # comparisons against a first label: pair 1 one, pair 2 one, pair 3 none (no first)
    assert result.flip_rate == 0.0
    assert result.unstable_share == pytest.approx(1 / 3)  # pair 3 has labels 1 and 0


def _noisy_judge(rng, *, p: float, queries: int, pairs: int, repeats: int) -> np.ndarray:
    truth = rng.random((queries * pairs, 1))
    labels = truth > 0.5
    flipped = rng.random((queries * pairs, repeats)) < p
    retests = np.where(labels ^ flipped, 0.8, 0.2)
    return np.column_stack([np.where(labels, 0.8, 0.2), retests])


@pytest.mark.unit
def test_flip_rate_interval_covers_the_flip_probability():
    """A judge that flips each retest label with probability p: the 95% query-bootstrap
    interval covers p in most seeded repetitions (200, vectorised: seconds)."""
    p, covered = 0.1, 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        scores = _noisy_judge(rng, p=p, queries=20, pairs=6, repeats=3)
        result = retest_agreement(scores, query_ids=np.arange(120) // 6, n_resamples=500,
                                  seed=seed)
        covered += result.flip_interval.low <= p <= result.flip_interval.high
    assert covered >= 0.88 * 200  # nominal 95%; percentile intervals run a little short


@pytest.mark.unit
def test_fewer_than_two_queries_gives_an_interval_without_bounds():
    result = retest_agreement([[0.9, 0.1], [0.2, 0.2]], query_ids=["q", "q"])
    assert result.flip_rate == 0.5
    assert result.flip_interval.low is None and "two queries" in result.flip_interval.reason


@pytest.mark.unit
def test_nothing_scored_twice_gives_none():
    result = retest_agreement([[0.9, np.nan], [np.nan, 0.2]], query_ids=[1, 2])
    assert result.flip_rate is None and result.alpha_scores is None
    assert result.flip_interval.low is None


@pytest.mark.unit
@pytest.mark.parametrize("bad, message", [([], "non-empty"), ([[0.1, 0.2]], "query_ids")])
def test_bad_input_says_what_to_give(bad, message):
    with pytest.raises(AgreementInputError, match=message):
        retest_agreement(bad, query_ids=[1, 2])


@pytest.mark.unit
def test_unknown_metric_is_refused():
    with pytest.raises(AgreementInputError, match="metric"):
        krippendorff_alpha([[0.1, 0.2]], metric="ratio")

"""Each grid point's P@5 interval: one query bootstrap shared by every grid point."""

import numpy as np
import pytest
from scipy import stats

from eval_harness.metrics.calibration import grid_p_at_5_intervals, paired_bootstrap_interval

pytestmark = pytest.mark.unit


def _small_sweep(seed: int = 3, n_weights: int = 4, n_queries: int = 30) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 6, (n_weights, n_queries)) / 5.0  # P@5


def test_intervals_equal_a_direct_loop_over_grid_points_with_numpy_percentiles():
    matrix = _small_sweep()
    low, high = grid_p_at_5_intervals(matrix, confidence=0.9, n_resamples=2_000, seed=7)
    # the same resample matrix of query indices, then each row on its own
    drawn = np.random.default_rng(7).integers(0, matrix.shape[1], (2_000, matrix.shape[1]))
    for row, (lo, hi) in zip(matrix, zip(low, high)):
        means = np.array([row[indices].mean() for indices in drawn])
        assert (lo, hi) == pytest.approx(tuple(np.percentile(means, [5.0, 95.0])), abs=1e-12)


def test_each_row_is_the_bootstrap_of_its_mean_and_the_level_widens_it():
    matrix = _small_sweep()
    low, high = grid_p_at_5_intervals(matrix, n_resamples=4_000, seed=1)
    # a row against zeros is a paired bootstrap of that row's mean, on the same draw
    for row, lo, hi in zip(matrix, low, high):
        assert lo <= row.mean() <= hi
        assert (lo, hi) == pytest.approx(paired_bootstrap_interval(
            row, np.zeros_like(row), n_resamples=4_000, seed=1), abs=1e-12)
    narrow = grid_p_at_5_intervals(matrix, confidence=0.5, n_resamples=4_000, seed=1)
    assert (narrow[0] >= low).all() and (narrow[1] <= high).all()


def test_intervals_agree_with_scipy_percentile_bootstrap():
    row = _small_sweep(n_weights=1, n_queries=200)[0]
    low, high = grid_p_at_5_intervals(row[None, :], n_resamples=20_000, seed=2)
    reference = stats.bootstrap((row,), np.mean, method="percentile", n_resamples=20_000,
                                random_state=5).confidence_interval
    assert low[0] == pytest.approx(reference.low, abs=0.006)
    assert high[0] == pytest.approx(reference.high, abs=0.006)


def test_degenerate_inputs():
    low, high = grid_p_at_5_intervals([[0.4], [0.8]])  # one query: nothing to resample
    assert low.tolist() == high.tolist() == [0.4, 0.8]
    for bad in ([[]], [0.4, 0.8]):
        with pytest.raises(ValueError, match="matrix with a query"):
            grid_p_at_5_intervals(bad)
    with pytest.raises(ValueError, match="confidence"):
        grid_p_at_5_intervals([[0.4]], confidence=1.0)
    with pytest.raises(ValueError, match="n_resamples"):
        grid_p_at_5_intervals([[0.4]], n_resamples=0)

"""The calibration grid's points (eval_harness.calibration.grid): a point read off a sweep,
its JSON without NaN, and how the outputs write a weight."""

from __future__ import annotations

import doctest
import math

import numpy as np

from eval_harness.calibration import grid
from eval_harness.calibration.grid import grid_point, grid_points, weight_label
from eval_harness.retrieval.sweep import CandidateSet, sweep_weights
from sweep_candidates import random_queries


def test_the_doctests_run():
    assert doctest.testmod(grid).failed == 0


def test_weight_labels_are_exact_with_at_least_two_decimals():
    assert [weight_label(w) for w in (0.0, 0.5, 0.07, 0.125, 0.3333333333)] == [
        "0.00", "0.50", "0.07", "0.125", "0.3333333333"]


def test_points_carry_the_sweeps_means_and_an_interval_around_p_at_5():
    ids, semantic, keyword, relevance = random_queries(np.random.default_rng(3), 40)
    sweep = sweep_weights(CandidateSet.from_queries(ids, semantic, keyword, relevance),
                          [0.3, 0.7])
    points = grid_points(sweep, confidence=0.95, resamples=200, seed=0)
    assert [p.semantic_weight for p in points] == [0.3, 0.7]
    for i, point in enumerate(points):
        assert (point.p_at_5, point.keyword_weight) == (sweep.p_at_5[i],
                                                        sweep.keyword_weights[i])
        assert point.p_at_5_low <= point.p_at_5 <= point.p_at_5_high
        alone = grid_point(sweep, i)  # the same means, no interval
        assert alone.p_at_5 == point.p_at_5 and math.isnan(alone.p_at_5_low)
        assert alone.to_dict()["p_at_5_low"] is None

"""The decision rule (eval_harness.calibration.decision): the max-statistic permutation test
against exact enumeration of all sign patterns, the rule's thresholds, its sentence, and its
error rates by seeded simulation (weights in force truly best; a real gain of 0.05)."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest

from eval_harness.calibration import decision as decision_module
from eval_harness.calibration.decision import WeightDecision, decide_weights, max_statistic_p_value

GRID = [(0.5, 0.5), (0.6, 0.4), (0.7, 0.3), (0.8, 0.2)]


def enumerated_p(differences: np.ndarray) -> float:
    """The reference: share of all 2^n sign patterns of the rows whose grid maximum of the
    column means reaches the observed one (a plain loop, no shortcut)."""
    n = differences.shape[0]
    observed = differences.mean(axis=0).max()
    reach = 0
    for signs in itertools.product((1, -1), repeat=n):
        permuted = (np.array(signs)[:, None] * differences).mean(axis=0).max()
        reach += permuted >= observed - 1e-12
    return reach / 2 ** n


@pytest.mark.unit
def test_hand_worked_two_queries():
    # d = [[0.2, 0], [0.2, 0.2]]: observed max mean = max(0.2, 0.1) = 0.2. Patterns:
    # (+,+) -> means (0.2, 0.1), max 0.2 reaches; (+,-) -> (0, -0.1); (-,+) -> (0, 0.1);
    # (-,-) -> (-0.2, -0.1). One of four: p = 0.25.
    assert max_statistic_p_value(np.array([[0.2, 0.0], [0.2, 0.2]])) == (0.25, 4)


@pytest.mark.unit
def test_hand_worked_three_queries_one_point():
    # One grid point, all three queries gain 0.2: only (+,+,+) reaches 0.2, p = 1/8.
    p, used = max_statistic_p_value(np.array([[0.2], [0.2], [0.2]]))
    assert (p, used) == (0.125, 8)


@pytest.mark.unit
def test_a_second_grid_point_raises_the_adjusted_p():
    # The first point as above (observed maximum 0.2); a second point that loses 0.2 on
    # every query reaches a mean of 0.2 under the pattern (-,-,-), so two of the eight
    # patterns reach the observed maximum: p = 2/8 (the search over two points costs).
    d = np.array([[0.2, -0.2], [0.2, -0.2], [0.2, -0.2]])
    assert max_statistic_p_value(d)[0] == 0.25


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(12))
def test_exact_enumeration_equals_the_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 13))
    d = rng.choice([-0.4, -0.2, 0.0, 0.2, 0.4], size=(n, 5), p=[.1, .2, .4, .2, .1])
    p, used = max_statistic_p_value(d, permutations=10_000)
    nonzero_rows = int(np.any(d != 0, axis=1).sum())
    assert used == (2 ** nonzero_rows if nonzero_rows else 1)
    assert p == pytest.approx(enumerated_p(d), abs=1e-12)


@pytest.mark.unit
def test_drawn_patterns_agree_with_enumeration():
    rng = np.random.default_rng(7)
    d = rng.choice([-0.2, 0.0, 0.2, 0.4], size=(12, 6))
    exact = enumerated_p(d)
    p, used = max_statistic_p_value(d, permutations=2000, seed=3)  # 2000 < 4096: drawn
    assert used == 2000
    assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / 2000) + 1e-3
    assert max_statistic_p_value(d, permutations=2000, seed=3)[0] == p  # seeded


@pytest.mark.unit
def test_no_difference_anywhere_is_p_one():
    assert max_statistic_p_value(np.zeros((50, 3))) == (1.0, 1)


def _decide(per_query, baseline, **options):
    per_query = np.asarray(per_query, dtype=float)
    best = int(np.argmax(per_query.mean(axis=1)))
    return decide_weights(per_query, GRID[:per_query.shape[0]], (0.7, 0.3), baseline,
                          best_index=best, **options)


@pytest.mark.unit
def test_a_clear_gain_changes_and_says_so():
    baseline = np.zeros(40)
    per_query = np.vstack([np.zeros(40), np.full(40, 0.2)])
    decision = _decide(per_query, baseline, permutations=1000, bootstrap_resamples=500)
    assert decision.changed and decision.best == (0.6, 0.4)
    assert decision.gain == pytest.approx(0.2) and decision.low == decision.high == 0.2
    assert decision.adjusted_p == pytest.approx(1 / 1001)
    assert decision.weights == (0.6, 0.4) and decision.decision == "changed"
    assert decision.sentence == ("changed 0.7 / 0.3 -> 0.6 / 0.4: gains +0.2000 "
                                 "[+0.2000, +0.2000], adjusted p = 0.001")


@pytest.mark.unit
def test_min_gain_keeps_a_significant_but_small_gain():
    per_query = np.vstack([np.zeros(40), np.full(40, 0.2)])
    decision = _decide(per_query, np.zeros(40), min_gain=0.25, permutations=1000)
    assert not decision.changed and decision.weights == (0.7, 0.3)
    assert decision.sentence.startswith("kept 0.7 / 0.3: best grid point 0.6 gains +0.2000")
    assert decision.sentence.endswith("(below min_gain 0.25)")


@pytest.mark.unit
def test_noise_keeps_the_weights_in_force():
    baseline = np.array([0.2, 0.4, 0.0, 0.2])
    per_query = np.vstack([baseline, [0.4, 0.2, 0.2, 0.2]])  # +0.05 on 4 queries
    decision = _decide(per_query, baseline, note="judge labels: the judges' bias is uncorrected")
    assert not decision.changed and decision.permutations == 8  # 3 moving rows: enumerated
    assert decision.adjusted_p == pytest.approx(enumerated_p((per_query - baseline).T))
    assert decision.sentence.startswith("kept 0.7 / 0.3: best grid point 0.6 gains +0.0500 [")
    assert decision.sentence.endswith("; judge labels: the judges' bias is uncorrected")


@pytest.mark.unit
def test_best_point_equal_to_the_weights_in_force_is_kept_at_p_one():
    baseline = np.array([0.2, 0.4, 0.0])
    decision = decide_weights(np.vstack([baseline - 0.2 * (baseline > 0), baseline]),
                              GRID[1:3], (0.7, 0.3), baseline, best_index=1)
    assert not decision.changed and decision.adjusted_p == 1.0 and decision.gain == 0.0
    assert (decision.low, decision.high) == (0.0, 0.0)
    assert decision.sentence == "kept 0.7 / 0.3: no grid point scores higher (adjusted p = 1.00)"


@pytest.mark.unit
def test_to_dict_is_json_safe_and_complete():
    import json

    decision = WeightDecision(False, (0.7, 0.3), (0.6, 0.4), 0.0027, -0.0062, 0.0124, 0.93,
                              0.05, 0.0, 10_000)
    data = json.loads(json.dumps(decision.to_dict()))
    assert data["decision"] == "kept" and data["weights"] == {"semantic": 0.7, "keyword": 0.3}
    assert data["sentence"] == ("kept 0.7 / 0.3: best grid point 0.6 gains +0.0027 "
                                "[-0.0062, +0.0124], adjusted p = 0.93")


@pytest.mark.unit
def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError, match="one per-query P@5 row per grid point"):
        decide_weights(np.zeros((2, 3)), GRID[:3], (0.7, 0.3), np.zeros(3), best_index=0)


# ------------------------------------------------------------------------------ simulation
def _per_query_matrix(rng: np.random.Generator, n_queries: int, gains: np.ndarray) -> np.ndarray:
    """P@5 per grid point x query, as fusion weights give it: every query's hits out of 5 at
    the weights in force, and at each grid point one hit more or less for some queries
    (60% move; up more often than down by the point's gain)."""
    hits = rng.binomial(5, rng.beta(2, 3, n_queries))
    draw = rng.random((gains.size, n_queries))
    up = draw < 0.3 + 2.5 * gains[:, None]
    down = (draw >= 0.3 + 2.5 * gains[:, None]) & (draw < 0.6)
    return np.clip(hits + up.astype(int) - down.astype(int), 0, 5) / 5


def _decisions(matrix: np.ndarray, in_force_row: int, repetitions: int, seed: int,
               n_queries: int) -> list[WeightDecision]:
    rng = np.random.default_rng(seed)
    grid = [(round(0.5 + 0.05 * i, 2), round(0.5 - 0.05 * i, 2)) for i in range(matrix.shape[0])]
    out = []
    for r in range(repetitions):
        sample = matrix[:, rng.integers(0, matrix.shape[1], n_queries)]
        means = sample.mean(axis=1)
        tied = np.flatnonzero(means >= means.max() - 1e-12)
        best = int(tied[np.argmin(np.abs(tied - in_force_row))])
        out.append(decide_weights(sample, grid, grid[in_force_row], sample[in_force_row],
                                  best_index=best, permutations=1000, bootstrap_resamples=100,
                                  seed=r))
    return out


def test_weights_in_force_truly_best_change_at_most_alpha():
    """200 resamplings of the queries of a population in which every grid point has the same
    mean P@5 as the weights in force: changed in at most alpha = 5% of them, plus binomial
    slack (3 standard deviations: 0.05 + 3 * sqrt(0.05 * 0.95 / 200) = 0.096)."""
    rng = np.random.default_rng(2024)
    matrix = _per_query_matrix(rng, 2000, np.zeros(9))
    matrix[[4, matrix.mean(axis=1).argmax()]] = matrix[[matrix.mean(axis=1).argmax(), 4]]
    assert matrix[4].mean() == matrix.mean(axis=1).max()  # truly best in the population
    decisions = _decisions(matrix, in_force_row=4, repetitions=200, seed=1, n_queries=150)
    share = np.mean([d.changed for d in decisions])
    assert share <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 200)


def test_a_real_gain_of_005_is_found_in_at_least_80_percent():
    """A grid point >= 0.05 P@5 better than the weights in force in the population (its
    neighbours less): found
    and adopted in >= 80% of 200 resamplings of 150 queries."""
    rng = np.random.default_rng(2025)
    gains = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.04, 0.065, 0.04, 0.0])
    matrix = _per_query_matrix(rng, 2000, gains)
    assert matrix[6].mean() - matrix[2].mean() >= 0.05  # after the clipping at 0 and 5 hits
    decisions = _decisions(matrix, in_force_row=2, repetitions=200, seed=2, n_queries=150)
    found = np.mean([d.changed and d.best[0] in (0.75, 0.8, 0.85) for d in decisions])
    assert found >= 0.80


def test_the_doctests_run():
    assert doctest.testmod(decision_module).failed == 0

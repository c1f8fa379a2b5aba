"""Staged judging peeks honestly: judges whose true kappa is at or below the floor rarely stop
judge 2 early, however many looks the plan has; judges well above it still stop early.

A seeded simulation of the stop rule (:func:`eval_harness.judges.staging.staged.stop_rule`) over
its planned looks, vectorised over 1,000 repetitions: 100 queries of 5 pairs, judge 1 calls
30% of the pairs relevant on average, with a query-level prevalence drawn from Beta(1.2, 2.8)
(queries differ, so pairs of one query are dependent, as the query bootstrap assumes), and
the two judges' joint labels set so that pooled kappa has a chosen true value. The plan is
the default-sized one: 20 queries first, 20 more per step (looks at 20, 40, 60, 80 queries
can stop judge 2 early; the fifth, all 100, skips nothing), floor 0.70, 95% intervals from
2,000 query-bootstrap resamples with the production seed. Every look's bound is the
production bound: :func:`test_the_simulated_bound_is_the_stop_rules_bound` checks it against
:func:`~eval_harness.judges.staging.staged.sample_agreement` on the same data.

Measured (seeded; ``pytest -s`` prints this table):

    true kappa  rule         early stops of 1,000 (95% Clopper-Pearson)  mean queries judge 2
    0.65        corrected       6  (0.3%..1.2%)                           99.6
    0.65        uncorrected    13  (0.8%..2.1%)                           99.1
    0.70        corrected      45  (3.5%..5.7%)                           97.2
    0.70        uncorrected    92  (7.7%..10.8%)                          94.4
    0.85        corrected     977  (96.8%..98.4%)                         37.7
    0.85        uncorrected   994  (98.8%..99.7%)                         30.8

The uncorrected rule (each look at the gate's 95%) stops early at the floor in 9.2% of runs;
alpha spent over the 4 looks brings that to 4.5%. Binomial slack: with 1,000 runs an observed
rate is known to about +-1.1 points (the Clopper-Pearson bounds above), so the test asserts
the observed share is at most 5% at the floor (and its upper bound at most 5% below it), and
that the uncorrected share's lower bound is above 5%. The corrected rate stays above the
2.5% the union bound promises for exact intervals: one look of the percentile bootstrap at 20
queries already errs more than its nominal tail (a property of the gate's interval, not of
the peeking; see the README). The cost, at true kappa 0.85: judge 2 judges 37.7 queries on
average instead of 30.8, and stops early in 97.7% of runs instead of 99.4%.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from eval_harness.judges.staging.staged import sample_agreement, sample_sizes, stop_rule
from eval_harness.settings import AgreementSettings
from eval_harness.settings.judges import StagedSettings

RUNS, QUERIES, PAIRS_PER_QUERY, PREVALENCE, CONCENTRATION = 1000, 100, 5, 0.3, 4.0
AGREEMENT = AgreementSettings()  # floor 0.70, 95%, 2,000 resamples
STAGED = StagedSettings(enabled=True, seed=0, first_queries=20, step_queries=20)
BOOTSTRAP_SEED = 0  # agreement_report's default, which the stop rule uses


def _query_tables(kappa: float, seed: int) -> np.ndarray:
    """counts[run, query, cell] (cells neither, second only, first only, both) of judges whose
    pooled kappa is ``kappa``. Within a query of prevalence p both judges call a pair relevant
    with probability p and agree beyond chance by k: P(both) = p^2 + k p (1 - p). Pooled over
    queries with p ~ Beta(c p0, c (1 - p0)), 1 - kappa = (1 - k) E[p(1 - p)] / (p0 (1 - p0))
    = (1 - k) c / (c + 1), so k = 1 - (1 - kappa) (c + 1) / c."""
    rng = np.random.default_rng(seed)
    within = 1.0 - (1.0 - kappa) * (CONCENTRATION + 1.0) / CONCENTRATION
    p = rng.beta(PREVALENCE * CONCENTRATION, (1 - PREVALENCE) * CONCENTRATION,
                 size=(RUNS, QUERIES, 1))
    spread = p * (1 - p)
    cells = np.concatenate([(1 - p) ** 2 + within * spread, (1 - within) * spread,
                            (1 - within) * spread, p ** 2 + within * spread], axis=-1)
    counts = np.zeros((RUNS, QUERIES, 4))
    upper = np.cumsum(cells, axis=-1)
    for _ in range(PAIRS_PER_QUERY):
        cell = np.minimum((rng.random((RUNS, QUERIES, 1)) > upper).sum(axis=-1), 3)
        counts += np.eye(4)[cell]
    return counts


def _pooled_kappa(counts: np.ndarray) -> np.ndarray:
    """Cohen's kappa of stacked 2x2 tables ``[..., 4]``; 1.0 where chance agreement is 1."""
    n = counts.sum(axis=-1)
    first = (counts[..., 2] + counts[..., 3]) / n
    second = (counts[..., 1] + counts[..., 3]) / n
    observed = (counts[..., 0] + counts[..., 3]) / n
    chance = first * second + (1 - first) * (1 - second)
    room = np.where(chance >= 1.0, 1.0, 1.0 - chance)
    return np.where(chance >= 1.0, 1.0, (observed - chance) / room)


def _lower_bounds(counts: np.ndarray, confidences: list[float]) -> np.ndarray:
    """lows[level, run]: each run's percentile-bootstrap lower bound of kappa over its
    queries, drawn as the production bootstrap draws them (one multinomial of queries per
    resample, seeded), for every level at once."""
    runs, n, _ = counts.shape
    times_drawn = np.random.default_rng(BOOTSTRAP_SEED).multinomial(
        n, np.full(n, 1.0 / n), size=AGREEMENT.bootstrap_resamples).astype(float)
    resampled = (times_drawn @ counts.transpose(1, 0, 2).reshape(n, -1)).reshape(-1, runs, 4)
    tails = [(1 - c) / 2 for c in confidences]
    return np.quantile(_pooled_kappa(resampled), tails, axis=0)


def _staged_runs(kappa: float, seed: int) -> dict[str, np.ndarray]:
    """For each rule, whether each run stopped judge 2 early and the queries it sampled."""
    counts = _query_tables(kappa, seed)
    rule = stop_rule(AGREEMENT, STAGED, QUERIES)
    sizes = list(sample_sizes(QUERIES, first=STAGED.first_queries, step=STAGED.step_queries))
    early = [s for s in sizes if s < QUERIES]
    assert len(early) == rule.looks == 4
    levels = {"corrected": rule.look_confidence, "uncorrected": AGREEMENT.confidence}
    results = {name: np.full(RUNS, QUERIES) for name in levels}
    for size in reversed(early):  # the earliest look that clears wins
        lows = _lower_bounds(counts[:, :size], list(levels.values()))  # the same resamples
        for name, low in zip(levels, lows):
            results[name][low >= rule.floor] = size
    return results


def _rate(stopped_at: np.ndarray) -> tuple[int, float, float]:
    """Early stops, and the 95% one-sided Clopper-Pearson bounds of their rate (low, high)."""
    stops = int((stopped_at < QUERIES).sum())
    interval = binomtest(stops, RUNS).proportion_ci(confidence_level=0.90, method="exact")
    return stops, interval.low, interval.high


@pytest.fixture(scope="module")
def simulated() -> dict[float, dict[str, np.ndarray]]:
    runs = {kappa: _staged_runs(kappa, seed) for seed, kappa in enumerate((0.65, 0.70, 0.85))}
    print("\ntrue kappa | rule | early stops of 1000 (95% CP bounds) | mean queries judge 2")
    for kappa, rules in runs.items():
        for name, stopped_at in rules.items():
            stops, low, high = _rate(stopped_at)
            print(f"{kappa:.2f} | {name} | {stops} ({low:.3f}..{high:.3f}) | "
                  f"{stopped_at.mean():.1f}")
    return runs


def test_judges_at_or_below_the_floor_stop_early_in_at_most_5_percent_of_runs(simulated):
    at_floor, _, _ = _rate(simulated[0.70]["corrected"])
    assert at_floor <= 0.05 * RUNS, f"{at_floor} of {RUNS} early stops at true kappa 0.70"
    # below the floor even the rate's one-sided 95% Clopper-Pearson upper bound is under 5%
    below, _, high = _rate(simulated[0.65]["corrected"])
    assert high <= 0.05, f"{below} of {RUNS} early stops at true kappa 0.65"


def test_without_the_correction_judges_at_the_floor_stop_early_more_than_5_percent(simulated):
    stops, low, _ = _rate(simulated[0.70]["uncorrected"])
    assert low > 0.05, f"only {stops} of {RUNS} uncorrected early stops"
    assert stops > 2 * _rate(simulated[0.70]["corrected"])[0]


def test_judges_well_above_the_floor_still_stop_early(simulated):
    corrected, uncorrected = simulated[0.85]["corrected"], simulated[0.85]["uncorrected"]
    assert (corrected < QUERIES).mean() >= 0.95
    # what the correction costs: judge 2 judges a few more queries on average, far from all
    assert corrected.mean() >= uncorrected.mean()
    assert corrected.mean() <= 0.5 * QUERIES


@pytest.mark.unit
def test_the_simulated_bound_is_the_stop_rules_bound():
    """The simulation's bootstrap is the production one: on a few runs, every look's lower
    bound equals what the staged run computes (sample_agreement at the rule's level)."""
    counts = _query_tables(0.70, seed=11)[:3]
    rule = stop_rule(AGREEMENT, STAGED, QUERIES)
    for size in (20, 40, 100):
        level = rule.confidence_at(size, QUERIES)
        simulated = _lower_bounds(counts[:, :size], [level])[0]
        for run in range(3):
            scores1, scores2, query_ids = _pairs(counts[run, :size])
            step = sample_agreement(scores1, scores2, query_ids, AGREEMENT, size,
                                    confidence=level)
            assert step.confidence == level and step.queries == size
            assert step.lower_bound == pytest.approx(simulated[run], abs=1e-12)
    assert rule.confidence_at(100, QUERIES) == AGREEMENT.confidence  # the last look: the gate's
    assert rule.confidence_at(80, QUERIES) == pytest.approx(1 - 0.05 / 4)


def _pairs(counts: np.ndarray) -> tuple[list[float], list[float], list[int]]:
    """Scores of both judges (1.0 relevant, 0.0 not) and query ids from per-query cells."""
    labels = {0: (0.0, 0.0), 1: (0.0, 1.0), 2: (1.0, 0.0), 3: (1.0, 1.0)}
    scores1, scores2, query_ids = [], [], []
    for query, cells in enumerate(counts):
        for cell, count in enumerate(cells.astype(int)):
            for _ in range(count):
                scores1.append(labels[cell][0])
                scores2.append(labels[cell][1])
                query_ids.append(query)
    return scores1, scores2, query_ids

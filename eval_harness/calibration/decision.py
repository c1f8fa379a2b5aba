"""The calibration decision: whether a calibration changes a dataset's weights, against the
weights in force, and what it publishes (:class:`CalibrationOutcome`).

Calibration searches a grid of weights on the same queries it then scores them on, so the
highest mean P@5 on the grid beats the weights in force by chance alone, and more so the
finer the grid. The weights change only on evidence that survives that search:

* every grid point ``g`` is compared with the weights in force (the dataset's
  ``datasets.<name>.hybrid_search``, else the global ``hybrid_search``) on the per-query
  differences ``d[q, g] = P@5_g(q) - P@5_in_force(q)``;
* the statistic is the largest mean difference over the grid, ``T = max_g mean_q d[q, g]``:
  that is the gain of the best grid point (highest mean P@5), the one a change would adopt;
* its adjusted p-value is a **max-statistic paired permutation test** (Westfall & Young 1993,
  *Resampling-Based Multiple Testing*, the single-step max-T procedure): flip the sign of each
  query's whole row of differences at random, recompute ``T*`` = the max over the grid, and
  ``p = share of sign patterns with T* >= T``. Flipping a query's row at once keeps the
  correlation between neighbouring grid points, so the adjustment costs only as much as the
  grid's effective number of distinct points (a Bonferroni over 101 near-identical weights
  would be far too strict). All queries serve both to pick the point and to test it (no
  query is spent on a held-out half), and the test is exact under the null that the
  differences' signs are exchangeable (no grid point differs from the weights in force in
  distribution): all ``2**n`` patterns are enumerated when there are at most
  ``permutations`` of them, else ``permutations`` are drawn, seeded, and
  ``p = (1 + hits) / (1 + permutations)`` (still valid; Phipson & Smyth 2010).

Raw mean differences, not studentised ones: all grid points share the P@5 scale, the
statistic's argmax is then exactly the best grid point, and a grid point with the same
ranking as the weights in force has differences of variance 0, on which a studentised
statistic is undefined.

The weights change only when ``adjusted p <= alpha`` and the gain is at least ``min_gain``
and positive (``calibration.decision`` in config.yaml). The interval on the gain is a paired
percentile bootstrap over queries (``1 - alpha`` level, seeded): it describes the gain of the
point chosen, not adjusted for having chosen it (the adjusted p carries the search).

**On judge labels** the per-query P@5 carries the judges' bias, and a bias can differ between
two weights (a judge over-rating documents that share the query's words favours a
keyword-heavy weight), so the permutation test on judge labels can be certain of a gain that
exists only in the judges. With a human sample that corrects the gain
(:func:`eval_harness.calibration.ppi_gain.judged_gain`: one prediction-powered inference
over the per-query differences best - in force, ``1 - alpha`` interval),
:func:`with_judged_gain` changes the weights only when **both** hold:

* the permutation test's ``adjusted p <= alpha`` (on judge labels): it guards the *search*.
  The PPI interval is about the one point compared and knows nothing of the grid it was
  picked from; alone, picking the best of 100 points and then testing it would overstate it;
* the PPI interval's lower bound ``> max(0, min_gain)``: it guards the *bias*. The
  permutation test is exact for the judges' P@5 but says nothing about whether the judges'
  gain is the people's; the PPI estimate is unbiased for the people's gain whatever the
  judges' bias, so a gain that lives only in the judges' errors fails here.

Each guards a different error, and neither covers the other's, so the rule is their
intersection: conservative (a change must pass two level-``alpha`` tests, so its error rate
is at most ``alpha`` under either failure mode), at the cost of some power. The decision
sentence then reports the corrected gain and its interval. Without a usable human sample
(none, or fewer than two sampled queries fully labelled at both weights) the decision rests
on the permutation test alone and says that the judges' bias is uncorrected.

This is the one test of "is it better?": the uplift over the default weight, its bootstrap
interval and randomization p-value (:func:`eval_harness.metrics.calibration.
uplift_over_default`) and the cross-validated P@5 are printed beside it and decide nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from eval_harness.calibration.verdict import VerdictFigure
from eval_harness.metrics.calibration import paired_bootstrap_interval

TIE_TOLERANCE = 1e-12  # a permuted maximum this close to the observed one counts as reaching it
SIGN_BUDGET = 2_000_000  # sign entries per chunk: ~16 MB of float64, reused
JUDGES_UNCORRECTED = "judge labels: the judges' bias is uncorrected"


@dataclass(frozen=True)
class WeightDecision:
    """A calibration's decision on one dataset's weights, with its evidence."""

    changed: bool
    in_force: tuple[float, float]  # (semantic, keyword) before the decision
    best: tuple[float, float]      # the grid point with the highest mean P@5
    gain: float                    # mean P@5 of best minus that of the weights in force
    low: float                     # paired bootstrap interval of the gain, level 1 - alpha
    high: float
    adjusted_p: float              # max-statistic permutation test over the grid
    alpha: float
    min_gain: float
    permutations: int              # sign patterns used (all of them when enumerated)
    label_source: str = "human"
    note: str | None = None        # e.g. judge labels without a human sample
    # judge labels with a human sample: the PPI-corrected gain best - in force, its 1 - alpha
    # interval and the human-labelled queries it rests on (:func:`with_judged_gain`)
    ppi_gain: float | None = None
    ppi_low: float | None = None
    ppi_high: float | None = None
    n_human: int | None = None

    @property
    def corrected(self) -> bool:
        """Whether the decision rests on the PPI-corrected gain too (judge labels)."""
        return self.ppi_gain is not None

    @property
    def decision(self) -> str:
        """``changed`` or ``kept``: the ``calibrated_weights`` column."""
        return "changed" if self.changed else "kept"

    @property
    def weights(self) -> tuple[float, float]:
        """The weights in force after the decision."""
        return self.best if self.changed else self.in_force

    @property
    def sentence(self) -> str:
        """The decision and its evidence in one line."""
        if self.corrected:
            evidence = (f"gains {self.ppi_gain:+.4f} [{self.ppi_low:+.4f}, {self.ppi_high:+.4f}]"
                        f" after correcting the judges with {self.n_human} human-labelled "
                        f"queries (PPI; judges alone {self.gain:+.4f}), adjusted p = "
                        f"{_p_label(self.adjusted_p)}")
        else:
            evidence = (f"gains {self.gain:+.4f} [{self.low:+.4f}, {self.high:+.4f}], "
                        f"adjusted p = {_p_label(self.adjusted_p)}")
        if self.changed:
            text = f"changed {_pair(self.in_force)} -> {_pair(self.best)}: {evidence}"
        elif _same_pair(self.best, self.in_force):  # nothing on the grid beats them
            text = (f"kept {_pair(self.in_force)}: no grid point scores higher (adjusted p = "
                    f"{_p_label(self.adjusted_p)})")
        else:
            text = f"kept {_pair(self.in_force)}: best grid point {_label(self.best[0])} {evidence}"
            if self.corrected and self._search_passes() and not self._bias_passes():
                text += (f" (the corrected interval does not clear "
                         f"{max(0.0, self.min_gain):g}: the judges' gain is not the people's)")
            elif self.gain >= 0 and self.adjusted_p <= self.alpha and self.gain < self.min_gain:
                text += f" (below min_gain {self.min_gain:g})"
        return text + (f"; {self.note}" if self.note else "")

    def _search_passes(self) -> bool:
        """The judges' (or people's) gain survives the search over the grid."""
        return bool(self.adjusted_p <= self.alpha and self.gain >= self.min_gain
                    and self.gain > TIE_TOLERANCE)

    def _bias_passes(self) -> bool:
        """The PPI-corrected gain's lower bound clears ``max(0, min_gain)``."""
        return self.ppi_low is not None and self.ppi_low > max(0.0, self.min_gain)

    def to_dict(self) -> dict:
        """JSON-safe: plain floats and strings."""
        return {"decision": self.decision, "changed": self.changed,
                "in_force": {"semantic": self.in_force[0], "keyword": self.in_force[1]},
                "best": {"semantic": self.best[0], "keyword": self.best[1]},
                "weights": {"semantic": self.weights[0], "keyword": self.weights[1]},
                "gain": self.gain, "ci_low": self.low, "ci_high": self.high,
                "ci_level": 1.0 - self.alpha, "adjusted_p": self.adjusted_p,
                "alpha": self.alpha, "min_gain": self.min_gain,
                "permutations": self.permutations, "label_source": self.label_source,
                "note": self.note, "sentence": self.sentence,
                "test": "max-statistic paired sign-flip permutation test over the grid "
                        "(Westfall & Young 1993)",
                "ppi_gain": self.ppi_gain, "ppi_ci_low": self.ppi_low,
                "ppi_ci_high": self.ppi_high, "n_human": self.n_human,
                "rule": ("adjusted p <= alpha and the PPI interval's lower bound > "
                         "max(0, min_gain)" if self.corrected
                         else "adjusted p <= alpha and gain >= min_gain")}


def with_judged_gain(decision: WeightDecision, *, estimate: float, low: float, high: float,
                     n_human: int, note: str | None = None) -> WeightDecision:
    """``decision`` (on judge labels) combined with the PPI-corrected gain of its best grid
    point over the weights in force (module docstring): changed only when the permutation
    test passes and the corrected interval's lower bound exceeds ``max(0, min_gain)``.

    >>> judges = WeightDecision(changed=True, in_force=(0.7, 0.3), best=(0.2, 0.8),
    ...     gain=0.2, low=0.15, high=0.25, adjusted_p=0.001, alpha=0.05, min_gain=0.0,
    ...     permutations=10_000, label_source="judges")
    >>> with_judged_gain(judges, estimate=-0.1, low=-0.18, high=-0.02, n_human=25).changed
    False
    >>> with_judged_gain(judges, estimate=0.1, low=0.02, high=0.18, n_human=25).changed
    True
    """
    corrected = dataclasses.replace(decision, ppi_gain=float(estimate), ppi_low=float(low),
                                    ppi_high=float(high), n_human=int(n_human), note=note)
    changed = corrected._search_passes() and corrected._bias_passes()
    return dataclasses.replace(corrected, changed=bool(changed))


def max_statistic_p_value(differences: np.ndarray, *, permutations: int = 10_000,
                          seed: int = 0) -> tuple[float, int]:
    """Adjusted p of the largest column mean of ``differences`` (queries x grid points), and
    the number of sign patterns it rests on (module docstring).

    Rows that are 0 at every grid point change no permuted mean and are left out; with at
    most ``permutations`` sign patterns of the rest, all are enumerated and p is exact.

    >>> max_statistic_p_value(np.array([[0.2, 0.0], [0.2, 0.2]]))   # 1 of 4 patterns reaches 0.2
    (0.25, 4)
    >>> max_statistic_p_value(np.zeros((3, 2)))
    (1.0, 1)
    """
    differences = np.asarray(differences, dtype=np.float64)
    if differences.ndim != 2 or differences.size == 0:
        raise ValueError("the differences must be a non-empty queries x grid matrix.")
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}.")
    observed = differences.mean(axis=0).max()
    n_queries = differences.shape[0]
    moving = differences[np.any(differences != 0.0, axis=1)]
    if moving.shape[0] == 0:
        return 1.0, 1
    if moving.shape[0] <= 30 and 2 ** moving.shape[0] <= permutations:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=moving.shape[0])))
        hits = _count_reaching(signs, moving, observed, n_queries)
        return hits / signs.shape[0], signs.shape[0]
    rng = np.random.default_rng(seed)
    n_moving = moving.shape[0]
    column_sums = moving.sum(axis=0)
    chunk = max(1, SIGN_BUDGET // n_moving)
    hits = 0
    for start in range(0, permutations, chunk):
        size = min(chunk, permutations - start)
        # one random bit per query: bit 1 flips its row; sum of s_q * d_q = total - 2 * flipped
        flips = np.unpackbits(np.frombuffer(rng.bytes(size * ((n_moving + 7) // 8)),
                                            dtype=np.uint8).reshape(size, -1),
                              axis=1, count=n_moving).astype(np.float64)
        maxima = (column_sums - 2.0 * (flips @ moving)).max(axis=1) / n_queries
        hits += int(np.count_nonzero(maxima >= observed - TIE_TOLERANCE))
    return (1 + hits) / (1 + permutations), permutations


def _count_reaching(signs: np.ndarray, moving: np.ndarray, observed: float,
                    n_queries: int) -> int:
    """How many sign patterns (rows of ``signs``) give a grid maximum >= ``observed``."""
    maxima = (signs @ moving).max(axis=1) / n_queries
    return int(np.count_nonzero(maxima >= observed - TIE_TOLERANCE))


def decide_weights(per_query_p_at_5: np.ndarray, grid: list[tuple[float, float]],
                   in_force: tuple[float, float], in_force_p_at_5: np.ndarray, *,
                   best_index: int, alpha: float = 0.05, min_gain: float = 0.0,
                   permutations: int = 10_000, bootstrap_resamples: int = 10_000,
                   seed: int = 0, label_source: str = "human",
                   note: str | None = None) -> WeightDecision:
    """The decision on the weights (module docstring).

    ``per_query_p_at_5`` is grid points x queries (the sweep's matrix), ``grid`` the
    (semantic, keyword) pair of each row, ``in_force_p_at_5`` the per-query P@5 at the
    weights in force and ``best_index`` the row of the best grid point (highest mean P@5,
    ties to the weights in force). Reruns with the same ``seed`` give the same decision.
    """
    per_query = np.asarray(per_query_p_at_5, dtype=np.float64)
    baseline = np.asarray(in_force_p_at_5, dtype=np.float64)
    if per_query.ndim != 2 or per_query.shape[0] != len(grid) \
            or per_query.shape[1] != baseline.size or baseline.size == 0:
        raise ValueError("decide_weights needs one per-query P@5 row per grid point and the "
                         "same queries at the weights in force.")
    differences = (per_query - baseline).T  # queries x grid points
    best_row = per_query[best_index]
    gain = float(best_row.mean() - baseline.mean())
    adjusted_p, used = max_statistic_p_value(differences, permutations=permutations, seed=seed)
    if abs(gain) <= TIE_TOLERANCE and not np.any(best_row != baseline):
        low = high = 0.0  # the best point ranks every query as the weights in force do
    else:
        low, high = paired_bootstrap_interval(best_row, baseline, confidence=1.0 - alpha,
                                              n_resamples=bootstrap_resamples, seed=seed)
    changed = bool(adjusted_p <= alpha and gain >= min_gain and gain > TIE_TOLERANCE)
    best = (float(grid[best_index][0]), float(grid[best_index][1]))
    return WeightDecision(changed=changed, in_force=(float(in_force[0]), float(in_force[1])),
                          best=best, gain=gain, low=float(low), high=float(high),
                          adjusted_p=float(adjusted_p), alpha=float(alpha),
                          min_gain=float(min_gain), permutations=int(used),
                          label_source=label_source, note=note)


@dataclass(frozen=True)
class CalibrationOutcome:
    """What one calibration of a dataset decided, as publishing writes it
    (:func:`eval_harness.calibration.workflow.publish_calibration`): the best grid point, the
    decision on the weights and the figure the verdict is given on. The CLI takes it from the
    calibration (:attr:`eval_harness.calibration.result.CalibrationResult.outcome`), Dagster's
    publishing asset from the grid the calibration stored
    (:func:`eval_harness.calibration.history.outcome_from_grid`)."""

    dataset: str
    best_semantic: float           # the best grid point's semantic weight
    decision: WeightDecision | None  # None: a grid stored before the decision rule
    figure: VerdictFigure
    label_source: str              # of the figure: human | judges | judges+ppi
    calibrated_at: datetime


def _label(weight: float) -> str:
    return f"{weight:.10f}".rstrip("0").rstrip(".") if weight % 1 else f"{weight:.1f}"


def _pair(weights: tuple[float, float]) -> str:
    return f"{_label(weights[0])} / {_label(weights[1])}"


def _p_label(p: float) -> str:
    return f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def _same_pair(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return math.isclose(a[0], b[0], abs_tol=1e-9) and math.isclose(a[1], b[1], abs_tol=1e-9)

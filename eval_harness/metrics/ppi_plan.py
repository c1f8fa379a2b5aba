"""How many human-labelled queries a PPI interval needs: the plan behind ``review sample --plan``.

The PPI interval of :func:`eval_harness.metrics.ppi.prediction_powered_mean` has the standard
error ``se = sqrt(R / n + I / N)``, with ``R`` the per-query variance of the rectifier
``y - lam * yhat`` on the n human-labelled queries and ``I`` the per-query variance of
``lam * yhat`` on the N judged queries. Both are properties of the judges' agreement with
people and of the queries, not of n; so, holding R, I, lam and N at their current estimates
(people label more of the queries the judges already judged), the n that gives a wanted
standard error ``s`` solves ``R / n + I / N = s**2``::

    n = R / (s**2 - I / N)

A wanted interval width W (two-sided, level 1 - alpha) is ``s = W / (2 z)``,
``z = norm.ppf(1 - alpha / 2)``. A gain G that a two-sided level-alpha test of "no gain"
should detect with probability ``power`` is ``s = |G| / (z + norm.ppf(power))`` (the normal
approximation of a two-sided z-test's power, ignoring the far tail; ppi-python's
``ppi_mean_power`` answers a related question, splitting a budget between n and N when both
can grow; here N, the judged queries, is fixed). For a gain, y and yhat
are per-query differences of P@5 between two weights: the same formula applies to them.

The answer is a plan, not a promise: R and lam are re-estimated on the larger sample, and a
first sample that happens to be easy or hard moves it. Pure numpy and scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from numpy.typing import ArrayLike
from scipy.stats import norm

from eval_harness.metrics.ppi import ppi_terms


@dataclass(frozen=True)
class LabelPlan:
    """The current PPI interval and the human-labelled queries a wanted one needs.

    ``needed`` is the total number of human-labelled queries (None: labelling cannot get
    there, see ``reason``); ``more`` how many beyond the current ``n_human``.
    """

    n_human: int
    n_judged: int
    lam: float
    standard_error: float          # now
    width: float                   # now, two-sided at level 1 - alpha
    target_standard_error: float
    needed: int | None
    reason: str | None             # why ``needed`` is None: "judged_term" or "too_few_judged"
    rectifier_variance: float      # R
    imputed_variance: float        # I

    @property
    def more(self) -> int | None:
        return None if self.needed is None else max(self.needed - self.n_human, 0)

    @property
    def width_with_all_labelled(self) -> float:
        """The width (same level) if every judged query were human-labelled: the best a plan
        holding R, I and N can do (``width * se_all / se``)."""
        if self.standard_error == 0.0:
            return 0.0
        all_labelled = math.sqrt((self.rectifier_variance + self.imputed_variance) / self.n_judged)
        return self.width * all_labelled / self.standard_error


def human_labels_for_standard_error(*, rectifier_variance: float, imputed_variance: float,
                                    n_judged: int, standard_error: float) -> int | None:
    """The smallest number n of human-labelled queries whose PPI standard error is at most
    ``standard_error``: ``n = ceil(R / (s**2 - I / N))`` (module docstring), at least 2 (PPI
    estimates a variance from the labelled queries).

    Returns ``None`` when labelling cannot reach ``s``: the judged term alone is at least
    ``s**2`` (``I / N >= s**2``: judging more queries, not labelling, narrows it), or n would
    exceed N (there are not that many judged queries). Raises ``ValueError`` for a negative
    variance, N < 1, or ``s <= 0``.

    Examples
    --------
    R = 0.04 and no judged term (a constant judge): s = 0.01 needs 0.04 / 0.0001 = 400.

    >>> human_labels_for_standard_error(rectifier_variance=0.04, imputed_variance=0.0,
    ...                                 n_judged=1000, standard_error=0.01)
    400

    With I = 0.05 over N = 1000 queries, I / N = 0.00005 takes half of s**2 = 0.0001, so the
    labels must bring R / n down to the other half: n = 0.04 / 0.00005 = 800.

    >>> human_labels_for_standard_error(rectifier_variance=0.04, imputed_variance=0.05,
    ...                                 n_judged=1000, standard_error=0.01)
    800

    With I = 0.1, I / N = s**2 already: no number of labels reaches it.

    >>> print(human_labels_for_standard_error(rectifier_variance=0.04, imputed_variance=0.1,
    ...                                       n_judged=1000, standard_error=0.01))
    None
    """
    if rectifier_variance < 0 or imputed_variance < 0 or not (
            math.isfinite(rectifier_variance) and math.isfinite(imputed_variance)):
        raise ValueError("human_labels_for_standard_error: the variances must be finite and "
                         f"non-negative, got {rectifier_variance!r} and {imputed_variance!r}.")
    if n_judged < 1:
        raise ValueError(f"human_labels_for_standard_error: n_judged must be at least 1, "
                         f"got {n_judged}.")
    if not standard_error > 0 or not math.isfinite(standard_error):
        raise ValueError("human_labels_for_standard_error: standard_error must be a positive "
                         f"number, got {standard_error!r}.")
    room = standard_error ** 2 - imputed_variance / n_judged
    if room <= 0.0:
        return None
    # 1e-9: 0.04 / 0.0001 computed as 400.00000000000006 is still 400
    needed = max(math.ceil(rectifier_variance / room - 1e-9), 2)
    return None if needed > n_judged else needed


def plan_for_width(*, y_labeled: ArrayLike, yhat_labeled: ArrayLike, yhat_unlabeled: ArrayLike,
                   target_width: float, alpha: float = 0.05,
                   lam: float | None = None) -> LabelPlan:
    """The human-labelled queries the PPI interval (level ``1 - alpha``) needs to be at most
    ``target_width`` wide, from the current sample. Inputs and ``lam`` as for
    :func:`~eval_harness.metrics.ppi.prediction_powered_mean` (``lam=None``: PPI++'s tuned
    weight, estimated now and held fixed); ``s = target_width / (2 z)``.

    Examples
    --------
    A constant judge: I = 0 and R = var(y) = 0.25 on the four labelled queries. The width
    is 2 * 1.96 * sqrt(0.25 / 4) = 0.98; a width of 0.2 needs s = 0.2 / 3.92 = 0.05102, so
    n = ceil(0.25 / 0.05102**2) = ceil(96.04) = 97, 93 more.

    >>> plan = plan_for_width(y_labeled=[1, 0, 1, 0], yhat_labeled=[0.5] * 4,
    ...                       yhat_unlabeled=[0.5] * 200, target_width=0.2, lam=1.0)
    >>> round(plan.width, 4), plan.needed, plan.more
    (0.98, 97, 93)
    """
    _check_alpha(alpha, "plan_for_width")
    if not target_width > 0 or not math.isfinite(target_width):
        raise ValueError(f"plan_for_width: target_width must be a positive number, "
                         f"got {target_width!r}.")
    z = float(norm.ppf(1.0 - alpha / 2.0))
    return _plan(y_labeled, yhat_labeled, yhat_unlabeled, lam, z, target_width / (2.0 * z))


def plan_for_power(*, y_labeled: ArrayLike, yhat_labeled: ArrayLike, yhat_unlabeled: ArrayLike,
                   gain: float, alpha: float = 0.05, power: float = 0.8,
                   lam: float | None = None) -> LabelPlan:
    """The human-labelled queries a two-sided level-``alpha`` PPI test of "no gain" needs to
    detect a true gain ``gain`` with probability ``power``: ``s = |gain| / (z_(1 - alpha/2) +
    z_power)`` (module docstring). ``y`` and ``yhat`` are per-query differences (human and
    judge P@5 at one weight minus at the other); ``width`` is the interval's current width at
    ``alpha``.

    Examples
    --------
    A constant judge difference: I = 0, R = var(d) = 0.01 on the labelled queries (d = -0.1,
    +0.1). A gain of 0.05 at alpha 0.05 with power 0.8 needs s = 0.05 / (1.96 + 0.8416) =
    0.017846, so n = ceil(0.01 / 0.017846**2) = ceil(31.40) = 32.

    >>> plan = plan_for_power(y_labeled=[-0.1, 0.1] * 5, yhat_labeled=[0.0] * 10,
    ...                       yhat_unlabeled=[0.0] * 500, gain=0.05, lam=1.0)
    >>> plan.needed, plan.more
    (32, 22)
    """
    _check_alpha(alpha, "plan_for_power")
    if not 0.0 < power < 1.0:
        raise ValueError(f"plan_for_power: power must lie in (0, 1), got {power!r}.")
    if not gain != 0 or not math.isfinite(gain):
        raise ValueError(f"plan_for_power: gain must be a non-zero number, got {gain!r}.")
    z = float(norm.ppf(1.0 - alpha / 2.0))
    return _plan(y_labeled, yhat_labeled, yhat_unlabeled, lam, z,
                 abs(gain) / (z + float(norm.ppf(power))))


def _plan(y_labeled, yhat_labeled, yhat_unlabeled, lam, z: float, target: float) -> LabelPlan:
    terms = ppi_terms(y_labeled, yhat_labeled, yhat_unlabeled, lam)
    needed = human_labels_for_standard_error(
        rectifier_variance=terms.rectifier_variance, imputed_variance=terms.imputed_variance,
        n_judged=terms.n_judged, standard_error=target)
    reason = None
    if needed is None:
        floor = 2.0 * z * math.sqrt(terms.imputed_variance / terms.n_judged)
        if floor >= 2.0 * z * target:
            reason = "judged_term"  # the judges' own spread over N queries already fills it
        else:
            reason = "too_few_judged"  # it would take more labels than there are judged queries
    return LabelPlan(n_human=terms.n_human, n_judged=terms.n_judged, lam=terms.lam,
                     standard_error=terms.standard_error, width=2.0 * z * terms.standard_error,
                     target_standard_error=target, needed=needed, reason=reason,
                     rectifier_variance=terms.rectifier_variance,
                     imputed_variance=terms.imputed_variance)


def _check_alpha(alpha: float, name: str) -> None:
    if not 0.0 < alpha < 1.0:  # also rejects NaN
        raise ValueError(f"{name}: alpha must lie in (0, 1), got {alpha!r}.")

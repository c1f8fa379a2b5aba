"""Kappa's lower bound read more than once: the alpha spent over looks planned in advance.

Staged dual judging reads the lower bound of kappa's interval after every step of a growing
sample and stops at the first look where it reaches the floor. Each look is a one-sided test
of "kappa is below the floor" at level ``alpha = (1 - confidence) / 2`` (the lower end of a
two-sided interval). Read K times, that level is not kept: each look is one more chance
of a lucky bound, so judges whose true kappa sits at the floor clear it at *some* look more
often than ``alpha`` (with four looks at 20, 40, 60 and 80 of 100 queries, 9.2% of 1,000
simulated runs instead of 2.5%: tests/judges/staging/test_staged_peeking.py).

The correction is Bonferroni's over the K looks, which are known before the first one
(staged judging's sample sizes are fixed by ``first_queries`` and ``step_queries``): each
look reads the lower end of a two-sided interval at ``1 - (1 - confidence) / K``, a
one-sided level of ``alpha / K``, and by the union bound the chance that any of the K bounds
lies above the true kappa is at most ``K * alpha / K = alpha``, however the looks are
correlated. This is alpha spending with a flat spending function (``alpha * k / K`` spent by
look k; C. Jennison and B. W. Turnbull, *Group Sequential Methods with Applications to
Clinical Trials*, 2000, ch. 7; K. K. G. Lan and D. L. DeMets, *Biometrika* 70, 1983) with the
union bound in place of the joint law of the looks.

Why not Pocock's or O'Brien-Fleming's exact boundaries: they assume the successive estimates
are jointly normal with correlation ``sqrt(n_j / n_k)``, which kappa's percentile bootstrap
over queries does not provide; the union bound needs only each look's own interval. It costs
little at a few looks: for K = 4 and one-sided 2.5%, Pocock's exact per-look critical value
is 2.361 (Jennison & Turnbull, Table 2.1) against Bonferroni's z(0.00625) = 2.498, and the
uncorrected 1.960. Why not a confidence sequence (S. R. Howard, A. Ramdas, J. McAuliffe and
J. Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", *Annals of
Statistics* 49, 2021): those hold at every sample size, including sizes never looked at,
and are built for means of bounded increments; kappa is a ratio of such means over clustered
pairs, and a bound valid at every step would be wider than the few planned looks need.

Pure numbers: no store, no settings.
"""

from __future__ import annotations


def spent_confidence(confidence: float, *, looks: int) -> float:
    """The two-sided confidence of each of ``looks`` planned looks whose lower bounds,
    together, keep the one-sided level of one look at ``confidence``:
    ``1 - (1 - confidence) / looks`` (Bonferroni; module docstring).

    Each look's lower bound is then a one-sided ``1 - (1 - confidence) / (2 * looks)``
    bound, and the chance that at least one of them lies above the true value is at most
    ``(1 - confidence) / 2``, as for a single look at ``confidence``.

    Degenerate input: ``looks`` of 1 returns ``confidence`` unchanged (nothing to correct);
    ``looks`` below 1 or ``confidence`` outside (0, 1) raise ``ValueError``.

    Examples
    --------
    A 95% interval read at 4 planned looks: the 5% is split into 4 parts of 1.25%, so each
    look reads a 98.75% interval, whose lower end is a one-sided 0.625% bound (4 x 0.625% =
    2.5%, the one-sided level of the single 95% interval).

    >>> spent_confidence(0.95, looks=4)
    0.9875
    >>> spent_confidence(0.9, looks=1)
    0.9
    >>> spent_confidence(0.95, looks=0)
    Traceback (most recent call last):
    ...
    ValueError: looks must be at least 1, got 0.
    """
    if looks < 1:
        raise ValueError(f"looks must be at least 1, got {looks}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}.")
    return 1.0 - (1.0 - confidence) / looks

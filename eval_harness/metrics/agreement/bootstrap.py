"""Interval for kappa from a cluster bootstrap over queries.

The documents of one query are judged against the same query text, so they are not
independent: resampling single pairs would make the interval too narrow.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from eval_harness.metrics.agreement.inputs import (AgreementInputError, label_array,
                                                   index_queries)
from eval_harness.metrics.agreement.kappa import cell_codes, kappa_values, counts_per_query
from eval_harness.metrics.agreement.results import BootstrapInterval

DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0


def kappa_bootstrap_interval(labels1: Sequence[int] | np.ndarray,
                             labels2: Sequence[int] | np.ndarray, *,
                             query_ids: Sequence[Hashable],
                             n_resamples: int = DEFAULT_RESAMPLES,
                             confidence: float = DEFAULT_CONFIDENCE,
                             seed: int = DEFAULT_SEED) -> BootstrapInterval:
    """Percentile interval for Cohen's kappa from a cluster bootstrap over queries.

    Each resample draws as many queries as there are, with replacement, keeps all pairs of
    every drawn query, and recomputes pooled kappa (with the degenerate-as-1.0 convention
    of :func:`cohen_kappa`, so every resample has a value). The interval is the
    ``(1 - confidence)/2`` and ``(1 + confidence)/2`` quantiles. Resampling queries rather
    than pairs respects that documents of one query are judged together.

    References: A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*,
    section 3.8 (hierarchical data), 1997; B. Efron and R. Tibshirani, *An Introduction to
    the Bootstrap*, chapter 13 (percentile interval), 1993.

    Degenerate input: empty input raises :class:`AgreementInputError`; with fewer than two
    queries the interval is ``low=high=None`` with a ``reason``.

    Examples
    --------
    The judges agree on every pair of three queries, so every resample has kappa 1:

    >>> same = [1, 0, 1, 0, 1, 0]
    >>> interval = kappa_bootstrap_interval(same, same, query_ids=["a", "a", "b", "b", "c", "c"])
    >>> interval.low, interval.high, interval.n_queries
    (1.0, 1.0, 3)

    They disagree on both pairs of query c: pooled kappa is (4/6 - 1/2) / (1 - 1/2) = 1/3
    (each judge says 1 on half the pairs, so P_e = 1/2). A resample drawing c three times
    has kappa -1 (probability 1/27 = 3.7% > 2.5%), one without c has kappa 1 (probability
    8/27), so with three queries the 95% interval spans everything; the same seed draws the
    same resamples.

    >>> first, second = [1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 0, 1]
    >>> queries = ["a", "a", "b", "b", "c", "c"]
    >>> interval = kappa_bootstrap_interval(first, second, query_ids=queries, seed=7)
    >>> interval.low, interval.high
    (-1.0, 1.0)
    >>> interval == kappa_bootstrap_interval(first, second, query_ids=queries, seed=7)
    True
    >>> kappa_bootstrap_interval([1, 0], [1, 0], query_ids=["a", "a"]).reason
    'a bootstrap over queries needs at least 2 queries with scored pairs'
    """
    cells = cell_codes(label_array(labels1, "labels1"), label_array(labels2, "labels2"))
    query_index, _ = index_queries(query_ids, cells.size)
    per_query = counts_per_query(cells, query_index)
    return bootstrap_kappa(per_query, n_resamples=n_resamples, confidence=confidence, seed=seed)


def bootstrap_kappa(per_query_counts: np.ndarray, *, n_resamples: int, confidence: float,
                     seed: int) -> BootstrapInterval:
    """Cluster bootstrap of pooled kappa; ``per_query_counts`` has one row per query."""
    if n_resamples < 1:
        raise AgreementInputError(f"n_resamples must be at least 1, got {n_resamples}.")
    if not 0.0 < confidence < 1.0:
        raise AgreementInputError(f"confidence must be between 0 and 1, got {confidence}.")
    n_queries = int(per_query_counts.shape[0])
    if n_queries < 2:
        return BootstrapInterval(None, None, confidence, n_resamples, n_queries, seed,
                                 "a bootstrap over queries needs at least 2 queries with "
                                 "scored pairs")
    rng = np.random.default_rng(seed)
    # times_drawn[b, q]: how often query q is in resample b (sampling with replacement).
    times_drawn = rng.multinomial(n_queries, np.full(n_queries, 1.0 / n_queries),
                                  size=n_resamples)
    resampled_counts = times_drawn @ per_query_counts
    kappas = kappa_values(resampled_counts)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(kappas, [tail, 1.0 - tail])
    return BootstrapInterval(float(low), float(high), confidence, n_resamples, n_queries, seed)

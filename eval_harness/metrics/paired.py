"""Paired comparison of two runs over the same units (placeholder until the reviewed module)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class PairedComparison:
    difference: float
    interval: tuple[float, float]
    p_value: float
    n: int


def paired_comparison(base: Sequence[float], candidate: Sequence[float], *,
                      confidence: float = 0.95, resamples: int = 10_000,
                      seed: int = 0) -> PairedComparison:
    """>>> paired_comparison([0.0, 0.0], [0.0, 0.0]).p_value
    1.0
    """
    d = np.asarray(candidate, float) - np.asarray(base, float)
    n = len(d)
    observed = float(d.mean())
    if not d.any():
        return PairedComparison(0.0, (0.0, 0.0), 1.0, n)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
    signs = rng.choice([-1.0, 1.0], size=(resamples, n))
    flipped = np.abs((signs * d).mean(axis=1))
    count = int((flipped >= abs(observed) - 1e-12).sum())
    return PairedComparison(observed, (float(low), float(high)), (count + 1) / (resamples + 1),
                            n)


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """>>> holm_adjusted([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def paired_verdict(difference: float, p_adjusted: float, *, margin: float, alpha: float) -> str:
    """>>> paired_verdict(-0.05, 0.001, margin=0.01, alpha=0.05)
    'worse'
    """
    if p_adjusted < alpha and difference < -margin:
        return "worse"
    if p_adjusted < alpha and difference > margin:
        return "better"
    return "no evidence"

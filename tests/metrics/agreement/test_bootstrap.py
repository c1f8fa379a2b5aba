"""The kappa bootstrap interval: it resamples queries, not pairs, is seeded and fast, and says
when it cannot be computed."""

from __future__ import annotations

import time

import numpy as np
import pytest

from agreement_samples import clustered_scores
from eval_harness.metrics.agreement import (
    agreement_report,
    binarize_scores,
    cohen_kappa,
    kappa_bootstrap_interval,
)

pytestmark = pytest.mark.unit


def test_bootstrap_interval_contains_estimate_and_narrows_with_more_queries():
    widths = []
    for n_queries in (30, 600):
        first, second, query_ids = clustered_scores(n_queries, 5, seed=3)
        report = agreement_report(first, second, query_ids=query_ids)
        interval = report.kappa_interval
        assert interval.low < report.kappa.value < interval.high
        assert interval.n_queries == n_queries and interval.n_resamples == 2000
        widths.append(interval.high - interval.low)
    assert widths[1] < widths[0] / 2  # ~sqrt(20) narrower in theory


def test_bootstrap_resamples_queries_not_pairs():
    # Disagreement is a property of the query: on half the queries the judges agree on every
    # document, on the other half the second judge flips 60% of the labels. Pairs within a
    # query are dependent, so resampling single pairs (each pair its own "query") must give
    # a clearly narrower, overconfident interval than resampling queries.
    rng = np.random.default_rng(5)
    n_queries, docs = 100, 10
    labels1 = (rng.random(n_queries * docs) < 0.5).astype(int)
    hard_query = np.repeat(rng.random(n_queries) < 0.5, docs)
    flipped = hard_query & (rng.random(labels1.size) < 0.6)
    labels2 = np.where(flipped, 1 - labels1, labels1)
    query_ids = np.repeat(np.arange(n_queries), docs)
    by_query = kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids)
    by_pair = kappa_bootstrap_interval(labels1, labels2, query_ids=np.arange(labels1.size))
    assert (by_query.high - by_query.low) > 1.5 * (by_pair.high - by_pair.low)


def test_bootstrap_is_seeded_and_fast():
    first, second, query_ids = clustered_scores(1000, 5, seed=9)
    labels1, labels2 = np.array(binarize_scores(first)), np.array(binarize_scores(second))
    started = time.perf_counter()
    interval = kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids, seed=1)
    assert time.perf_counter() - started < 1.5
    assert interval == kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids, seed=1)
    assert interval != kappa_bootstrap_interval(labels1, labels2, query_ids=query_ids, seed=2)


def test_bootstrap_of_identical_queries_collapses_to_the_point_estimate():
    # Every query has the same 2x2 table, so every resample has the same pooled proportions:
    # the resampled kappa must be exactly the point estimate (same formula in both paths).
    first, second = [1, 1, 0, 0, 1] * 20, [1, 0, 0, 1, 1] * 20
    interval = kappa_bootstrap_interval(first, second, query_ids=np.repeat(np.arange(20), 5))
    point = cohen_kappa(first, second).value
    assert interval.low == pytest.approx(point, abs=1e-12)
    assert interval.high == pytest.approx(point, abs=1e-12)


def test_bootstrap_needs_two_queries():
    interval = kappa_bootstrap_interval([1, 0, 1], [1, 0, 0], query_ids=["q", "q", "q"])
    assert interval.low is None and interval.high is None
    assert "at least 2 queries" in interval.reason

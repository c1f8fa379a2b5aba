"""Fusion: a NaN score never reaches a metric; the query is named."""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.retrieval.fusion import NonFiniteScores, fuse_normalised, fuse_scores

pytestmark = pytest.mark.unit


def test_fuse_scores_refuses_a_nan_and_names_the_query():
    semantic = np.array([0.9, np.nan, 0.1])
    keyword = np.array([0.0, 0.2, 0.4])
    with pytest.raises(NonFiniteScores, match="the fused hybrid score of query 'q7' is NaN for "
                                              "3 of its candidates"):
        fuse_scores(semantic, keyword, 0.7, query="q7")
    with pytest.raises(NonFiniteScores, match="the fused hybrid score of a query is NaN"):
        fuse_scores(semantic, keyword, 0.7)
    # an infinite raw score normalises to NaN as well
    with pytest.raises(NonFiniteScores):
        fuse_scores(np.array([0.5, np.inf]), np.array([0.0, 1.0]), 0.5)
    # finite scores are fused by the rule
    np.testing.assert_allclose(fuse_scores(np.array([0.9, 0.5, 0.1]), keyword, 0.7),
                               [0.7, 0.5, 0.3])


def test_fuse_normalised_names_the_row_of_a_matrix_and_refuses_nan_weights():
    sem = np.array([[0.0, 1.0], [np.nan, 1.0]])
    kw = np.zeros((2, 2))
    with pytest.raises(NonFiniteScores, match="query 'b' is NaN for 1 of its candidates"):
        fuse_normalised(sem, kw, 0.5, 0.5, query=("a", "b"))
    with pytest.raises(ValueError, match="fusion weights must be finite numbers"):
        fuse_normalised(np.zeros(2), np.zeros(2), float("nan"), 0.5)

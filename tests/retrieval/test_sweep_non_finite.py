"""The weight sweep refuses a NaN semantic score, naming the query."""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.retrieval.fusion import NonFiniteScores
from eval_harness.retrieval.sweep import CandidateSet, sweep_weights

pytestmark = pytest.mark.unit


def test_the_sweep_refuses_a_nan_semantic_score_naming_the_query():
    candidates = CandidateSet.from_queries(
        [np.array([1, 2]), np.array([1, 2])], [np.array([0.5, 0.1]), np.array([0.5, np.nan])],
        [np.array([1.0, 2.0]), np.array([1.0, 2.0])], [{1: 1}, {2: 1}], query_ids=["ok", "bad"])
    with pytest.raises(NonFiniteScores, match="query 'bad' has 1 candidates whose semantic "
                                              "score is NaN, so no metric is computed"):
        sweep_weights(candidates)

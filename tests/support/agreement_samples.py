"""Label and score samples for the agreement statistics' tests, and sklearn's kappa as the
reference they are checked against."""

from __future__ import annotations

import warnings

import numpy as np
import sklearn
from sklearn.metrics import cohen_kappa_score


def labels_from_table(both: int, first_only: int, second_only: int, neither: int):
    first = [1] * both + [1] * first_only + [0] * second_only + [0] * neither
    second = [1] * both + [0] * first_only + [1] * second_only + [0] * neither
    return first, second


def sklearn_kappa(first, second, **options) -> float:
    with warnings.catch_warnings(), sklearn.config_context(skip_parameter_validation=True):
        warnings.simplefilter("ignore")  # sklearn warns on the cases it returns NaN for
        return float(cohen_kappa_score(first, second, **options))


def clustered_scores(n_queries: int, docs_per_query: int, seed: int):
    """Two judges who share each query's leaning and a document's true relevance."""
    rng = np.random.default_rng(seed)
    query_leaning = np.repeat(rng.normal(0.0, 0.25, n_queries), docs_per_query)
    truth = rng.random(n_queries * docs_per_query) + query_leaning
    first = np.clip(truth + rng.normal(0.0, 0.2, truth.size), 0.0, 1.0)
    second = np.clip(truth + rng.normal(0.0, 0.2, truth.size), 0.0, 1.0)
    return first, second, np.repeat(np.arange(n_queries), docs_per_query)

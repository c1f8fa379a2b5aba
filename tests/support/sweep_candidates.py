"""Random candidate sets for the weight sweep and the calibration statistics: quantised scores
with many ties, constant columns, tiny queries and relevant documents never retrieved."""

from __future__ import annotations

import numpy as np


def random_queries(rng: np.random.Generator, n_queries: int, *, levels: int = 4,
                   max_candidates: int = 25) -> tuple[list, list, list, list]:
    """Candidates with quantised scores (many ties, constant columns, tiny queries)."""
    ids, semantic, keyword, relevance = [], [], [], []
    for _ in range(n_queries):
        n = int(rng.integers(1, max_candidates + 1))
        doc_ids = rng.choice(500, n, replace=False).astype(np.int64)
        ids.append(doc_ids)
        semantic.append(rng.integers(0, levels, n) / levels)  # quantised: ties everywhere
        kw_levels = 1 if rng.random() < 0.1 else levels  # sometimes constant: max == min
        keyword.append(rng.integers(0, kw_levels, n) * 2.5)
        judged = np.concatenate([rng.choice(doc_ids, min(n, 4), replace=False),
                                 rng.choice(500, 3)])  # some relevant docs not retrieved
        relevance.append({int(d): int(rng.integers(0, 4)) for d in judged})
    return ids, semantic, keyword, relevance

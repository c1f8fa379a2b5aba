"""Judged@k (eval_harness.metrics.ranking.judged_at_k, judged_share): hand-worked values,
degenerate cases, and trec_eval's P@k on qrels where every label counts as relevant."""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.metrics.ranking import judged_at_k, judged_share, precision_at_k

pytestmark = pytest.mark.unit

QRELS = {"a": 2, "b": 0, "c": 1}  # b is judged, as not relevant


def test_hand_worked_values():
    # top 5 of a x b y c z: a, b and c carry a label, x and y do not: 3 / 5
    assert judged_at_k(["a", "x", "b", "y", "c", "z"], QRELS, k=5) == pytest.approx(0.6)
    # a grade-0 label is a label: b counts, so the top 2 is fully judged
    assert judged_at_k(["b", "a"], QRELS, k=2) == 1.0
    # P@5 of the first ranking is 2 / 5 and a lower bound: x and y might be relevant
    assert precision_at_k(["a", "x", "b", "y", "c", "z"], QRELS, k=5) == pytest.approx(0.4)
    # a set of judged ids works as well as the qrels mapping
    assert judged_at_k(["a", "x"], {"a", "b"}, k=5) == 0.5


def test_degenerate_inputs():
    # a short ranking is divided by what it holds: 1 judged of 2 retrieved, not 1 / 5
    assert judged_at_k(["x", "b"], QRELS, k=5) == 0.5
    assert judged_at_k([], QRELS, k=5) == 1.0  # nothing unlabelled: P@5 = 0 is exact
    assert judged_at_k(["x"], {}, k=5) == 0.0  # no label at all
    with pytest.raises(ValueError, match="k must be >= 1"):
        judged_at_k(["a"], QRELS, k=0)
    with pytest.raises(ValueError, match="repeat"):
        judged_at_k(["a", "a"], QRELS, k=5)
    assert judged_at_k(["a", "x", "a"], QRELS, k=2) == 0.5  # a repeat past the cut is fine


def test_judged_share_equals_judged_at_k_per_query():
    rng = np.random.default_rng(5)
    rankings, judged_sets = [], []
    for _ in range(500):
        n = int(rng.integers(0, 12))
        rankings.append(list(rng.choice(40, n, replace=False)))
        judged_sets.append(set(rng.choice(40, int(rng.integers(0, 30)), replace=False)))
    top = np.zeros((len(rankings), 5), dtype=bool)
    for q, (ranking, judged) in enumerate(zip(rankings, judged_sets)):
        top[q, :min(5, len(ranking))] = [d in judged for d in ranking[:5]]
    shares = judged_share(top, np.array([len(r) for r in rankings]))
    expected = [judged_at_k(r, j, k=5) for r, j in zip(rankings, judged_sets)]
    np.testing.assert_array_equal(shares, expected)
    assert ((shares >= 0) & (shares <= 1)).all()


def test_equal_to_trec_eval_precision_with_every_label_relevant():
    """Judged@k is P@k on qrels where every label, grade 0 included, counts as relevant
    (ir_measures defines its Judged@k so); on rankings of at least k documents the two
    denominators agree, so trec_eval's P_5 on such qrels is an independent reference."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(17)
    qrels, runs, rankings = {}, {}, {}
    for q in range(2000):
        docs = [f"d{d}" for d in rng.choice(60, int(rng.integers(5, 15)), replace=False)]
        labelled = rng.choice(60, int(rng.integers(0, 20)), replace=False)
        qrels[f"q{q}"] = {f"d{d}": int(rng.integers(0, 3)) for d in labelled}
        rankings[f"q{q}"] = docs
        runs[f"q{q}"] = {d: float(len(docs) - rank) for rank, d in enumerate(docs)}
    any_label = {q: {d: 1 for d in labels} for q, labels in qrels.items()}
    evaluator = pytrec_eval.RelevanceEvaluator({q: labels or {"none": 0}
                                                for q, labels in any_label.items()}, {"P_5"})
    theirs = evaluator.evaluate(runs)
    for q, ranking in rankings.items():
        assert judged_at_k(ranking, qrels[q], k=5) == pytest.approx(theirs[q]["P_5"], abs=1e-12)

"""Calibration on a real store (eval_harness.calibration.run): the sweep vs SQL hybrid
search at every weight, the result's figures, and the verdict sentence.
The other parts: test_trec_runs.py, test_config_writeback.py, test_history.py here,
tests/cli/test_calibrate.py and tests/assets/test_calibration.py.
Several datasets side by side: tests/cli/test_calibrate_per_dataset.py."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from beir_factory import write_beir
from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.run import calibrate_dataset
from eval_harness.calibration.text import format_table
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.metrics import ranking
from eval_harness.metrics.calibration import weight_grid
from eval_harness.retrieval.hybrid import hybrid_search
from eval_harness.retrieval.sweep import normalised_scores, rank_top_k

FINE_GRID = weight_grid(start=0.0, stop=1.0, step=0.01)


def sql_runs(conn, corpus, weight: float, keyword: float, depth: int) -> dict[int, list[int]]:
    """Top-10 ids of every ground-truth query by SQL hybrid search at one pair of weights."""
    return {qid: [hit.id for hit in hybrid_search(
                conn, corpus["name"], query_text=text, query_embedding=emb, k=10,
                semantic_weight=weight, keyword_weight=keyword, candidate_depth=depth)]
            for qid, (text, emb) in corpus["queries"].items()}


# ------------------------------------------------------------- sweep == SQL hybrid search
@pytest.mark.parametrize("depth", [2, 10])
def test_sweep_equals_sql_hybrid_search_at_every_weight(conn, corpus, depth):
    """The issue's key test: for all 101 weights 0.00..1.00, the sweep's top 10 of every
    query is SQL hybrid search's top 10 at that weight, and so are all four metrics."""
    result = calibrate_dataset(conn, corpus["name"], grid=FINE_GRID, candidate_depth=depth,
                               **FAST)
    qrels = result.candidates  # ground truth aligned with the candidate rows
    relevance = {qid: {int(d): int(g) for d, g in zip(*_relevant(conn, qid))}
                 for qid in qrels.query_ids}
    assert [p.semantic_weight for p in result.grid] == FINE_GRID.tolist()
    for i, point in enumerate(result.grid):
        assert point.keyword_weight == round(1 - point.semantic_weight, 10)
        ours = rank_top_k(result.candidates, point.semantic_weight,
                          keyword_weight=point.keyword_weight)
        runs = sql_runs(conn, corpus, point.semantic_weight, point.keyword_weight, depth)
        for row, qid in enumerate(result.candidates.query_ids):
            assert ours[row].tolist() == runs[qid], (point.semantic_weight, qid)
        expected = ranking.mean_metrics(runs, relevance)
        assert point.p_at_5 == pytest.approx(expected["p_at_5"], abs=1e-12)
        assert point.recall_at_5 == pytest.approx(expected["recall_at_5"], abs=1e-12)
        assert point.ndcg_at_10 == pytest.approx(expected["ndcg_at_10"], abs=1e-12)
        assert point.mrr_at_10 == pytest.approx(expected["mrr_at_10"], abs=1e-12)
        np.testing.assert_array_equal(
            result.sweep.per_query_p_at_5[i],
            [ranking.precision_at_k(runs[q], relevance[q], k=5) for q in qrels.query_ids])
    if depth == 2:  # the degenerate cases the metrics must handle were really exercised
        assert (result.candidates.mask.sum(axis=1) < 5).any()
    semantic, keyword = normalised_scores(result.candidates)
    fused, mask = 0.5 * semantic + 0.5 * keyword, result.candidates.mask
    assert any(np.unique(row[m]).size < m.sum() for row, m in zip(fused, mask))  # ties


def _relevant(conn, qid):
    return conn.execute("SELECT expected_docs, relevance_grades FROM ground_truth WHERE id = %s",
                        (qid,)).fetchone()


def test_result_holds_best_uplift_cv_rrf_and_verdict(conn, corpus):
    result = calibrate_dataset(conn, corpus["name"], grid=[0.5, 0.6, 0.8, 0.9],
                               current_weight=0.9, candidate_depth=10, **FAST)
    assert result.default_added_to_grid and result.default.semantic_weight == 0.7
    p5 = {p.semantic_weight: p.p_at_5 for p in result.grid}
    top = max(p5.values())
    assert result.best.p_at_5 == top
    # ties go to the weight closest to the configured one (0.9 here)
    assert result.best.semantic_weight == max((w for w, v in p5.items() if v >= top - 1e-12),
                                              key=lambda w: (-abs(w - 0.9), -w))
    assert result.uplift.absolute == pytest.approx(result.best.p_at_5 - result.default.p_at_5)
    assert result.uplift.ci_low <= result.uplift.absolute <= result.uplift.ci_high
    assert 0 < result.uplift.p_value <= 1
    assert 0 <= result.cross_validation.p_at_5 <= 1 and len(result.cross_validation.fold_sizes) == 3
    # the verdict is given at the weights in force after the decision, not the best point
    at = result.best if result.decision.changed else result.in_force
    assert result.verdict_point == at and result.verdict_p_at_5 == at.p_at_5
    assert (result.figure.semantic_weight, result.figure.keyword_weight) == (
        at.semantic_weight, at.keyword_weight)
    assert result.figure.weights == result.decision.decision
    if not result.decision.changed:
        assert at.semantic_weight == 0.9 and result.verdict_p_at_5 != result.best.p_at_5
        assert "at the weights kept, semantic 0.90 / keyword 0.10" in format_table(result)
    assert result.p_at_5_candidate_ceiling <= result.p_at_5_ceiling
    assert all(p.p_at_5 <= result.p_at_5_ceiling + 1e-12 for p in result.grid)
    text = json.dumps(result.to_dict(), allow_nan=False)  # JSON-safe, no NaN
    assert '"verdict"' in text


def test_unknown_dataset_and_empty_ground_truth(conn, tmp_path):
    with pytest.raises(LookupError, match="ingest"):
        calibrate_dataset(conn, "no-such-dataset")
    name = f"e{uuid.uuid4().hex[:8]}"
    folder = write_beir(tmp_path / "empty", {"d1": "heart", "d2": "brain"}, {"q1": "heart"},
                        [("q1", "d1", 0)])  # no relevant document: no ground-truth query
    ingest_beir(conn, folder, name=name)
    with pytest.raises(ValueError, match="no ground-truth queries"):
        calibrate_dataset(conn, name)


@pytest.mark.unit
def test_verdict_sentence_names_an_unreachable_band():
    from eval_harness.calibration.verdict import VerdictBands, verdict_sentence

    bands = VerdictBands(0.75, 0.70)
    low_ceiling = verdict_sentence("failure", 0.17, bands, ceiling=0.226)
    assert "perfect ranking reaches only P@5 0.2260" in low_ceiling
    assert "perfect ranking" not in verdict_sentence("failure", 0.17, bands, ceiling=0.9)
    assert "perfect ranking" not in verdict_sentence("failure", 0.17, bands)


def test_weights_in_force_off_the_grid_are_evaluated_for_the_decision(conn, corpus):
    """A semantic weight in force off the grid is added to it; a keyword weight other than
    1 - semantic is swept on its own: the decision compares the grid with exactly them."""
    from eval_harness.retrieval.sweep import sweep_weights

    on_own = calibrate_dataset(conn, corpus["name"], candidate_depth=10, current_weight=0.55,
                               cv_folds=3, bootstrap_resamples=200)
    assert on_own.in_force_added_to_grid and 0.55 in [p.semantic_weight for p in on_own.grid]
    assert on_own.decision.in_force == (0.55, 0.45)
    odd = calibrate_dataset(conn, corpus["name"], candidate_depth=10, current_weight=0.7,
                            in_force_keyword=0.2, cv_folds=3, bootstrap_resamples=200)
    alone = sweep_weights(odd.candidates, [0.7], keyword_weights=[0.2]).p_at_5[0]
    assert odd.decision.in_force == (0.7, 0.2)
    assert odd.decision.gain == pytest.approx(odd.best.p_at_5 - alone, abs=1e-12)

"""TREC run and qrels files of a calibration (eval_harness.calibration.trec_runs) give our
metrics in ranx and trec_eval, on a real store."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import pytrec_eval
from ranx import Qrels, Run, evaluate

from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.run import calibrate_dataset
from eval_harness.calibration.trec_runs import qrels_file_name, run_file_name, write_trec_runs
from eval_harness.metrics.calibration import weight_grid


# --------------------------------------------------- TREC runs vs ranx and trec_eval
@pytest.mark.slow
@pytest.mark.parametrize("depth", [2, 10])
def test_trec_runs_give_our_metrics_in_ranx_and_trec_eval(conn, corpus, tmp_path, depth):
    grid = weight_grid(start=0.0, stop=1.0, step=0.1)
    result = calibrate_dataset(conn, corpus["name"], grid=grid, candidate_depth=depth, **FAST)
    name = corpus["name"]
    paths = write_trec_runs(conn, result, tmp_path)
    assert [p.name for p in paths[1:]] == [run_file_name(name, w) for w in grid]
    assert run_file_name(name, 0.7) == f"run.{name}.semantic-0.70.trec"
    assert paths[0].name == qrels_file_name(name) == f"qrels.{name}.trec"
    warnings.filterwarnings("ignore")  # numba casting warnings inside ranx
    qrels = Qrels.from_file(str(paths[0]), kind="trec")
    with open(paths[0]) as handle:
        trec_qrels = pytrec_eval.parse_qrel(handle)
    for point in result.grid:
        path = tmp_path / run_file_name(name, point.semantic_weight)
        run = Run.from_file(str(path), kind="trec")
        scores = evaluate(qrels, run, ["precision@5", "recall@5", "ndcg@10", "mrr@10"])
        assert scores["precision@5"] == pytest.approx(point.p_at_5, abs=1e-12)
        assert scores["recall@5"] == pytest.approx(point.recall_at_5, abs=1e-12)
        assert scores["ndcg@10"] == pytest.approx(point.ndcg_at_10, abs=1e-12)
        assert scores["mrr@10"] == pytest.approx(point.mrr_at_10, abs=1e-12)
        with open(path) as handle:
            trec_run = pytrec_eval.parse_run(handle)
        top10 = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10])
                 for q, docs in trec_run.items()}
        per_query = pytrec_eval.RelevanceEvaluator(
            trec_qrels, {"P_5", "recall_5", "ndcg_cut_10", "recip_rank"}).evaluate(top10)
        assert np.mean([m["P_5"] for m in per_query.values()]) == pytest.approx(point.p_at_5)
        assert np.mean([m["recall_5"] for m in per_query.values()]) == pytest.approx(
            point.recall_at_5)
        assert np.mean([m["ndcg_cut_10"] for m in per_query.values()]) == pytest.approx(
            point.ndcg_at_10)
        assert np.mean([m["recip_rank"] for m in per_query.values()]) == pytest.approx(
            point.mrr_at_10)
    lines = (tmp_path / run_file_name(name, 0.5)).read_text().splitlines()
    qid, q0, _, rank, score, tag = lines[0].split()
    assert q0 == "Q0" and rank == "1" and tag == f"eval-harness-{name}-semantic-0.50"
    assert qid in {text.split()[0] for text in paths[0].read_text().splitlines()}

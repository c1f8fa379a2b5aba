"""The gain between two weights on biased judge labels, corrected by a human sample: one PPI
over the per-query differences (eval_harness.calibration.ppi_gain).

The scenario (tests/support/judged_gain_corpus.py): judges that call every document carrying
the query's words relevant favour the keyword-heavy weight 0.2 over 0.9 by about +0.2 P@5,
while the hidden qrels favour 0.9. The test builds the per-query vectors itself, from SQL
hybrid search at each weight (not the sweep) and the labels it wrote, and checks the figures
against ppi-python's ``ppi_mean_ci``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from eval_harness.calibration.ppi_gain import UNCORRECTED, bias_note, judged_gain
from eval_harness.calibration.run import calibrate_with_settings
from eval_harness.retrieval.hybrid import hybrid_search
from eval_harness.settings import load_settings
from judged_gain_corpus import N_QUERIES, PER_QUERY, gain_scenario, label_sample  # noqa: F401

N_SAMPLE = 25


def _calibrate(db, scenario, store):
    settings = load_settings(scenario["config"], environ={"DATABASE_URL": store.url})
    return calibrate_with_settings(db, settings, scenario["name"], labels="judges")


def _p_at_5_by_sql(db, scenario, weight):
    """{query external id: (judges' P@5, qrels P@5)} at ``weight``, by SQL hybrid search."""
    rows = db.execute("SELECT external_id, query, query_embedding FROM ground_truth "
                      "WHERE dataset = %s", (scenario["name"],)).fetchall()
    figures = {}
    for query, text, embedding in rows:
        hits = hybrid_search(db, scenario["name"], query_text=text, query_embedding=embedding,
                             k=5, semantic_weight=weight, candidate_depth=PER_QUERY)
        docs = [hit.external_id for hit in hits]
        figures[query] = (sum((query, d) in scenario["judged_relevant"] for d in docs) / 5,
                          sum((query, d) in scenario["relevant"] for d in docs) / 5)
    return figures


def test_the_ppi_gain_corrects_the_biased_judges_and_equals_ppi_python(db, gain_scenario,
                                                                       store):
    sampled = label_sample(db, gain_scenario, n=N_SAMPLE)
    result = _calibrate(db, gain_scenario, store)
    gain = judged_gain(db, result, 0.2, 0.9)

    a, b = _p_at_5_by_sql(db, gain_scenario, 0.2), _p_at_5_by_sql(db, gain_scenario, 0.9)
    queries = sorted(a)
    judge = np.array([a[q][0] - b[q][0] for q in queries])
    truth = np.array([a[q][1] - b[q][1] for q in queries])
    y = np.array([a[q][1] - b[q][1] for q in sampled])
    yhat = np.array([a[q][0] - b[q][0] for q in sampled])

    assert (gain.n_human, gain.n_all, gain.incomplete_queries) == (N_SAMPLE, N_QUERIES, 0)
    assert gain.judge_gain == pytest.approx(judge.mean(), abs=1e-12)
    low, high = ppi_mean_ci(y, yhat, judge, alpha=0.05)
    point = ppi_mean_pointestimate(y, yhat, judge)
    assert gain.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert (gain.low, gain.high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)

    # the claim: the judges favour 0.2 on their bias; the corrected interval does not
    assert judge.mean() > 0.1 and truth.mean() < -0.05
    assert gain.low <= truth.mean() <= gain.high
    assert gain.high < judge.mean()
    assert gain.to_dict()["interval"] == [gain.low, gain.high]
    assert "gain of 0.20 over 0.90 corrected by the human sample" in gain.sentence()
    assert f"{N_SAMPLE} human-labelled of {N_QUERIES} judged queries" in gain.sentence()


def test_without_a_human_sample_the_bias_is_named_and_no_gain_is_estimated(db, gain_scenario,
                                                                           store):
    result = _calibrate(db, gain_scenario, store)
    assert bias_note(result) == UNCORRECTED
    assert judged_gain(db, result, 0.2, 0.9) is None
    assert bias_note(dataclasses.replace(result, label_source="human")) is None
    with pytest.raises(ValueError, match="corrects judge labels only"):
        judged_gain(db, dataclasses.replace(result, label_source="human"), 0.2, 0.9)

    label_sample(db, gain_scenario, n=5)
    assert bias_note(_calibrate(db, gain_scenario, store)) is None

"""The judged pairs on the real store (eval_harness.agreement.judge_pairs): loading the
judges' scores, and the final labels.

Judge scores are written straight into ground_truth with SQL, as the judge layer would.
"""

from __future__ import annotations

import pytest

from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.judge_pairs import JudgeScoresError, final_labels, load_judge_pairs
from eval_harness.agreement.review import queue_disagreements
from review_store import FAST_AGREEMENT as SETTINGS, N_QUERIES, set_scores


# ---------------------------------------------------------------------------------------
# Loading scores, final labels


def test_pairs_load_with_unscored_and_human_labels(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, None), ("d2", 0.2, 0.3)],
                                     "q2": [("d3", float("nan"), 0.7), ("d4", 0.6, 0.4)]})
    pairs = load_judge_pairs(db, dataset["name"])
    assert len(pairs) == 4 and pairs.n_queries == N_QUERIES and len(pairs.queries) == 2
    assert pairs.scores2 == (None, 0.3, 0.7, 0.4)
    assert pairs.scores1 == (0.9, 0.2, None, 0.6)  # NaN is unscored, never a value
    assert pairs.human == (1, 0, 1, 0)  # in expected_docs <=> human-relevant
    assert pairs.judge1_models == ("judge-a",)
    result = dataset_agreement(db, dataset["name"], SETTINGS)
    assert result.report.n_scored == 2 and result.report.n_unscored == 2


def test_misaligned_scores_are_refused_with_the_query_named(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, 0.8), ("d2", 0.1, 0.2)]})
    db.execute("UPDATE ground_truth SET judge2_score = ARRAY[0.5]::float8[] "
               "WHERE dataset = %s AND external_id = 'q1'", (dataset["name"],))
    with pytest.raises(JudgeScoresError, match=r"query 'q1'.*2 judged_docs but 1 judge2_score"):
        load_judge_pairs(db, dataset["name"])


def test_a_document_judged_twice_is_refused(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, 0.1), ("d1", 0.8, 0.1)]})
    with pytest.raises(JudgeScoresError, match="lists a document twice"):
        load_judge_pairs(db, dataset["name"])
    with pytest.raises(ValueError, match="lists a document twice"):
        queue_disagreements(db, dataset["name"], threshold=0.4)


def test_final_labels_mean_of_judges_unless_adjudicated(db, dataset):
    name = dataset["name"]
    set_scores(db, name, {"q1": [("d1", 0.9, 0.3), ("d2", 0.4, 0.5), ("d3", 0.9, None)]})
    pairs = load_judge_pairs(db, name)
    key = pairs.keys[0]
    plain = final_labels(pairs, {}, threshold=0.5)
    # (0.9 + 0.3) / 2 = 0.6 > 0.5; (0.4 + 0.5) / 2 = 0.45; one judge only: no label
    assert [(f.label, f.source) for f in plain] == [(1, "judges"), (0, "judges"), (None, None)]
    overridden = final_labels(pairs, {key: 0, pairs.keys[2]: 1}, threshold=0.5)
    assert [(f.label, f.source) for f in overridden] == [
        (0, "adjudicated"), (0, "judges"), (1, "adjudicated")]

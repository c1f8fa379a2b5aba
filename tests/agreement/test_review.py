"""The review queue on the real store (eval_harness.agreement.review): queueing the judges'
disagreements, export -> edit -> import, adjudicated overrides, malformed and stale files.

Judge scores are written straight into ground_truth with SQL, as the judge layer would.
"""

from __future__ import annotations

import pytest

from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.judge_pairs import load_final_labels
from eval_harness.agreement.review import (adjudicated_labels, export_review_csv,
                                           import_review_csv, queue_disagreements)
from eval_harness.agreement.review_file import CSV_COLUMNS, ReviewFileError
from review_store import (FAST_AGREEMENT as SETTINGS, QUERIES, agreeing_scores,
                          disagreeing_scores, read_csv, review_rows, set_scores, write_csv)


# ---------------------------------------------------------------------------------------
# The queue


def test_requeue_is_idempotent_and_keeps_verdicts_until_scores_change(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    first = queue_disagreements(db, name, threshold=0.4)
    assert (first.new, first.pending, first.adjudicated) == (4, 4, 0)
    before = review_rows(db, name)
    again = queue_disagreements(db, name, threshold=0.4)
    assert (again.new, again.requeued, again.unchanged, again.removed) == (0, 0, 4, 0)
    assert review_rows(db, name) == before  # not even a timestamp moved

    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    rows[0]["verdict"] = "relevant"
    import_review_csv(db, name, write_csv(tmp_path / "r.csv", rows))
    kept = queue_disagreements(db, name, threshold=0.4)
    assert (kept.unchanged, kept.adjudicated, kept.pending) == (4, 1, 3)
    # a higher threshold drops pending rows but keeps the verdict made on unchanged scores
    raised = queue_disagreements(db, name, threshold=0.9)
    assert (raised.removed, raised.adjudicated, raised.pending) == (3, 1, 0)

    # the judges re-score the adjudicated pair: it goes back to pending, revision 2
    scores = disagreeing_scores()
    scores["q1"][0] = ("d1", 0.95, 0.05)
    set_scores(db, name, scores)
    assert adjudicated_labels(db, name) == {}  # a stale verdict never overrides new scores
    requeued = queue_disagreements(db, name, threshold=0.4)
    assert (requeued.requeued, requeued.new, requeued.adjudicated) == (1, 3, 0)
    row = db.execute("""SELECT r.status, r.verdict, r.score_revision, r.judge1_score
                        FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
                        WHERE g.dataset = %s AND g.external_id = 'q1'""", (name,)).fetchone()
    assert row == ("pending", None, 2, 0.95)

    # judges now agree everywhere: the queue empties
    set_scores(db, name, agreeing_scores())
    assert queue_disagreements(db, name, threshold=0.4).removed == 4
    assert review_rows(db, name) == []


def test_difference_of_exactly_the_threshold_is_not_queued(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, 0.5), ("d2", 0.1, 0.55)]})
    counts = queue_disagreements(db, dataset["name"], threshold=0.4)
    assert counts.new == 1  # 0.9 - 0.5 is 0.4 (not above); 0.55 - 0.1 = 0.45 is


# ---------------------------------------------------------------------------------------
# Export -> edit -> import


def test_review_round_trip_export_edit_import(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    exported = export_review_csv(db, name, tmp_path / "review.csv")
    assert (exported.rows, exported.pending, exported.adjudicated) == (4, 4, 0)
    lines = exported.path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS) and len(lines) == 5
    rows = read_csv(exported.path)
    assert [r["query_external_id"] for r in rows] == ["q1", "q3", "q5", "q7"]
    assert all(r["verdict"] == "" and r["status"] == "pending" for r in rows)
    assert rows[0]["query"] == QUERIES["q1"] and rows[0]["doc_snippet"].startswith("Document 1")
    assert rows[0]["judge1_score"] == "0.9" and rows[0]["score_diff"] == "0.8"
    assert rows[1]["query"] == "'+3 question | about topic 3"

    rows[0].update(verdict="Relevant", reviewer="ana", note="clearly on topic")
    rows[1].update(verdict="not  relevant", reviewer="ana")
    imported = import_review_csv(db, name, write_csv(tmp_path / "edited.csv", rows))
    assert (imported.adjudicated, imported.unchanged, imported.blank) == (2, 0, 2)
    stored = {(r[2], r[3]): r for r in db.execute("""
        SELECT r.status, r.verdict, g.external_id, d.external_id, r.reviewer, r.note,
               r.adjudicated_at IS NOT NULL
        FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
        JOIN l2_insights d ON d.id = r.doc_id WHERE g.dataset = %s""", (name,))}
    assert stored[("q1", "d1")] == ("adjudicated", "relevant", "q1", "d1", "ana",
                                    "clearly on topic", True)
    assert stored[("q3", "d5")][:2] == ("adjudicated", "not relevant")
    assert stored[("q5", "d9")][:2] == ("pending", None)

    # importing the same file again changes nothing; the next export shows the verdicts
    again = import_review_csv(db, name, tmp_path / "edited.csv")
    assert (again.adjudicated, again.unchanged) == (0, 2)
    rows = read_csv(export_review_csv(db, name, tmp_path / "review2.csv").path)
    assert [r["verdict"] for r in rows] == ["relevant", "not relevant", "", ""]
    assert [r["status"] for r in rows][:2] == ["adjudicated", "adjudicated"]


def test_adjudicated_label_overrides_both_judges(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    # q1/d1: judges 0.9 vs 0.1 (mean 0.5: not relevant); the human says relevant
    rows[0]["verdict"] = "relevant"
    import_review_csv(db, name, write_csv(tmp_path / "r.csv", rows))
    labels = {(f.query_id, f.doc_id): f for f in load_final_labels(db, name, threshold=0.5)}
    overrides = adjudicated_labels(db, name)
    (key, verdict), = overrides.items()
    assert verdict == 1 and labels[key].label == 1 and labels[key].source == "adjudicated"
    result = dataset_agreement(db, name, SETTINGS)
    assert result.n_adjudicated_overrides == 1
    judge1, judge2, final = result.versus_human
    # judge 2 misses the relevant doc of q1, q3, q5, q7; the final labels recover q1 only
    assert judge2.report.recall == pytest.approx(4 / 8)
    assert final.report.recall == pytest.approx(5 / 8)
    assert judge1.report.recall == 1.0 and judge1.report.precision == 1.0


@pytest.mark.parametrize("damage, rows_named", [
    ("header", [1]), ("verdict", [3]), ("unknown_id", [2]), ("duplicate", [6]),
    ("dataset", [4]), ("short_row", [5]), ("several", [2, 3, 5]),
])
def test_malformed_file_changes_nothing_and_names_rows(db, dataset, tmp_path, damage,
                                                       rows_named):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    for row in rows:
        row["verdict"] = "relevant"  # every row valid and filled ...
    header = list(CSV_COLUMNS)
    path = tmp_path / "bad.csv"
    if damage == "header":
        header[header.index("verdict")] = "verdcit"
        rows = [{("verdcit" if k == "verdict" else k): v for k, v in r.items()} for r in rows]
    elif damage == "verdict":
        rows[1]["verdict"] = "maybe"
    elif damage == "unknown_id":
        rows[0]["doc_id"] = "999999999"
    elif damage == "duplicate":
        rows.append(dict(rows[1]))
    elif damage == "dataset":
        rows[2]["dataset"] = "other"
    elif damage == "several":
        rows[0]["query_id"] = "x"
        rows[1]["verdict"] = "yes"
        rows[3]["verdict"] = "irrelevant"
    write_csv(path, rows, header)
    if damage == "short_row":
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[4] = ",".join(lines[4].split(",")[:5])
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = review_rows(db, name)
    with pytest.raises(ReviewFileError) as caught:
        import_review_csv(db, name, path)
    assert caught.value.rows == rows_named
    message = str(caught.value)
    assert "nothing was imported" in message and "\n" not in message
    for row in rows_named:
        assert f"row {row}:" in message
    assert review_rows(db, name) == before  # ... yet nothing at all was written


def test_stale_file_is_refused(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    rows[0]["verdict"] = "relevant"
    rows[2]["verdict"] = "not relevant"
    path = write_csv(tmp_path / "edited.csv", rows)
    # the judges re-score q5/d9 after the export (not yet re-queued)
    scores = disagreeing_scores()
    scores["q5"][0] = ("d9", 0.8, 0.2)
    set_scores(db, name, scores)
    before = review_rows(db, name)
    with pytest.raises(ReviewFileError, match=r"row 4: the row is stale") as caught:
        import_review_csv(db, name, path)
    assert caught.value.rows == [4]
    assert review_rows(db, name) == before
    # after the queue is refreshed the file is still stale (its revision is old)
    queue_disagreements(db, name, threshold=0.4)
    with pytest.raises(ReviewFileError, match=r"row 4: the row is stale"):
        import_review_csv(db, name, path)
    # a row without a verdict may be stale: it is skipped, not refused
    rows[2]["verdict"] = ""
    imported = import_review_csv(db, name, write_csv(tmp_path / "edited.csv", rows))
    assert (imported.adjudicated, imported.blank) == (1, 3)

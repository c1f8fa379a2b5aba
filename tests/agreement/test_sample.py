"""`review sample`: a seeded uniform sample of judged queries (all their judged pairs) in the
review file's columns, recorded in human_sample, and read back by `review import`.

Judge scores are written straight into ground_truth with SQL, as the judge layer would.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from beir_factory import write_beir
from eval_harness.agreement.review_file import CSV_COLUMNS, ReviewFileError
from eval_harness.agreement.sample import (
    export_sample_csv,
    import_sample_csv,
    is_sample_file,
    sample_order,
)
from eval_harness_pipelines import cli
from review_store import read_csv, review_rows, set_scores, write_csv

N_QUERIES = 30
DOCS = {f"d{i}": f"document {i} on subject {i % 7}" for i in range(1, 3 * N_QUERIES + 1)}
QUERIES = {f"q{k}": f"question {k} on subject {k % 7}" for k in range(1, N_QUERIES + 1)}
QRELS = [(f"q{k}", f"d{3 * k - 2}", 1) for k in range(1, N_QUERIES + 1)]
JUDGED = 24  # queries q1..q24 are judged; the rest are not and are never sampled


@pytest.fixture
def dataset(db, tmp_path):
    from eval_harness.datasets.ingest import ingest_beir

    name = f"smp{uuid.uuid4().hex[:8]}"
    ingest_beir(db, write_beir(tmp_path / "data", DOCS, QUERIES, QRELS), name=name)
    # Three judged docs per query; the third scored by judge 1 only (not a scored pair).
    set_scores(db, name, {f"q{k}": [(f"d{3 * k - 2}", 0.9, 0.8), (f"d{3 * k - 1}", 0.2, 0.7),
                                     (f"d{3 * k}", 0.6, None)]
                          for k in range(1, JUDGED + 1)})
    return name


def _sample_rows(db, name):
    return db.execute("""SELECT g.external_id, h.doc_id, h.seed, h.verdict, h.reviewer,
                                h.labelled_at IS NOT NULL
                         FROM human_sample h JOIN ground_truth g ON g.id = h.ground_truth_id
                         WHERE h.dataset = %s ORDER BY 1, 2""", (name,)).fetchall()


def test_the_same_seed_and_n_give_the_same_queries_and_a_larger_n_extends(db, dataset,
                                                                          tmp_path):
    first = export_sample_csv(db, dataset, tmp_path / "a.csv", n=5, seed=7)
    rows = read_csv(tmp_path / "a.csv")
    assert (first.queries, first.judged_queries, first.pairs, first.added) == (5, JUDGED, 10, 10)
    assert list(rows[0]) == list(CSV_COLUMNS)
    queries = {row["query_external_id"] for row in rows}
    assert len(queries) == 5 and all(int(q[1:]) <= JUDGED for q in queries)
    # every scored pair of each sampled query, none of its unscored ones
    assert Counter(row["query_external_id"] for row in rows) == {q: 2 for q in queries}
    assert {row["status"] for row in rows} == {"sample"}
    # the judges' scores are not shown to the person labelling (no anchoring)
    assert {row["judge1_score"] + row["judge2_score"] + row["judge1_model"] for row in rows} == {""}
    assert queries == set(sample_order(7, [f"q{k}" for k in range(1, JUDGED + 1)])[:5])

    again = export_sample_csv(db, dataset, tmp_path / "b.csv", n=5, seed=7)
    assert again.added == 0 and read_csv(tmp_path / "b.csv") == rows
    bigger = export_sample_csv(db, dataset, tmp_path / "c.csv", n=8)  # seed kept: 7
    assert bigger.seed == 7 and bigger.added == 6
    extended = {row["query_external_id"] for row in read_csv(tmp_path / "c.csv")}
    assert queries < extended and len(extended) == 8
    assert {r[2] for r in _sample_rows(db, dataset)} == {7}
    assert len(_sample_rows(db, dataset)) == 16
    assert review_rows(db, dataset) == []  # separate from the disagreement queue


def test_another_seed_is_refused_in_one_sentence(db, dataset, tmp_path):
    export_sample_csv(db, dataset, tmp_path / "a.csv", n=3, seed=1)
    with pytest.raises(ValueError, match=r"^the human sample of dataset '.*' was drawn with "
                                         r"seed 1, not 2; sample again with --seed 1"):
        export_sample_csv(db, dataset, tmp_path / "b.csv", n=3, seed=2)
    with pytest.raises(ValueError, match="at least 1 query"):
        export_sample_csv(db, dataset, tmp_path / "b.csv", n=0)


@pytest.mark.unit
def test_the_draw_is_uniform_over_the_judged_queries():
    """Over 3,000 seeds each of 24 queries is drawn into a sample of 6 with probability 1/4:
    counts within 4.5 standard deviations of 750 (binomial sd ~23.7)."""
    ids = [f"q{k}" for k in range(1, JUDGED + 1)]
    counts = Counter(q for seed in range(3000) for q in sample_order(seed, ids)[:6])
    assert set(counts) == set(ids)
    assert all(abs(c - 750) < 4.5 * 23.7 for c in counts.values()), counts
    # and the position of a query in the order does not depend on the order it was given in
    assert sample_order(3, ids) == sample_order(3, list(reversed(ids)))


def test_round_trip_stores_verdicts_and_blank_rows_stay(db, dataset, tmp_path):
    path = tmp_path / "sample.csv"
    export_sample_csv(db, dataset, path, n=4, seed=0)
    rows = read_csv(path)
    assert is_sample_file(path)
    for i, row in enumerate(rows):
        row["verdict"] = "" if i == 0 else ("Relevant" if i % 2 else "not  relevant")
        row["reviewer"] = "ana"
    write_csv(path, rows)
    counts = import_sample_csv(db, None, path)
    assert (counts.adjudicated, counts.unchanged, counts.blank, counts.dataset) == (
        len(rows) - 1, 0, 1, dataset)
    stored = {(r[0], r[1]): r[3:] for r in _sample_rows(db, dataset)}
    assert Counter(stored.values()) == {(None, None, False): 1,
                                        ("relevant", "ana", True): len(rows) // 2,
                                        ("not relevant", "ana", True): (len(rows) - 1) // 2}
    again = import_sample_csv(db, dataset, path)
    assert (again.adjudicated, again.unchanged) == (0, len(rows) - 1)
    # re-exporting shows the stored verdicts
    export_sample_csv(db, dataset, tmp_path / "again.csv", n=4)
    assert [r["verdict"] for r in read_csv(tmp_path / "again.csv")] == \
        [" ".join(r["verdict"].lower().split()) for r in rows]
    assert review_rows(db, dataset) == []


def test_unknown_or_stale_rows_refuse_the_whole_file_in_one_sentence(db, dataset, tmp_path):
    path = tmp_path / "sample.csv"
    export_sample_csv(db, dataset, path, n=3, seed=0)
    rows = read_csv(path)
    for row in rows:
        row["verdict"] = "relevant"
    sampled = {row["query_external_id"] for row in rows}
    outside = next(f"q{k}" for k in range(1, JUDGED + 1) if f"q{k}" not in sampled)
    qid, doc = db.execute("""SELECT g.id, d.id FROM ground_truth g JOIN l2_insights d
                             ON d.dataset = g.dataset AND d.external_id = %s
                             WHERE g.dataset = %s AND g.external_id = %s""",
                          (f"d{3 * int(outside[1:]) - 2}", dataset, outside)).fetchone()
    unknown = dict(rows[0], query_id=str(qid), doc_id=str(doc), query_external_id=outside)
    rows[1]["doc_external_id"] = "d-edited"  # the ids no longer name the stored pair
    write_csv(path, rows + [unknown])
    with pytest.raises(ReviewFileError) as caught:
        import_sample_csv(db, None, path)
    message = str(caught.value)
    assert "\n" not in message and message.count(". ") == 0
    assert caught.value.rows == [3, len(rows) + 2]
    assert "row 3: the row is stale" in message and "is not in the human sample" in message
    assert message.endswith("write a fresh file with `eval-harness review sample`.")
    assert {r[3] for r in _sample_rows(db, dataset)} == {None}  # nothing written


def test_cli_sample_then_import_and_the_queue_import_is_untouched(db, dataset, tmp_path, store,
                                                                  monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", store.url)
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: {dataset}\ndatasets:\n  {dataset}:\n    path: "
                      f"{tmp_path / 'data'}\n")
    path = tmp_path / "s.csv"
    code = cli.main(["--config", str(config), "review", "sample", "--n", "2", "--seed", "5",
                     str(path)])
    out = capsys.readouterr().out
    assert code == 0 and f"(seed 5): 2 of {JUDGED} judged queries, 4 pair(s)" in out
    rows = read_csv(path)
    for row in rows:
        row["verdict"] = "relevant"
    write_csv(path, rows)
    assert cli.main(["--config", str(config), "review", "import", str(path)]) == 0
    assert "into the human sample of" in capsys.readouterr().out
    assert [r[3] for r in _sample_rows(db, dataset)] == ["relevant"] * 4
    # a queue file still goes to the review queue
    queue = tmp_path / "queue.csv"
    assert cli.main(["--config", str(config), "review", "export", str(queue)]) == 0
    assert not is_sample_file(queue)
    assert cli.main(["--config", str(config), "review", "import", str(queue)]) == 0
    assert "into the review queue of" in capsys.readouterr().out


# ---------------------------------------------------------------- notes, repeated errors, echoes

def test_a_note_is_stored_exported_again_and_a_note_alone_counts(db, dataset, tmp_path):
    path = tmp_path / "sample.csv"
    export_sample_csv(db, dataset, path, n=3, seed=0)
    rows = read_csv(path)
    for row in rows:
        row.update(verdict="relevant", reviewer="ana")
    write_csv(path, rows)
    import_sample_csv(db, None, path)
    for i, row in enumerate(rows):  # a second pass adds notes only
        row["note"] = f"checked twice, pass {i}"
    rows[0].update(verdict="", note="unsure: ask Bo")  # a note on a blank row is not kept
    write_csv(path, rows)
    counts = import_sample_csv(db, None, path)
    assert (counts.adjudicated, counts.unchanged, counts.blank) == (len(rows) - 1, 0, 1)
    assert str(counts).endswith("1 row(s) without a verdict left as they are (1 of them with "
                                "a note, not stored: a note is stored with a verdict)")
    notes = dict(db.execute("SELECT doc_id, note FROM human_sample WHERE dataset = %s",
                            (dataset,)).fetchall())
    assert sorted(n for n in notes.values() if n) == sorted(r["note"] for r in rows[1:])
    export_sample_csv(db, dataset, tmp_path / "again.csv", n=3)
    again = {r["doc_id"]: r["note"] for r in read_csv(tmp_path / "again.csv")}
    assert [again[r["doc_id"]] for r in rows[1:]] == [r["note"] for r in rows[1:]]


def test_the_same_problem_on_every_row_is_said_once_with_its_rows(db, dataset, tmp_path):
    path = tmp_path / "sample.csv"
    export_sample_csv(db, dataset, path, n=JUDGED, seed=0)
    rows = read_csv(path)
    for row in rows:
        row["verdict"] = "maybe"
    rows[5]["verdict"] = "perhaps"
    write_csv(path, rows)
    with pytest.raises(ReviewFileError) as caught:
        import_sample_csv(db, None, path)
    message = str(caught.value)
    last = len(rows) + 1
    assert (f"{len(rows)} row(s) are wrong (rows 2-{last}): rows 2-6, 8-{last}: verdict 'maybe' "
            "is not 'relevant' or 'not relevant' (leave it blank to skip the row); row 7: "
            "verdict 'perhaps' is not") in message
    assert message.count("verdict 'maybe'") == 1 and len(message) < 600, message


def test_a_long_cell_is_cut_where_a_message_quotes_it(db, dataset, tmp_path, store, monkeypatch,
                                                      capsys):
    path = tmp_path / "sample.csv"
    export_sample_csv(db, dataset, path, n=2, seed=0)
    rows = read_csv(path)
    junk = "x" * 100_000
    rows[0].update(verdict=junk, status=junk, query_id=junk)
    write_csv(path, rows)
    with pytest.raises(ReviewFileError) as caught:
        import_sample_csv(db, None, path)
    assert len(str(caught.value)) < 1500 and "x" * 79 + "…'" in str(caught.value)
    for row in rows:  # a file naming a dataset nobody has, through the CLI
        row["dataset"] = "junk " * 20_000
    write_csv(path, rows)
    monkeypatch.setenv("DATABASE_URL", store.url)
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: {dataset}\ndatasets:\n  {dataset}:\n    path: "
                      f"{tmp_path / 'data'}\n")
    assert cli.main(["--config", str(config), "review", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 1500, err
    assert "its dataset column names 'junk junk" in err and "…', which is not a dataset" in err

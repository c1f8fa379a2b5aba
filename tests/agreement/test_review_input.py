"""Issue #16, review queue: spreadsheet formula injection in `review export` (OWASP CSV
injection) and `review import` taking its dataset from the file's own `dataset` column.

Stores, scores and CSV helpers are those of tests/agreement/test_review.py:
tests/support/review_store.py.
"""

from __future__ import annotations

import csv
import uuid

import pytest

from beir_factory import write_beir
from eval_harness.agreement.review import export_review_csv, import_review_csv, queue_disagreements
from eval_harness.agreement.review_file import ReviewFileError
from eval_harness_pipelines import cli
from review_store import (DOCS, QRELS, QUERIES, disagreeing_scores, read_csv, review_rows,
                          set_scores, write_csv)

# Texts a spreadsheet would run as a formula (OWASP: = + - @, tab, carriage return), and
# texts that really start with an apostrophe, which must survive the escaping too.
DANGEROUS = ["=cmd|\" /C calc\"!A0", "+1+1", "-2+3", "@SUM(A1:A9)", "\tx=1", "\r=1",
             "'=already quoted", "''=two quotes", "'plain apostrophe", "=", "'"]
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _raw_cells(path) -> list[list[str]]:
    """Cells as a spreadsheet receives them: no unescaping."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _store_texts(db, name: str, text_of_row) -> None:
    """Write reviewer, note and verdict on every queued row, as an earlier import would."""
    rows = db.execute("""SELECT r.ground_truth_id, r.doc_id FROM judge_review r
                         JOIN ground_truth g ON g.id = r.ground_truth_id
                         WHERE g.dataset = %s ORDER BY g.external_id""",
                      (name,)).fetchall()
    for i, (qid, doc) in enumerate(rows):
        reviewer, note = text_of_row(i)
        db.execute("""UPDATE judge_review SET status = 'adjudicated', verdict = 'relevant',
                          adjudicated_at = now(), reviewer = %s, note = %s
                      WHERE (ground_truth_id, doc_id) = (%s, %s)""",
                   (reviewer, note, qid, doc))


@pytest.fixture
def hostile(db, tmp_path):
    """A dataset whose query, document and external ids start like formulas."""
    from eval_harness.datasets.ingest import ingest_beir

    name = f"inj{uuid.uuid4().hex[:8]}"
    docs = {("-" + d if d == "d1" else d): ("=HYPERLINK(\"http://x\") " + text
                                            if d == "d1" else text)
            for d, text in DOCS.items()}
    queries = {("@" + q if q == "q1" else q): ("-1+1 " + text if q == "q1" else text)
               for q, text in QUERIES.items()}
    qrels = [("@" + q if q == "q1" else q, "-" + d if d == "d1" else d, grade)
             for q, d, grade in QRELS]
    ingest_beir(db, write_beir(tmp_path / "hostile", docs, queries, qrels), name=name)
    scores = disagreeing_scores()
    scores["@q1"] = [("-d1", 0.9, 0.1), ("d2", 0.1, 0.2)]
    del scores["q1"]
    set_scores(db, name, scores)
    queue_disagreements(db, name, threshold=0.4)
    return name


# ---------------------------------------------------------------------------------------
# Formula injection


def test_no_exported_cell_starts_like_a_formula(db, hostile, tmp_path):
    _store_texts(db, hostile, lambda i: (DANGEROUS[i % len(DANGEROUS)],
                                         DANGEROUS[(i + 1) % len(DANGEROUS)]))
    path = export_review_csv(db, hostile, tmp_path / "r.csv").path
    cells = [cell for row in _raw_cells(path)[1:] for cell in row]
    assert cells, "the export has rows"
    assert not [c for c in cells if c[:1] in TRIGGERS], "a cell starts like a formula"
    first = _raw_cells(path)[1]
    header = _raw_cells(path)[0]
    row = dict(zip(header, first))
    assert row["query_external_id"] == "'@q1" and row["doc_external_id"] == "'-d1"
    assert row["query"].startswith("'-1+1 ") and row["doc_snippet"].startswith("'=HYPERLINK")


def test_every_text_survives_export_then_import_byte_for_byte(db, hostile, tmp_path):
    texts = {i: (DANGEROUS[i], DANGEROUS[-1 - i]) for i in range(4)}
    _store_texts(db, hostile, lambda i: texts[i])
    # (no leading whitespace here: an import trims reviewer and note, as it always did)
    before = review_rows(db, hostile)
    path = export_review_csv(db, hostile, tmp_path / "r.csv").path
    rows = read_csv(path)
    # What a reader gets back from every cell is the stored text, once one quote is removed.
    from eval_harness.agreement.review_file import read_review_file
    read_back = [cells for _, cells in read_review_file(path)]
    stored = db.execute("""
        SELECT g.external_id, d.external_id, r.reviewer, r.note, r.verdict, r.status
        FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
        JOIN l2_insights d ON d.id = r.doc_id WHERE g.dataset = %s
        ORDER BY g.external_id, d.external_id""", (hostile,)).fetchall()
    assert [(c["query_external_id"], c["doc_external_id"], c["reviewer"], c["note"],
             c["verdict"], c["status"]) for c in read_back] == stored
    assert read_back[0]["query"] == "-1+1 " + QUERIES["q1"]
    assert read_back[0]["doc_snippet"].startswith("=HYPERLINK(\"http://x\") ")
    assert rows[0]["reviewer"] == "'" + DANGEROUS[0]
    # re-importing the exported file changes nothing at all
    imported = import_review_csv(db, hostile, path)
    assert imported.adjudicated == 0 and imported.unchanged == 4
    assert review_rows(db, hostile) == before


@pytest.mark.parametrize("note", [t for t in DANGEROUS if t.strip() == t and t])
def test_a_note_typed_in_the_file_is_stored_and_exported_again_unchanged(db, hostile,
                                                                        tmp_path, note):
    rows = read_csv(export_review_csv(db, hostile, tmp_path / "r.csv").path)
    # The reviewer's spreadsheet writes the escaped form of what they typed.
    rows[0].update(verdict="relevant", reviewer="ana", note=_escaped(note))
    import_review_csv(db, hostile, write_csv(tmp_path / "edited.csv", rows))
    stored = db.execute("""SELECT r.note FROM judge_review r
                           JOIN ground_truth g ON g.id = r.ground_truth_id
                           WHERE g.dataset = %s AND r.note IS NOT NULL""",
                        (hostile,)).fetchall()
    assert stored == [(note,)]
    again = read_csv(export_review_csv(db, hostile, tmp_path / "again.csv").path)
    assert again[0]["note"] == _escaped(note)


def _escaped(text: str) -> str:
    rest = text.lstrip("'")
    return "'" + text if rest[:1] in TRIGGERS else text


# ---------------------------------------------------------------------------------------
# The file's own dataset column


def _export_with_a_verdict(db, name: str, tmp_path):
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / f"{name}.csv").path)
    rows[0]["verdict"] = "relevant"
    return rows


def test_import_without_a_dataset_uses_the_files_column(db, dataset, tmp_path):
    name = dataset["name"]
    path = write_csv(tmp_path / "edited.csv", _export_with_a_verdict(db, name, tmp_path))
    imported = import_review_csv(db, None, path)
    assert (imported.adjudicated, imported.blank, imported.dataset) == (1, 3, name)


def test_dataset_given_and_different_from_the_file_is_one_error(db, dataset, tmp_path):
    name = dataset["name"]
    path = write_csv(tmp_path / "edited.csv", _export_with_a_verdict(db, name, tmp_path))
    before = review_rows(db, name)
    with pytest.raises(ReviewFileError) as caught:
        import_review_csv(db, "otherset", path)
    message = str(caught.value)
    assert f"'{name}'" in message and "'otherset'" in message and "\n" not in message
    assert "nothing was imported" in message and message.count("row ") == 0
    assert review_rows(db, name) == before


def test_a_file_mixing_datasets_is_one_error_naming_them(db, dataset, tmp_path):
    name = dataset["name"]
    rows = _export_with_a_verdict(db, name, tmp_path)
    rows[2]["dataset"] = "other"
    path = write_csv(tmp_path / "mixed.csv", rows)
    before = review_rows(db, name)
    with pytest.raises(ReviewFileError) as caught:
        import_review_csv(db, None, path)
    message = str(caught.value)
    assert "mixes datasets" in message and f"'{name}' (rows 2-3, 5)" in message
    assert "'other' (row 4)" in message and "nothing was imported" in message
    assert review_rows(db, name) == before


def test_a_file_without_any_dataset_and_no_dataset_given_is_refused(db, dataset, tmp_path):
    name = dataset["name"]
    rows = _export_with_a_verdict(db, name, tmp_path)
    for row in rows:
        row["dataset"] = " "
    with pytest.raises(ReviewFileError, match=r"no row names a dataset.*--dataset") as caught:
        import_review_csv(db, None, write_csv(tmp_path / "blank.csv", rows))
    assert "nothing was imported" in str(caught.value)


def test_cli_import_of_a_non_default_dataset_needs_no_flag(db, dataset, tmp_path, store,
                                                           monkeypatch, capsys):
    from eval_harness.datasets.ingest import ingest_beir

    other = f"def{uuid.uuid4().hex[:8]}"
    ingest_beir(db, write_beir(tmp_path / "other", DOCS, QUERIES, QRELS), name=other)
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: {other}\ndatasets:\n  {other}:\n    path: data\n"
                      f"  {dataset['name']}:\n    path: data\n"
                      "dagster:\n  home: dagster-home\n")
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    set_scores(db, dataset["name"], disagreeing_scores())
    file = tmp_path / "review.csv"
    assert cli.main(["--config", str(config), "review", "export", str(file),
                     "--dataset", dataset["name"]]) == 0
    rows = read_csv(file)
    rows[0]["verdict"] = "relevant"
    write_csv(file, rows)
    capsys.readouterr()
    code = cli.main(["--config", str(config), "review", "import", str(file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"review queue of '{dataset['name']}'" in out and "1 verdict(s) stored" in out
    code = cli.main(["--config", str(config), "review", "import", str(file),
                     "--dataset", other])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert f"'{dataset['name']}'" in err and f"'{other}'" in err


def test_a_file_without_rows_imports_nothing_and_needs_no_dataset(db, dataset, tmp_path):
    before = review_rows(db, dataset["name"])
    imported = import_review_csv(db, None, write_csv(tmp_path / "empty.csv", []))
    assert (imported.adjudicated, imported.unchanged, imported.blank,
            imported.dataset) == (0, 0, 0, None)
    assert review_rows(db, dataset["name"]) == before

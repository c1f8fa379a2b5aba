"""Bad input in a BEIR folder ends in one sentence naming the file and line, and the store is
left as it was: bytes that are not UTF-8, a text
Postgres cannot hold, a document too long for a tsvector; and what the reader accepts but
says: a qrels file without its header, negative grades.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beir_factory import write_beir
from eval_harness.datasets.beir import DatasetError, read_beir
from eval_harness.datasets.ingest import ingest_beir
from paths import REPO

DOCS = {"d1": "aspirin lowers heart attack risk", "d2": "statins lower cholesterol",
        "d3": "café au lait spots in children"}
QUERIES = {"q1": "does aspirin prevent heart attacks", "q2": "what lowers cholesterol"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 2)]


def folder_with(tmp_path: Path, **files: bytes) -> Path:
    """A valid BEIR folder, then the named files (corpus, queries, qrels) replaced by bytes."""
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS)
    paths = {"corpus": folder / "corpus.jsonl", "queries": folder / "queries.jsonl",
             "qrels": folder / "qrels" / "test.tsv"}
    for name, data in files.items():
        paths[name].write_bytes(data)
    return folder


def jsonl(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


CORPUS = [{"_id": k, "title": "", "text": v} for k, v in DOCS.items()]
QUERY_LINES = [{"_id": k, "text": v} for k, v in QUERIES.items()]


def rows(conn) -> tuple[int, int]:
    return (conn.execute("SELECT count(*) FROM datasets").fetchone()[0],
            conn.execute("SELECT count(*) FROM l2_insights").fetchone()[0])


# --- not UTF-8 ----------------------------------------------------------------------------

def latin1_corpus() -> bytes:
    lines = jsonl(CORPUS).splitlines(keepends=True)
    # line 3 as a Latin-1 editor saves it: "café" with é as the single byte 0xe9
    lines[2] = json.dumps(CORPUS[2], ensure_ascii=False).encode("latin-1") + b"\n"
    return b"".join(lines)


@pytest.mark.parametrize("name, data, where", [
    ("corpus", latin1_corpus(), "corpus.jsonl:3"),
    ("queries", jsonl(QUERY_LINES[:1]) + b'{"_id": "q2", "text": "what \xff lowers"}\n',
     "queries.jsonl:2"),
    ("qrels", b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\xa0\t2\n", "test.tsv:3"),
])
def test_bytes_that_are_not_utf8_name_the_file_and_line(fresh, tmp_path, name, data, where):
    folder = folder_with(tmp_path, **{name: data})
    with fresh.connection() as conn:
        with pytest.raises(DatasetError) as caught:
            ingest_beir(conn, folder, name="latin")
        assert rows(conn) == (0, 0)
    message = str(caught.value)
    assert message.startswith(f"{folder}/") and f"{where}: not valid UTF-8 (byte 0x" in message
    assert "save the file as UTF-8" in message


@pytest.mark.unit
def test_the_byte_and_its_place_in_the_line_are_named(tmp_path):
    folder = folder_with(tmp_path, corpus=latin1_corpus())
    with pytest.raises(DatasetError) as caught:
        read_beir(folder)
    # {"_id": "d3", "title": "", "text": "caf  <- the 0xe9 is the 40th byte of the line
    assert "not valid UTF-8 (byte 0xe9 at byte 40 of the line)" in str(caught.value)


@pytest.mark.unit
def test_a_byte_order_mark_is_no_content(tmp_path):
    bom = b"\xef\xbb\xbf"
    folder = folder_with(tmp_path, corpus=bom + jsonl(CORPUS), queries=bom + jsonl(QUERY_LINES),
                         qrels=bom + b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n")
    data = read_beir(folder)
    assert [d.external_id for d in data.documents] == ["d1", "d2", "d3"]
    assert [q.external_id for q in data.queries] == ["q1", "q2"] and data.notices == ()


@pytest.mark.parametrize("record, field", [
    ({"_id": "d3", "title": "", "text": "broken \\ud83d half of an emoji"}, "text"),
    ({"_id": "d3", "title": "", "text": "ok", "metadata": {"source": "\\udc00"}}, "metadata"),
])
def test_an_unpaired_surrogate_escape_names_the_line(fresh, tmp_path, record, field):
    # json.dumps would escape the backslash; write the JSON escape itself
    line = json.dumps(record).replace("\\\\u", "\\u").encode() + b"\n"
    folder = folder_with(tmp_path, corpus=jsonl(CORPUS[:2]) + line)
    with fresh.connection() as conn:
        with pytest.raises(DatasetError, match=r"corpus\.jsonl:3: text contains an unpaired "
                                               r"surrogate \(\\u[0-9a-f]{4}\)"):
            ingest_beir(conn, folder, name="surrogate")
        assert rows(conn) == (0, 0)


# --- too long for a tsvector ---------------------------------------------------------------

def distinct_words(count: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = []
    for i in range(count):
        word = ""
        for _ in range(5):
            i, r = divmod(i, 26)
            word += letters[r]
        words.append("zq" + word)
    return " ".join(words)


def test_a_document_too_long_for_a_tsvector_is_named(fresh, tmp_path):
    docs = {**DOCS, "huge": distinct_words(160_000)}  # 160k distinct 7-letter words: > 1 MB
    folder = write_beir(tmp_path / "data", docs, QUERIES, QRELS)
    with fresh.connection() as conn:
        with pytest.raises(DatasetError) as caught:
            ingest_beir(conn, folder, name="long", language="simple")
        assert rows(conn) == (0, 0)
    message = str(caught.value)
    assert message.startswith(f"{folder / 'corpus.jsonl'}:4: document 'huge' is too long for "
                              "Postgres full-text search (string is too long for tsvector (")
    assert message.endswith("split it into smaller documents or shorten it; nothing was stored.")


def test_a_long_document_with_few_distinct_words_is_fine(fresh, tmp_path):
    docs = {**DOCS, "long": "aspirin " * 200_000}  # 1.6 MB of text, one lexeme
    folder = write_beir(tmp_path / "data", docs, QUERIES, QRELS)
    with fresh.connection() as conn:
        report = ingest_beir(conn, folder, name="long", language="simple")
    assert report.documents.inserted == 4


# --- what the reader accepts, and says ----------------------------------------------------

@pytest.mark.unit
def test_qrels_without_header_lose_nothing_and_say_so(tmp_path, caplog):
    folder = folder_with(tmp_path, qrels=b"q1\td1\t1\nq2\td2\t2\n")
    with caplog.at_level(logging.WARNING, logger="eval_harness.datasets.beir"):
        data = read_beir(folder)
    assert {q.external_id: q.relevance for q in data.queries} == {"q1": {"d1": 1},
                                                                  "q2": {"d2": 2}}
    notice = f"{folder / 'qrels' / 'test.tsv'}: no header line (query-id, corpus-id, score); " \
             "line 1 was read as data"
    assert data.notices == (notice,)
    assert [r.getMessage() for r in caplog.records] == [notice]


def test_negative_grades_are_judged_not_relevant_and_counted(fresh, tmp_path):
    qrels = (b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td3\t-2\nq2\td2\t-1\nq2\td3\t0\n")
    folder = folder_with(tmp_path, qrels=qrels)
    with fresh.connection() as conn:
        report = ingest_beir(conn, folder, name="negative")
        stored = conn.execute("SELECT g.external_id, array(SELECT d.external_id FROM "
                              "unnest(g.expected_docs) e JOIN l2_insights d ON d.id = e), "
                              "g.relevance_grades FROM ground_truth g ORDER BY 1").fetchall()
    # q2 has no relevant document left (-1 and 0): left out like any such query
    assert stored == [("q1", ["d1"], [1])] and report.skipped_queries == 1
    assert report.notices == (f"{folder / 'qrels' / 'test.tsv'}: 2 judgements have a negative "
                              "grade (lines 3, 4); read as judged not relevant, like 0, and "
                              "not stored",)


def test_the_ingest_command_prints_the_notices_and_names_bad_bytes(fresh, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_HARNESS_", "OPENAI",
                                                                     "ANTHROPIC"))}
    env.update(DATABASE_URL=fresh.url, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "eval_harness_pipelines.cli", "ingest"]
    clean = folder_with(tmp_path / "clean", qrels=b"q1\td1\t1\nq2\td2\t-2\nq2\td3\t1\n")
    done = subprocess.run([*command, str(clean), "--name", "clean"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    notices = [line for line in done.stderr.splitlines() if "test.tsv" in line]
    assert notices == [f"{clean / 'qrels' / 'test.tsv'}: no header line (query-id, corpus-id, "
                       "score); line 1 was read as data",
                       f"{clean / 'qrels' / 'test.tsv'}: 1 judgement has a negative grade "
                       "(lines 2); read as judged not relevant, like 0, and not stored"]
    latin = folder_with(tmp_path / "latin", corpus=latin1_corpus())
    done = subprocess.run([*command, str(latin), "--name", "latin"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    config_line, error = done.stderr.strip().splitlines()  # no config.yaml here: said first
    assert config_line.startswith("eval-harness: config: none (no config.yaml in ")
    assert error == (f"eval-harness: error: {latin / 'corpus.jsonl'}:3: not valid "
                     "UTF-8 (byte 0xe9 at byte 40 of the line); save the file as "
                     "UTF-8 (from Latin-1: iconv -f latin1 -t utf-8).")

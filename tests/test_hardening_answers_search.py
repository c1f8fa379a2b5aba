"""Issue #16: answers files with bad bytes or far-future dates, and `search --k` bounds."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.gates.answers import AnswersFileError, import_answers, read_answers_file
from eval_harness.retrieval.hybrid import hybrid_search
from eval_harness_pipelines import cli


def answer_line(answer_id: str, created_at: str | None = "2024-06-02T10:00:00Z") -> str:
    row = {"id": answer_id, "query": "What does it show?", "answer": "A claim [1].",
           "sources": [{"id": "d1", "text": "A claim."}]}
    if created_at is not None:
        row["created_at"] = created_at
    return json.dumps(row)


def write_lines(path, lines: list[bytes]):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


# --- 5a: a byte that is not UTF-8 is named on its own line ---------------------------------

def test_bad_utf8_byte_names_its_line_and_the_byte(tmp_path):
    tag = uuid.uuid4().hex[:8]
    lines = [answer_line(f"{tag}-{n}").encode() for n in range(1, 6)]
    # line 6: "café" saved as Latin-1; the 0xe9 is byte 43 of the line
    bad = answer_line(f"{tag}-6").replace("A claim [1].", "caf\u00e9 [1].").encode("latin-1")
    path = write_lines(tmp_path / "latin1.jsonl", lines + [bad])
    column = bad.index(b"\xe9") + 1
    with pytest.raises(AnswersFileError) as raised:
        list(read_answers_file(path))
    message = str(raised.value)
    assert message.startswith(f"{path}:6: not valid UTF-8 (byte 0xe9 at byte {column} ")
    assert "\n" not in message


def test_bad_utf8_imports_nothing(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    path = write_lines(tmp_path / "bad.jsonl",
                       [answer_line(f"{tag}-1").encode(), answer_line(f"{tag}-2").encode(),
                        b'{"id": "\xff"}'])
    with pytest.raises(AnswersFileError, match=r":3: not valid UTF-8 \(byte 0xff"):
        import_answers(conn, path)
    assert conn.execute("SELECT count(*) FROM answers WHERE id LIKE %s",
                        (f"{tag}%",)).fetchone()[0] == 0


def test_byte_order_mark_and_crlf_are_still_read(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + answer_line("a").encode() + b"\r\n"
                     + answer_line("b").encode() + b"\r\n")
    assert [r.id for r in read_answers_file(path)] == ["a", "b"]


# --- 6a: a created_at far in the future is refused ------------------------------------------

def test_answer_from_the_year_2999_is_refused_naming_file_line_and_date(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    path = write_lines(tmp_path / "future.jsonl",
                       [answer_line(f"{tag}-1").encode(),
                        answer_line(f"{tag}-2", "2999-01-01T00:00:00Z").encode()])
    with pytest.raises(AnswersFileError) as raised:
        import_answers(conn, path)
    message = str(raised.value)
    assert message.startswith(f"{path}:2: 'created_at' '2999-01-01T00:00:00Z' is in the future")
    assert "\n" not in message
    assert conn.execute("SELECT count(*) FROM answers WHERE id LIKE %s",
                        (f"{tag}%",)).fetchone()[0] == 0


def test_future_tolerance_is_one_day_of_clock_skew(tmp_path):
    now = datetime.now(timezone.utc)
    soon = (now + timedelta(hours=12)).isoformat()
    later = (now + timedelta(days=2)).isoformat()
    path = write_lines(tmp_path / "skew.jsonl", [answer_line("a", soon).encode()])
    assert [r.id for r in read_answers_file(path)] == ["a"]
    path = write_lines(tmp_path / "late.jsonl", [answer_line("a", later).encode()])
    with pytest.raises(AnswersFileError, match=r":1: 'created_at' .* is in the future"):
        list(read_answers_file(path))


# --- 5b/6b: search --k and --candidate-depth -------------------------------------------------

DOCS = {f"d{n}": f"heart health note number {n}" for n in range(1, 9)}
QUERIES = {"q1": "heart health"}


@pytest.fixture
def project(tmp_path, store, monkeypatch):
    """A config with candidate_depth 3 and an ingested eight-document dataset."""
    name = f"k{uuid.uuid4().hex[:8]}"
    vectors = np.eye(len(DOCS), 8, dtype=np.float32)
    write_beir(tmp_path / "data", DOCS, QUERIES, [("q1", "d1", 1)], doc_vectors=vectors,
               query_vectors=vectors[[0]])
    config = tmp_path / "config.yaml"
    config.write_text(f"""
default_dataset: {name}
datasets:
  {name}:
    path: data
hybrid_search:
  semantic: 0.7
  keyword: 0.3
  candidate_depth: 3
dagster:
  home: dagster-home
""")
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    code = cli.main(["--config", str(config), "ingest", str(tmp_path / "data"), "--name", name])
    assert code == 0
    return {"config": str(config), "name": name}


def search(capsys, project, *extra):
    code = cli.main(["--config", project["config"], "search", "--dataset", project["name"],
                     "heart health", "--json", *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("k", ["-1", "0"])
def test_k_must_be_a_positive_integer(project, capsys, k):
    code, out, err = search(capsys, project, "--k", k)
    assert code == 2 and out == ""
    assert err == f"eval-harness: error: --k must be a positive integer, got {k}.\n"


@pytest.mark.parametrize("depth", ["0", "-4", "1001"])
def test_candidate_depth_out_of_range_is_refused_not_replaced(project, capsys, depth):
    # 0 used to fall back to the configured depth silently
    code, out, err = search(capsys, project, "--candidate-depth", depth)
    assert code == 2 and out == ""
    assert err == ("eval-harness: error: --candidate-depth must be between 1 and 1000, "
                   f"got {depth}.\n")


def test_k_above_the_candidate_depth_gets_a_notice(project, capsys):
    code, out, err = search(capsys, project, "--k", "100000")
    hits = json.loads(out)["hits"]
    assert code == 0 and 1 <= len(hits) <= 6  # the union of 3 nearest and 3 best keyword
    assert err.count("\n") == 1 and err.startswith("eval-harness: notice: ")
    assert "--k 100000" in err and "candidate depth 3" in err and "--candidate-depth" in err
    assert "at most 6 results" in err
    # keyword-only (free text, no embedding): one list of 3 candidates
    code = cli.main(["--config", project["config"], "search", "--dataset", project["name"],
                     "health note", "--semantic-weight", "0", "--k", "10"])
    out, err = capsys.readouterr()
    assert code == 0 and "at most 3 results" in err and err.count("\n") == 1
    # within the depth: no notice
    code, out, err = search(capsys, project, "--k", "3")
    assert code == 0 and len(json.loads(out)["hits"]) == 3 and err == ""
    # raising the depth as the notice says brings every document back
    code, out, err = search(capsys, project, "--k", "8", "--candidate-depth", "8")
    assert code == 0 and len(json.loads(out)["hits"]) == 8 and err == ""


def test_hybrid_search_refuses_a_k_below_one(conn):
    with pytest.raises(ValueError, match="k must be a positive integer, got -1"):
        hybrid_search(conn, "never-looked-up", query_text="x", query_embedding=None, k=-1,
                      semantic_weight=0)

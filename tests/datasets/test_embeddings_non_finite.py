"""No metric over a NaN score (issue #16, item 1).

A vector cosine similarity cannot use (NaN, infinite, overflowing, or all zeros) is refused at
ingest, from embeddings.npz and from an embedder alike, naming the document or query and the
file, and nothing is stored. A store that holds one anyway (written by an earlier version or
by hand) makes `report` and `calibrate` stop with one sentence instead of scoring a NaN
ranking, which sorts by document id and gives near-zero metrics without a word.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.beir import DatasetError
from eval_harness.datasets.ingest import ingest_beir

DOCS = {f"d{i}": f"document {i} about aspirin and topic {i % 3}" for i in range(8)}
QUERIES = {"q0": "aspirin topic 0", "q1": "aspirin topic 1", "q2": "aspirin topic 2"}
QRELS = [("q0", "d0", 1), ("q0", "d3", 1), ("q1", "d1", 1), ("q2", "d2", 2)]
DIM = 8


def vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM))


def stored(conn, name: str) -> int:
    return conn.execute("SELECT count(*) FROM datasets WHERE name = %s", (name,)).fetchone()[0]


# --- embeddings.npz -----------------------------------------------------------------------

@pytest.mark.parametrize("bad, problem", [
    (np.nan, "contains NaN or infinite values"),
    (np.inf, "contains NaN or infinite values"),
    (-np.inf, "contains NaN or infinite values"),
    (1e20, "is too large (its squared length overflows float32)"),
])
def test_a_non_finite_document_vector_in_the_file_is_refused_by_id(fresh, tmp_path, bad,
                                                                   problem):
    docs = vectors(len(DOCS), 0)
    docs[2, 5] = bad
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS, doc_vectors=docs)
    with fresh.connection() as conn:
        with pytest.raises(DatasetError) as caught:
            ingest_beir(conn, folder, name="nonfinite")
        assert stored(conn, "nonfinite") == 0
    assert str(caught.value) == (f"{folder / 'embeddings.npz'}: the embedding of document "
                                 f"'d2' {problem}; recompute the file.")


def test_a_non_finite_query_vector_in_the_file_is_refused_by_id(fresh, tmp_path):
    queries = vectors(len(QUERIES), 1)
    queries[1, 0] = np.nan
    queries[2, 0] = np.inf
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS, query_vectors=queries)
    with fresh.connection() as conn:
        with pytest.raises(DatasetError, match=re.escape(
                "the embedding of query 'q1' contains NaN or infinite values (2 such vectors "
                "in all); recompute the file.")) as caught:
            ingest_beir(conn, folder, name="nonfinite")
        assert stored(conn, "nonfinite") == 0
    assert str(folder / "embeddings.npz") in str(caught.value)


def test_an_all_zero_query_vector_in_the_file_is_refused_by_id(fresh, tmp_path):
    queries = vectors(len(QUERIES), 1)
    queries[0] = 0.0
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS, query_vectors=queries)
    with fresh.connection() as conn, pytest.raises(DatasetError, match="query 'q0' is all zeros"):
        ingest_beir(conn, folder, name="zero")


# --- computed embeddings ------------------------------------------------------------------

class BrokenEmbedder:
    """Deterministic vectors, except for the texts it is told to break."""

    model = "test-broken"

    def __init__(self, broken: dict[str, float]):
        self.broken = broken  # text -> the value every component of its vector gets

    def embed(self, texts):
        rows = []
        for text in texts:
            row = np.random.default_rng(sum(map(ord, text))).normal(size=DIM)
            if text in self.broken:
                row[:] = self.broken[text]
            rows.append(row)
        return np.array(rows, dtype=np.float32)


def computed_folder(tmp_path: Path) -> Path:
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS)
    (folder / "embeddings.npz").unlink()  # the embedder computes them
    return folder


@pytest.mark.parametrize("value, problem", [
    (0.0, "is all zeros (cosine similarity with it is undefined)"),
    (np.nan, "contains NaN or infinite values"),
])
def test_a_computed_document_vector_cosine_cannot_use_is_refused_by_id(fresh, tmp_path, value,
                                                                       problem):
    folder = computed_folder(tmp_path)
    broken = {DOCS["d4"]: value}  # a document's text is its content (no title here)
    with fresh.connection() as conn:
        with pytest.raises(DatasetError) as caught:
            ingest_beir(conn, folder, name="computed",
                        embedder_factory=lambda: BrokenEmbedder(broken))
        assert stored(conn, "computed") == 0
        assert conn.execute("SELECT count(*) FROM l2_insights").fetchone()[0] == 0
    assert str(caught.value) == (
        f"{folder / 'corpus.jsonl'}: the test-broken embedding of document 'd4' {problem}; "
        "nothing was stored; check that text and the embedder.")


def test_a_computed_query_vector_cosine_cannot_use_is_refused_by_id(fresh, tmp_path):
    folder = computed_folder(tmp_path)
    with fresh.connection() as conn:
        with pytest.raises(DatasetError, match=re.escape(
                f"{folder / 'queries.jsonl'}: the test-broken embedding of query 'q1' contains "
                "NaN or infinite values;")):
            ingest_beir(conn, folder, name="computed",
                        embedder_factory=lambda: BrokenEmbedder({QUERIES["q1"]: np.inf}))
        assert stored(conn, "computed") == 0


def test_a_sound_embedder_still_ingests(fresh, tmp_path):
    with fresh.connection() as conn:
        report = ingest_beir(conn, computed_folder(tmp_path), name="computed",
                             embedder_factory=lambda: BrokenEmbedder({}))
    assert report.documents.inserted == len(DOCS) and report.queries.inserted == len(QUERIES)


# --- the commands, on a store that holds a zero vector anyway -----------------------------

@pytest.fixture
def poisoned(fresh, tmp_path, monkeypatch):
    """A dataset ingested cleanly, then one vector zeroed behind ingest's back."""
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS)
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="tiny")
        conn.commit()
    config = tmp_path / "config.yaml"
    config.write_text("default_dataset: tiny\ndatasets:\n  tiny: {path: data}\n"
                      "history: {duckdb_path: history.duckdb}\n")
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return fresh, config


def zero(location, table: str, column: str, external_id: str) -> None:
    with location.connection() as conn:
        conn.execute(f"UPDATE {table} SET {column} = array_fill(0, ARRAY[{DIM}])::vector "
                     f"WHERE external_id = %s", (external_id,))
        conn.commit()


def cli(capsys, config: Path, *argv: str) -> tuple[int, str, str]:
    from eval_harness_pipelines import cli as installed

    code = installed.main(["--config", str(config), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def offered_options(command: str) -> set[str]:
    from eval_harness_pipelines.cli import build_parser

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]
    return {s for p in (parser, sub) for a in p._actions for s in a.option_strings}


def test_report_stops_on_a_zero_document_vector_instead_of_scoring_zero(poisoned, capsys):
    location, config = poisoned
    code, out, err = cli(capsys, config, "report", "--json")
    assert code == 0, err  # the clean dataset reports
    zero(location, "l2_insights", "embedding", "d3")
    code, out, err = cli(capsys, config, "report", "--json")
    assert (code, out) == (2, ""), out
    [line] = err.strip().splitlines()
    # as calibrate does: the query by its own id, the vector to blame (issue #26)
    assert line.startswith("eval-harness: error: dataset 'tiny': query 'q"), line
    assert "is NaN" in line and "no metric is computed" in line
    assert "the embedding of document 'd3' is all zeros" in line


@pytest.mark.parametrize("table, column, external_id, blame", [
    ("l2_insights", "embedding", "d3", "the embedding of document 'd3' is all zeros"),
    ("ground_truth", "query_embedding", "q1", "query 'q1' has"),
])
def test_calibrate_names_the_vector_and_suggests_only_options_it_has(poisoned, capsys, table,
                                                                     column, external_id,
                                                                     blame):
    location, config = poisoned
    zero(location, table, column, external_id)
    code, out, err = cli(capsys, config, "calibrate", "--no-write")
    assert (code, out) == (2, ""), out
    [line] = err.strip().splitlines()
    assert "dataset 'tiny': query '" in line and blame in line, line
    assert "no metric is computed" in line and "re-ingest the dataset" in line
    if table == "ground_truth":
        assert "the query's own embedding is all zeros or not finite" in line
    assert "per_retriever" not in line and "normalisation" not in line
    assert set(re.findall(r"--[a-z][a-z-]*", line)) <= offered_options("calibrate")

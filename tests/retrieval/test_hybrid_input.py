"""`search --k` and `--candidate-depth` bounds, and hybrid_search's own k check."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.retrieval.hybrid import hybrid_search
from eval_harness_pipelines import cli

# --- 5b/6b: search --k and --candidate-depth -------------------------------------------------

DOCS = {f"d{n}": f"heart health note number {n}" for n in range(1, 9)}
QUERIES = {"q1": "heart health"}


def make_project(path):
    """A config with candidate_depth 3 and an ingested eight-document dataset."""
    name = f"k{uuid.uuid4().hex[:8]}"
    vectors = np.eye(len(DOCS), 8, dtype=np.float32)
    write_beir(path.parent / "data", DOCS, QUERIES, [("q1", "d1", 1)], doc_vectors=vectors,
               query_vectors=vectors[[0]])
    path.write_text(f"""
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
    code = cli.main(["--config", str(path), "ingest", str(path.parent / "data"), "--name", name])
    assert code == 0


pytestmark = pytest.mark.project(config=make_project)  # the tests below


def search(capsys, project, *extra):
    code = cli.main(["--config", str(project), "search", "--dataset", project.default_dataset,
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
    # refused, never replaced by the configured depth without a word
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
    code = cli.main(["--config", str(project), "search", "--dataset", project.default_dataset,
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

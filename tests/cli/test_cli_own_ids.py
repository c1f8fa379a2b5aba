"""Live stores whose ids are text or uuid, through the CLI: attach, report,
judge with the local judges, review export and import, calibrate with its TREC runs, the
gate on answers citing own ids, the write-back of judge scores.

Each store holds the documents and queries of a seed-layout store (``rag``, integer ids) with
its ids made text (``varchar``: ``doc-007``) or ``uuid`` (tests/support/own_id_store.py), so
every figure must equal the integer store's; outputs name the store's own ids; P@5 of the
harness's TREC runs in ranx, against qrels written here from the store's own table, equals
calibrate's; the RAG relations are unchanged, byte for byte.
"""

from __future__ import annotations

import csv
import json
import warnings

import pytest
from ranx import Qrels, Run, evaluate

from cli_runs import run_cli
from eval_harness.datasets.demo_store import build_rag_store
from own_id_store import (
    build_own_id_store,
    own_doc_id,
    own_query_id,
    own_store_checksum,
    own_store_config,
)

GATES = """quality_gates:
  partition_start: 2025-01-01
  answers: {relation: own.answers, id: id, query: query, answer: answer,
            created_at: created_at, sources: {column: sources, kind: ids}, dataset: own}
  gates:
    grounding: {enabled: false}
    answer_reward: {enabled: false}
"""


def write_config(root, extra_own: dict | None = None) -> str:
    config = root / "config.yaml"
    config.write_text(
        "default_dataset: own\n"
        "datasets:\n" + own_store_config("own", "own", **(extra_own or {}))
        + "  ints:\n    language: english\n    embedder: local:test-random\n    live:\n"
          "      corpus: {relation: rag.l2_insights, id: id, content: content, "
          "embedding: embedding, tsvector: null}\n"
          "      ground_truth: {relation: rag.ground_truth, id: id, query: query, "
          "expected_docs: expected_docs}\n"
        "history: {duckdb_path: history.duckdb}\n"
        "judges: {judge1: 'local:lexical', judge2: 'local:embedding', budget_usd: null}\n"
        "dagster: {home: dagster-home}\n" + GATES, encoding="utf-8")
    return str(config)


@pytest.fixture(params=["text", "uuid"])
def own_ids(request, fresh, beir_folder) -> str:
    """The RAG store and one of its own ids' kind (text or uuid) in the test's database, with
    two served answers citing own ids, one of them unknown; returns the kind."""
    kind = request.param
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        build_own_id_store(conn, kind, schema="own")
        with conn.transaction():  # two served answers citing own ids, one of them unknown
            conn.execute(
                "INSERT INTO own.answers VALUES ('a1', 'q', 'Aspirin lowers the risk of a heart "
                "attack [1] and of a stroke [2].', ARRAY[%s, %s]::{t}, '2025-03-01T10:00:00Z'), "
                "('a2', 'q', 'Vitamin intake is discussed in this study [1].', ARRAY[%s]::{t}, "
                "'2025-03-01T11:00:00Z')".replace("{t}",
                                                  "varchar[]" if kind == "text" else "uuid[]"),
                (own_doc_id(kind, 1), own_doc_id(kind, 2), UNKNOWN[kind]))
    return kind


pytestmark = pytest.mark.project(config=lambda path, own_ids: write_config(path.parent),
                                 database="fresh", chdir=True)


UNKNOWN = {"text": "doc-999", "uuid": "00000000-0000-4000-8000-000000000999"}


def cli(capsys, project, *argv):
    return run_cli(capsys, "--config", str(project), *argv)


def checksum(project) -> str:
    with project.store.connection() as conn:
        return own_store_checksum(conn, "own")


@pytest.mark.slow
def test_a_store_with_own_ids_runs_through_every_command(project, own_ids, capsys):
    kind, root = own_ids, project.folder
    before = checksum(project)
    doc_ids = {own_doc_id(kind, n) for n in range(1, 61)}
    for dataset in ("own", "ints"):
        code, out, err = cli(capsys, project, "attach", "--dataset", dataset)
        assert code == 0 and "15 queries (15 new" in out, err

    # the same documents: the same figures as the integer store
    reports = {}
    for dataset in ("own", "ints"):
        code, out, err = cli(capsys, project, "report", "--dataset", dataset, "--json")
        assert code == 0, err
        reports[dataset] = json.loads(out)
    figures = ("p_at_5", "recall_at_5", "ndcg_at_10", "mrr_at_10")
    own, ints = (_metrics(reports[d], figures) for d in ("own", "ints"))
    assert own == ints and own["p_at_5"] > 0

    code, out, err = cli(capsys, project, "search", "--dataset", "own", "aspirin heart",
                         "--semantic-weight", "0", "--json")
    assert code == 0, err
    assert {h["external_id"] for h in json.loads(out)["hits"]} <= doc_ids

    # judges, then the review queue: the file names the documents by their own ids
    code, out, err = cli(capsys, project, "judge", "--dataset", "own")
    assert code == 0, err
    file = root / "review.csv"
    code, out, err = cli(capsys, project, "review", "export", str(file), "--dataset", "own")
    assert code == 0, err
    with file.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows, out
    assert {r["doc_external_id"] for r in rows} <= doc_ids
    assert {r["query_external_id"] for r in rows} <= {own_query_id(kind, n)
                                                       for n in range(1, 16)}
    rows[0]["verdict"] = "relevant"
    with file.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = cli(capsys, project, "review", "import", str(file))
    assert code == 0 and "1 verdict(s) stored" in out, err

    # calibrate's TREC runs are in own ids; ranx on them against qrels written from the
    # store's own table gives calibrate's P@5
    runs = root / "runs"
    code, out, err = cli(capsys, project, "calibrate", "--dataset", "own", "--json",
                         "--trec-runs", str(runs))
    result = json.loads(out)
    assert code in (0, 1) and "Traceback" not in err, err  # 1: the P@5 verdict failed
    with project.store.connection() as conn:
        qrels = {qid: {doc: 1 for doc in expected} for qid, expected in conn.execute(
            "SELECT id::text, expected_ids::text[] FROM own.questions")}
    warnings.filterwarnings("ignore")  # numba casting warnings inside ranx
    for point in (result["grid"][0], result["grid"][-1]):  # ranx is slow to start
        path = runs / f"run.own.semantic-{point['semantic_weight']:.2f}.trec"
        lines = path.read_text().splitlines()
        assert {line.split()[2] for line in lines} <= doc_ids
        run = Run.from_file(str(path), kind="trec")
        assert evaluate(Qrels(qrels), run, "precision@5") == pytest.approx(
            point["p_at_5"], abs=1e-12)

    # the gate resolves the cited own ids; the unknown one is named as the store writes it
    code, out, err = cli(capsys, project, "gate", "--since", "2025-03-01", "--json")
    assert "Traceback" not in err, err
    checks = {c["gate"]: c for c in json.loads(out)["checks"]}
    assert checks["citation_coverage"]["failing_answer_ids"] == ["a2"]
    with project.store.connection() as conn:
        missing = conn.execute(
            "SELECT details->'missing_sources' FROM eval_harness.gate_results "
            "WHERE answer_id = 'a2' AND gate = 'citation_coverage'").fetchone()[0]
    assert missing == [{"number": 1, "id": UNKNOWN[kind]}]
    assert checksum(project) == before


def _metrics(report: dict, names) -> dict:
    found = {}

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in names and key not in found:
                    found[key] = value
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(report)
    assert set(found) == set(names), report
    return found

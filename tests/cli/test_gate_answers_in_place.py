"""`eval-harness gate` and `answers import` with ``quality_gates.answers``
(eval_harness.cli.gate, eval_harness.cli.answers): a seeds-style store's answers gated in place
through both paths (``--since`` through the library, ``--partition`` through the Dagster job),
a bad mapping and an import refused in one sentence (exit 2), and not a RAG row changed."""

from __future__ import annotations

import json

import pytest

from answer_files import SAMPLE
from cli_runs import run_cli
from eval_harness.datasets.demo_store import build_rag_store
from served_answers import DAY, lay_out_served_answers, served_checksum

CONFIG = """
datasets:
  live:
    embedder: local:test-random
    live:
      corpus: {{relation: rag.l2_insights, id: id, content: content, embedding: embedding}}
      ground_truth: {{relation: rag.ground_truth, id: id, query: query,
                     expected_docs: expected_docs}}
quality_gates:
  partition_start: 2025-01-01
  answers: {{relation: rag.served_answers, id: answer_id, query: question, answer: response,
            created_at: {created_at}, sources: {{column: source_ids, kind: ids}},
            dataset: live}}
  gates:
    grounding: {{enabled: false}}
    answer_reward: {{enabled: false}}
dagster:
  home: dagster-home
"""


@pytest.fixture
def served(fresh, beir_folder):
    """The RAG store with its served answers laid out, in the test's database."""
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        lay_out_served_answers(conn)


pytestmark = pytest.mark.project(
    config=lambda path, served: path.write_text(CONFIG.format(created_at="served_at")),
    database="fresh")


def checksum(project) -> str:
    with project.store.connection() as conn:
        return served_checksum(conn)


def test_both_gate_paths_read_the_answers_in_place(project, capsys):
    before, config = checksum(project), project
    code, out, err = run_cli(capsys, "--config", config, "gate", "--since", DAY, "--json")
    assert code == 1, err  # citation_coverage: 3 of 4 < 0.90, blocking
    checks = {c["gate"]: c for c in json.loads(out)["checks"]}
    assert checks["citation_coverage"]["failing_answer_ids"] == ["2"]
    assert checks["format_compliance"]["answers"] == 4
    code, out, err = run_cli(capsys, "--config", config, "gate", "--partition", DAY, "--json")
    assert code == 1, err
    report = json.loads(out)
    checks = {c["gate"]: c for c in report["checks"]}
    assert checks["citation_coverage"]["failing_answer_ids"] == ["2"]
    assert checks["citation_coverage"]["evaluated_now"] == 0  # --since stored them already
    assert checksum(project) == before


def test_a_bad_mapping_and_an_import_are_refused_in_one_sentence(project, capsys, tmp_path):
    before = checksum(project)
    code, _, err = run_cli(capsys, "--config", project, "answers", "import", SAMPLE)
    assert code == 2 and "'quality_gates.answers' maps the RAG system's own table " \
        "rag.served_answers, which the harness only reads" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.format(created_at="served_local"))
    for window in (("--since", DAY), ("--partition", DAY)):
        junit = tmp_path / "gate.xml"
        code, _, err = run_cli(capsys, "--config", bad, "gate", *window,
                               "--junit-xml", junit)
        assert code == 2 and "Traceback" not in err, err
        assert ("'quality_gates.answers.created_at': column rag.served_answers.served_local is "
                "timestamp without time zone") in err
        assert "served_local" in junit.read_text()
    assert checksum(project) == before

"""``eval-harness compare`` as a pull request uses it, on SciFact (the bundled copy of
../shared/datasets/scifact, with its embeddings): the shipped weights 0.7/0.3 recorded as
``main``, 0.1/0.9 as the candidate: P@5 worse with an interval wholly below zero, exit 1, in
the JSON, the Markdown comment and the JUnit XML; the same configuration recorded twice
compares as no difference, exit 0; records that measured another ground truth, or share too
few queries, are not compared (exit 2, one sentence)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from cli_runs import run_cli

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
THIS = "tests/cli/test_compare.py"
CONFIG = """\
default_dataset: scifact
datasets:
  scifact:
    path: {data}
    language: english
    split: test
hybrid_search:
  semantic: {semantic}
  keyword: {keyword}
  candidate_depth: 50
dagster:
  home: dagster-home
"""


def configure(project, semantic: float, keyword: float) -> None:
    project.write_text(CONFIG.format(data=REPO / "datasets" / "scifact", semantic=semantic,
                                     keyword=keyword), encoding="utf-8")


@pytest.fixture
def recorded(project, capsys):
    """SciFact ingested; ``main`` at 0.7/0.3 twice (``main`` then ``main-again``), ``pr`` at
    0.1/0.9."""
    configure(project, 0.7, 0.3)
    assert run_cli(capsys, "--config", project, "ingest", REPO / "datasets" / "scifact",
                   "--name", "scifact")[0] == 0
    for name in ("main", "main-again"):
        code, _, err = run_cli(capsys, "--config", project, "report", "--record", name)
        assert code == 0, err
        assert f"recorded '{name}' (retrieval: dataset 'scifact', 300 queries, 1200 values)" \
            in err
    configure(project, 0.1, 0.9)
    assert run_cli(capsys, "--config", project, "report", "--record", "pr")[0] == 0
    return project


@pytest.mark.project(database="fresh")
def test_a_worse_candidate_fails_with_its_evidence(recorded, capsys, tmp_path):
    summary, junit = tmp_path / "comment.md", tmp_path / "compare.xml"
    code, out, err = run_cli(capsys, "--config", recorded, "compare", "main", "pr", "--json",
                             "--summary", summary, "--junit-xml", junit)
    assert code == 1, err
    result = json.loads(out)
    assert result["comparable"] is True and result["gates"] == []
    rows = {row["metric"]: row for row in result["metrics"]}
    assert list(rows) == ["precision_at_5", "recall_at_5", "ndcg_at_10", "mrr_at_10"]
    p5 = rows["precision_at_5"]
    assert p5["verdict"] == "worse" and p5["queries"] == 300
    assert p5["interval"][0] <= p5["difference"] <= p5["interval"][1] < 0
    assert p5["difference"] == pytest.approx(p5["candidate"] - p5["base"])
    assert p5["p_adjusted"] < 0.05 and p5["difference"] < -0.01
    # the figures are the two reports' own means
    configure(recorded, 0.7, 0.3)
    main_p5 = json.loads(run_cli(capsys, "--config", recorded, "report", "--json")[1])
    assert p5["base"] == pytest.approx(main_p5["metrics"]["p_at_5"])

    comment = summary.read_text(encoding="utf-8")
    assert comment.startswith("### Compared with `main`: WORSE")
    p5_row = next(line for line in comment.splitlines() if line.startswith("| P\\@5 | "))
    assert p5_row.endswith(f"| {p5['difference']:+.4f} | [{p5['interval'][0]:+.4f}, "
                           f"{p5['interval'][1]:+.4f}] | {p5['p_adjusted']:.4f} | 300 | "
                           "**WORSE** |")
    worst = p5["most_worse"][0]
    assert worst["candidate"] < worst["base"]
    assert f"- P\\@5: `{worst['id']}` ({worst['base']:.2f} → {worst['candidate']:.2f})" \
        in comment
    # the CI guide shows this very comment, rendered
    guide = (REPO / "docs" / "guides" / "ci-gate.md").read_text(encoding="utf-8")
    shown = guide.split(f"<!-- compare-comment: {THIS} -->\n", 1)[1].split(
        "<!-- /compare-comment -->", 1)[0]
    assert shown == comment, ("docs/guides/ci-gate.md shows another comment than compare "
                              "writes today; put this between its compare-comment markers:\n"
                              + comment)
    cases = ET.parse(junit).getroot().find("testsuite")
    failed = [case.get("name") for case in cases if case.find("failure") is not None]
    assert "precision_at_5" in failed

    code, out, _ = run_cli(capsys, "--config", recorded, "compare", "main", "pr")
    assert code == 1 and out.startswith("WORSE: 'pr' against 'main': P@5")


@pytest.mark.project(database="fresh")
def test_the_same_configuration_twice_is_no_difference(recorded, capsys):
    code, out, err = run_cli(capsys, "--config", recorded, "compare", "main", "main-again",
                             "--json")
    assert code == 0, err
    rows = json.loads(out)["metrics"]
    assert [row["verdict"] for row in rows] == ["no evidence"] * 4
    assert all(row["difference"] == 0 and row["p_adjusted"] == 1 for row in rows)


@pytest.mark.project(database="fresh")
def test_records_that_measured_other_things_are_not_compared(recorded, capsys, tmp_path):
    # the ground truth changes (a qrel is dropped): main's record no longer measures the same
    with recorded.store.connection() as conn:
        conn.execute("UPDATE eval_harness.ground_truth SET expected_docs = expected_docs[2:], "
                     "relevance_grades = relevance_grades[2:] WHERE id = (SELECT min(id) FROM "
                     "eval_harness.ground_truth WHERE cardinality(expected_docs) > 1)")
        conn.commit()
    configure(recorded, 0.7, 0.3)
    assert run_cli(capsys, "--config", recorded, "report", "--record", "after")[0] == 0
    summary = tmp_path / "comment.md"
    code, out, err = run_cli(capsys, "--config", recorded, "compare", "main", "after",
                             "--summary", summary)
    assert code == 2, (out, err)
    assert out.startswith("Not comparable: 'after' against 'main': the retrieval records "
                          "measured other ground truth")
    assert "Not comparable" in summary.read_text(encoding="utf-8")
    # main recorded again on the new ground truth: the newest record of a name is compared,
    # the earlier one stays as its history
    assert run_cli(capsys, "--config", recorded, "report", "--record", "main")[0] == 0
    code, out, _ = run_cli(capsys, "--config", recorded, "compare", "main", "after", "--json")
    assert code == 0 and json.loads(out)["comparable"] is True
    with recorded.store.connection() as conn:
        assert conn.execute("SELECT count(*) FROM eval_harness.result_records WHERE name = "
                            "'main'").fetchone()[0] == 2

    recorded.write_text(recorded.read_text(encoding="utf-8")
                        + "ci:\n  compare:\n    min_shared: 301\n", encoding="utf-8")
    code, out, _ = run_cli(capsys, "--config", recorded, "compare", "main", "main-again")
    assert code == 2 and "share 300 queries, fewer than ci.compare.min_shared (301)" in out

    code, _, err = run_cli(capsys, "--config", recorded, "compare", "main", "nobody")
    assert code == 2 and err.count("\n") == 1
    assert "'nobody' has no retrieval record of dataset 'scifact'" in err or \
        "share no record" in err

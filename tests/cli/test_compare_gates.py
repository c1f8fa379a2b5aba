"""``gate --record`` and ``compare`` on the gates' scores: the bundled sample answers recorded
as ``main``; a candidate RAG that served the same questions (other ids, a later day, the query
in other case and spacing) without citation markers is worse on citation coverage (a blocking
gate: exit 1), and the same answers served again compare as no difference."""

from __future__ import annotations

import json
import re

import pytest

from answer_files import SAMPLE
from cli_runs import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.project(database="fresh", config=f"""
quality_gates:
  partition_start: 2025-01-01
  answers_file: {SAMPLE}
ci:
  compare:
    min_shared: 20
dagster:
  home: dagster-home
""")]


def served_again(tmp_path, day: str, *, cite: bool) -> str:
    """The sample's answers to the same queries served on ``day``, with or without [n]."""
    lines = []
    for number, line in enumerate(SAMPLE.read_text(encoding="utf-8").splitlines()):
        answer = json.loads(line)
        answer.update(id=f"{day}-{number}", created_at=f"{day}T09:{number:02d}:00Z",
                      query="  " + answer["query"].upper() + " ")
        if not cite:
            answer["answer"] = re.sub(r"\s*\[\d+\]", "", answer["answer"])
        lines.append(json.dumps(answer))
    path = tmp_path / f"{day}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_answers_are_paired_by_query_and_a_worse_gate_blocks(project, capsys, tmp_path):
    assert run_cli(capsys, "--config", project, "answers", "import", SAMPLE)[0] == 0
    code, _, err = run_cli(capsys, "--config", project, "gate", "--since", "2025-03-03",
                           "--record", "main")
    assert code in (0, 1), err
    assert "recorded 'main' (gates: 30 answered queries, " in err  # an unscored one: no value

    for day, cite in (("2025-04-01", True), ("2025-04-02", False)):
        assert run_cli(capsys, "--config", project, "answers", "import",
                       served_again(tmp_path, day, cite=cite))[0] == 0
        code, _, err = run_cli(capsys, "--config", project, "gate", "--partition", day,
                               "--record", f"served-{day}")
        assert code in (0, 1) and f"recorded 'served-{day}' (gates: 30 answered" in err

    code, out, err = run_cli(capsys, "--config", project, "compare", "main",
                             "served-2025-04-01", "--json")
    assert code == 0, (out, err)
    result = json.loads(out)
    assert result["metrics"] == [] and result["comparable"] is True
    assert {row["gate"] for row in result["gates"]} == {
        "format_compliance", "citation_coverage", "grounding", "answer_reward"}
    assert all(row["verdict"] == "no evidence" and row["difference"] == 0
               for row in result["gates"])
    # grounding leaves one answer unscored: 29 pairs, the other gates 30
    assert sorted(row["answers"] for row in result["gates"]) == [29, 30, 30, 30]

    code, out, _ = run_cli(capsys, "--config", project, "compare", "main", "served-2025-04-02",
                           "--json")
    rows = {row["gate"]: row for row in json.loads(out)["gates"]}
    assert code == 1
    coverage = rows["citation_coverage"]
    assert coverage["verdict"] == "worse" and coverage["blocking"] is True
    assert coverage["interval"][1] < 0
    # answer_reward is not blocking (quality_gates' default): never a reason to exit 1
    assert rows["answer_reward"]["blocking"] is False

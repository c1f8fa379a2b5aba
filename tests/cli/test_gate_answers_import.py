"""`eval-harness answers import FILE [--format F]` (eval_harness.cli.gate) on a real store:
the detected format said, new/updated/unchanged counts, a bad trace named, exit codes."""

from __future__ import annotations

import pytest

from eval_harness_pipelines import cli
from traced_rag import otlp_json_lines, run_rag
from cli_runs import run_cli


@pytest.fixture
def project(tmp_path, fresh, monkeypatch):
    """A database of its own: the traced answers are dated today."""
    config = tmp_path / "config.yaml"
    config.write_text("quality_gates:\n  partition_start: 2025-01-01\n")
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    return config


def test_import_of_traces_says_the_format_and_counts(project, capsys, tmp_path):
    spans, expected = run_rag()
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans))
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 0, err
    assert out.splitlines() == [
        "format: otlp-json (detected: resourceSpans (an OTLP/JSON trace export))",
        f"answers from {path} into 'answers': 3 new, 0 updated, 0 unchanged"]
    code, out, _ = run_cli(capsys, "--config", project, "answers", "import", path,
                           "--format", "otlp-json")
    assert code == 0
    assert out.splitlines() == [f"answers from {path} into 'answers': 0 new, 0 updated, "
                                "3 unchanged"]


def test_a_bad_trace_exits_2_naming_it(project, capsys, tmp_path):
    spans, expected = run_rag(["Does sleep help memory?"], answer_span=False, rewrite=False)
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans, batches=1))
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 2 and out.startswith("format: otlp-json")
    assert err == (f"eval-harness: error: {path}:1: trace {expected[0].trace_id}: has no LLM "
                   "span (openinference.span.kind LLM) to take the answer from.\n")


def test_an_unknown_format_name_is_refused_by_the_parser(project, capsys, tmp_path):
    with pytest.raises(SystemExit) as raised:
        cli.main(["--config", str(project), "answers", "import", str(tmp_path / "x"),
                  "--format", "yaml"])
    assert raised.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err

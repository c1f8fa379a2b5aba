"""The `eval-harness gate` command (eval_harness.cli.gate) on a real store, over the bundled
sample answers (2025-03-03 .. 2025-03-05): exit codes, JSON, JUnit XML and the Markdown
summary."""

from __future__ import annotations

import json
from datetime import UTC

import pytest

from answer_files import SAMPLE
from cli_runs import run_cli

pytestmark = pytest.mark.project(config=f"""
quality_gates:
  partition_start: 2025-01-01
  answers_file: {SAMPLE}
dagster:
  home: dagster-home
""")


# --- the gate command ------------------------------------------------------------------------

def test_gate_command_exit_codes_and_json(project, capsys):
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", SAMPLE)
    assert code == 0 and "into 'answers'" in out, err

    code, out, err = run_cli(capsys, "--config", project, "gate", "--partition", "2025-03-03")
    assert code == 0, err
    assert "format_compliance" in out and "verdict: PASS" in out and err == ""

    code, out, err = run_cli(capsys, "--config", project, "gate", "--partition", "2025-03-04",
                             "--json")
    assert code == 1 and err == ""
    report = json.loads(out)
    assert report["passed"] is False and report["window"]["partition"] == "2025-03-04"
    # all four gates run: grounding (the offline stand-in judge) fails 4 of that day's 10
    assert report["failed_blocking"] == ["format_compliance", "citation_coverage", "grounding"]
    checks = {check["gate"]: check for check in report["checks"]}
    assert set(checks["citation_coverage"]) >= {
        "passed", "blocking", "severity", "threshold", "min_pass_rate", "answers",
        "passed_answers", "pass_rate", "pass_rate_interval", "mean_score", "unscored",
        "evaluated_now", "worst_answer_ids", "failing_answer_ids", "failing_count",
        "latency_p50_ms", "latency_p95_ms"}
    assert checks["citation_coverage"]["failing_answer_ids"] == [
        "sa-0304-07", "sa-0304-06", "sa-0304-08"]
    code, out, _ = run_cli(capsys, "--config", project, "gate", "--partition", "2025-03-04",
                           "--json")
    rerun = json.loads(out)
    assert code == 1 and [check["evaluated_now"] for check in rerun["checks"]] == [0] * 4
    # nothing scored again: no answer evaluated now, no time spent scoring
    assert rerun["checks"] == [{**check, "evaluated_now": 0, "seconds": 0.0}
                               for check in report["checks"]]

    # --since runs the library across days: 03-05 fails grounding alone
    code, out, _ = run_cli(capsys, "--config", project, "gate", "--since", "2025-03-05")
    assert code == 1 and "answers since 2025-03-05" in out
    assert "verdict: FAIL (blocking: grounding)" in out
    code, out, _ = run_cli(capsys, "--config", project, "gate", "--since",
                           "2025-03-04T00:00:00Z", "--json")
    since = {check["gate"]: check for check in json.loads(out)["checks"]}
    assert code == 1 and since["format_compliance"]["answers"] >= 20  # other tests add later ones
    assert since["citation_coverage"]["failing_answer_ids"][:4] == [
        "sa-0304-07", "sa-0304-06", "sa-0304-08", "sa-0305-09"]  # 0.0, 0.333, 0.5, 0.667


@pytest.mark.parametrize(("args", "message"), [
    (["gate", "--partition", "2024-12-31"], "before quality_gates.partition_start"),
    (["gate", "--partition", "03/04/2025"], "not a date YYYY-MM-DD"),
    (["gate", "--since", "2025-03-04T10:00"], "has no timezone"),
    (["answers", "import", "missing.jsonl"], "missing.jsonl: file not found"),
    (["answers", "import", "--format", "otlp-json", "missing.json"],
     "missing.json: file not found"),
    (["answers", "import", "/"], "/: cannot be read (Is a directory)"),
])
def test_gate_command_exits_2_on_bad_input(project, capsys, args, message):
    code, _, err = run_cli(capsys, "--config", project, *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_gate_command_exits_2_on_bad_config_or_unreachable_store(project, capsys, monkeypatch,
                                                                 tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("quality_gates:\n  gates:\n    grounding: {threshold: 1.5}\n")
    code, _, err = run_cli(capsys, "--config", bad, "gate", "--partition", "2025-03-03")
    assert code == 2 and "grounding.threshold' must lie in [0, 1]" in err
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    code, _, err = run_cli(capsys, "--config", project, "gate", "--partition", "2025-03-03")
    assert code == 2 and "Cannot connect to the store" in err and "Traceback" not in err


def test_gate_writes_junit_xml_and_markdown_summary(project, capsys, tmp_path):
    import xml.etree.ElementTree as ET

    assert run_cli(capsys, "--config", project, "answers", "import", SAMPLE)[0] == 0
    junit, summary = tmp_path / "ci" / "gates.xml", tmp_path / "ci" / "summary.md"
    code, out, err = run_cli(capsys, "--config", project, "gate", "--partition", "2025-03-04",
                             "--json", "--junit-xml", junit, "--summary", summary)
    assert code == 1, err
    report = json.loads(out)
    suite = ET.parse(junit).getroot()
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {f"{check['gate']}[2025-03-04]" for check in report["checks"]}
    assert suite.get("tests") == str(len(cases))
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {f"{gate}[2025-03-04]" for gate in report["failed_blocking"]} == {
        "format_compliance[2025-03-04]", "citation_coverage[2025-03-04]",
        "grounding[2025-03-04]"}
    failure_text = cases["citation_coverage[2025-03-04]"].find("failure").text
    assert "pass rate 0.700" in failure_text and "sa-0304-07" in failure_text
    text = summary.read_text()
    assert text.startswith("### Quality gates: FAIL")
    assert "| citation_coverage | **FAIL** | yes | 0.700 |" in text


# --- all four gates by default; who decides each; where the answers are ------------------

FABRICATED = {"id": "fab-1", "query": "Does red meat cure chronic disease?",
              "answer": "Red meat cures most chronic diseases within a week [1].",
              "sources": [{"id": "s1", "text": "Diets high in processed red meat are "
                           "associated with a higher risk of heart disease and colorectal "
                           "cancer in large cohort studies."}],
              "created_at": "2025-06-02T10:00:00Z"}
STAND_IN = ("judge 1 local:lexical, the offline stand-in (OPENAI_API_KEY is not set, so it "
            "replaces openai:gpt-4o)")


@pytest.fixture
def minimal(tmp_path, fresh, monkeypatch):
    """A config as a newcomer writes it: no quality_gates.gates, no judges, no API key."""
    config = tmp_path / "config.yaml"
    config.write_text("quality_gates: {partition_start: 2025-01-01}\n")
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_CONFIG",
                 "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    return config


def test_a_minimal_config_runs_all_four_gates_and_grounding_fails_a_fabrication(
        minimal, capsys, tmp_path):
    import xml.etree.ElementTree as ET

    answers = tmp_path / "fabricated.jsonl"
    answers.write_text(json.dumps(FABRICATED) + "\n")
    assert run_cli(capsys, "--config", minimal, "answers", "import", answers)[0] == 0
    junit, summary = tmp_path / "gates.xml", tmp_path / "summary.md"
    code, out, err = run_cli(capsys, "--config", minimal, "gate", "--since", "2025-06-01",
                             "--junit-xml", junit, "--summary", summary)
    # well formatted and cited, so only grounding can catch it: it does, and it blocks
    assert code == 1, (out, err)
    rows = {line.split()[0]: line for line in out.splitlines()[2:6]}
    assert list(rows) == ["format_compliance", "citation_coverage", "grounding",
                          "answer_reward"], out
    assert rows["grounding"].split()[1] == "FAIL" and "grounding: 1 failing answer(s): fab-1" in out
    assert rows["format_compliance"].split()[1] == "PASS"
    assert rows["citation_coverage"].split()[1] == "PASS"
    assert "verdict: FAIL (blocking: grounding)" in out
    # each line says who decides it; the judged ones name the offline stand-in and why
    assert rows["format_compliance"].endswith("rules, no judge")
    assert rows["grounding"].endswith(STAND_IN) and rows["answer_reward"].endswith(STAND_IN)
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    failure = cases["grounding[since 2025-06-01T00:00:00+00:00]"].find("failure")
    assert failure.get("message").endswith(f"decided by {STAND_IN}")
    assert "decided by rules, no judge" in \
        cases["format_compliance[since 2025-06-01T00:00:00+00:00]"].find("system-out").text
    text = summary.read_text()
    assert "| grounding | **FAIL** | yes |" in text and text.count("offline stand-in") == 2

    code, out, _ = run_cli(capsys, "--config", minimal, "gate", "--since", "2025-06-01",
                           "--json")
    checks = {check["gate"]: check for check in json.loads(out)["checks"]}
    assert checks["grounding"]["failing_answer_ids"] == ["fab-1"]
    assert checks["grounding"]["decided_by"] == STAND_IN


def test_a_window_without_answers_says_where_the_answers_are(minimal, capsys, tmp_path):
    from datetime import datetime

    answers = tmp_path / "days.jsonl"
    answers.write_text("".join(json.dumps({**FABRICATED, "id": f"a-{day}-{n}",
                                           "created_at": f"2025-03-0{day}T09:00:00Z"}) + "\n"
                               for day in (1, 4, 7) for n in range(2)))
    assert run_cli(capsys, "--config", minimal, "answers", "import", answers)[0] == 0
    today = datetime.now(UTC).date()
    expected = (f"no answers in the window {today} (UTC); 6 answers exist from 2025-03-01 to "
                "2025-03-07 (UTC): gate --since 2025-03-01")
    # the default window is today (UTC): through Dagster, as a user runs it
    code, out, err = run_cli(capsys, "--config", minimal, "gate")
    assert code == 1, err
    assert expected in out.splitlines(), out
    summary = tmp_path / "summary.md"
    code, out, _ = run_cli(capsys, "--config", minimal, "gate", "--since",
                           f"{today}T00:00:00Z", "--json", "--summary", summary)
    report = json.loads(out)
    assert report["answers_elsewhere"] == {"answers": 6, "first_day": "2025-03-01",
                                           "last_day": "2025-03-07"}
    assert report["no_answers"].endswith("6 answers exist from 2025-03-01 to 2025-03-07 "
                                         "(UTC): gate --since 2025-03-01")
    assert "gate --since 2025-03-01" in summary.read_text()
    # and what it says is right: that window gates all six
    code, out, _ = run_cli(capsys, "--config", minimal, "gate", "--since", "2025-03-01",
                           "--json")
    assert {check["answers"] for check in json.loads(out)["checks"]} == {6}

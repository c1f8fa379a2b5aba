"""What the commands tell a user and CI, on a real store: where `run`'s report and
reports/latest.html are, how many queries a judge run changed, answer_reward's figures on the
reward scale it is configured in, and `gate`'s JUnit XML and Markdown summary (also when the
gates could not run, with the reason)."""

from __future__ import annotations

import html
import json
import re
import uuid
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from markdown_it import MarkdownIt

from eval_harness_pipelines.assets.judging import dual_judge_scores
from eval_harness_pipelines.assets.quality_gates import check_metadata
from eval_harness_pipelines.assets.reporting import run_report
from eval_harness_pipelines.resources import default_resources
from beir_factory import write_beir
from eval_harness_pipelines import cli
from eval_harness_pipelines import run as run_cli
from eval_harness.gates.report import GateSummary
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.datasets.ingest import ingest_beir
from answer_files import SAMPLE

ENVIRONMENT = ("DAGSTER_HOME", "EVAL_HARNESS_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
               "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "EVAL_HARNESS_JUDGE1",
               "EVAL_HARNESS_JUDGE2", "EVAL_HARNESS_JUDGE_BUDGET_USD", "DAGSTER_POSTGRES_URL")


def run(capsys, *argv):
    code = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def isolated(monkeypatch, fresh, tmp_path):
    """A fresh database as DATABASE_URL, no keys or overrides, the temp folder as cwd."""
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    return fresh


# --- run: where the report is ------------------------------------------------------------

def test_run_prints_the_report_and_latest_html_paths(isolated, tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text("default_dataset: scifact\nhistory: {duckdb_path: history.duckdb}\n"
                      "dagster: {home: dagster-home}\n")
    resources = default_resources(config_path=str(config), database_url=isolated.url)
    result = dg.materialize([run_report], resources=resources)
    assert result.success
    capsys.readouterr()
    run_cli._print_report_location(result)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("report: reports/runs/") and lines[0].endswith("/report.html")
    assert lines[1].strip() == lines[0].removeprefix("report: ").replace(".html", ".md")
    assert lines[2] == "latest: reports/latest.html"
    for shown in (lines[0].removeprefix("report: "), lines[1].strip(), "reports/latest.html"):
        assert (tmp_path / shown).is_file(), shown
    # from a folder the reports are not under, the paths are absolute (still openable)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run_cli._print_report_location(result)
    latest = capsys.readouterr().out.strip().splitlines()[2]
    assert latest == f"latest: {(tmp_path / 'reports' / 'latest.html').resolve()}"


# --- judges: what a rerun changed --------------------------------------------------------

DOCS = {"d1": "aspirin lowers heart attack risk", "d2": "statins lower cholesterol",
        "d3": "exercise and heart health", "d4": "vitamin d and bones",
        "d5": "sleep improves memory", "d6": "coffee and liver health"}
QUERIES = {"q1": "aspirin heart attack", "q2": "cholesterol statins", "q3": "memory sleep"}
QRELS = [("q1", "d1", 1), ("q1", "d3", 1), ("q2", "d2", 1), ("q3", "d5", 1)]


@pytest.fixture
def judged_project(isolated, tmp_path):
    tag = uuid.uuid4().hex[:8]
    vectors = np.eye(len(DOCS), 8, dtype=np.float32) + 0.05
    write_beir(tmp_path / "data", {k: f"{v} {tag}" for k, v in DOCS.items()},
               {k: f"{v} {tag}" for k, v in QUERIES.items()}, QRELS, doc_vectors=vectors,
               query_vectors=vectors[[0, 1, 4]])
    name = f"changed_{tag}"
    with isolated.connection() as conn:
        ingest_beir(conn, tmp_path / "data", name=name)
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: {name}\ndatasets:\n  {name}: {{path: data}}\n"
                      "hybrid_search: {semantic: 0.7, keyword: 0.3, candidate_depth: 5}\n")
    return {"name": name, "config": config}


def test_a_judge_rerun_on_unchanged_data_changes_no_query_and_says_so(judged_project, isolated,
                                                                      settings):
    local = replace(settings, database_url=isolated.url, openai_api_key=None,
                    anthropic_api_key=None)
    name = judged_project["name"]
    with isolated.connection() as conn:
        first = judge_dataset(conn, local, name)
        assert (first.queries_written, first.queries_changed) == (3, 3)
        assert "3 of 3 queries judged, 3 queries changed" in first.format()
        second = judge_dataset(conn, local, name)
        assert (second.queries_written, second.queries_changed) == (3, 0)
        assert "3 of 3 queries judged, 0 queries changed" in second.format()
        assert second.metadata()["queries_changed"] == 0
        assert second.to_dict()["queries_changed"] == 0
        # a stored score that differs from the judges' (e.g. edited by hand): one query changes
        conn.execute("UPDATE ground_truth SET judge1_score[1] = 0.123 "
                     "WHERE dataset = %s AND external_id = 'q2'", (name,))
        conn.commit()
        third = judge_dataset(conn, local, name)
        assert (third.queries_written, third.queries_changed) == (3, 1)
        restored = conn.execute("SELECT judge1_score[1] FROM ground_truth WHERE dataset = %s "
                                "AND external_id = 'q2'", (name,)).fetchone()[0]
        assert restored != 0.123


def test_run_prints_zero_queries_changed_for_a_rerun_of_the_judging_asset(judged_project,
                                                                          isolated, capsys):
    resources = default_resources(config_path=str(judged_project["config"]),
                                  database_url=isolated.url)
    lines = []
    for _ in range(2):
        result = dg.materialize([dual_judge_scores], resources=resources)
        assert result.success
        capsys.readouterr()
        run_cli._print_materializations(result)
        lines.append(capsys.readouterr().out.strip())
    assert lines[0].startswith("dual_judge_scores: 3 of 3 queries judged, 3 queries changed;")
    assert lines[1].startswith("dual_judge_scores: 3 of 3 queries judged, 0 queries changed; "
                               "provider calls 0, cache hits ")
    assert "queries written" not in "\n".join(lines)


# --- gate: answer_reward on its scale, JUnit and summary -----------------------------------

def write_gate_config(folder: Path) -> Path:
    config = folder / "config.yaml"
    config.write_text(f"""
quality_gates:
  partition_start: 2025-01-01
  answers_file: {SAMPLE}
  gates:
    grounding: {{enabled: false}}
    answer_reward: {{enabled: true, threshold: 0.30, min_pass_rate: 0.90, blocking: false}}
judges: {{judge1: local:lexical, judge2: local:embedding}}
dagster: {{home: dagster-home}}
""")
    return config


@pytest.fixture
def gate_project(isolated, tmp_path, capsys):
    config = write_gate_config(tmp_path)
    code, _, err = run(capsys, "--config", config, "answers", "import", SAMPLE)
    assert code == 0, err
    return config


def parse_junit(path: Path) -> ET.Element:
    suite = ET.parse(path).getroot()  # well-formed, or this raises
    assert suite.tag == "testsuite"
    for attribute in ("name", "tests", "failures", "errors", "skipped", "time", "timestamp"):
        assert suite.get(attribute) is not None, attribute
    assert float(suite.get("time")) >= 0
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
    assert int(suite.get("errors")) == sum(c.find("error") is not None for c in cases)
    for case in cases:
        assert case.get("classname") and case.get("name")
        assert float(case.get("time")) >= 0
    return suite


def test_answer_reward_shows_the_configured_reward_scale_everywhere(gate_project, isolated,
                                                                     tmp_path, capsys):
    junit, summary = tmp_path / "gates.xml", tmp_path / "summary.md"
    code, out, err = run(capsys, "--config", gate_project, "gate", "--since", "2025-03-05",
                         "--json", "--junit-xml", junit, "--summary", summary)
    assert code in (0, 1), err
    reward = {c["gate"]: c for c in json.loads(out)["checks"]}["answer_reward"]
    with isolated.connection() as conn:
        stored_threshold, mean_score = conn.execute(
            "SELECT min(threshold), avg(score) FROM gate_results "
            "WHERE gate = 'answer_reward'").fetchone()
    # stored results keep the gates' 0..1 scale: (0.30 + 1) / 2 = 0.65 ...
    assert stored_threshold == pytest.approx(0.65)
    # ... every output shows the reward scale of config.yaml: threshold 0.30, mean 2*s - 1
    assert reward["threshold"] == 0.3 and reward["scale"] == "reward -1..1"
    assert reward["mean_score"] == pytest.approx(2 * mean_score - 1)
    case = next(c for c in parse_junit(junit).iter("testcase")
                if c.get("name").startswith("answer_reward["))
    text = ET.tostring(case, encoding="unicode")
    assert "answers reach reward 0.3 " in text and "threshold 0.3," in text
    assert "(reward -1..1)" in text and "0.65" not in text
    markdown = summary.read_text()
    assert "| 0.3 (reward) |" in markdown and "0.65" not in markdown
    code, table, _ = run(capsys, "--config", gate_project, "gate", "--since", "2025-03-05")
    row = next(line for line in table.splitlines() if line.startswith("answer_reward "))
    assert row.split()[3] == "0.3" and "0.65" not in table
    assert "answer_reward: threshold and mean on the reward scale -1..1" in table
    # the Dagster path: the check's metadata (its summary feeds --json) is on the same scale
    code, out, err = run(capsys, "--config", gate_project, "gate", "--partition", "2025-03-05",
                         "--json")
    assert code in (0, 1), err
    checked = {c["gate"]: c for c in json.loads(out)["checks"]}["answer_reward"]
    assert checked["threshold"] == 0.3 and -1.0 <= checked["mean_score"] <= 1.0
    metadata = check_metadata(GateSummary.from_dict(checked))
    assert metadata["threshold"] == 0.3
    assert metadata["mean_score"].value == pytest.approx(checked["mean_score"])


def test_junit_cases_carry_the_day_and_times(gate_project, tmp_path, capsys):
    files = {}
    for day in ("2025-03-04", "2025-03-05"):
        files[day] = tmp_path / f"{day}.xml"
        code, _, err = run(capsys, "--config", gate_project, "gate", "--partition", day,
                           "--junit-xml", files[day])
        assert code in (0, 1), err
    names = {day: {c.get("name") for c in parse_junit(path).iter("testcase")}
             for day, path in files.items()}
    assert names["2025-03-04"] == {f"{gate}[2025-03-04]" for gate in (
        "format_compliance", "citation_coverage", "answer_reward")}
    assert not names["2025-03-04"] & names["2025-03-05"]  # two days never collide
    first = parse_junit(files["2025-03-05"])
    assert float(first.get("time")) > 0  # the gate command took time
    # a rerun scores nothing again: every gate took no time, the command still some
    code, _, _ = run(capsys, "--config", gate_project, "gate", "--partition", "2025-03-05",
                     "--junit-xml", files["2025-03-05"])
    rerun = parse_junit(files["2025-03-05"])
    assert [c.get("time") for c in rerun.iter("testcase")] == ["0.000"] * 3
    assert float(rerun.get("time")) > 0


@pytest.mark.parametrize("cause", ["bad config", "unreachable store", "partition too early"])
def test_a_gate_that_cannot_run_still_writes_why(isolated, tmp_path, capsys, monkeypatch, cause):
    config = write_gate_config(tmp_path)
    partition = "2025-03-04"
    if cause == "bad config":
        (tmp_path / "bad.yaml").write_text("hybrid_serch: {semantic: 0.5}\n")
        config = "bad.yaml"  # relative, as typed: the reason names it so
        expected = "bad.yaml: unknown key 'hybrid_serch' (did you mean 'hybrid_search'?)"
    elif cause == "unreachable store":
        monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
        expected = "Cannot connect to the store"
    else:
        partition = "2024-12-31"
        expected = "--partition 2024-12-31 is before quality_gates.partition_start"
    junit, summary = tmp_path / "ci" / "gates.xml", tmp_path / "ci" / "summary.md"
    code, out, err = run(capsys, "--config", config, "gate", "--partition", partition,
                         "--junit-xml", junit, "--summary", summary)
    assert code == 2 and out == "" and "Traceback" not in err
    printed = err.strip().removeprefix("eval-harness: error: ")
    assert expected in printed
    suite = parse_junit(junit)
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "1")
    [case] = suite.findall("testcase")
    assert case.get("name") == f"quality_gates[{partition}]"
    error = case.find("error")
    assert error.get("message") == f"could not run: {printed}"  # the reason the CLI printed
    assert error.text == printed
    # as a renderer shows it: a URL in the reason is escaped so that it is not made a link
    rendered = MarkdownIt("commonmark").render(summary.read_text())
    assert re.findall(r"<(\w+)", rendered) == ["h3", "p"]
    assert html.unescape(re.sub(r"<[^>]+>", "", rendered)) == (
        f"Quality gates: could not run ({partition})\ncould not run: {printed}\n")


def test_the_library_alone_gates_a_partition_like_the_dagster_job(gate_project, capsys):
    """`python -m eval_harness.cli gate --partition DAY` (no Dagster) and the installed
    command (quality_gate_job) give the same checks: one set of stored results."""
    from eval_harness import cli as library_cli

    code, dagster_out, err = run(capsys, "--config", gate_project, "gate", "--partition",
                                 "2025-03-05", "--json")
    assert code in (0, 1), err
    library_code = library_cli.main(["--config", str(gate_project), "gate", "--partition",
                                     "2025-03-05", "--json"])
    library_out = capsys.readouterr().out
    assert library_code == code
    via_dagster = {c["gate"]: (c["passed"], c["pass_rate"], c["answers"])
                   for c in json.loads(dagster_out)["checks"]}
    via_library = {c["gate"]: (c["passed"], c["pass_rate"], c["answers"])
                   for c in json.loads(library_out)["checks"]}
    assert via_library == via_dagster and "format_compliance" in via_library
    assert "run" not in library_cli.build_parser()._subparsers._group_actions[0].choices

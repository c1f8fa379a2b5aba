"""Quality gates over the live store: import, incremental evaluation, summaries, Dagster checks
and the `eval-harness gate` command, on a real PostgreSQL.

Library tests use days in 2024-06 with ids unique to the test; the bundled sample answers
(2025-03-03 .. 2025-03-05) serve the Dagster and command-line tests. Expected per-answer scores
are worked out by hand from the gate rules (tests/test_gates_format_citations.py has the rule
details); the comment next to each shows the count.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import uuid
from datetime import date, timedelta, timezone
from pathlib import Path

import dagster as dg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_harness_pipelines.check_outcomes import rounded
from eval_harness_pipelines.assets.quality_gates import QUALITY_GATE_JOB, quality_gate_assets
from eval_harness_pipelines.resources import default_resources
from eval_harness_pipelines import cli
from eval_harness.gates.answers import (AnswersFileError, TimeWindow, import_answers,
                                  import_configured_answers, stream_answers)
from eval_harness.gates.registry import Gate, build_gates, per_answer, reward_to_score
from eval_harness.gates.result import GateResult
from eval_harness.gates.runner import evaluate_window, run_quality_gates, summarize_gates
from eval_harness.metrics.proportions import wilson_interval
from eval_harness.settings import ConfigError, GateSettings, QualityGateSettings, load_settings

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "datasets" / "answers" / "sample_answers.jsonl"
SOURCES = [{"id": "d1", "text": "first source"}, {"id": "d2", "text": "second source"}]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n"
                            for row in rows), encoding="utf-8")
    return path


def answer_row(answer_id, text, created_at, *, sources=SOURCES, query="What does it show?"):
    row = {"id": answer_id, "query": query, "answer": text, "sources": sources}
    if created_at is not None:
        row["created_at"] = created_at
    return row


def gates_with(**changes) -> list[Gate]:
    """The rule-based gates with the default config, some gate settings replaced."""
    defaults = QualityGateSettings()
    gates = dict(defaults.gates)
    gates.update(changes)
    return build_gates(dataclasses.replace(defaults, gates=gates))


# --- Wilson interval ------------------------------------------------------------------------

# Newcombe (1998), Statistics in Medicine 17:857-872, Table II, method 3 (Wilson score
# interval without continuity correction), 95%: the published four-decimal bounds.
NEWCOMBE_TABLE = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)),
                  ((0, 20), (0.0000, 0.1611)), ((1, 29), (0.0061, 0.1718))]


@pytest.mark.parametrize(("counts", "expected"), NEWCOMBE_TABLE)
def test_wilson_interval_matches_newcombes_table(counts, expected):
    low, high = wilson_interval(*counts)
    assert (round(low, 4), round(high, 4)) == expected


def test_wilson_interval_hand_worked_and_degenerate_cases():
    # 9 of 10, z = 1.959964, z^2 = 3.841459:
    # centre = (9 + 1.920729) / 13.841459 = 0.788988
    # half   = 1.959964 * sqrt(10) / 13.841459 * sqrt(0.09 + 3.841459 / 40) = 0.193137
    low, high = wilson_interval(9, 10)
    assert low == pytest.approx(0.595851, abs=2e-6) and high == pytest.approx(0.982125, abs=2e-6)
    assert wilson_interval(20, 20) == (pytest.approx(1 - 0.161125, abs=1e-6), 1.0)
    assert wilson_interval(0, 20)[0] == 0.0
    assert wilson_interval(81, 263, confidence=0.99)[0] < wilson_interval(81, 263)[0]
    with pytest.raises(ValueError, match="n must be positive"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match="successes must lie"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 10, confidence=1.0)
    with pytest.raises(TypeError):
        wilson_interval(1.5, 10)


@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_rate_and_is_symmetric(counts):
    successes, n = counts
    low, high = wilson_interval(successes, n)
    assert 0.0 <= low <= successes / n <= high <= 1.0
    mirror_low, mirror_high = wilson_interval(n - successes, n)
    assert low == pytest.approx(1.0 - mirror_high, abs=1e-12)
    assert high == pytest.approx(1.0 - mirror_low, abs=1e-12)


# --- settings --------------------------------------------------------------------------------

def test_quality_gate_settings_from_the_repository_config():
    settings = load_settings(REPO / "config.yaml", environ={})
    gates = settings.quality_gates
    assert gates.answers_relation == "answers" and gates.grounding_source_chars == 500
    assert gates.reflexion_threshold == 0.3 and gates.answers_file == SAMPLE
    assert gates.gate("format_compliance") == GateSettings(True, 0.95, 0.90, True)
    assert gates.gate("answer_reward").blocking is False


@pytest.mark.parametrize(("section", "message"), [
    ("quality_gates: {gates: {citation_coverage: {threshold: 1.5}}}",
     "'quality_gates.gates.citation_coverage.threshold' must lie in [0, 1]"),
    ("quality_gates: {gates: {formatting: {enabled: true}}}",
     "unknown key 'quality_gates.gates.formatting'"),
    ("quality_gates: {gates: {grounding: {blocking: 'yes'}}}", "must be true or false"),
    ("quality_gates: {answers_relation: 'answers; drop table x'}", "answers_relation"),
    ("quality_gates: {partition_start: last year}", "partition_start"),
])
def test_bad_quality_gate_config_is_one_clear_error(tmp_path, section, message):
    config = tmp_path / "config.yaml"
    config.write_text(section + "\n")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_settings(config, environ={})


def test_enabling_an_unwired_llm_gate_says_what_to_do():
    settings = QualityGateSettings()
    enabled = dataclasses.replace(
        settings, gates={**settings.gates, "grounding": GateSettings(True, 0.8, 0.9, True)})
    with pytest.raises(ConfigError, match="grounding.enabled: false"):
        build_gates(enabled)
    assert reward_to_score(0.3) == pytest.approx(0.65)  # the answer_reward threshold's scale


# --- import ----------------------------------------------------------------------------------

def test_import_is_idempotent_by_id_and_reports_changes(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    rows = [answer_row(f"{tag}-1", "Aspirin lowers the risk of heart attacks [1].",
                       "2024-06-01T09:00:00Z"),
            answer_row(f"{tag}-2", "Statins lower cholesterol in most adults [2].",
                       "2024-06-01T23:59:59.999+00:00"),
            answer_row(f"{tag}-3", "Sleep improves memory consolidation in adults [1].", None)]
    path = write_jsonl(tmp_path / "answers.jsonl", rows)
    first = import_answers(conn, path)
    assert (first.inserted, first.updated, first.unchanged) == (3, 0, 0)
    stamped = conn.execute("SELECT created_at FROM answers WHERE id = %s",
                           (f"{tag}-3",)).fetchone()[0]
    # the UTC days the file's answers fall on (the run command gates exactly these)
    assert first.days == tuple(sorted({date(2024, 6, 1),
                                       stamped.astimezone(timezone.utc).date()}))
    again = import_answers(conn, path)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 3)
    rows[1]["answer"] = "Statins lower LDL cholesterol in most adults [1]."
    changed = import_answers(conn, write_jsonl(path, rows))
    assert (changed.inserted, changed.updated, changed.unchanged) == (0, 1, 2)
    # an answer without created_at keeps the time of its first import
    assert conn.execute("SELECT created_at FROM answers WHERE id = %s",
                        (f"{tag}-3",)).fetchone()[0] == stamped
    # the day window is [00:00, 24:00) UTC: 23:59:59.999 is in it, the next day is not
    day = [a.id for a in stream_answers(conn, TimeWindow.day("2024-06-01"), batch_size=1)
           if a.id.startswith(tag)]
    assert sorted(day) == [f"{tag}-1", f"{tag}-2"]


@pytest.mark.parametrize(("bad_line", "message"), [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"id": "x", "query": "q", "answer": "a"}', "missing field 'sources'"),
    ('{"id": "", "query": "q", "answer": "a", "sources": []}', "'id' must be a non-empty"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": [{"id": "d1"}]}',
     "source 1 must be an object with 'id' and 'text'"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": {"id": "d1", "text": "t"}}',
     "'sources' must be a list"),
    ('{"id": "x", "query": "q", "answer": "a", "sources": [], "created_at": "2024-06-01T10:00"}',
     "'created_at' '2024-06-01T10:00' has no timezone"),
    ('{"id": "x", "query": "q", "answer": "a\\u0000", "sources": []}', "contains a NUL character"),
    ('{"id": "DUP", "query": "q", "answer": "a", "sources": []}', "duplicate id 'DUP' (first on line 1)"),
])
def test_bad_line_names_file_and_line_and_imports_nothing(conn, tmp_path, bad_line, message):
    tag = uuid.uuid4().hex[:8]
    good = [json.dumps(answer_row("DUP" if "DUP" in bad_line else f"{tag}-1", "A claim [1].",
                                  "2024-06-02T10:00:00Z")),
            json.dumps(answer_row(f"{tag}-2", "Another claim [1].", "2024-06-02T11:00:00Z"))]
    path = write_jsonl(tmp_path / "bad.jsonl", [good[0], "", good[1], bad_line])
    with pytest.raises(AnswersFileError) as raised:
        import_answers(conn, path)
    assert f"{path}:4: {message}" in str(raised.value)
    assert conn.execute("SELECT count(*) FROM answers WHERE id LIKE %s OR id = 'DUP'",
                        (f"{tag}%",)).fetchone()[0] == 0


# --- incremental evaluation and summaries ---------------------------------------------------

# Hand-worked scores (format threshold 0.95; citation threshold 0.70, two sources):
HAND_WRITTEN = {
    # format 1.0 (no issue); citation 2/2 = 1.0
    "good": "Aspirin lowers the risk of heart attacks [1]. Statins lower cholesterol [2].",
    # format 0.9 (empty_heading); citation 1/1 = 1.0
    "heading": "##\n\nAspirin lowers the risk of heart attacks [1].",
    # format 1.0; citation 1/2 = 0.5 (second claim uncited)
    "uncited": "Aspirin lowers the risk of heart attacks [1]. Statins lower blood cholesterol.",
    # format 0.9 (non_sequential: [3] skips 2); citation 2/2 = 1.0 halved for [3] = 0.5
    "invalid": "Aspirin lowers the risk of heart attacks [1]. Statins lower cholesterol [3].",
}


_FREE_DAYS = itertools.count()


@pytest.fixture
def hand_written(conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    day = date(2024, 7, 1) + timedelta(days=next(_FREE_DAYS))  # a day of its own per test
    rows = [answer_row(f"{tag}-{name}", text, f"{day}T12:00:00Z")
            for name, text in HAND_WRITTEN.items()]
    path = write_jsonl(tmp_path / "hand.jsonl", rows)
    import_answers(conn, path)
    return {"tag": tag, "window": TimeWindow.day(day), "rows": rows, "path": path}


def by_gate(report):
    return {s.gate: s for s in report.summaries}


def test_summary_figures_over_hand_written_answers(store, hand_written):
    tag, window = hand_written["tag"], hand_written["window"]
    report = run_quality_gates(store, window, gates_with())
    fmt, cit = by_gate(report)["format_compliance"], by_gate(report)["citation_coverage"]
    # format: good 1.0, heading 0.9, uncited 1.0, invalid 0.9 -> 2 of 4 pass, mean 0.95
    assert (fmt.answers, fmt.passed_answers, fmt.unscored, fmt.evaluated_now) == (4, 2, 0, 4)
    assert fmt.mean_score == pytest.approx(0.95) and fmt.pass_rate == 0.5
    assert fmt.pass_rate_interval == pytest.approx(wilson_interval(2, 4))
    assert fmt.failing_answer_ids == (f"{tag}-heading", f"{tag}-invalid")  # 0.9 each, by id
    # citation: good 1.0, heading 1.0, uncited 0.5, invalid 0.5 -> 2 of 4, mean 0.75
    assert (cit.passed_answers, cit.mean_score) == (2, pytest.approx(0.75))
    assert cit.worst_answer_ids[:2] == (f"{tag}-invalid", f"{tag}-uncited")
    assert not fmt.passed and not report.passed and report.failed_blocking == [
        "format_compliance", "citation_coverage"]
    assert fmt.latency_p50_ms is not None and fmt.latency_p95_ms >= fmt.latency_p50_ms


def test_rerun_evaluates_nothing_and_a_changed_answer_is_reevaluated(store, conn, hand_written):
    window, gates = hand_written["window"], gates_with()
    first = evaluate_window(store, window, gates)
    assert first.evaluated == {"format_compliance": 4, "citation_coverage": 4}
    again = evaluate_window(store, window, gates)
    assert again.answers_read == 0 and again.evaluated == {}
    rows = hand_written["rows"]
    rows[1]["answer"] = "## Heart\n\nAspirin lowers the risk of heart attacks [1]."  # fixed
    import_answers(conn, write_jsonl(hand_written["path"], rows))
    changed = evaluate_window(store, window, gates)
    assert changed.answers_read == 1 and changed.evaluated == {"format_compliance": 1,
                                                               "citation_coverage": 1}
    summary = by_gate(run_quality_gates(store, window, gates))["format_compliance"]
    assert (summary.passed_answers, summary.evaluated_now) == (3, 0)


def test_a_new_threshold_rederives_passed_without_reevaluating(store, conn, hand_written):
    window = hand_written["window"]
    run_quality_gates(store, window, gates_with())
    lenient = gates_with(format_compliance=GateSettings(True, 0.9, 0.5, True))
    report = run_quality_gates(store, window, lenient)
    fmt = by_gate(report)["format_compliance"]
    assert (fmt.evaluated_now, fmt.passed_answers, fmt.passed) == (0, 4, True)
    stored = conn.execute("SELECT bool_and(passed), min(threshold) FROM gate_results "
                          "WHERE gate = 'format_compliance' AND answer_id LIKE %s",
                          (hand_written["tag"] + "%",)).fetchone()
    assert stored == (True, 0.9)


def test_a_failing_judge_gives_unscored_failing_results_not_a_crash(store, conn, hand_written):
    def judge_down(answers, run):
        raise TimeoutError("judge did not answer in 30 s")

    def score_one(answer):
        if answer.id.endswith("uncited"):
            raise ValueError("bad row")
        return GateResult("half", 0.75, True, 0.5)

    flaky = Gate("grounding", 0.8, 0.9, True, version="test-judge-v1",
                 evaluate_batch=judge_down, needs_judge=True)
    half = Gate("half", 0.5, 0.5, False, version="v1",
                evaluate_batch=per_answer("half", 0.5, score_one))
    report = run_quality_gates(store, hand_written["window"], [flaky, half])
    grounding, partial = by_gate(report)["grounding"], by_gate(report)["half"]
    assert (grounding.answers, grounding.unscored, grounding.passed_answers) == (4, 4, 0)
    assert grounding.mean_score is None and not grounding.passed and not report.passed
    assert (partial.unscored, partial.passed_answers, partial.passed) == (1, 3, True)
    assert partial.worst_answer_ids[0] == hand_written["tag"] + "-uncited"  # unscored first
    error = conn.execute("SELECT details->>'error', score, passed FROM gate_results "
                         "WHERE gate = 'grounding' AND answer_id = %s",
                         (hand_written["tag"] + "-good",)).fetchone()
    assert error == ("TimeoutError: judge did not answer in 30 s", None, False)


def test_an_empty_window_fails_with_a_reason(store, conn):
    window = TimeWindow.day("2024-01-02")
    summary = summarize_gates(conn, window, gates_with())[0]
    assert (summary.answers, summary.pass_rate, summary.pass_rate_interval) == (0, None, None)
    assert not summary.passed and "no answers" in summary.verdict


# --- the bundled sample -----------------------------------------------------------------------

def test_sample_sources_are_verbatim_scifact_passages():
    """Each source is a retrieved chunk: the abstract's text at ``span``, whole sentences, no
    longer than the grounding cut (so the grounding judge sees all of it)."""
    corpus = {}
    with open(REPO / "datasets" / "scifact" / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            corpus[doc["_id"]] = doc["text"]
    limit = load_settings(REPO / "config.yaml", environ={}).quality_gates.grounding_source_chars
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 30
    for row in rows:
        for source in row["sources"]:
            where = (row["id"], source["id"])
            abstract = corpus[source["id"]]
            start, end = source["span"]
            assert source["text"] == abstract[start:end] and source["text"] in abstract, where
            assert 0 < len(source["text"]) <= limit, where
            assert start == 0 or abstract[start - 2:start - 1] in ".?!", where  # ". " before
            assert source["text"].endswith((".", "?", "!", ")")), where
            assert end == len(abstract) or abstract[end].isspace(), where


@pytest.fixture
def sample_imported(conn, settings):
    report = import_configured_answers(conn, settings)
    assert report is not None and report.total == 30
    return report


def test_checks_pass_and_fail_per_partition_on_the_real_store(store, sample_imported):
    settings = load_settings(REPO / "config.yaml", environ={"DATABASE_URL": store.url})
    answers_asset, checks = quality_gate_assets(settings)
    resources = default_resources(config_path=str(REPO / "config.yaml"), database_url=store.url)
    outcomes = {}
    for day in ("2025-03-03", "2025-03-04"):
        result = dg.materialize([answers_asset, *checks], partition_key=day,
                                resources=resources, raise_on_error=False)
        outcomes[day] = {e.check_name: e for e in result.get_asset_check_evaluations()}
    good, bad = outcomes["2025-03-03"], outcomes["2025-03-04"]
    # grounding runs on judge 1, here local:lexical (no API key); datasets/answers/README.md
    assert {name: e.passed for name, e in good.items()} == {"format_compliance": True,
                                                          "citation_coverage": True,
                                                          "grounding": True,
                                                          "answer_reward": True}
    grounding = {key: value.value for key, value in good["grounding"].metadata.items()}
    # 9 of 10: sa-0303-09 states what its source does not say (score 0 of 2 claims)
    assert (grounding["passed_answers"], grounding["pass_rate"]) == (9, 0.9)
    assert grounding["summary"]["failing_answer_ids"] == ["sa-0303-09"]
    # 2025-03-05, where grounding fails: tests/test_quality_gates_llm.py (one run per day and
    # gate version, since the test store is shared)
    assert not bad["grounding"].passed
    fmt = bad["format_compliance"]
    assert not fmt.passed and fmt.severity == dg.AssetCheckSeverity.ERROR
    assert fmt.partition == "2025-03-04"
    meta = {key: value.value for key, value in fmt.metadata.items()}
    # 6 of 10 answers of 2025-03-04 have one Markdown defect each (datasets/answers/README.md)
    assert (meta["answers"], meta["passed_answers"], meta["unscored"]) == (10, 4, 0)
    assert meta["pass_rate"] == 0.4 and meta["threshold"] == 0.95
    # shown to 4 significant digits; the summary JSON keeps the exact bound
    assert meta["pass_rate_wilson95_low"] == rounded(wilson_interval(4, 10)[0]) == 0.1682
    assert meta["summary"]["pass_rate_interval"][0] == pytest.approx(wilson_interval(4, 10)[0])
    assert meta["partition"] == "2025-03-04"
    assert meta["mean_score"] == pytest.approx(0.94)  # (4 * 1.0 + 6 * 0.9) / 10
    assert "sa-0304-01" in meta["worst_answer_ids"] and meta["latency_p95_ms"] >= 0
    assert meta["summary"]["failing_answer_ids"] == [
        "sa-0304-01", "sa-0304-02", "sa-0304-03", "sa-0304-04", "sa-0304-05", "sa-0304-08"]
    cit = {key: value.value for key, value in bad["citation_coverage"].metadata.items()}
    assert (cit["passed_answers"], cit["summary"]["failing_answer_ids"]) == (
        7, ["sa-0304-07", "sa-0304-06", "sa-0304-08"])  # scores 0.0, 0.333, 0.5


def test_the_report_read_from_the_store_is_what_the_checks_of_the_run_recorded(
        store, sample_imported):
    """`gate --partition` reads its report from the stored results of the Dagster run
    (stored_gate_report), as `gate --since` does; the checks of that run recorded the same
    summaries, so the table, JUnit XML and Markdown are the same either way."""
    from eval_harness.gates.ci_output import junit_xml, markdown_summary
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.report import GateReport, GateSummary, format_gate_table
    from eval_harness.gates.runner import stored_gate_report

    settings = load_settings(REPO / "config.yaml", environ={"DATABASE_URL": store.url})
    answers_asset, checks = quality_gate_assets(settings)
    resources = default_resources(config_path=str(REPO / "config.yaml"), database_url=store.url)
    day = "2025-03-04"  # format_compliance and citation_coverage fail on it
    result = dg.materialize([answers_asset, *checks], partition_key=day, resources=resources,
                            raise_on_error=False)
    gates, window = configured_gates(settings), TimeWindow.day(day)
    recorded = {e.check_name: GateSummary.from_dict(e.metadata["summary"].value)
                for e in result.get_asset_check_evaluations()}
    from_checks = GateReport(window, tuple(recorded[gate.name] for gate in gates), result.run_id)
    stored = stored_gate_report(store, window, gates,
                                relation=settings.quality_gates.answers_relation,
                                run_id=result.run_id)
    assert stored == from_checks and not stored.passed
    assert junit_xml(stored, seconds=1.5) == junit_xml(from_checks, seconds=1.5)
    assert markdown_summary(stored) == markdown_summary(from_checks)
    assert format_gate_table(stored) == format_gate_table(from_checks)


def test_definitions_load_with_the_quality_gate_job():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def(QUALITY_GATE_JOB)
    assert job.partitions_def is not None
    assert job.partitions_def.get_first_partition_key() == "2024-01-01"
    main_keys = {key.to_user_string() for key in defs.resolve_job_def(MAIN_JOB)
                 .asset_layer.selected_asset_keys}
    assert "answers" not in main_keys


# --- the gate command ------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path, store, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(f"""
quality_gates:
  partition_start: 2025-01-01
  answers_file: {SAMPLE}
dagster:
  home: dagster-home
""")
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    return config


def run_cli(capsys, *argv):
    code = cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


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
    assert report["failed_blocking"] == ["format_compliance", "citation_coverage"]
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
    assert code == 1 and [check["evaluated_now"] for check in rerun["checks"]] == [0, 0]
    # nothing scored again: no answer evaluated now, no time spent scoring
    assert rerun["checks"] == [{**check, "evaluated_now": 0, "seconds": 0.0}
                               for check in report["checks"]]

    # --since runs the library across days: 03-05 alone passes, 03-04 onwards fails
    code, out, _ = run_cli(capsys, "--config", project, "gate", "--since", "2025-03-05")
    assert code == 0 and "answers since 2025-03-05" in out
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
    (["answers", "import", "missing.jsonl"], "file not found"),
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
        "format_compliance[2025-03-04]", "citation_coverage[2025-03-04]"}
    failure_text = cases["citation_coverage[2025-03-04]"].find("failure").text
    assert "pass rate 0.700" in failure_text and "sa-0304-07" in failure_text
    text = summary.read_text()
    assert text.startswith("### Quality gates: FAIL")
    assert "| citation_coverage | **FAIL** | yes | 0.700 |" in text

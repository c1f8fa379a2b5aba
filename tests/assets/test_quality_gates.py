"""The quality gate assets and their checks (assets/quality_gates.py) on a real store, over the
bundled sample answers (2025-03-03 .. 2025-03-05), and the quality gate job."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from answer_files import SAMPLE
from eval_harness.gates.answers import import_configured_answers
from eval_harness.gates.window import TimeWindow
from eval_harness.metrics.proportions import wilson_interval
from eval_harness.settings import load_settings
from eval_harness_pipelines.assets.quality_gates import QUALITY_GATE_JOB, quality_gate_assets
from eval_harness_pipelines.check_outcomes import rounded
from eval_harness_pipelines.resources import default_resources
from paths import REPO

# --- the bundled sample -----------------------------------------------------------------------

@pytest.mark.unit
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


def test_checks_pass_and_fail_per_partition_on_the_real_store(store, settings,
                                                               sample_imported):
    answers_asset, checks = quality_gate_assets(settings)
    resources = default_resources(config_path=str(settings.config_path), database_url=store.url)
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
    # 2025-03-05, where grounding fails: tests/gates/test_llm_gates.py (one run per day and
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
        store, settings, sample_imported):
    """`gate --partition` reads its report from the stored results of the Dagster run
    (stored_gate_report), as `gate --since` does; the checks of that run recorded the same
    summaries, so the table, JUnit XML and Markdown are the same either way."""
    from eval_harness.gates.ci_output import junit_xml, markdown_summary
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.report import GateReport, GateSummary, format_gate_table
    from eval_harness.gates.runner import stored_gate_report

    answers_asset, checks = quality_gate_assets(settings)
    resources = default_resources(config_path=str(settings.config_path), database_url=store.url)
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


@pytest.mark.unit
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

"""The judge_agreement asset and its blocking kappa check (assets/agreement.py), on the real
store, and the agreement job.

One verdict for the kappa gate everywhere: labels from
local stand-ins for API judges whose keys are unset fail the gate with WARN, and every place
that shows the gate says WARN with the same sentence: the `agreement` command (exit 0, and it
names the stand-ins), its JSON, reports/agreement.md, the run report's summary, its agreement
section and the folded full report, and the Dagster check. Before, `agreement` said "Gate:
FAIL", exited 1 and never mentioned the stand-ins, and the folded section said FAIL under a
WARN heading."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import dagster as dg
import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.reporting.run_report import build_run_report
from eval_harness.settings import load_settings
from eval_harness_pipelines import cli
from eval_harness_pipelines.assets.agreement import judge_agreement, kappa_lower_bound_above_floor
from eval_harness_pipelines.resources import default_resources
from review_store import (
    N_QUERIES,
    agreeing_scores,
    disagreeing_scores,
    set_scores,
    write_agreement_config,
)

ENVIRONMENT = ("DAGSTER_HOME", "EVAL_HARNESS_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
               "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "EVAL_HARNESS_JUDGE1",
               "EVAL_HARNESS_JUDGE2", "EVAL_HARNESS_JUDGE_BUDGET_USD", "DAGSTER_POSTGRES_URL")
TOPICS = ("aspirin heart", "statins cholesterol", "sleep memory", "coffee liver",
          "vitamin bones", "exercise mood")


def config_text(name: str, stand_in_judges: str) -> str:
    # API judges configured, no keys set: local stand-ins write every label
    return (f"default_dataset: {name}\ndatasets:\n  {name}: {{path: data}}\n"
            "judges: {judge1: 'openai:gpt-4o', judge2: 'anthropic:claude-haiku-4-5'}\n"
            f"agreement: {{kappa_floor: 0.99, bootstrap_resamples: 200, "
            f"stand_in_judges: {stand_in_judges}}}\n"
            "history: {duckdb_path: history.duckdb}\ndagster: {home: dagster-home}\n")


@pytest.fixture
def stand_in_labels(monkeypatch, fresh, tmp_path):
    """A small dataset judged by the stand-ins of two keyless API judges; its agreement is
    below the (deliberately high) floor."""
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    docs, qrels = {}, []
    for k, topic in enumerate(TOPICS):
        for j in range(3):
            docs[f"d{k}{j}"] = f"{topic} study {j}" if j < 2 else f"{topic} unrelated note"
        qrels += [(f"q{k}", f"d{k}0", 1), (f"q{k}", f"d{k}1", 1)]
    write_beir(tmp_path / "data", docs, {f"q{k}": t for k, t in enumerate(TOPICS)}, qrels,
               doc_vectors=rng.normal(size=(len(docs), 8)),
               query_vectors=rng.normal(size=(len(TOPICS), 8)))
    name = f"verdict_{uuid.uuid4().hex[:8]}"
    config = tmp_path / "config.yaml"
    config.write_text(config_text(name, "warn"), encoding="utf-8")
    settings = load_settings(config, environ={"DATABASE_URL": fresh.url})
    with fresh.connection(autocommit=True) as conn:
        ingest_beir(conn, tmp_path / "data", name=name)
        summary = judge_dataset(conn, settings, name)
    assert summary.pairs > 0
    return {"name": name, "config": config, "settings": settings, "store": fresh}


def agreement(capsys, config, *extra):
    code = cli.main(["--config", str(config), "agreement", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_place_says_warn_with_the_same_sentence(stand_in_labels, capsys, tmp_path):
    config, settings = stand_in_labels["config"], stand_in_labels["settings"]
    code, text, err = agreement(capsys, config)
    assert code == 0, err  # a warning is reported, not a failure
    assert "**Gate: WARN.**" in text and "Gate: FAIL" not in text
    assert "local stand-ins (local:lexical for openai:gpt-4o; local:embedding for " \
           "anthropic:claude-haiku-4-5)" in text
    code, out, _ = agreement(capsys, config, "--json")
    verdict = json.loads(out)["verdict"]
    assert code == 0 and verdict["status"] == "WARN"
    sentence = verdict["description"]
    assert sentence in text

    # the run report: summary, section heading and the folded full report
    with stand_in_labels["store"].connection() as conn:
        report = build_run_report(conn, settings, run_id=None, out_dir=tmp_path / "r",
                                  days=[])
    summary_row = [line for line in report.markdown.splitlines()
                   if line.startswith("| Judge agreement gate |")]
    assert len(summary_row) == 1 and "| WARN |" in summary_row[0]
    assert report.markdown.count(f"**Gate: WARN.** {sentence}") == 2  # section + folded
    assert "Gate: FAIL" not in report.markdown

    # the Dagster check (and so `run`'s check line) carries the same verdict and sentence
    resources = default_resources(config_path=str(config),
                                  database_url=stand_in_labels["store"].url)
    result = dg.materialize([judge_agreement, kappa_lower_bound_above_floor],
                            resources=resources)
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.description == sentence
    assert check.metadata["blocks_downstream"].value is False
    agreement_md = (tmp_path / "reports" / "agreement.md").read_text(encoding="utf-8")
    assert f"**Gate: WARN.** {sentence}" in agreement_md


def test_told_to_block_every_place_says_fail_and_agreement_exits_1(stand_in_labels, capsys):
    config = stand_in_labels["config"]
    config.write_text(config_text(stand_in_labels["name"], "block"), encoding="utf-8")
    code, text, _ = agreement(capsys, config)
    assert code == 1 and "**Gate: FAIL.**" in text and "Gate: WARN" not in text
    # the stand-ins are still named: the reader sees why the labels are what they are
    assert "local stand-ins" in text
    settings = replace(stand_in_labels["settings"],
                       agreement=replace(stand_in_labels["settings"].agreement,
                                         stand_in_judges="block"))
    with stand_in_labels["store"].connection() as conn:
        report = build_run_report(conn, settings, run_id=None,
                                  out_dir=stand_in_labels["config"].parent / "r", days=[])
    assert "Gate: WARN" not in report.markdown and report.markdown.count("**Gate: FAIL.**") == 2


# ---------------------------------------------------------------------------------------
# The asset and its blocking check on the review dataset


pytestmark = pytest.mark.project(config=write_agreement_config)  # the tests below


def materialize_agreement(project, store):
    resources = default_resources(config_path=str(project), database_url=store.url)
    result = dg.materialize([judge_agreement, kappa_lower_bound_above_floor],
                            resources=resources, raise_on_error=False)
    materialization = result.get_asset_materialization_events()[0] \
        .step_materialization_data.materialization
    (check,) = result.get_asset_check_evaluations()
    return result, {k: v.value for k, v in materialization.metadata.items()}, check


def test_asset_check_passes_when_judges_agree(project, store, db):
    set_scores(db, project.default_dataset, agreeing_scores())
    result, metadata, check = materialize_agreement(project, store)
    assert result.success and check.passed
    assert metadata["kappa"] == 1.0 and metadata["kappa_ci_low"] == 1.0
    assert metadata["n_scored"] == 2 * N_QUERIES and metadata["n_unscored"] == 0
    assert metadata["landis_koch"] == "Almost Perfect Agreement"
    assert metadata["gwet_ac1"] == 1.0 and metadata["krippendorff_alpha"] > 0.9
    assert check.metadata["floor"].value == 0.7 and check.metadata["lower_bound"].value == 1.0
    report = project.folder / "reports" / "agreement.md"
    assert report.is_file() and "Gate: PASS" in report.read_text(encoding="utf-8")


def test_asset_check_fails_on_a_low_lower_bound_and_blocks(project, store, db):
    set_scores(db, project.default_dataset, disagreeing_scores())
    result, metadata, check = materialize_agreement(project, store)
    assert not result.success  # the blocking check failed the run
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert metadata["kappa_ci_low"] < 0.7 and metadata["n_scored"] == 2 * N_QUERIES
    assert metadata["review_pending"] == 4 and metadata["review_queued_new"] == 4
    assert check.metadata["lower_bound"].value == metadata["kappa_ci_low"]
    assert check.metadata["kappa"].value == metadata["kappa"]
    assert check.metadata["floor"].value == 0.7
    assert "below the floor 0.70" in check.description


def test_asset_check_fails_clearly_when_nothing_is_scored(project, store):
    result, metadata, check = materialize_agreement(project, store)
    assert metadata["n_scored"] == 0 and metadata["kappa"] is None
    assert metadata["n_unscored"] == 0 and metadata["landis_koch"] == "Undefined"
    assert not check.passed and "No (query, document) pair is scored" in check.description


@pytest.mark.unit
def test_agreement_is_its_own_job_until_the_judges_feed_it():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("agreement_job")
    assert job.asset_layer.selected_asset_keys == {dg.AssetKey("judge_agreement")}
    assert dg.AssetKey("judge_agreement") not in \
        defs.resolve_job_def(MAIN_JOB).asset_layer.selected_asset_keys

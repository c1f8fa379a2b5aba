"""The eval-harness command and the Dagster definitions, on a real store."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC

import dagster as dg
import numpy as np
import pytest

from beir_factory import write_beir
from cli_runs import run_cli
from eval_harness_pipelines.assets.datasets import corpus_and_ground_truth
from eval_harness_pipelines.assets.retrieval import retrieval_report
from eval_harness_pipelines.resources import default_resources

DOCS = {"d1": "aspirin lowers heart attack risk", "d2": "statins lower cholesterol",
        "d3": "exercise and heart health", "d4": "vitamin d and bones",
        "d5": "sleep improves memory", "d6": "coffee and liver health"}
QUERIES = {"q1": "aspirin heart", "q2": "cholesterol", "q3": "memory sleep"}
QRELS = [("q1", "d1", 1), ("q1", "d3", 1), ("q2", "d2", 1), ("q3", "d5", 1)]


def write_project(path):
    """A config.yaml and its own dataset (in ``data`` beside it, under a new name)."""
    name = f"p{uuid.uuid4().hex[:8]}"
    # each query's vector equals its first relevant document's vector
    vectors = np.eye(len(DOCS), 8, dtype=np.float32)
    write_beir(path.parent / "data", DOCS, QUERIES, QRELS, doc_vectors=vectors,
               query_vectors=vectors[[0, 1, 4]])
    path.write_text(f"""
default_dataset: {name}
datasets:
  {name}:
    path: data
    language: english
hybrid_search:
  semantic: 0.7
  keyword: 0.3
  candidate_depth: 5
dagster:
  home: dagster-home
""")


# a project folder with its own config.yaml and dataset, on the test store (the fixture
# clears EVAL_HARNESS_CONFIG, which `run` sets for its job)
pytestmark = pytest.mark.project(config=write_project)


def test_ingest_search_and_report(project, capsys):
    cfg, name = str(project), project.default_dataset
    code, out, _ = run_cli(capsys, "--config", cfg, "ingest", str(project.folder / "data"),
                           "--name", name)
    assert code == 0 and "6 new" in out and "PostgreSQL at" in out
    assert "***" in out or "@" not in out.split("PostgreSQL at")[1].split()[0]
    code, out, _ = run_cli(capsys, "--config", cfg, "search", "--dataset", name, "aspirin heart",
                           "--k", "3", "--json")
    result = json.loads(out)
    assert code == 0 and len(result["hits"]) == 3
    assert result["hits"][0]["external_id"] == "d1"  # the stored query embedding was reused
    code, out, _ = run_cli(capsys, "--config", cfg, "report", "--json")
    report = json.loads(out)
    assert code == 0 and report["queries"] == 3
    assert set(report["metrics"]) == {"p_at_5", "recall_at_5", "ndcg_at_10", "mrr_at_10"}


def test_malformed_dataset_exits_2_with_one_sentence(project, capsys, tmp_path):
    folder = write_beir(tmp_path / "bad", DOCS, QUERIES, QRELS)
    with (folder / "queries.jsonl").open("a") as out:
        out.write("{not json\n")
    code, out, err = run_cli(capsys, "--config", str(project), "ingest", str(folder),
                             "--name", project.default_dataset)
    assert code == 2
    assert err.count("\n") == 1 and "queries.jsonl:4: not valid JSON" in err
    assert "Traceback" not in err


def test_unknown_dataset_exits_2(project, capsys):
    code, _, err = run_cli(capsys, "--config", str(project), "search", "--dataset",
                           "missing", "x", "--semantic-weight", "0")
    assert code == 2 and "Dataset 'missing' is not in the store" in err


def test_free_text_search_without_embedder_says_how_to_get_one(project, capsys):
    cfg, name = str(project), project.default_dataset
    assert run_cli(capsys, "--config", cfg, "ingest", str(project.folder / "data"),
                   "--name", name)[0] == 0
    # the dataset was embedded with "test-random": no embedder can produce that model
    code, _, err = run_cli(capsys, "--config", cfg, "search", "--dataset", name, "new words")
    assert code == 2 and "--semantic-weight 0" in err
    code, out, _ = run_cli(capsys, "--config", cfg, "search", "--dataset", name,
                           "cholesterol words", "--semantic-weight", "0", "--json")
    assert code == 0 and json.loads(out)["hits"][0]["external_id"] == "d2"


@pytest.mark.unit
def test_definitions_load_and_validate():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    dg.Definitions.validate_loadable(defs)
    keys = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert {"corpus", "ground_truth", "retrieval_report"} <= keys
    assert defs.resolve_job_def(MAIN_JOB) is not None


def test_assets_materialize_on_the_real_store(project, store):
    resources = default_resources(config_path=str(project), database_url=store.url)
    result = dg.materialize([corpus_and_ground_truth, retrieval_report], resources=resources)
    assert result.success
    by_key = {e.step_materialization_data.materialization.asset_key.to_user_string():
              e.step_materialization_data.materialization.metadata
              for e in result.get_asset_materialization_events()}
    assert by_key["corpus"]["documents_new"].value == 6
    assert by_key["ground_truth"]["queries_new"].value == 3
    assert 0.0 <= by_key["retrieval_report"]["P@5"].value <= 1.0
    assert (project.folder / "reports" / "retrieval-report.md").is_file()
    # materializing again changes nothing in the store
    again = dg.materialize([corpus_and_ground_truth], resources=resources)
    meta = again.get_asset_materialization_events()[0].step_materialization_data.materialization
    assert meta.metadata["documents_unchanged"].value == 6


def test_run_command_runs_the_main_job(project, capsys):
    # dated before any other test's days
    answer = {"id": f"a-{project.default_dataset}", "query": "q", "answer": "Aspirin helps [1].",
              "sources": [{"id": "d1", "text": "aspirin"}], "created_at": "2019-06-01T10:00:00Z"}
    (project.folder / "answers.jsonl").write_text(json.dumps(answer) + "\n")
    with project.open("a") as config:
        config.write("quality_gates:\n  answers_file: answers.jsonl\n")
    code, out, err = run_cli(capsys, "--config", str(project), "run")
    assert code == 0, err
    assert "P@5" in out and "nDCG@10" in out and "dagster dev" in out
    assert "answers: 1 new" in out
    assert "answers of 2019-06-01 are before quality_gates.partition_start" in out
    code, out, err = run_cli(capsys, "--config", str(project), "run")
    assert code == 0 and "answers: 0 new, 0 updated, 1 unchanged" in out
    assert (project.folder / "dagster-home" / "dagster.yaml").is_file()


@pytest.mark.unit
def test_run_gates_only_days_that_are_answers_partitions(capsys):
    """Answers dated before partition_start or after today (UTC) are named and skipped
    (the shared test store must not get such answers: other tests gate --since)."""
    from datetime import date

    from eval_harness_pipelines.run import _gateable

    first, today = date(2024, 1, 1), date(2026, 11, 22)
    assert _gateable(date(2025, 3, 4), first, today) and _gateable(today, first, today)
    assert not _gateable(date(2023, 12, 31), first, today)
    assert not _gateable(date(2026, 11, 23), first, today)
    out = capsys.readouterr().out
    assert "answers of 2023-12-31 are before quality_gates.partition_start (2024-01-01)" in out
    assert "answers of 2026-11-23 are after today (2026-11-22, UTC); not gated" in out


def test_dataset_without_embeddings_and_no_embedder_says_how_to_get_one(project, capsys,
                                                                       tmp_path):
    try:
        import sentence_transformers  # noqa: F401
        pytest.skip("the local embedder is installed here")
    except ImportError:
        pass
    folder = write_beir(tmp_path / "noemb", DOCS, QUERIES, QRELS)
    (folder / "embeddings.npz").unlink()
    code, _, err = run_cli(capsys, "--config", str(project), "ingest", str(folder),
                           "--name", project.default_dataset)
    assert code == 2
    from eval_harness.datasets.embeddings import local_embeddings_install_command

    assert f"run `{local_embeddings_install_command()}`" in err
    assert f"{sys.executable} -m pip install torch==2.13.0 -c " in err  # this venv's own pip


@pytest.mark.unit
def test_nightly_schedules_resolve_to_their_jobs():
    from datetime import datetime

    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import NIGHTLY_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    nightly = defs.resolve_schedule_def("nightly")
    assert nightly.job_name == NIGHTLY_JOB and nightly.cron_schedule == "0 2 * * *"
    assert nightly.execution_timezone == "UTC"
    job_assets = {k.to_user_string() for k in
                  defs.resolve_job_def(NIGHTLY_JOB).asset_layer.executable_asset_keys}
    assert {"corpus", "ground_truth", "retrieval_report", "dual_judge_scores",
            "judge_agreement", "calibration_grid", "calibrated_weights"} <= job_assets
    assert "answers" not in job_assets
    gates = defs.resolve_schedule_def("nightly_quality_gates")
    assert gates.job_name == "quality_gate_job"
    context = dg.build_schedule_context(
        repository_def=defs.get_repository_def(),
        scheduled_execution_time=datetime(2026, 11, 22, 2, 0, tzinfo=UTC))
    requests = list(gates.evaluate_tick(context).run_requests)
    assert [r.partition_key for r in requests] == ["2026-11-21"]  # yesterday's answers


@pytest.mark.parametrize("fails", [False, True])
def test_report_sensors_request_the_report_of_each_nightly_run(fails):
    """After nightly_job, failed (e.g. a blocking check) or not, report_job runs on it."""
    from eval_harness_pipelines.definitions import defs
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    @dg.op
    def step():
        if fails:
            raise RuntimeError("a blocking check failed")

    @dg.job(name="nightly_job")
    def stand_in_nightly():
        step()

    with dg.DagsterInstance.ephemeral() as instance:
        result = stand_in_nightly.execute_in_process(instance=instance, raise_on_error=False)
        run = instance.get_run_by_id(result.run_id)
        status = "PIPELINE_FAILURE" if fails else "PIPELINE_SUCCESS"
        event = next(entry.dagster_event for entry in instance.all_logs(result.run_id)
                     if entry.dagster_event and entry.dagster_event.event_type_value == status)
        name = "report_after_failed_nightly" if fails else "report_after_nightly"
        sensor = defs.resolve_sensor_def(name)
        context = dg.build_run_status_sensor_context(
            sensor_name=name, dagster_event=event, dagster_instance=instance, dagster_run=run)
        request = sensor(context.for_run_failure() if fails else context)
    assert sensor.job_name == "report_job"
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert request.run_key == f"report-{result.run_id}"
    assert request.run_config["ops"]["run_report"]["config"]["source_run_id"] == result.run_id


def test_a_store_error_is_one_sentence_not_a_traceback(server_url, tmp_path, monkeypatch,
                                                       capsys):
    import psycopg
    from psycopg import sql

    from eval_harness.store import migrate
    from scratch_databases import scratch_database

    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS,
                        doc_vectors=np.eye(len(DOCS), 8, dtype=np.float32),
                        query_vectors=np.eye(len(DOCS), 8, dtype=np.float32)[[0, 1, 4]])
    with scratch_database(server_url, "eh_ro") as location:
        with location.connection() as conn:
            migrate(conn)
        dbname = psycopg.conninfo.conninfo_to_dict(location.url)["dbname"]
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on")
                          .format(sql.Identifier(dbname)))
        monkeypatch.setenv("DATABASE_URL", location.url)
        code, out, err = run_cli(capsys, "ingest", str(folder), "--name", "ro")
    assert code == 2
    # without --config the command first says which config it read (./config.yaml, or none)
    [error] = [line for line in err.splitlines() if not line.startswith("eval-harness: config:")]
    assert error.startswith("eval-harness: error: the store reported: ") and "read-only" in error
    assert "Traceback" not in err and err.count("\n") == 2


def test_definitions_read_no_config_or_environment_at_import(tmp_path):
    """Importing the definitions module reads nothing; Dagster's loader (defs()) reads the
    settings, so a broken config is reported when they load, naming the file."""
    import os
    import subprocess

    code = ("import eval_harness_pipelines.definitions as d\n"
            "print('imported')\n"
            "d.defs()\n")
    env = dict(os.environ, EVAL_HARNESS_CONFIG=str(tmp_path / "missing.yaml"),
               PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, cwd=tmp_path)
    assert result.stdout.strip() == "imported", result.stderr
    assert "missing.yaml: config file not found" in result.stderr

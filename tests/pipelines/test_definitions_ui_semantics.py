"""What the Dagster UI shows matches what the pipeline does, on a real store.

- every step carries the name of the asset it materializes;
- each check is declared blocking exactly when it can stop the run (gates: config.yaml);
- a blocking check that fails stops the run with its verdict, figure and threshold as the
  run's error (read back from the event log), its result recorded, downstream not run;
- floats in metadata are rounded for people, report paths are paths;
- an ``answers`` partition shows, through the UI's GraphQL, only current results of the
  checks the UI lists: after two days, a re-run, and a gate disabled in config.yaml.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from dagster._core.definitions.dependency import NodeHandle

from answer_files import harness_answers_config_text
from beir_factory import write_beir
from eval_harness.gates.answers import import_configured_answers
from eval_harness.settings import load_settings
from eval_harness_pipelines.assets.quality_gates import (
    QUALITY_GATE_JOB,
    quality_gate_assets,
    quality_gate_definitions,
)
from eval_harness_pipelines.check_outcomes import BlockingCheckFailed, rounded
from eval_harness_pipelines.resources import (
    DUCKDB_IO_MANAGER_KEY,
    default_resources,
    duckdb_io_manager,
)
from paths import REPO

JOBS = ("main_job", "nightly_job", "calibration_job", "agreement_job", "judging_job",
        QUALITY_GATE_JOB, "report_job", "judging_shards_job", "record_job",
        "ground_truth_job")


# ----------------------------------------------------------------------------- structure

@pytest.mark.unit
def test_every_step_is_named_after_the_asset_it_materializes():
    from eval_harness_pipelines.definitions import defs
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    steps = {}  # step key -> asset keys it materializes, over every job
    for name in JOBS:
        job = defs.resolve_job_def(name)
        for node in job.graph.node_dict:  # an op outside a graph: its name is its step key
            assets_def = job.asset_layer.get_assets_def_for_node(NodeHandle(node, None))
            keys = {key.to_user_string() for key in assets_def.keys}
            if keys:
                steps[node] = keys
    for step, keys in steps.items():
        assert step in keys, f"step {step} materializes {keys}"
    assert steps["corpus"] == {"corpus", "ground_truth"}  # one transaction ingests both
    assert {"retrieval_report", "answers", "dual_judge_scores", "judge_agreement",
            "calibration_grid", "calibrated_weights", "run_report"} <= set(steps)
    every_asset = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert set().union(*steps.values()) == every_asset


def _blocking(checks) -> dict[str, bool]:
    return {spec.name: spec.blocking for check in checks for spec in check.check_specs}


@pytest.mark.unit
def test_checks_are_declared_blocking_exactly_as_configured(tmp_path):
    from eval_harness_pipelines.assets.agreement import kappa_lower_bound_above_floor
    from eval_harness_pipelines.assets.calibration import p_at_5_verdict

    settings = load_settings(REPO / "config.yaml", environ={})
    _, checks = quality_gate_assets(settings)
    # config.yaml: answer_reward only warns (blocking: false), the other gates block
    assert _blocking(checks) == {"format_compliance": True, "citation_coverage": True,
                                 "grounding": True, "answer_reward": False}
    flipped = tmp_path / "config.yaml"
    flipped.write_text("quality_gates:\n  gates:\n"
                       "    format_compliance: {enabled: true, blocking: false}\n"
                       "    citation_coverage: {enabled: false}\n"
                       "    answer_reward: {enabled: true, blocking: true}\n")
    _, checks = quality_gate_assets(load_settings(flipped, environ={}))
    # grounding is not named: it runs, blocking, as every gate does unless switched off
    assert _blocking(checks) == {"format_compliance": False, "grounding": True,
                                 "answer_reward": True}
    descriptions = {spec.name: spec.description for c in checks for spec in c.check_specs}
    assert "Warns only" in descriptions["format_compliance"]
    assert "Blocking" in descriptions["answer_reward"]
    # these two can stop the run (the kappa check warns only on stand-ins' labels, which
    # is known when it runs; its description and each result's metadata say so)
    assert _blocking([kappa_lower_bound_above_floor, p_at_5_verdict]) == {
        "kappa_lower_bound_above_floor": True, "p_at_5_verdict": True}
    assert "stand-ins" in next(iter(kappa_lower_bound_above_floor.check_specs)).description
    # the drift check blocks too; judges.drift.blocking: false makes its failure a WARN
    from eval_harness_pipelines.assets.judging import judge_drift
    assert _blocking([judge_drift]) == {"judge_drift": True}
    assert "judges.drift.blocking" in next(iter(judge_drift.check_specs)).description


# ------------------------------------------------ a blocking failure reads as its verdict

VOCAB = "protein cell gene cancer therapy risk heart brain blood study trial dose".split()


@pytest.fixture(scope="module")
def dataset(store, tmp_path_factory):
    """30 short random documents, 8 queries with 1..3 relevant documents each."""
    rng = np.random.default_rng(5)
    docs = {f"d{i:02d}": " ".join(rng.choice(VOCAB, size=4)) for i in range(30)}
    queries = {f"q{i}": " ".join(rng.choice(VOCAB, size=2, replace=False)) for i in range(8)}
    qrels = [(q, f"d{j:02d}", 1) for q in queries
             for j in rng.choice(30, size=rng.integers(1, 4), replace=False)]
    folder = write_beir(tmp_path_factory.mktemp("ui") / "ds", docs, queries, qrels)
    name = f"ui{uuid.uuid4().hex[:8]}"
    from eval_harness.datasets.ingest import ingest_beir

    with store.connection() as conn:
        ingest_beir(conn, folder, name=name)
    return {"name": name, "folder": folder}


def write_config(path: Path, dataset, *, full: float, partial: float, floor: float = 0.7):
    path.write_text(f"""
default_dataset: {dataset['name']}
datasets:
  {dataset['name']}:
    path: {dataset['folder']}
hybrid_search: {{semantic: 0.5, keyword: 0.5, candidate_depth: 10}}
calibration:
  grid: {{start: 0.5, stop: 0.9, step: 0.1}}
  cv_folds: 3
  bootstrap_resamples: 300
  verdict: {{full_success: {full}, partial_success: {partial}}}
agreement: {{kappa_floor: {floor}, bootstrap_resamples: 200}}
judges: {{judge1: "local:lexical", judge2: "local:embedding"}}
history: {{duckdb_path: state/history.duckdb}}
""")
    return path


def run_events(instance, run_id: str):
    events = [entry.dagster_event for entry in instance.all_logs(run_id) if entry.dagster_event]
    return {kind: [e for e in events if e.event_type_value == kind]
            for kind in {e.event_type_value for e in events}}


@dg.asset(deps=["calibrated_weights"])
def serving_weights() -> None:
    """Stands for whatever would use the calibrated weights."""


def test_a_failed_p_at_5_verdict_stops_the_run_with_the_verdict_not_a_crash(
        tmp_path, store, dataset):
    from eval_harness_pipelines.assets.calibration import (
        calibrated_weights,
        calibration_grid,
        p_at_5_verdict,
    )

    config = write_config(tmp_path / "config.yaml", dataset, full=1.0, partial=1.0)
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [calibration_grid, calibrated_weights, p_at_5_verdict, serving_weights],
            resources=resources, instance=instance, raise_on_error=False)
        events = run_events(instance, result.run_id)
        history = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("calibrated_weights"), "p_at_5_verdict"), limit=5)
    assert not result.success
    # the check's result is recorded as a failed evaluation, not as "execution failed"
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert [record.status.value for record in history] == ["FAILED"]
    p_at_5 = evaluation.metadata["p_at_5"].value
    # the step failure is the verdict with its figure and threshold ...
    (failure,) = events["STEP_FAILURE"]
    assert failure.step_key == "calibrated_weights_p_at_5_verdict"
    data = failure.step_failure_data
    match = re.fullmatch(r"Blocking check p_at_5_verdict failed: P@5 (0\.\d{3,}) < 1\.00 "
                         r"\(FAILURE\)", data.user_failure_data.description)
    # shown with 3 decimals; the metadata has 4 significant digits
    assert match and float(match.group(1)) == pytest.approx(p_at_5, abs=6e-4)
    figures = {key: value.value for key, value in data.user_failure_data.metadata.items()}
    assert figures["p_at_5"] == p_at_5 and figures["partial_success"] == 1.0
    # ... which is also the error message the UI shows first, for the step and for the run
    assert data.error.cls_name == BlockingCheckFailed.__name__
    assert data.error.message.startswith(
        "eval_harness_pipelines.check_outcomes.BlockingCheckFailed: "
        "Blocking check p_at_5_verdict failed: P@5")
    assert "DagsterAssetCheckFailedError" not in data.error.to_string()
    (run_failure,) = events["PIPELINE_FAILURE"]
    assert "Blocking check p_at_5_verdict failed" in run_failure.event_specific_data.error.message
    # downstream of the blocking check does not run
    materialized = {e.step_materialization_data.materialization.asset_key.to_user_string()
                    for e in result.get_asset_materialization_events()}
    assert materialized == {"calibration_grid", "calibrated_weights"}
    started = {e.step_key for e in events["STEP_START"]}
    assert "serving_weights" not in started

    # metadata for people: floats to 4 significant digits, report paths as paths
    grid = result.asset_materializations_for_node("calibration_grid")[0].metadata
    floats = {k: v.value for k, v in grid.items() if isinstance(v, dg.FloatMetadataValue)}
    assert {"p_at_5_best", "p_at_5_ceiling", "uplift_ci_low"} <= set(floats)
    assert all(value == rounded(value) for value in floats.values()), floats
    for key in ("report_path", "history_path"):
        assert isinstance(grid[key], dg.PathMetadataValue), key
    assert Path(grid["report_path"].value).is_file()
    weights = result.asset_materializations_for_node("calibrated_weights")[0].metadata
    if weights["decision"].value == "changed":  # config.yaml is written only on a change
        assert isinstance(weights["config_path"], dg.PathMetadataValue)
        assert Path(weights["config_path"].value) == config
    else:
        assert weights["decision"].value == "kept" and weights["written"].value is False
        assert weights["decision_sentence"].value.startswith("kept ")


def test_a_failed_kappa_gate_stops_calibration_with_its_figure(tmp_path, store, dataset):
    from eval_harness_pipelines.assets.agreement import (
        judge_agreement,
        kappa_lower_bound_above_floor,
    )
    from eval_harness_pipelines.assets.calibration import (
        calibrated_weights,
        calibration_grid,
        p_at_5_verdict,
    )
    from eval_harness_pipelines.assets.judging import dual_judge_scores

    config = write_config(tmp_path / "config.yaml", dataset, full=0.0, partial=0.0, floor=1.0)
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [dual_judge_scores, judge_agreement, kappa_lower_bound_above_floor,
             calibration_grid, calibrated_weights, p_at_5_verdict],
            resources=resources, instance=instance, raise_on_error=False)
        events = run_events(instance, result.run_id)
    (check,) = result.get_asset_check_evaluations()
    meta = {key: value.value for key, value in check.metadata.items()}
    assert not check.passed and meta["blocks_downstream"] is True  # configured local judges
    (failure,) = events["STEP_FAILURE"]
    assert failure.step_key == "judge_agreement_kappa_lower_bound_above_floor"
    description = failure.step_failure_data.user_failure_data.description
    match = re.fullmatch(r"Blocking check kappa_lower_bound_above_floor failed: kappa lower "
                         r"bound (-?\d\.\d{3,}) < floor 1\.00 \(kappa -?\d\.\d{3}, "
                         rf"{meta['n_scored']} pairs\)", description)
    # the agreement asset keeps exact figures for the check; people see rounded ones
    agreement = result.asset_materializations_for_node("judge_agreement")[0].metadata
    exact = agreement["kappa_gate_inputs"].value["kappa_ci_low"]
    assert match and float(match.group(1)) == pytest.approx(exact, abs=5.01e-4)  # 3 decimals
    assert agreement["kappa_ci_low"].value == rounded(exact) == meta["lower_bound"]
    assert isinstance(agreement["report_path"], dg.PathMetadataValue)
    started = {e.step_key for e in events["STEP_START"]}
    assert "calibration_grid" not in started and "calibrated_weights" not in started


# ------------------------------------------- the answers partitions, as the UI's GraphQL

CHECKS_QUERY = """
query ($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
  assetChecksOrError { ... on AssetChecks { checks { name blocking } } } } } }"""
PARTITION_QUERY = """
query ($key: AssetKeyInput!, $check: String!, $partition: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $check, partition: $partition, limit: 5) {
    runId status evaluation { partition success targetMaterialization { runId } } } }"""
ANSWERS = {"path": ["answers"]}


def gate_definitions(config: Path, url: str, folder: Path, tag: str):
    """The quality-gate definitions of ``config`` as the UI loads them: a module file."""
    module = folder / f"gate_defs_{tag}.py"  # a new name per load, as a reload is
    module.write_text(
        "import dagster as dg\n"
        "from eval_harness_pipelines.assets.quality_gates import quality_gate_definitions\n"
        "from eval_harness_pipelines.resources import default_resources\n"
        "from eval_harness.settings import load_settings\n"
        f"settings = load_settings({str(config)!r}, environ={{'DATABASE_URL': {url!r}}})\n"
        "defs = dg.Definitions.merge(quality_gate_definitions(settings), dg.Definitions(\n"
        f"    resources=default_resources(config_path={str(config)!r}, database_url={url!r})))\n")
    return module


def graphql(instance, module: Path, query: str, variables: dict) -> dict:
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
    from dagster_graphql.test.utils import execute_dagster_graphql

    origin = InProcessCodeLocationOrigin(LoadableTargetOrigin(
        python_file=str(module), attribute="defs", working_directory=str(REPO)))
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as workspace:
        reply = execute_dagster_graphql(workspace.create_request_context(), query, variables)
    assert not reply.errors, reply.errors
    return reply.data


def listed_checks(instance, module: Path) -> dict[str, bool]:
    data = graphql(instance, module, CHECKS_QUERY, {"key": ANSWERS})
    checks = data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    return {check["name"]: check["blocking"] for check in checks}


def latest_materialization_run(instance, day: str) -> str:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("answers"), asset_partitions=[day]),
        limit=1).records
    return records[0].event_log_entry.run_id


def executions(instance, module: Path, day: str) -> dict[str, list[dict]]:
    """Each listed check's executions for ``day``, newest first: what the UI's check
    partition page shows (its first entry is the partition's status there)."""
    return {check: graphql(instance, module, PARTITION_QUERY, {
        "key": ANSWERS, "check": check, "partition": day})["assetCheckExecutions"]
        for check in listed_checks(instance, module)}


def assert_partition_shows_current_results(instance, module: Path, day: str) -> None:
    """The latest execution of every listed check for ``day`` is a result for the
    partition's latest materialization, and says which partition it is about."""
    current = latest_materialization_run(instance, day)
    for check, found in executions(instance, module, day).items():
        evaluation = found[0]["evaluation"]
        assert evaluation is not None, (check, day, found[0])
        assert evaluation["partition"] == day, check
        assert evaluation["targetMaterialization"]["runId"] == current, (check, day)


def run_gates(defs, instance, day: str):
    return defs.resolve_job_def(QUALITY_GATE_JOB).execute_in_process(
        partition_key=day, instance=instance, raise_on_error=False)


@pytest.mark.slow
def test_answers_partitions_show_only_current_check_results(store, conn, tmp_path,
                                                            monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2"):
        monkeypatch.delenv(variable, raising=False)  # LLM gates: judge 1 is local:lexical
    everything = tmp_path / "all-gates.yaml"
    everything.write_text(harness_answers_config_text().replace("datasets/", f"{REPO}/datasets/"))
    settings = load_settings(everything, environ={"DATABASE_URL": store.url})
    import_configured_answers(conn, settings)  # the sample days 2025-03-03 .. 03-05
    module_all = gate_definitions(everything, store.url, tmp_path, "all")
    defs_all = dg.Definitions.merge(
        quality_gate_definitions(settings), dg.Definitions(
            resources=default_resources(config_path=str(everything), database_url=store.url)))
    home = tmp_path / "dagster"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        assert listed_checks(instance, module_all) == {
            "format_compliance": True, "citation_coverage": True, "grounding": True,
            "answer_reward": False}
        # two days, then the second again
        for day in ("2025-03-03", "2025-03-04", "2025-03-04"):
            result = run_gates(defs_all, instance, day)
        # 2025-03-04 fails its blocking gates with their figures; answer_reward only warns
        failures = {e.step_key: e.step_failure_data.user_failure_data.description
                    for e in result.all_events if e.is_step_failure}
        assert failures["answers_format_compliance"] == (
            "Blocking check format_compliance failed: pass rate 0.400 < minimum 0.90 on "
            "2025-03-04 (4 of 10 answers reach score 0.95)")
        assert "answers_answer_reward" not in failures
        reward = {e.check_name: e for e in result.get_asset_check_evaluations()}["answer_reward"]
        assert not reward.passed and reward.severity == dg.AssetCheckSeverity.WARN
        for day in ("2025-03-03", "2025-03-04"):
            assert_partition_shows_current_results(instance, module_all, day)

        # answer_reward disabled in config.yaml, the definitions not reloaded: the run stops
        # before it materializes, so no listed check is left with an older result
        fewer = tmp_path / "fewer-gates.yaml"
        fewer.write_text(everything.read_text().replace(
            "answer_reward: {enabled: true", "answer_reward: {enabled: false"))
        stale = dg.Definitions.merge(
            quality_gate_definitions(settings), dg.Definitions(
                resources=default_resources(config_path=str(fewer), database_url=store.url)))
        before = latest_materialization_run(instance, "2025-03-04")
        refused = run_gates(stale, instance, "2025-03-04")
        assert not refused.success
        (failure,) = [e for e in refused.all_events if e.is_step_failure]
        assert failure.step_key == "answers"
        cause = failure.step_failure_data.error.cause  # the user error Dagster wrapped
        assert cause.cls_name == "ConfigError"
        assert "config.yaml now disables answer_reward" in cause.message
        assert "reload them" in cause.message
        assert latest_materialization_run(instance, "2025-03-04") == before
        # the UI shows the refused attempt as the partition's latest execution of every check
        # (status "execution failed", linking to the run that says why), not an old result
        for check, found in executions(instance, module_all, "2025-03-04").items():
            assert (found[0]["runId"], found[0]["status"]) == (
                refused.run_id, "EXECUTION_FAILED"), check
            assert found[1]["evaluation"]["targetMaterialization"]["runId"] == before, check

        # reloaded: the UI lists the three enabled gates, each with a current result
        reloaded = load_settings(fewer, environ={"DATABASE_URL": store.url})
        module_fewer = gate_definitions(fewer, store.url, tmp_path, "fewer")
        defs_fewer = dg.Definitions.merge(
            quality_gate_definitions(reloaded), dg.Definitions(
                resources=default_resources(config_path=str(fewer), database_url=store.url)))
        run_gates(defs_fewer, instance, "2025-03-04")
        assert set(listed_checks(instance, module_fewer)) == {
            "format_compliance", "citation_coverage", "grounding"}
        assert_partition_shows_current_results(instance, module_fewer, "2025-03-04")
        assert_partition_shows_current_results(instance, module_fewer, "2025-03-03")

"""The calibration assets and the P@5 verdict check (assets/calibration.py) on a real store,
the calibration job, and the kappa check gating calibration."""

from __future__ import annotations

import dagster as dg
import duckdb
import pandas as pd
import pytest

from calibration_corpus import corpus, write_config  # noqa: F401 (fixture)
from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.history import read_grid_history
from eval_harness.settings import load_settings
from eval_harness_pipelines.assets.calibration import (
    calibrated_weights,
    calibration_grid,
    p_at_5_verdict,
)
from eval_harness_pipelines.check_outcomes import BlockingCheckFailed
from eval_harness_pipelines.resources import (
    DUCKDB_IO_MANAGER_KEY,
    EvalSettings,
    default_resources,
    duckdb_io_manager,
)


# ------------------------------------------------------------------------- Dagster assets
def _grid(p_at_5: float) -> pd.DataFrame:
    return pd.DataFrame({"semantic_weight": [0.7, 0.8], "p_at_5": [0.1, p_at_5],
                         "is_best": [False, True], "dataset": ["d", "d"],
                         "verdict_p_at_5": [p_at_5, p_at_5],
                         "verdict_semantic_weight": [0.8, 0.8]})


@pytest.mark.parametrize("p_at_5, passed, severity, verdict", [
    (0.75, True, dg.AssetCheckSeverity.WARN, "full success"),
    (0.7499, False, dg.AssetCheckSeverity.WARN, "partial success"),
    (0.70, False, dg.AssetCheckSeverity.WARN, "partial success"),
    (0.6999, False, dg.AssetCheckSeverity.ERROR, "failure")])
def test_verdict_check_at_the_band_edges(tmp_path, corpus, p_at_5, passed, severity, verdict):
    settings = EvalSettings(config_path=str(write_config(tmp_path / "config.yaml", corpus)))
    outcome = iter(p_at_5_verdict(calibration_grid=_grid(p_at_5), settings=settings))
    result = next(outcome)  # the result is reported first ...
    assert (result.passed, result.severity) == (passed, severity)
    assert result.metadata["verdict"].value == verdict
    assert result.metadata["p_at_5"].value == p_at_5
    assert result.metadata["full_success"].value == 0.75
    assert result.metadata["partial_success"].value == 0.70
    if severity == dg.AssetCheckSeverity.ERROR:  # ... then a failure stops with its figure
        with pytest.raises(BlockingCheckFailed) as failure:
            next(outcome)
        assert failure.value.description == (
            "Blocking check p_at_5_verdict failed: P@5 0.6999 < 0.70 (FAILURE)")
    else:
        assert next(outcome, None) is None


def test_assets_and_check_materialize(tmp_path, store, corpus):
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0, alpha=0.99)
    # weights in force off the best (0.9 / 0.1) and a permissive rule: the writes run
    config.write_text(config.read_text().replace("semantic: 0.5 ", "semantic: 0.9 ").replace(
        "keyword: 0.5 ", "keyword: 0.1 "))
    database = tmp_path / "artefacts.duckdb"
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(database))})
    result = dg.materialize([calibration_grid, calibrated_weights, p_at_5_verdict],
                            resources=resources)
    assert result.success
    metadata = {e.step_materialization_data.materialization.asset_key.to_user_string():
                e.step_materialization_data.materialization.metadata
                for e in result.get_asset_materialization_events()}
    grid_meta = metadata["calibration_grid"]
    best = grid_meta["best_semantic_weight"].value
    for key in ("p_at_5_best", "p_at_5_default", "uplift_absolute", "uplift_ci_low",
                "uplift_ci_high", "p_at_5_cross_validated", "p_at_5_ceiling"):
        assert 0 <= abs(grid_meta[key].value) <= 1, key
    judged = grid_meta["judged_at_5_best"].value
    assert 0 <= judged <= 1 and grid_meta["min_judged"].value == 0.9
    # the corpus' qrels list only relevant documents: most of the top 5 is unlabelled
    assert judged < 0.9 and "is a lower bound" in grid_meta["p_at_5_lower_bound"].value
    weights_meta = metadata["calibrated_weights"]
    assert grid_meta["decision"].value == weights_meta["decision"].value == "changed"
    assert weights_meta["semantic_weight"].value == best
    assert weights_meta["config_key"].value == f"datasets.{corpus['name']}.hybrid_search"
    settings = load_settings(config, environ={})
    assert settings.weights_for(corpus["name"]).semantic == best
    assert settings.hybrid.semantic == 0.9  # the global default is not calibration's to change
    with store.connection() as conn:
        row = conn.execute("SELECT dataset, semantic_weight, run_id FROM calibrated_weights "
                           "WHERE id = %s",
                           (weights_meta["calibrated_weights_id"].value,)).fetchone()
    assert row == (corpus["name"], best, result.run_id)
    check = result.get_asset_check_evaluations()[0]
    assert check.passed and check.metadata["verdict"].value == "full success"
    with duckdb.connect(str(database)) as con:
        stored = con.execute("SELECT semantic_weight, is_best FROM public.calibration_grid "
                             "ORDER BY semantic_weight").fetchall()
    assert [w for w, _ in stored] == [0.5, 0.6, 0.7, 0.8, 0.9]
    assert [w for w, is_best in stored if is_best] == [best]
    assert len(read_grid_history(tmp_path / "state" / "history.duckdb")) == 5
    report = tmp_path / "reports" / f"calibration-results-{corpus['name']}.md"
    assert grid_meta["report_path"].value == str(report) and report.is_file()


def test_assets_keep_the_weights_in_force_without_evidence(tmp_path, store, corpus):
    """The default rule on 12 queries: nothing significant, so config.yaml stays byte for
    byte, the row records the kept weights in force and every output says the decision."""
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0)
    before = config.read_bytes()
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    result = dg.materialize([calibration_grid, calibrated_weights, p_at_5_verdict],
                            resources=resources)
    assert result.success and config.read_bytes() == before
    metadata = {e.step_materialization_data.materialization.asset_key.to_user_string():
                e.step_materialization_data.materialization.metadata
                for e in result.get_asset_materialization_events()}
    weights_meta = metadata["calibrated_weights"]
    assert weights_meta["decision"].value == "kept" and weights_meta["written"].value is False
    assert weights_meta["decision_adjusted_p"].value > 0.05
    assert weights_meta["decision_sentence"].value.startswith("kept 0.5 / 0.5: ")
    assert (weights_meta["semantic_weight"].value, weights_meta["keyword_weight"].value) == (
        0.5, 0.5)
    with store.connection() as conn:
        row = conn.execute("SELECT semantic_weight, keyword_weight, decision, in_force_semantic, "
                           "adjusted_p, alpha FROM calibrated_weights WHERE id = %s",
                           (weights_meta["calibrated_weights_id"].value,)).fetchone()
    assert row[:4] == (0.5, 0.5, "kept", 0.5) and row[4] > 0.05 and row[5] == 0.05
    check = result.get_asset_check_evaluations()[0]
    assert "\nWeights: kept 0.5 / 0.5: " in check.description
    # the verdict describes the weights kept, not the best grid point
    assert "at the weights kept, semantic 0.50 / keyword 0.50" in check.description
    assert (check.metadata["semantic_weight"].value, check.metadata["keyword_weight"].value,
            check.metadata["weights"].value) == (0.5, 0.5, "kept")


def test_failure_verdict_blocks_with_error(tmp_path, store, corpus):
    config = write_config(tmp_path / "config.yaml", corpus, full=1.0, partial=1.0)
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    result = dg.materialize([calibration_grid, calibrated_weights, p_at_5_verdict],
                            resources=resources, raise_on_error=False)
    assert not result.success  # a failed blocking ERROR check fails the run
    check = result.get_asset_check_evaluations()[0]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert check.metadata["verdict"].value == "failure"


@pytest.mark.unit
def test_definitions_hold_the_calibration_job():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("calibration_job")
    keys = {key.to_user_string() for key in job.asset_layer.executable_asset_keys}
    assert {"calibration_grid", "calibrated_weights", "ground_truth"} <= keys
    main = {key.to_user_string()
            for key in defs.resolve_job_def(MAIN_JOB).asset_layer.executable_asset_keys}
    assert "calibrated_weights" not in main  # the main job never rewrites config.yaml
    assert "calibrated_weights_p_at_5_verdict" in job.graph.node_dict  # the check runs too
    assert weight_label(0.7) == "0.70" and weight_label(0.125) == "0.125"


def materialize_judged_calibration(config, store, tmp_path):
    """judging -> agreement (+ kappa check) -> calibration (+ verdict) on ``config``: the
    result, the materialized asset names and the kappa check's evaluation."""
    from eval_harness_pipelines.assets.agreement import (
        judge_agreement,
        kappa_lower_bound_above_floor,
    )
    from eval_harness_pipelines.assets.judging import dual_judge_scores

    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    result = dg.materialize(
        [dual_judge_scores, judge_agreement, kappa_lower_bound_above_floor, calibration_grid,
         calibrated_weights, p_at_5_verdict], resources=resources, raise_on_error=False)
    materialized = {e.step_materialization_data.materialization.asset_key.to_user_string()
                    for e in result.get_asset_materialization_events()}
    kappa_check = [c for c in result.get_asset_check_evaluations()
                   if c.check_name == "kappa_lower_bound_above_floor"][0]
    return result, materialized, kappa_check


@pytest.mark.parametrize("kappa_floor, calibrated", [(-1.0, True), (1.0, False)])
def test_agreement_check_gates_calibration(tmp_path, store, corpus, kappa_floor, calibrated):
    """judging -> judge_agreement (blocking kappa check) -> calibration, with local judges:
    an agreement below the floor stops calibration; above it, calibration runs."""
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0)
    config.write_text(config.read_text().replace("kappa_floor: 0.70", f"kappa_floor: {kappa_floor}")
                      + "\njudges:\n  judge1: local:lexical\n  judge2: local:embedding\n")
    result, materialized, kappa_check = materialize_judged_calibration(config, store, tmp_path)
    assert {"dual_judge_scores", "judge_agreement"} <= materialized
    assert kappa_check.passed is calibrated
    assert ("calibration_grid" in materialized) is calibrated
    assert result.success is calibrated


@pytest.mark.parametrize("stand_in_judges, calibrated", [("warn", True), ("block", False)])
def test_local_stand_ins_for_api_judges_warn_instead_of_blocking(
        tmp_path, store, corpus, monkeypatch, stand_in_judges, calibrated):
    """API judges without keys fall back to local ones; their failed kappa gate warns (the
    stand-ins' agreement says nothing about the configured judges) unless told to block."""
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2"):
        monkeypatch.delenv(variable, raising=False)
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0)
    config.write_text(config.read_text().replace("kappa_floor: 0.70", "kappa_floor: 1.0")
                      .replace("agreement:\n",
                               f"agreement:\n  stand_in_judges: {stand_in_judges}\n")
                      + "\njudges:\n  judge1: openai:gpt-4o\n"
                      "  judge2: anthropic:claude-haiku-4-5\n")
    _, materialized, kappa_check = materialize_judged_calibration(config, store, tmp_path)
    assert kappa_check.passed is False
    assert "local:lexical for openai:gpt-4o" in kappa_check.metadata["stand_in_judges"].value
    expected = dg.AssetCheckSeverity.WARN if calibrated else dg.AssetCheckSeverity.ERROR
    assert kappa_check.severity == expected
    # the check is declared blocking; each result says whether it blocked this time
    assert kappa_check.metadata["blocks_downstream"].value is not calibrated
    assert ("calibration_grid" in materialized) is calibrated

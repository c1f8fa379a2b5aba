"""The query-sources domain: ``new_queries`` materialized on a corpus without ground truth,
and its job kept out of main_job and nightly_job."""

from __future__ import annotations

import dagster as dg
import pytest

from corpus_only import corpus_only_folder
from eval_harness.datasets.ingest import ingest_beir
from eval_harness_pipelines.assets.query_sources import new_queries
from eval_harness_pipelines.resources import default_resources


def test_new_queries_materializes_generated_queries_once(fresh, tmp_path, monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    folder = corpus_only_folder(tmp_path / "corpus", n_docs=120)
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: bare\ndatasets:\n  bare: {{path: {folder}}}\n",
                      encoding="utf-8")
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="bare")
    resources = default_resources(config_path=str(config), database_url=fresh.url)
    run_config = {"ops": {"new_queries": {"config": {"queries": 20}}}}
    first = dg.materialize([new_queries], resources=resources, run_config=run_config)
    meta = first.get_asset_materialization_events()[0].step_materialization_data \
        .materialization.metadata
    assert meta["new"].value == 20 and meta["writer"].value == "local:offline"
    again = dg.materialize([new_queries], resources=resources, run_config=run_config)
    meta = again.get_asset_materialization_events()[0].step_materialization_data \
        .materialization.metadata
    assert meta["new"].value == 0 and meta["already"].value == 20
    with fresh.connection() as conn:
        assert conn.execute("SELECT count(*) FROM ground_truth WHERE dataset = 'bare' AND "
                            "origin = 'generated'").fetchone()[0] == 20


@pytest.mark.unit
def test_ground_truth_job_is_its_own():
    from eval_harness.settings import load_settings
    from eval_harness_pipelines.definitions import build_defs
    from paths import REPO

    defs = build_defs(load_settings(REPO / "config.yaml", environ={}))

    def selected(job: str) -> set[str]:
        return {k.to_user_string() for k in defs.resolve_job_def(job).asset_layer
                .selected_asset_keys}

    assert selected("ground_truth_job") == {"new_queries"}
    for job in ("main_job", "nightly_job"):
        keys = selected(job)
        assert "new_queries" not in keys and "corpus" in keys

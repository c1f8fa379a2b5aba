"""The record asset and its blocking check (assets/comparison.py) on a real store with SciFact
(the bundled copy): a partition per record name; the baseline's own partition passes; a
candidate worse than the baseline fails the check with ERROR severity and what is downstream
of the record does not run; one recorded before any baseline warns."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_harness.datasets.ingest import ingest_beir
from eval_harness_pipelines.assets.comparison import CHECK, RECORDS, retrieval_record
from eval_harness_pipelines.resources import default_resources
from paths import REPO

pytestmark = pytest.mark.slow

CONFIG = """\
default_dataset: scifact
datasets:
  scifact: {{path: {data}, language: english}}
hybrid_search: {{semantic: {semantic}, keyword: {keyword}, candidate_depth: 50}}
"""


@dg.asset(deps=[retrieval_record], partitions_def=RECORDS)
def published_weights() -> None:
    """What a team puts after the record: it must not run on a worse candidate."""


def materialize(instance, config, store, name: str, semantic: float) -> dg.ExecuteInProcessResult:
    config.write_text(CONFIG.format(data=REPO / "datasets" / "scifact", semantic=semantic,
                                    keyword=round(1 - semantic, 1)), encoding="utf-8")
    instance.add_dynamic_partitions(RECORDS.name, [name])
    return dg.materialize([retrieval_record, published_weights], partition_key=name,
                          instance=instance, raise_on_error=False,
                          resources=default_resources(config_path=str(config),
                                                      database_url=store.url))


def test_a_worse_candidate_blocks_what_follows_its_record(fresh, tmp_path):
    with fresh.connection() as conn:
        ingest_beir(conn, REPO / "datasets" / "scifact", name="scifact")
        conn.commit()
    config = tmp_path / "config.yaml"
    instance = dg.DagsterInstance.ephemeral()

    early = materialize(instance, config, fresh, "early", 0.7)  # no baseline yet: a warning
    (evaluation,) = early.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert "nothing to compare" in evaluation.metadata["verdict"].value
    assert early.success

    main = materialize(instance, config, fresh, "main", 0.7)
    (evaluation,) = main.get_asset_check_evaluations()
    assert main.success and evaluation.passed and evaluation.check_name == CHECK

    candidate = materialize(instance, config, fresh, "pr-7", 0.1)
    (evaluation,) = candidate.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["verdict"].value.startswith("WORSE: 'pr-7' against 'main': P@5")
    assert evaluation.metadata["precision_at_5_difference"].value < 0
    assert not candidate.success
    materialized = {event.asset_key.to_user_string()
                    for event in candidate.get_asset_materialization_events()}
    assert materialized == {"retrieval_record"}  # published_weights did not run

    same = materialize(instance, config, fresh, "pr-8", 0.7)
    assert same.success and same.get_asset_check_evaluations()[0].passed
    assert {event.asset_key.to_user_string()
            for event in same.get_asset_materialization_events()} == {"retrieval_record",
                                                                      "published_weights"}

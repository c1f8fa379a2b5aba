"""The one Definitions object: every domain's assets and checks, resources, jobs."""

from __future__ import annotations

import dagster as dg

from assets import agreement, calibration, ground_truth, judging, quality_gates, retrieval
from assets.resources import DUCKDB_IO_MANAGER_KEY, default_resources, duckdb_io_manager

MAIN_JOB = "main_job"

main_job = dg.define_asset_job(
    MAIN_JOB,  # agreement stays out until dual_judge_scores fills the judge columns
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups(agreement.GROUP)
    - dg.AssetSelection.groups(calibration.GROUP)  # calibration_job: it rewrites config.yaml
    - dg.AssetSelection.groups(quality_gates.GROUP)  # partitioned: quality_gate_job
    - dg.AssetSelection.groups(judging.GROUP),  # may call paid APIs: judging_job
    description="Ingest the default dataset and report retrieval quality at the configured weights.")

defs = dg.Definitions.merge(
    ground_truth.defs,
    retrieval.defs,
    agreement.defs,
    calibration.defs,
    quality_gates.defs,
    judging.defs,
    dg.Definitions(jobs=[main_job], resources=default_resources()),
    dg.Definitions(resources={DUCKDB_IO_MANAGER_KEY: duckdb_io_manager()}),
)

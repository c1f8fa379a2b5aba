"""The one Definitions object: every domain's assets and checks, resources, jobs."""

from __future__ import annotations

import dagster as dg

from assets import ground_truth, retrieval
from assets.resources import default_resources

MAIN_JOB = "main_job"

main_job = dg.define_asset_job(
    MAIN_JOB, selection=dg.AssetSelection.all(),
    description="Ingest the default dataset and report retrieval quality at the configured weights.")

defs = dg.Definitions.merge(
    ground_truth.defs,
    retrieval.defs,
    dg.Definitions(jobs=[main_job], resources=default_resources()),
)

"""The Definitions: every domain's assets and checks with the jobs, schedules, sensors and
resources, merged.

:func:`build_defs` builds them from a :class:`~eval_harness.settings.Settings`; nothing here
reads config.yaml or the environment at import. Dagster's tools (``dagster dev``, the
webserver, the daemon) call :func:`defs` when they load the code location; it reads the
settings then (``EVAL_HARNESS_CONFIG`` or ./config.yaml, and the environment). The CLI passes
its own settings to :func:`build_defs`. The jobs are in :mod:`eval_harness_pipelines.jobs`
(which says where each is defined), the schedules and sensors in
:mod:`eval_harness_pipelines.schedules`.
"""

from __future__ import annotations

import dagster as dg

from eval_harness.settings import Settings, load_settings
from eval_harness_pipelines.assets import (
    agreement,
    calibration,
    comparison,
    datasets,
    judging,
    quality_gates,
    query_sources,
    reporting,
    retrieval,
)
from eval_harness_pipelines.jobs import build_jobs, nightly_job
from eval_harness_pipelines.resources import (
    DUCKDB_IO_MANAGER_KEY,
    default_resources,
    duckdb_io_manager,
)
from eval_harness_pipelines.schedules import build_schedules, report_sensors


def build_defs(settings: Settings) -> dg.Definitions:
    """Every definition, with the structure ``settings`` fixes: the nightly cron and timezone,
    the answers partitions and gate checks, the judging shards and the DuckDB history file.
    The resources read the same config file again at run time, for everything that may
    change between runs."""
    config_path = str(settings.config_path) if settings.config_path else None
    return dg.Definitions.merge(
        datasets.defs,
        retrieval.defs,
        agreement.defs,
        calibration.defs,
        quality_gates.quality_gate_definitions(settings),
        judging.defs,
        judging.shard_definitions(settings),
        reporting.defs,
        comparison.defs,
        query_sources.defs,
        dg.Definitions(jobs=build_jobs(settings),
                       schedules=build_schedules(settings, nightly_job),
                       sensors=report_sensors(nightly_job),
                       resources=default_resources(config_path=config_path)),
        dg.Definitions(resources={DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(
            str(settings.history_duckdb_path))}),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """Dagster's entry point (workspace.yaml, ``[tool.dagster]``): the settings of the
    environment Dagster runs in, read when it loads the definitions."""
    return build_defs(load_settings())

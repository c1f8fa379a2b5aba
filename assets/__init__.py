"""Dagster assets and asset checks, one module per domain (datasets, retrieval, judging,
agreement, calibration, quality_gates, reporting). Thin: they load inputs, call eval_harness
and attach metadata. A domain's only job is defined beside its assets; the other jobs, the
schedules and sensors are in eval_harness_pipelines (jobs, schedules), and
eval_harness_pipelines.definitions merges everything."""

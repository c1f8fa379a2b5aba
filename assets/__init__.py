"""Dagster definitions, one module per domain: its assets, checks and jobs (thin: they load
inputs, call eval_harness and attach metadata). eval_harness_pipelines.definitions merges them."""

#!/usr/bin/env bash
# ruff and mypy over the project (configured in pyproject.toml); scripts/test.sh runs this
# before the tests. Needs the venv test.sh sets up.
set -euo pipefail
shopt -s nullglob
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
# mypy checks the Dagster layer as the package it installs as (pyproject's [tool.mypy]):
# eval_harness_pipelines is pipelines/ with assets/ as its .assets, laid out here as links;
# its findings are shown at the files' own paths.
view=.mypy_cache/package-view/eval_harness_pipelines
rm -rf "$view"
mkdir -p "$view"
for module in pipelines/*.py; do ln -s "../../../$module" "$view/"; done
ln -s ../../../assets "$view/assets"
.venv/bin/mypy | sed -e "s#^$view/assets/#assets/#" -e "s#^$view/#pipelines/#"

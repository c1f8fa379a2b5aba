"""The Dagster UI in headless Chromium, as a person sees it (tools/ui_check/check.py).

The browser test starts ``dagster dev`` in a throwaway environment, checks the asset graph,
the asset checks, schedules, sensors and jobs, launches main_job with the UI's button and
finds the run in the history. It needs the Debian packages chromium and chromium-driver.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eval_harness_pipelines.dagster_home import MARKER
from eval_harness.settings import load_settings
from tools.ui_check.check import (ROOT, browser_missing, run_ui_checks, throwaway_config,
                                   throwaway_environment)

CONFIG = ROOT / "config.yaml"


def test_throwaway_config_reads_the_project_inputs_and_writes_only_in_its_folder(tmp_path):
    before = CONFIG.read_bytes()
    copy = throwaway_config(CONFIG, tmp_path)
    settings = load_settings(copy, environ={})
    original = load_settings(CONFIG, environ={})
    assert CONFIG.read_bytes() == before
    assert copy.parent == tmp_path
    # the same inputs ...
    assert settings.datasets == original.datasets
    assert settings.quality_gates.answers_file == original.quality_gates.answers_file
    assert settings.hybrid == original.hybrid
    # ... and every output inside the throwaway folder (reports/ sits next to the config)
    for path in (settings.embedded_pgdata, settings.history_duckdb_path, settings.dagster_home,
                 settings.root / "reports"):
        assert tmp_path in path.parents, path
    assert yaml.safe_load(copy.read_text())["default_dataset"] == original.default_dataset


def test_throwaway_environment_has_its_own_dagster_home_and_store(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", "postgresql://shared-history.invalid/dagster")
    monkeypatch.setenv("EVAL_HARNESS_PGDATA", str(ROOT / ".eval-harness" / "pgdata"))
    env = throwaway_environment(CONFIG, tmp_path)
    assert Path(env["EVAL_HARNESS_CONFIG"]).parent == tmp_path
    assert Path(env["DAGSTER_HOME"]).parent == tmp_path
    assert (Path(env["DAGSTER_HOME"]) / "dagster.yaml").read_text().startswith(MARKER)
    assert "DAGSTER_POSTGRES_URL" not in env and "EVAL_HARNESS_PGDATA" not in env
    settings = load_settings(env["EVAL_HARNESS_CONFIG"], environ=env)
    assert tmp_path in settings.embedded_pgdata.parents


@pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")
def test_ui_shows_the_definitions_and_materializes_main_job(tmp_path):
    screenshots = tmp_path / "screenshots"
    results = run_ui_checks(config=CONFIG, screenshots=screenshots, run_timeout=240)
    failures = [result.line() for result in results if not result.passed]
    assert not failures, "\n".join(failures)
    names = {result.name for result in results}
    assert {"asset graph", "checks of judge_agreement", "checks of calibrated_weights",
            "checks of answers", "schedules and sensors", "jobs", "materialize main_job",
            "run history"} <= names
    for result in results:  # a PNG for every page looked at
        assert result.screenshot and result.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

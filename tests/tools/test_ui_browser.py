"""The Dagster UI in headless Chromium, as a person sees it (tools/ui_check/).

The browser test starts ``dagster dev`` in a throwaway environment, checks the asset graph,
the asset checks, schedules, sensors and jobs, launches main_job with the UI's button and
finds the run in the history. Selenium drives Chromium through Debian's chromedriver: the
tests need the Debian packages chromium and chromium-driver.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from eval_harness.settings import load_settings
from eval_harness_pipelines.dagster_home import MARKER
from tools.ui_check.browser import browser_missing, headless_chromium
from tools.ui_check.check import run_ui_checks
from tools.ui_check.environment import (
    LAUNCH_JOB,
    ROOT,
    summarize_definitions,
    throwaway_config,
    throwaway_environment,
)

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
    assert settings.demo_rag_answers == original.demo_rag_answers  # the in-place answers' source
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


def test_the_definitions_summary_reads_the_workspace_without_a_browser(tmp_path):
    """What the browser checks expect; read here too, as the browser test is skipped where
    Chromium is not installed (workspace.yaml names a @dg.definitions function)."""
    summary = summarize_definitions(throwaway_environment(CONFIG, tmp_path))
    assert LAUNCH_JOB in summary.jobs and {"nightly", "nightly_quality_gates"} <= set(
        summary.schedules)
    assert {"corpus", "ground_truth", "answers", "judge_agreement"} <= set(summary.assets)
    assert set(summary.launch_assets) <= set(summary.assets) and summary.launch_assets
    assert {"format_compliance", "grounding"} <= set(summary.checks["answers"])
    assert set(summary.checks) <= set(summary.assets)


@pytest.mark.slow
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


def processes() -> list[tuple[int, str, str, int, int]]:
    """(pid, command name, state, parent pid, process group) of every process, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it ended meanwhile
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        state, parent, group = text[text.rindex(")") + 2:].split()[:3]
        found.append((int(stat.parent.name), name, state, int(parent), int(group)))
    return found


def living_members(group: int) -> list[str]:
    return [f"{pid} {name}" for pid, name, state, _, pgrp in processes()
            if pgrp == group and state != "Z"]


@pytest.mark.slow
@pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")
def test_the_browser_runs_on_the_installed_chromedriver_without_selenium_manager(
        tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.selenium_manager import SeleniumManager

    def no_download(self, args):  # it would look for, and download, a driver and a browser
        raise AssertionError(f"Selenium Manager was asked for {args}")
    monkeypatch.setattr(SeleniumManager, "binary_paths", no_download)
    scratch = tmp_path / "scratch"
    with headless_chromium(tmp_path / "chromedriver.log", scratch) as driver:
        driver.get("data:text/html,<p id='seen'>shown in Chromium</p>")
        assert driver.find_element(By.ID, "seen").text == "shown in Chromium"
        assert driver.get_window_size() == {"width": 1600, "height": 1000}
        assert driver.capabilities["browserName"] in ("chrome", "chromium")
        assert (scratch / "profile").is_dir()  # a fresh --user-data-dir in the scratch folder
    assert (tmp_path / "chromedriver.log").read_text().strip()  # chromedriver logged there


OPEN_AND_HANG = """
import sys, time
from pathlib import Path
from tools.ui_check.browser import headless_chromium
with headless_chromium(Path(sys.argv[1]), Path(sys.argv[2])) as driver:
    driver.get("data:text/html,<p>shown</p>")
    print("open", flush=True)
    time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_check_leaves_no_chromedriver_or_chromium_behind(tmp_path):
    """SIGKILL runs no cleanup code: the group reaper ends chromedriver and Chromium anyway."""
    child = subprocess.Popen([sys.executable, "-c", OPEN_AND_HANG, str(tmp_path / "driver.log"),
                              str(tmp_path / "scratch")], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        drivers = [pid for pid, name, _, parent, _ in processes()
                   if parent == child.pid and name == "chromedriver"]
        assert len(drivers) == 1, processes()
        group = drivers[0]
        assert any("chrom" in member and not member.endswith("chromedriver")
                   for member in living_members(group)), living_members(group)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    deadline = time.monotonic() + 30
    while living_members(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert living_members(group) == []


def test_the_tool_says_how_to_install_selenium_when_it_is_missing(tmp_path):
    without_selenium = ("import sys; sys.modules['selenium'] = None\n"
                        "from tools.ui_check.__main__ import main\n"
                        f"sys.exit(main(['--screenshots', {str(tmp_path)!r}]))")
    done = subprocess.run([sys.executable, "-c", without_selenium], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: selenium is not installed (it comes with the test extra): run "
        "`.venv/bin/python -m pip install -c requirements.lock -e '.[test]'`."]
    assert list(tmp_path.iterdir()) == []  # nothing was started

"""Check the Dagster UI in headless Chromium, the way a person would look at it.

``run_ui_checks`` starts ``dagster dev`` on the project's workspace in a throwaway environment
(its own DAGSTER_HOME, store and copy of the config file: nothing in the checkout changes;
environment.py), then drives Chromium with Selenium through Debian's chromedriver (browser.py,
pages.py). Every wait has a timeout; nothing sleeps a fixed time.
It checks that the global asset lineage shows every asset of the definitions, that each
asset's page lists its checks, that the schedules, sensors and jobs are listed, and that a run
launched by clicking "Materialize all" on ``main_job`` succeeds and shows in the run history.
"""

from __future__ import annotations

import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from selenium.common.exceptions import WebDriverException

from tools.ui_check.browser import browser_missing, headless_chromium, one_line
from tools.ui_check.environment import (
    LAUNCH_JOB,
    ROOT,
    DefinitionsSummary,
    UICheckUnavailable,
    summarize_definitions,
    throwaway_config,
    throwaway_environment,
)
from tools.ui_check.pages import PageBroken, Pages
from tools.ui_check.webserver import (
    GraphQLError,
    dagster_dev,
    run_error,
    run_ids,
    status_if_done,
    wait_until,
)

__all__ = ["ROOT", "CheckResult", "UICheckUnavailable", "browser_missing", "run_ui_checks",
           "throwaway_config", "throwaway_environment"]

RUN_STATUS_LABELS = {"SUCCESS": "Success", "FAILURE": "Failure", "CANCELED": "Canceled"}
Outcome = tuple[bool, str, Path | None]  # passed, one sentence, screenshot


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str  # one sentence: what was seen, or what is wrong
    seconds: float
    screenshot: Path | None = None

    def line(self) -> str:
        status = "PASS" if self.passed else "FAIL"
        shot = f" [{self.screenshot}]" if self.screenshot else ""
        return f"{status} {self.name}: {self.detail} ({self.seconds:.1f} s){shot}"


def _listing(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(names) if names else "nothing"


class UIChecks:
    """Each check opens a page as a person would, waits for what must be there, screenshots."""

    def __init__(self, pages: Pages, summary: DefinitionsSummary, run_timeout: float):
        self.pages, self.summary, self.run_timeout = pages, summary, run_timeout
        self.run_id: str | None = None
        self.run_status: str | None = None

    def results(self) -> Iterator[CheckResult]:
        yield self._timed("asset graph", self.asset_graph)
        for asset, names in sorted(self.summary.checks.items()):
            yield self._timed(f"checks of {asset}",
                              lambda asset=asset, names=names: self.asset_checks(asset, names))
        yield self._timed("schedules and sensors", self.automation)
        yield self._timed("jobs", self.jobs)
        yield self._timed(f"materialize {LAUNCH_JOB}", self.launch)
        yield self._timed("run history", self.run_history)

    def _timed(self, name: str, check: Callable[[], Outcome]) -> CheckResult:
        started = time.monotonic()
        try:
            passed, detail, shot = check()
        except (PageBroken, TimeoutError, WebDriverException, GraphQLError, OSError) as exc:
            passed, detail, shot = False, f"{one_line(exc)}.", self._try_shot(name)
        return CheckResult(name, passed, detail, time.monotonic() - started, shot)

    def _try_shot(self, name: str) -> Path | None:
        try:
            return self.pages.shot("failed-" + name.replace(" ", "-").replace("/", "_"))
        except (WebDriverException, OSError):
            return None

    def asset_graph(self) -> Outcome:
        self.pages.visit("/asset-groups")
        heading = self.pages.wait_for_lines(["Global asset lineage"])
        self.pages.dismiss_community_popup(appear_within=5)  # the first page shows it
        missing = self.pages.wait_for_asset_nodes(self.summary.assets)
        shot = self.pages.shot("asset-graph")
        if heading:
            return False, "/asset-groups does not show the heading 'Global asset lineage'.", shot
        if missing:
            return False, (f"Global asset lineage does not draw {_listing(missing)} "
                           f"(expected all {len(self.summary.assets)} assets)."), shot
        return True, (f"Global asset lineage draws all {len(self.summary.assets)} assets: "
                      f"{_listing(self.summary.assets)}."), shot

    def asset_checks(self, asset: str, names: tuple[str, ...]) -> Outcome:
        path = "/".join(urllib.parse.quote(part, safe="") for part in asset.split("/"))
        self.pages.visit(f"/assets/{path}?view=checks")
        missing = self.pages.wait_for_lines(names)
        shot = self.pages.shot("checks-" + asset.replace("/", "_"))
        if missing:
            return False, f"the Checks tab of {asset} does not list {_listing(missing)}.", shot
        return True, f"the Checks tab of {asset} lists {_listing(names)}.", shot

    def automation(self) -> Outcome:
        wanted = self.summary.schedules + self.summary.sensors
        self.pages.visit("/automation")
        missing = self.pages.wait_for_lines(wanted)
        shot = self.pages.shot("automation")
        if missing:
            return False, f"the Automation page does not list {_listing(missing)}.", shot
        return True, (f"the Automation page lists the schedules {_listing(self.summary.schedules)}"
                      f" and the sensors {_listing(self.summary.sensors)}."), shot

    def jobs(self) -> Outcome:
        self.pages.visit("/jobs")
        missing = self.pages.wait_for_lines(self.summary.jobs)
        shot = self.pages.shot("jobs")
        if missing:
            return False, f"the Jobs page does not list {_listing(missing)}.", shot
        return True, f"the Jobs page lists {_listing(self.summary.jobs)}.", shot

    def launch(self) -> Outcome:
        job, base_url = LAUNCH_JOB, self.pages.base_url
        before = run_ids(base_url, job)
        self.pages.visit("/jobs")
        self.pages.click_when_ready(f"//a[normalize-space(.)='{job}']",
                                    f"link to {job} on the Jobs page")
        missing = self.pages.wait_for_asset_nodes(self.summary.launch_assets)
        shot = self.pages.shot(f"job-{job}")
        if missing:
            return False, f"{job}'s page does not draw {_listing(missing)}.", shot
        self.pages.click_when_ready("//button[normalize-space(.)='Materialize all' "
                                    "and not(@disabled)]", f"enabled 'Materialize all' on {job}")
        try:
            new = wait_until(lambda: run_ids(base_url, job) - before, 30, "no run", interval=0.5)
        except TimeoutError:
            return False, (f"clicking 'Materialize all' on {job}'s page started no run "
                           "within 30 s."), self.pages.shot("launch")
        self.run_id = sorted(new)[0]
        self.pages.shot("launch")  # the "Launched run ..." toast
        return self._await_run(job, self.run_id)

    def _await_run(self, job: str, run_id: str) -> Outcome:
        started = time.monotonic()
        status = wait_until(lambda: status_if_done(self.pages.base_url, run_id), self.run_timeout,
                            f"run {run_id[:8]} of {job} did not finish", interval=1.0)
        seconds = time.monotonic() - started
        self.run_status = status
        self.pages.visit(f"/runs/{run_id}")
        # a failed run's page shows its error: that is the run's failure, not the page's
        shown = not self.pages.wait_for_lines([RUN_STATUS_LABELS[status]], errors_fail=False)
        self.pages.wait_for_lines([f"RUN_{status}"], timeout=10, errors_fail=False)  # for the shot
        shot = self.pages.shot("run")
        if status != "SUCCESS":
            return False, (f"run {run_id[:8]} of {job}, launched from the UI, ended {status}: "
                           f"{run_error(self.pages.base_url, run_id)}"), shot
        if not shown:
            return False, f"run {run_id[:8]} succeeded but its page does not say Success.", shot
        return True, (f"clicking 'Materialize all' on {job}'s page launched run {run_id[:8]}, "
                      f"which materialized {_listing(self.summary.launch_assets)} and succeeded "
                      f"after {seconds:.0f} s."), shot

    def run_history(self) -> Outcome:
        if self.run_id is None:
            return False, "no run was launched from the UI, so none can be in the history.", None
        label = RUN_STATUS_LABELS.get(self.run_status or "", "")
        self.pages.visit("/runs")
        missing = self.pages.wait_for_lines([self.run_id[:8], LAUNCH_JOB] + [label] * bool(label))
        shot = self.pages.shot("runs")
        if missing:
            return False, (f"the Runs page does not show {_listing(missing)} for run "
                           f"{self.run_id[:8]}."), shot
        return True, (f"the Runs page lists run {self.run_id[:8]} of {LAUNCH_JOB}"
                      f"{' as ' + label if label else ''}."), shot


def run_ui_checks(*, config: Path, screenshots: Path, page_timeout: float = 30.0,
                  run_timeout: float = 300.0,
                  report: Callable[[str], None] = lambda line: None) -> list[CheckResult]:
    """Start ``dagster dev`` and a browser in a throwaway environment and run every check.

    Raises :class:`UICheckUnavailable` (one sentence) when the checks cannot run at all.
    ``report`` receives a line per step as it happens; the results are returned.
    """
    missing = browser_missing()
    if missing:
        raise UICheckUnavailable(missing)
    if not config.is_file():
        raise UICheckUnavailable(f"{config}: config file not found; pass --config FILE.")
    screenshots.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eval-harness-ui-",
                                     ignore_cleanup_errors=True) as folder:
        env = throwaway_environment(config, Path(folder))
        with ThreadPoolExecutor(max_workers=1) as pool:  # read them while dagster dev starts
            reading = pool.submit(summarize_definitions, env)
            with dagster_dev(env, screenshots / "dagster-dev.log") as base_url, \
                    headless_chromium(screenshots / "chromedriver.log",
                                      Path(folder) / "browser") as driver:
                summary = reading.result()
                report(f"dagster dev serves {base_url} (ready after "
                       f"{time.monotonic() - started:.1f} s); definitions: "
                       f"{len(summary.assets)} assets, {sum(map(len, summary.checks.values()))} "
                       f"checks, {len(summary.jobs)} jobs, {len(summary.schedules)} schedules, "
                       f"{len(summary.sensors)} sensors")
                pages = Pages(driver, base_url, screenshots, page_timeout)
                results = []
                for result in UIChecks(pages, summary, run_timeout).results():
                    report(result.line())
                    results.append(result)
                return results

"""The Dagster UI as a person sees it through one Selenium session.

Every wait is a WebDriverWait with a timeout; none sleeps a fixed time.
"""

from __future__ import annotations

from pathlib import Path

from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

# What Dagster's UI shows instead of a page when something broke (its error boundary, a
# GraphQL error, a code location that did not load).
ERROR_MARKERS = ("can't be displayed", "An unexpected exception was thrown",
                 "Error loading code location", "Code location not found")
COMMUNITY_POPUP = "Join the Dagster community"
PAGE_TEXT = "return document.body ? document.body.innerText : '';"
ASSET_NODE_LINES = """
return Array.from(document.querySelectorAll('svg foreignObject:not(.group)'))
  .map(node => node.firstElementChild ? node.firstElementChild.innerText : '')
  .flatMap(text => text.split('\\n')).map(line => line.trim()).filter(Boolean);
"""


class PageBroken(RuntimeError):
    """The UI shows an error instead of the page."""


class Pages:
    """The Dagster UI at ``base_url`` in ``driver``; screenshots go to ``screenshots``."""

    def __init__(self, driver: WebDriver, base_url: str, screenshots: Path, timeout: float):
        self.driver, self.base_url = driver, base_url
        self.screenshots, self.timeout = screenshots, timeout

    def wait(self, timeout: float, poll: float = 0.25) -> WebDriverWait:
        # React re-renders replace elements between finding and using them: look again
        return WebDriverWait(self.driver, timeout, poll_frequency=poll,
                             ignored_exceptions=(StaleElementReferenceException,))

    def visit(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def shot(self, name: str) -> Path:
        self.dismiss_community_popup()
        path = self.screenshots / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.driver.get_screenshot_as_png())
        return path

    def lines(self) -> set[str]:
        text = self.driver.execute_script(PAGE_TEXT) or ""
        return {line.strip() for line in text.splitlines() if line.strip()}

    def wait_for_lines(self, wanted: tuple[str, ...] | list[str], timeout: float | None = None,
                       *, errors_fail: bool = True) -> list[str]:
        """Poll until each of ``wanted`` is a line of the page; returns those still missing.

        With ``errors_fail`` an error the UI shows instead of the page raises PageBroken.
        """
        missing: list[str] = list(wanted)

        def all_shown(driver: WebDriver) -> bool:
            nonlocal missing
            lines = self.lines()
            broken = [marker for marker in ERROR_MARKERS
                      if errors_fail and any(marker in line for line in lines)]
            if broken:
                raise PageBroken(f"{driver.current_url} shows '{broken[0]}'")
            missing = [text for text in wanted if text not in lines]
            return not missing
        try:
            self.wait(timeout or self.timeout).until(all_shown)
        except TimeoutException:
            pass
        return missing

    def dismiss_community_popup(self, appear_within: float = 0.0) -> None:
        """Dagster asks once per instance, on localhost, to join its newsletter: Skip it."""
        def shown(driver: WebDriver) -> bool:
            return COMMUNITY_POPUP in (driver.execute_script(PAGE_TEXT) or "")
        try:
            self.wait(appear_within).until(shown)
        except TimeoutException:
            return
        for button in self.driver.find_elements(By.XPATH, "//button[normalize-space(.)='Skip']"):
            button.click()
        self.wait(5).until_not(shown, "the community popup did not close after Skip within 5 s")

    def click_when_ready(self, xpath: str, what: str) -> None:
        """Click the first element at ``xpath`` once it is shown and enabled."""
        self.dismiss_community_popup()
        found = self.wait(self.timeout).until(
            expected_conditions.element_to_be_clickable((By.XPATH, xpath)),
            f"no {what} within {self.timeout:.0f} s")
        found.click()

    def asset_nodes(self) -> set[str]:
        return set(self.driver.execute_script(ASSET_NODE_LINES) or [])

    def wait_for_asset_nodes(self, assets: tuple[str, ...]) -> list[str]:
        """Poll until every asset is drawn as a node; expands collapsed groups (Alt+E) once."""
        names = {asset: asset.split("/")[-1] for asset in assets}
        missing = list(assets)
        expanded = False

        def all_drawn(driver: WebDriver) -> bool:
            nonlocal missing, expanded
            drawn = self.asset_nodes()
            missing = [asset for asset, name in names.items() if name not in drawn]
            # Groups start collapsed; the graph's own shortcut expands them all, and the URL
            # says which are open (pressing it again would collapse them).
            if (missing and not expanded and "expanded=" not in driver.current_url
                    and driver.find_elements(By.XPATH, "//*[name()='foreignObject']")):
                self.dismiss_community_popup()
                ActionChains(driver).key_down(Keys.ALT).send_keys("e").key_up(Keys.ALT).perform()
                expanded = True
            return not missing
        try:
            self.wait(self.timeout, poll=0.5).until(all_drawn)
        except TimeoutException:
            pass
        return missing

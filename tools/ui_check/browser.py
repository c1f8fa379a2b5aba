"""Headless Chromium under Debian's chromedriver, driven by Selenium.

Selenium is given the installed chromedriver and Chromium by path and talks to a chromedriver
it started itself, so Selenium Manager (which would look for, and download, a driver and a
browser) never runs: this machine reaches no download site. Every command to chromedriver has
a timeout, and so do page loads and scripts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.client_config import ClientConfig
from selenium.webdriver.remote.webdriver import WebDriver

from tools.ui_check.environment import UICheckUnavailable
from tools.ui_check.webserver import log_tail

INSTALL_HINT = "apt-get install chromium chromium-driver"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROME_ARGS = ("--headless", "--no-sandbox", "--disable-background-networking",
               "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1600,1000")
COMMAND_TIMEOUT = 90  # seconds for one command to chromedriver, starting the session included
PAGE_LOAD_TIMEOUT_MS, SCRIPT_TIMEOUT_MS = 60_000, 30_000


def chromium_binary() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


def chromedriver_binary() -> str | None:
    return shutil.which("chromedriver")


def browser_missing() -> str | None:
    """One sentence naming what is not installed, or None when Chromium and chromedriver are."""
    missing = [name for name, found in (("chromium", chromium_binary()),
                                        ("chromedriver", chromedriver_binary()))
               if not found]
    if not missing:
        return None
    return (f"{' and '.join(missing)} not installed: run `{INSTALL_HINT}` "
            "(as root, after apt-get update).")


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (Selenium's carry a stack trace after it)."""
    text = exc.msg if isinstance(exc, WebDriverException) and exc.msg else str(exc)
    lines = text.strip().splitlines()
    return lines[0].rstrip(".") if lines else type(exc).__name__


def chrome_options(chromium: str, profile: Path) -> webdriver.ChromeOptions:
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (*CHROME_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(argument)
    options.timeouts = {"pageLoad": PAGE_LOAD_TIMEOUT_MS, "script": SCRIPT_TIMEOUT_MS}
    return options


# Chromium outlives a chromedriver that is killed. chromedriver leads a process group of its own,
# which Chromium joins; this shell reads its stdin until we close it, which the kernel does when
# we end, however we end (SIGKILL included), and then kills that whole group.
_GROUP_REAPER = ("bash", "-c", 'read -r _; kill -KILL -- "-$1" 2>/dev/null; exit 0', "reaper")


@contextmanager
def _reaped_group(leader: int) -> Iterator[None]:
    """Kill the process group ``leader`` leads when the block ends or when we die."""
    reaper = subprocess.Popen([*_GROUP_REAPER, str(leader)], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        yield
    finally:
        reaper.stdin.close()
        reaper.wait(timeout=10)


def _start_session(driver_url: str, chromium: str, profile: Path) -> WebDriver:
    try:
        return webdriver.Remote(
            command_executor=driver_url, options=chrome_options(chromium, profile),
            client_config=ClientConfig(remote_server_addr=driver_url, timeout=COMMAND_TIMEOUT))
    except WebDriverException as exc:
        raise UICheckUnavailable(
            f"Chromium did not start under chromedriver ({one_line(exc)}).") from None


@contextmanager
def headless_chromium(log_path: Path, scratch: Path) -> Iterator[WebDriver]:
    """A Selenium session in a fresh headless Chromium; chromedriver logs to ``log_path``.

    Chromium's profile and shared-memory files go to ``scratch`` (its --user-data-dir and
    TMPDIR), which the caller removes: left to themselves they stay behind in /tmp. Chromium
    puts Unix sockets there, whose paths may not exceed about 100 bytes, so a longer
    ``scratch`` is reached through a short symbolic link in the system's temporary folder.
    """
    chromium, chromedriver = chromium_binary(), chromedriver_binary()
    if not chromium or not chromedriver:
        raise UICheckUnavailable(browser_missing() or "chromium is not installed.")
    scratch.mkdir(parents=True, exist_ok=True)
    with _short_path(scratch) as scratch:
        yield from _session(log_path, scratch, chromium, chromedriver)


@contextmanager
def _short_path(folder: Path, limit: int = 40) -> Iterator[Path]:
    if len(str(folder)) <= limit:
        yield folder
        return
    link = Path(tempfile.mkdtemp(prefix="ehui-")) / "s"
    link.symlink_to(folder, target_is_directory=True)
    try:
        yield link
    finally:
        shutil.rmtree(link.parent, ignore_errors=True)  # the link only, not its target


def _session(log_path: Path, scratch: Path, chromium: str,
             chromedriver: str) -> Iterator[WebDriver]:
    # start_new_session: chromedriver leads its own process group, which _reaped_group kills
    service = Service(executable_path=chromedriver, log_output=str(log_path),
                      env=dict(os.environ, TMPDIR=str(scratch)),
                      popen_kw={"start_new_session": True})
    try:
        service.start()
    except WebDriverException as exc:
        raise UICheckUnavailable(f"chromedriver did not start ({one_line(exc)}; log: "
                                 f"{log_tail(log_path)}).") from None
    with _reaped_group(service.process.pid):
        try:
            driver = _start_session(service.service_url, chromium, scratch / "profile")
            try:
                yield driver
            finally:
                try:
                    driver.quit()
                except (WebDriverException, OSError):
                    pass  # the process group is killed all the same
        finally:
            service.stop()

"""Check the Dagster UI in headless Chromium, the way a person would look at it.

``run_ui_checks`` starts ``dagster dev`` on the project's workspace with a throwaway
DAGSTER_HOME (its own run history even with DAGSTER_POSTGRES_URL set), embedded store (or
DATABASE_URL's) and copy of the config file, so nothing in the checkout changes (the
calibration assets, for one, write weights into the config file in use). It starts
chromedriver and drives Chromium through the W3C WebDriver protocol: plain HTTP and JSON, no
Selenium. Every wait polls with a timeout; nothing sleeps a fixed time.
It checks that the global asset lineage shows every asset of the definitions, that each
asset's page lists its checks, that the schedules, sensors and jobs are listed, and that a run
launched by clicking "Materialize all" on ``main_job`` succeeds and shows in the run history.

What the definitions contain is read by a child Python process, so this module imports no
Dagster (the library stays orchestrator-free) and expects nothing hard-coded.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = ROOT / "workspace.yaml"
INSTALL_HINT = "apt-get install chromium chromium-driver"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROME_ARGS = ("--headless", "--no-sandbox", "--disable-background-networking",
               "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1600,1000")
LAUNCH_JOB = "main_job"
# What Dagster's UI shows instead of a page when something broke (its error boundary, a
# GraphQL error, a code location that did not load).
ERROR_MARKERS = ("can't be displayed", "An unexpected exception was thrown",
                 "Error loading code location", "Code location not found")


class UICheckUnavailable(RuntimeError):
    """The check could not run (no browser, the webserver did not start); one sentence."""


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


@dataclass(frozen=True)
class DefinitionsSummary:
    """What the code location defines, read from ``eval_harness_pipelines.definitions`` itself."""

    assets: tuple[str, ...]
    checks: dict[str, tuple[str, ...]]  # asset -> its check names
    jobs: tuple[str, ...]
    schedules: tuple[str, ...]
    sensors: tuple[str, ...]
    launch_assets: tuple[str, ...] = field(default=())  # assets of LAUNCH_JOB


def browser_missing() -> str | None:
    """One sentence naming what is not installed, or None when Chromium and chromedriver are."""
    missing = [name for name, found in (("chromium", chromium_binary()),
                                        ("chromedriver", shutil.which("chromedriver")))
               if not found]
    if not missing:
        return None
    return (f"{' and '.join(missing)} not installed: run `{INSTALL_HINT}` "
            "(as root, after apt-get update).")


def chromium_binary() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], Any], timeout: float, what: str,
               interval: float = 0.25) -> Any:
    """Poll ``condition`` until it returns something truthy; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(interval)


# --- the throwaway environment -------------------------------------------------------------

def throwaway_config(config: Path, folder: Path) -> Path:
    """A copy of ``config`` in ``folder`` that reads the same inputs and writes only there.

    Inputs (datasets, the answers file) are kept by absolute path; outputs (the embedded
    store, the DuckDB history, Dagster's home, ``reports/`` next to the config) go to
    ``folder``. Comments are not kept: the copy is thrown away with the folder.
    """
    root = config.resolve().parent
    raw = yaml.safe_load(config.read_text(encoding="utf-8")) or {}

    def absolute(value: Any) -> str:
        return str((root / str(value)).resolve())

    for entry in (raw.get("datasets") or {}).values():
        for key in ("path", "embeddings"):
            if isinstance(entry, dict) and entry.get(key):
                entry[key] = absolute(entry[key])
    gates = raw.get("quality_gates") or {}
    if gates.get("answers_file"):
        gates["answers_file"] = absolute(gates["answers_file"])
    raw["store"] = {**(raw.get("store") or {}), "embedded_pgdata": str(folder / "pgdata")}
    raw["history"] = {**(raw.get("history") or {}), "duckdb_path": str(folder / "history.duckdb")}
    raw["dagster"] = {**(raw.get("dagster") or {}), "home": str(folder / "dagster")}
    copy = folder / "config.yaml"
    copy.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return copy


def throwaway_environment(config: Path, folder: Path) -> dict[str, str]:
    """Environment for ``dagster dev``: the config copy and a fresh DAGSTER_HOME in ``folder``."""
    from eval_harness_pipelines.dagster_home import instance_yaml
    from eval_harness.settings import load_settings

    env = dict(os.environ)
    env.pop("EVAL_HARNESS_PGDATA", None)  # the throwaway store, unless DATABASE_URL is set
    env.pop("DAGSTER_POSTGRES_URL", None)  # keep these runs out of a shared run history
    home = folder / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    env.update(EVAL_HARNESS_CONFIG=str(throwaway_config(config, folder)), DAGSTER_HOME=str(home))
    settings = load_settings(env["EVAL_HARNESS_CONFIG"], environ=env)
    (home / "dagster.yaml").write_text(instance_yaml(settings), encoding="utf-8")
    return env


def workspace_module() -> tuple[str, str]:
    """(module, attribute) of the one python_module entry of workspace.yaml."""
    raw = yaml.safe_load(WORKSPACE.read_text(encoding="utf-8")) or {}
    entries = [entry["python_module"] for entry in raw.get("load_from") or []
               if isinstance(entry, dict) and "python_module" in entry]
    if len(entries) != 1:
        raise UICheckUnavailable(f"{WORKSPACE} should load exactly one python_module.")
    entry = entries[0]
    if isinstance(entry, str):
        return entry, "defs"
    return entry["module_name"], entry.get("attribute", "defs")


# Runs in a child process: the only place where the definitions (and Dagster) are imported.
_SUMMARY_SCRIPT = """
import importlib, json, sys
defs = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
graph = defs.resolve_asset_graph()
checks = {}
for key in sorted(graph.asset_check_keys, key=lambda k: k.name):
    checks.setdefault(key.asset_key.to_user_string(), []).append(key.name)
jobs = [job for job in defs.resolve_all_job_defs() if not job.name.startswith("__")]
launch = defs.resolve_job_def(sys.argv[3]).asset_layer.executable_asset_keys
print(json.dumps({
    "assets": sorted(key.to_user_string() for key in graph.get_all_asset_keys()),
    "checks": checks, "jobs": sorted(job.name for job in jobs),
    "schedules": sorted(s.name for s in defs.schedules or []),
    "sensors": sorted(s.name for s in defs.sensors or []),
    "launch_assets": sorted(key.to_user_string() for key in launch)}))
"""


def summarize_definitions(env: dict[str, str]) -> DefinitionsSummary:
    """Load the workspace's definitions (with ``env``'s config) in a child process."""
    module, attribute = workspace_module()
    done = subprocess.run([sys.executable, "-c", _SUMMARY_SCRIPT, module, attribute, LAUNCH_JOB],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UICheckUnavailable(f"The definitions in {module} did not load ({last}).")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    return DefinitionsSummary(
        assets=tuple(raw["assets"]),
        checks={asset: tuple(names) for asset, names in raw["checks"].items()},
        jobs=tuple(raw["jobs"]), schedules=tuple(raw["schedules"]),
        sensors=tuple(raw["sensors"]), launch_assets=tuple(raw["launch_assets"]))


# --- processes -----------------------------------------------------------------------------

def _stop_with_parent() -> None:
    """In a child before exec: SIGTERM it when we die, so a killed test run leaves no server."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process_group(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM the group ``process`` leads (started with start_new_session), then SIGKILL."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except ProcessLookupError:
            pass
    try:  # children that outlived the leader (the daemon's run workers, say)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class GraphQLError(RuntimeError):
    pass


def graphql(base_url: str, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{base_url}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        answer = json.loads(reply.read())
    if answer.get("errors"):
        raise GraphQLError(f"GraphQL error: {answer['errors'][0].get('message')}")
    return answer["data"]


def _log_tail(path: Path, lines: int = 5) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return " | ".join(text.strip().splitlines()[-lines:]) or "no output"


def _location_loaded(base_url: str) -> bool:
    data = graphql(base_url, "{ workspaceOrError { ... on Workspace { locationEntries "
                             "{ loadStatus locationOrLoadError { __typename "
                             "... on PythonError { message } } } } } }")
    entries = data["workspaceOrError"]["locationEntries"]
    if not entries or any(e["loadStatus"] != "LOADED" for e in entries):
        return False
    for entry in entries:
        loaded = entry["locationOrLoadError"]
        if loaded["__typename"] == "PythonError":
            raise UICheckUnavailable("The code location failed to load in the webserver: "
                                     f"{loaded['message'].strip().splitlines()[-1]}")
    return True


@contextmanager
def dagster_dev(env: dict[str, str], log_path: Path, timeout: float = 120.0) -> Iterator[str]:
    """``dagster dev`` (webserver + daemon) on a free port; yields its base URL once loaded."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-w", str(WORKSPACE), "-h", "127.0.0.1",
             "-p", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_stop_with_parent)
        try:
            def ready() -> bool:
                if process.poll() is not None:
                    raise UICheckUnavailable(f"dagster dev exited with code {process.returncode}: "
                                             f"{_log_tail(log_path)}")
                try:
                    return _location_loaded(base_url)
                except (OSError, ValueError, GraphQLError):
                    return False  # not listening yet
            try:
                wait_until(ready, timeout, "the webserver did not load the code location",
                           interval=0.5)
            except TimeoutError as exc:
                raise UICheckUnavailable(f"{exc} (log: {_log_tail(log_path)}).") from None
            yield base_url
        finally:
            stop_process_group(process)


# Chromium outlives a chromedriver that is killed; this shell, told SIGTERM when we die,
# passes it to its whole process group: chromedriver and the browsers it started.
_GROUP_GUARD = ("bash", "-c", 'trap "trap - TERM; kill 0" TERM; "$@" & wait $!', "guard")


@contextmanager
def chromedriver(log_path: Path, scratch: Path, timeout: float = 30.0) -> Iterator[str]:
    """chromedriver on a free port; yields its URL once it reports ready.

    Chromium's profile and shared-memory files go to ``scratch`` (TMPDIR), which the caller
    removes: left to themselves they stay behind in /tmp.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    scratch.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([*_GROUP_GUARD, "chromedriver", f"--port={port}",
                                f"--log-path={log_path}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, start_new_session=True,
                               preexec_fn=_stop_with_parent,
                               env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        def ready() -> bool:
            if process.poll() is not None:
                raise UICheckUnavailable(f"chromedriver exited with code {process.returncode}: "
                                         f"{_log_tail(log_path)}")
            try:
                with urllib.request.urlopen(f"{url}/status", timeout=2) as reply:
                    return bool(json.loads(reply.read())["value"].get("ready"))
            except OSError:
                return False
        try:
            wait_until(ready, timeout, "chromedriver did not start")
        except TimeoutError as exc:
            raise UICheckUnavailable(f"{exc}.") from None
        yield url
    finally:
        stop_process_group(process, grace=10.0)


# --- the W3C WebDriver protocol ------------------------------------------------------------

ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"  # fixed by the W3C specification
ALT = "\ue00a"  # WebDriver key code of Alt (Option)


class WebDriverError(RuntimeError):
    pass


class Browser:
    """One headless Chromium session, driven over chromedriver's HTTP API."""

    def __init__(self, driver_url: str, binary: str, args: tuple[str, ...] = CHROME_ARGS):
        self.driver_url = driver_url
        options = {"binary": binary, "args": list(args)}
        reply = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options,
            "timeouts": {"pageLoad": 60_000, "script": 30_000}}}})
        self.session = reply["sessionId"]

    def _call(self, method: str, path: str, body: dict | None = None) -> Any:
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        request = urllib.request.Request(self.driver_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=90) as reply:
                return json.loads(reply.read())["value"]
        except urllib.error.HTTPError as exc:
            value = json.loads(exc.read() or b"{}").get("value") or {}
            message = (value.get("message") or "").strip().splitlines()
            raise WebDriverError(f"{value.get('error', exc.code)}: "
                                 f"{message[0] if message else ''}") from None

    def _session(self, method: str, path: str, body: dict | None = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def run_script(self, script: str, *args: Any) -> Any:
        return self._session("POST", "/execute/sync", {"script": script, "args": list(args)})

    def page_text(self) -> str:
        return self.run_script("return document.body ? document.body.innerText : '';") or ""

    def find_all(self, xpath: str) -> list[str]:
        found = self._session("POST", "/elements", {"using": "xpath", "value": xpath})
        return [element[ELEMENT_KEY] for element in found]

    def click(self, element: str) -> None:
        self._session("POST", f"/element/{element}/click")

    def press(self, key: str, modifier: str) -> None:
        """Type ``key`` while holding ``modifier`` (a WebDriver key code such as ALT)."""
        keys = [{"type": "keyDown", "value": modifier}, {"type": "keyDown", "value": key},
                {"type": "keyUp", "value": key}, {"type": "keyUp", "value": modifier}]
        self._session("POST", "/actions", {"actions": [{"type": "key", "id": "keyboard",
                                                        "actions": keys}]})

    def current_url(self) -> str:
        return self._session("GET", "/url")

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._session("GET", "/screenshot")))
        return path

    def quit(self) -> None:
        try:
            self._session("DELETE", "")
        except (OSError, WebDriverError):
            pass


# --- pages ---------------------------------------------------------------------------------

ASSET_NODE_LINES = """
return Array.from(document.querySelectorAll('svg foreignObject:not(.group)'))
  .map(node => node.firstElementChild ? node.firstElementChild.innerText : '')
  .flatMap(text => text.split('\\n')).map(line => line.trim()).filter(Boolean);
"""
COMMUNITY_POPUP = "Join the Dagster community"
TERMINAL_RUN_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}


class Pages:
    """The Dagster UI as seen through one browser session; every wait polls, none sleeps."""

    def __init__(self, browser: Browser, base_url: str, screenshots: Path, timeout: float):
        self.browser, self.base_url = browser, base_url
        self.screenshots, self.timeout = screenshots, timeout

    def visit(self, path: str) -> None:
        self.browser.open(self.base_url + path)

    def shot(self, name: str) -> Path:
        self.dismiss_community_popup()
        return self.browser.screenshot(self.screenshots / f"{name}.png")

    def lines(self) -> set[str]:
        return {line.strip() for line in self.browser.page_text().splitlines() if line.strip()}

    def wait_for_lines(self, wanted: tuple[str, ...] | list[str], timeout: float | None = None,
                       *, errors_fail: bool = True) -> list[str]:
        """Poll until each of ``wanted`` is a line of the page; returns those still missing.

        With ``errors_fail`` an error the UI shows instead of the page raises PageBroken.
        """
        missing: list[str] = list(wanted)

        def all_shown() -> bool:
            nonlocal missing
            lines = self.lines()
            broken = [marker for marker in ERROR_MARKERS
                      if errors_fail and any(marker in line for line in lines)]
            if broken:
                raise PageBroken(f"{self.browser.current_url()} shows '{broken[0]}'")
            missing = [text for text in wanted if text not in lines]
            return not missing
        try:
            wait_until(all_shown, timeout or self.timeout, "page")
        except TimeoutError:
            pass
        return missing

    def dismiss_community_popup(self, appear_within: float = 0.0) -> None:
        """Dagster asks once per instance, on localhost, to join its newsletter: Skip it."""
        def shown() -> bool:
            return COMMUNITY_POPUP in self.browser.page_text()
        try:
            wait_until(shown, appear_within, "popup")
        except TimeoutError:
            return
        for button in self.browser.find_all("//button[normalize-space(.)='Skip']"):
            self.browser.click(button)
        wait_until(lambda: not shown(), 5, "the community popup did not close after Skip")

    def click_when_ready(self, xpath: str, what: str) -> None:
        self.dismiss_community_popup()
        found = wait_until(lambda: self.browser.find_all(xpath), self.timeout, f"no {what}")
        self.browser.click(found[0])

    def asset_nodes(self) -> set[str]:
        return set(self.browser.run_script(ASSET_NODE_LINES) or [])

    def wait_for_asset_nodes(self, assets: tuple[str, ...]) -> list[str]:
        """Poll until every asset is drawn as a node; expands collapsed groups (Alt+E) once."""
        names = {asset: asset.split("/")[-1] for asset in assets}
        missing = list(assets)
        expanded = False

        def all_drawn() -> bool:
            nonlocal missing, expanded
            drawn = self.asset_nodes()
            missing = [asset for asset, name in names.items() if name not in drawn]
            # Groups start collapsed; the graph's own shortcut expands them all, and the URL
            # says which are open (pressing it again would collapse them).
            if (missing and not expanded and "expanded=" not in self.browser.current_url()
                    and self.browser.find_all("//*[name()='foreignObject']")):
                self.dismiss_community_popup()
                self.browser.press("e", ALT)
                expanded = True
            return not missing
        try:
            wait_until(all_drawn, self.timeout, "graph", interval=0.5)
        except TimeoutError:
            pass
        return missing


class PageBroken(RuntimeError):
    """The UI shows an error instead of the page."""


def _listing(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(names) if names else "nothing"


# --- the checks ----------------------------------------------------------------------------

RUN_STATUS_LABELS = {"SUCCESS": "Success", "FAILURE": "Failure", "CANCELED": "Canceled"}
Outcome = tuple[bool, str, Path | None]  # passed, one sentence, screenshot


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
        except (PageBroken, TimeoutError, WebDriverError, GraphQLError, OSError) as exc:
            passed, detail, shot = False, f"{exc}.", self._try_shot(name)
        return CheckResult(name, passed, detail, time.monotonic() - started, shot)

    def _try_shot(self, name: str) -> Path | None:
        try:
            return self.pages.shot("failed-" + name.replace(" ", "-").replace("/", "_"))
        except (WebDriverError, OSError):
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
        job = LAUNCH_JOB
        before = self._run_ids(job)
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
            new = wait_until(lambda: self._run_ids(job) - before, 30, "no run", interval=0.5)
        except TimeoutError:
            return False, (f"clicking 'Materialize all' on {job}'s page started no run "
                           "within 30 s."), self.pages.shot("launch")
        self.run_id = sorted(new)[0]
        self.pages.shot("launch")  # the "Launched run ..." toast
        return self._await_run(job, self.run_id)

    def _await_run(self, job: str, run_id: str) -> Outcome:
        started = time.monotonic()
        status = wait_until(lambda: self._status_if_done(run_id), self.run_timeout,
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
                           f"{self._run_error(run_id)}"), shot
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

    def _run_ids(self, job: str) -> set[str]:
        data = graphql(self.pages.base_url,
                       "query($job: String) { runsOrError(filter: {pipelineName: $job}) "
                       "{ ... on Runs { results { runId } } } }", {"job": job})
        return {run["runId"] for run in data["runsOrError"].get("results", [])}

    def _status_if_done(self, run_id: str) -> str | None:
        data = graphql(self.pages.base_url, "query($id: ID!) { runOrError(runId: $id) "
                                            "{ ... on Run { status } } }", {"id": run_id})
        status = data["runOrError"].get("status")
        return status if status in TERMINAL_RUN_STATUSES else None

    def _run_error(self, run_id: str) -> str:
        """The first step failure (or run failure) of a run: its innermost cause, one line."""
        data = graphql(self.pages.base_url, """query($id: ID!) { logsForRun(runId: $id) {
            ... on EventConnection { events { __typename
              ... on ExecutionStepFailureEvent { stepKey error { message causes { message } } }
              ... on RunFailureEvent { message } } } } }""", {"id": run_id})
        events = data["logsForRun"].get("events", [])
        for event in events:
            if event.get("error"):
                error = event["error"]
                innermost = (error["causes"] or [error])[-1]["message"].strip().splitlines()
                return f"step {event['stepKey']}: {innermost[0] if innermost else 'no message'}"
        for event in events:
            if event["__typename"] == "RunFailureEvent":
                return event["message"].strip().splitlines()[0]
        return "no failure event was recorded."


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
                    chromedriver(screenshots / "chromedriver.log",
                                 Path(folder) / "browser") as driver_url:
                summary = reading.result()
                report(f"dagster dev serves {base_url} (ready after "
                       f"{time.monotonic() - started:.1f} s); definitions: "
                       f"{len(summary.assets)} assets, {sum(map(len, summary.checks.values()))} "
                       f"checks, {len(summary.jobs)} jobs, {len(summary.schedules)} schedules, "
                       f"{len(summary.sensors)} sensors")
                return _check_in_browser(driver_url, base_url, summary, screenshots,
                                         page_timeout, run_timeout, report)


def _check_in_browser(driver_url: str, base_url: str, summary: DefinitionsSummary,
                      screenshots: Path, page_timeout: float, run_timeout: float,
                      report: Callable[[str], None]) -> list[CheckResult]:
    try:
        browser = Browser(driver_url, chromium_binary() or "chromium")
    except WebDriverError as exc:
        raise UICheckUnavailable(
            f"Chromium did not start under chromedriver ({exc}).") from None
    try:
        pages = Pages(browser, base_url, screenshots, page_timeout)
        results = []
        for result in UIChecks(pages, summary, run_timeout).results():
            report(result.line())
            results.append(result)
        return results
    finally:
        browser.quit()

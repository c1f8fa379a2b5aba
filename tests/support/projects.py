"""The ``project`` fixture: a project folder as a user has one, for tests that run commands.

A project is the test's ``tmp_path`` holding a ``config.yaml``, with ``DATABASE_URL`` on a
test database and none of the variables a developer's shell may hold that would change what
the commands read (the Dagster home, the config path, the judges' keys, servers and specs).
The fixture's value is the config file's path (what ``--config`` takes), carrying the folder
as ``.folder`` and the database as ``.store``.

What differs between test modules is said by a ``project`` marker on the module (or test):

* ``config``: the config.yaml's text, or a function making the project: ``make(path,
  **fixtures)`` writes ``path`` (and what the project holds beside it: a data folder, an
  ingest through the CLI), each parameter after the path without a default a fixture of that
  name (``tmp_path``, ``dataset``, ...), so a module's own data fixtures are made first; it
  runs with the environment already set;
* ``database``: ``"store"`` (the session's migrated database, the default), ``"fresh"`` (one
  of the test's own) or None (no database: ``DATABASE_URL`` unset);
* ``chdir``: the folder becomes the working directory (default False);
* ``judges_on_fake``: both LLM providers pointed at the fake LLM server (the ``fake``
  fixture) with made-up keys naming the test by this tag (tests/support/judge_cli_env.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from eval_harness.store import StoreLocation
from judge_cli_env import judge_cli_environment

# Read by the commands from the environment; a project sets DATABASE_URL only.
CLEARED_VARIABLES = ("DAGSTER_HOME", "DAGSTER_POSTGRES_URL", "EVAL_HARNESS_CONFIG",
                     "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                     "ANTHROPIC_BASE_URL", "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2",
                     "EVAL_HARNESS_JUDGE_BUDGET_USD")
DATABASES = ("store", "fresh", None)


class Project(type(Path())):
    """A project's config.yaml (a path), with its folder and its database (``store``).

    Paths derived from it (``project.parent``) are plain paths of this class without them."""

    folder: Path
    store: StoreLocation | None

    @property
    def default_dataset(self) -> str | None:
        """The dataset the config names as its default, as the file now says."""
        return (yaml.safe_load(self.read_text(encoding="utf-8")) or {}).get("default_dataset")


@pytest.fixture
def project(request, tmp_path, monkeypatch) -> Project:
    """The project folder the test's (or its module's) ``project`` marker describes."""
    marker = request.node.get_closest_marker("project")
    options = dict(marker.kwargs) if marker else {}
    database = options.pop("database", "store")
    config, chdir = options.pop("config", ""), options.pop("chdir", False)
    judges_on_fake = options.pop("judges_on_fake", None)
    if options or database not in DATABASES:
        raise TypeError(f"project marker: unknown options {sorted(options)} or database "
                        f"{database!r} (config, database in {DATABASES}, chdir, "
                        "judges_on_fake)")
    # the database first: the test server's own fixture reads DATABASE_URL once, when made
    store = request.getfixturevalue(database) if database else None
    for variable in CLEARED_VARIABLES + ("DATABASE_URL",):
        monkeypatch.delenv(variable, raising=False)
    if store is not None:
        monkeypatch.setenv("DATABASE_URL", store.url)
    path = Project(tmp_path / "config.yaml")
    path.folder, path.store = tmp_path, store
    if callable(config):
        fixtures = [name for name, parameter in inspect.signature(config).parameters.items()
                    if parameter.default is parameter.empty][1:]
        config(path, **{name: request.getfixturevalue(name) for name in fixtures})
    else:
        path.write_text(config)
    if judges_on_fake:
        judge_cli_environment(monkeypatch, store, request.getfixturevalue("fake"),
                              tag=judges_on_fake)
    if chdir:
        monkeypatch.chdir(tmp_path)
    return path

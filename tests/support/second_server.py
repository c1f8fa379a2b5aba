"""The second server some tests also run on: a PostgreSQL 15 named by ``EVAL_HARNESS_PG15_URL``
(``.ci/run`` starts a throwaway one where the machine has Debian's ``postgresql-15``, and builds
pgvector for it from Debian's source package).

:func:`servers` gives the ``params`` of a fixture that runs on the test server and, when the
second server is there (with pgvector, for the tests that need it), on it too. When it is not,
the PostgreSQL 15 case is skipped with one line saying what is missing, never an error.
"""

from __future__ import annotations

import functools
import os

import psycopg
import pytest

PG15_ENV = "EVAL_HARNESS_PG15_URL"
TEST_SERVER = "test"


@functools.cache
def missing(*, needs_vector: bool) -> str | None:
    """Why the PostgreSQL 15 cases cannot run here (None: they can)."""
    url = os.environ.get(PG15_ENV)
    if not url:
        return f"{PG15_ENV} is unset: no PostgreSQL 15 server"
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            version = int(conn.execute("SHOW server_version_num").fetchone()[0])
            vector = conn.execute("SELECT default_version FROM pg_available_extensions "
                                  "WHERE name = 'vector'").fetchone()
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"{PG15_ENV} names no server that answers ({first})"
    if version // 10000 != 15:
        return f"{PG15_ENV} names PostgreSQL {version // 10000}, not 15"
    if needs_vector and vector is None:
        return (f"the PostgreSQL 15 server at {PG15_ENV} has no pgvector (extension \"vector\" "
                "is not available; .ci/run builds it from Debian's pgvector source package)")
    return None


def servers(*, needs_vector: bool) -> list:
    """Fixture params: the test server, and the PostgreSQL 15 server (skipped with its reason
    when it is missing). A fixture maps :data:`TEST_SERVER` to its own server's URL and
    anything else to :func:`url`."""
    why = missing(needs_vector=needs_vector)
    return [pytest.param(TEST_SERVER, id="test-server"),
            pytest.param(PG15_ENV, id="pg15", marks=pytest.mark.skipif(
                why is not None, reason=why or ""))]


def url(param: str, test_server_url: str) -> str:
    """The URL a fixture param stands for."""
    return test_server_url if param == TEST_SERVER else os.environ[PG15_ENV]

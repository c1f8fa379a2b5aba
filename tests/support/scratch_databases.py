"""Databases of their own on the test server: created for one test, dropped afterwards.

The root conftest's ``store``, ``fresh`` and ``empty_database`` fixtures are built on
``scratch_database``; tests that need a second database beside those call it directly.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import psycopg
from psycopg import sql

from eval_harness.store import StoreLocation
from eval_harness.store.connection import redact_url


def _with_dbname(url: str, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=dbname)


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

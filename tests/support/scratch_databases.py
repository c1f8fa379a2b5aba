"""Databases of their own on the test server: created for one test, dropped afterwards.

The root conftest's ``store``, ``fresh`` and ``empty_database`` fixtures are built on
``scratch_database``; tests that need a second database beside those call it directly.

A migrated database is a copy of one template (``CREATE DATABASE ... TEMPLATE``) that has
every migration applied: the root conftest's ``migrated_template`` makes it once per server
and test process, so a test that needs an empty, complete store gets one without running the
migrations again. The tests of migrating itself start from ``empty_database`` instead.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager

import psycopg
from psycopg import sql

from eval_harness.store import StoreLocation, migrate
from eval_harness.store.connection import redact_url


def _with_dbname(url: str, dbname: str) -> str:
    return psycopg.conninfo.make_conninfo(url, dbname=dbname)


def database_name(location: StoreLocation) -> str:
    """The database ``location`` connects to."""
    return psycopg.conninfo.conninfo_to_dict(location.url)["dbname"]


@contextmanager
def scratch_database(server_url: str, prefix: str, *, template: str | None = None):
    """A new database on the test server, dropped afterwards; yields its location. Empty, or
    a copy of the database ``template`` (which nobody may be connected to meanwhile)."""
    dbname = f"{prefix}_{uuid.uuid4().hex[:10]}"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname))
    if template:
        create += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(create)
    try:
        yield StoreLocation(_with_dbname(server_url, dbname),
                            f"test database {dbname} on {redact_url(server_url)}")
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(dbname)))


@contextmanager
def migrated_template_database(server_url: str):
    """A database with every migration applied and no connection left open, to be copied by
    ``scratch_database(..., template=name)``; yields its name, drops it afterwards."""
    with scratch_database(server_url, "eh_template") as location:
        with location.connection() as conn:
            migrate(conn)
        yield database_name(location)

"""Numbered SQL migrations, applied once each, in order, under an advisory lock.

Files are ``migrations/NNNN_name.sql``. Each applied file is recorded in
``schema_migrations`` with its checksum; a file edited after it was applied is an error
(write a new migration instead). All pending migrations run in one transaction holding a
transaction-level advisory lock, so two processes migrating at once apply each file once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from pgvector.psycopg import register_vector

MIGRATION_LOCK_KEY = 0x6576616C  # "eval": any fixed bigint shared by all our processes
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available_migrations() -> list[Migration]:
    found = []
    for entry in resources.files("eval_harness.store.migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"Two migration files share a number: {[m.name for m in found]}")
    return found


def applied_migrations(conn: psycopg.Connection) -> dict[int, tuple[str, str]]:
    """The migrations recorded in ``schema_migrations``: {version: (file name, checksum)}."""
    return {version: (name, checksum) for version, name, checksum in
            conn.execute("SELECT version, name, checksum FROM schema_migrations")}


def migrate(conn: psycopg.Connection) -> list[str]:
    """Apply pending migrations; returns the names applied now (empty when up to date)."""
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        conn.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())""")
        done = applied_migrations(conn)
        for migration in available_migrations():
            if migration.version in done:
                name, checksum = done[migration.version]
                if checksum != migration.checksum:
                    raise MigrationError(
                        f"Migration {migration.name} was changed after it was applied "
                        f"(as {name}); add a new numbered migration instead of editing it.")
                continue
            conn.execute(migration.sql)
            conn.execute("INSERT INTO schema_migrations (version, name, checksum) "
                         "VALUES (%s, %s, %s)",
                         (migration.version, migration.name, migration.checksum))
            applied_now.append(migration.name)
    register_vector(conn)  # the connection may predate the vector extension
    return applied_now

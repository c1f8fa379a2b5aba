"""Numbered SQL migrations, applied once each, in order, under an advisory lock.

Files are ``migrations/NNNN_name.sql``. Each applied file is recorded in
``schema_migrations`` of the harness schema (``store.schema``) with its checksum; a file
edited after it was applied is an error (write a new migration instead). The files name no
schema: they run with the harness schema first on the search path, so everything they create
lands there. All pending migrations run in one transaction holding a transaction-level
advisory lock, so two processes migrating at once apply each file once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from eval_harness.errors import UserError
from eval_harness.store.connection import set_search_path

MIGRATION_LOCK_KEY = 0x6576616C  # "eval": any fixed bigint shared by all our processes
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class MigrationError(UserError, RuntimeError):
    """The schema cannot be brought up to date here; the message says why and what to do."""


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


def applied_migrations(conn: psycopg.Connection,
                       schema: str | None = None) -> dict[int, tuple[str, str]]:
    """The migrations recorded in ``schema_migrations`` of ``schema`` (None: as the search path
    resolves it): {version: (file name, checksum)}; empty when there is no such table."""
    table = (sql.Identifier(schema, "schema_migrations") if schema
             else sql.Identifier("schema_migrations"))
    if conn.execute("SELECT to_regclass(%s) IS NULL", (table.as_string(conn),)).fetchone()[0]:
        return {}
    return {version: (name, checksum) for version, name, checksum in
            conn.execute(sql.SQL("SELECT version, name, checksum FROM {}").format(table))}


def harness_schema(conn: psycopg.Connection) -> str:
    """The harness schema of this connection: the first entry of its search path
    (:func:`eval_harness.store.connection.set_search_path` put it there)."""
    path = conn.execute("SELECT current_setting('search_path')").fetchone()[0]
    first = path.split(",")[0].strip()
    return first[1:-1].replace('""', '"') if first.startswith('"') else first


def pending_migrations(conn: psycopg.Connection, schema: str) -> list[Migration]:
    """The migrations ``schema`` still lacks (reads only); a changed applied file is an error."""
    done = applied_migrations(conn, schema)
    pending = []
    for migration in available_migrations():
        if migration.version not in done:
            pending.append(migration)
        elif done[migration.version][1] != migration.checksum:
            raise MigrationError(
                f"Migration {migration.name} was changed after it was applied "
                f"(as {done[migration.version][0]}); add a new numbered migration instead of "
                "editing it.")
    return pending


def check_schema_current(conn: psycopg.Connection, schema: str | None = None) -> None:
    """Raise a :class:`MigrationError` (one sentence) unless the harness schema exists and
    has every migration: what read-only commands need, since they never migrate."""
    schema = schema or harness_schema(conn)
    pending = pending_migrations(conn, schema)
    if not pending:
        return
    if len(pending) == len(available_migrations()):
        state = f"has no eval-harness schema '{schema}' yet"
    else:
        state = (f"has the eval-harness schema '{schema}' without migration "
                 f"{pending[0].name} (and {len(pending) - 1} more)" if len(pending) > 1
                 else f"has the eval-harness schema '{schema}' without migration "
                      f"{pending[0].name}")
    raise MigrationError(
        f"The store {state}: run `eval-harness migrate` once with a role that may create "
        f"the schema (or owns it); read-only commands never change the store.")


def migrate(conn: psycopg.Connection, schema: str | None = None) -> list[str]:
    """Apply pending migrations in ``schema`` (None: the connection's harness schema);
    returns the names applied now (empty when up to date).

    An up-to-date schema is only read: no lock, no DDL, so a role that may only read can
    call this. The first migration into a new schema adopts the tables an earlier version
    kept in ``public`` (:func:`_adopt_public_layout`), data included.
    """
    schema = schema or harness_schema(conn)
    set_search_path(conn, schema)  # the vector extension may have come since connecting
    if not pending_migrations(conn, schema):
        if not conn.autocommit:
            conn.commit()  # end the reading transaction
        return []
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                     (MIGRATION_LOCK_KEY, schema))
        if conn.execute("SELECT to_regnamespace(%s) IS NULL", (schema,)).fetchone()[0]:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        adopted = _adopt_public_layout(conn, schema)
        if adopted:
            applied_now.append(f"moved {len(adopted)} tables from public into {schema}")
        conn.execute(sql.SQL("""
            CREATE TABLE IF NOT EXISTS {} (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())""").format(
            sql.Identifier(schema, "schema_migrations")))
        for migration in pending_migrations(conn, schema):
            conn.execute(migration.sql)
            conn.execute(sql.SQL("INSERT INTO {} (version, name, checksum) VALUES (%s, %s, %s)")
                         .format(sql.Identifier(schema, "schema_migrations")),
                         (migration.version, migration.name, migration.checksum))
            applied_now.append(migration.name)
    set_search_path(conn, schema)  # the first migration may have created the vector extension
    register_vector(conn)
    return applied_now


# Every table migrations 0001-0007 created, when they all lived in ``public``.
PUBLIC_LAYOUT_TABLES = (
    "schema_migrations", "datasets", "l2_insights", "ground_truth", "evaluation_log",
    "api_cost_log", "api_retry_log", "episode_memory", "answers", "judge_cache",
    "judge_review", "gate_results", "regeneration_queue", "api_cache_hit_log", "judge_batches")


def _adopt_public_layout(conn: psycopg.Connection, schema: str) -> list[str]:
    """Move an earlier version's tables from ``public`` into ``schema``; returns their names.

    Versions before the own schema applied their migrations in ``public``. Such a store is
    recognised by ``public.schema_migrations`` holding this project's first migration with its
    checksum, so a RAG system's own ``public.l2_insights`` is never taken for ours. Tables
    move with their rows, indexes, constraints and identity sequences (ALTER TABLE ... SET
    SCHEMA); a relation a user replaced by a view (``answers``) stays where it is.
    """
    if schema == "public" or applied_migrations(conn, schema):
        return []
    first = available_migrations()[0]
    if applied_migrations(conn, "public").get(first.version, (None, None))[1] != first.checksum:
        return []
    tables = [name for (name,) in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
        "AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
        (list(PUBLIC_LAYOUT_TABLES),))]
    for name in tables:
        conn.execute(sql.SQL("ALTER TABLE {} SET SCHEMA {}").format(
            sql.Identifier("public", name), sql.Identifier(schema)))
    if conn.execute("SELECT to_regprocedure('public.eh_or_tsquery(regconfig, text)') "
                    "IS NOT NULL").fetchone()[0]:
        conn.execute(sql.SQL("ALTER FUNCTION public.eh_or_tsquery(regconfig, text) "
                             "SET SCHEMA {}").format(sql.Identifier(schema)))
    return tables

"""What the server holds, read for the doctor and the store commands: the server's version,
extensions, whether a relation exists, and the current role's privileges.

It owns no harness table (tests/test_layers.py holds the owner map); the live datasets the
store holds are read by :mod:`eval_harness.datasets.live_catalog`.

Reads only; each runs in the caller's transaction (the doctor's session is read-only). The
migrations applied are read by :func:`eval_harness.store.migrate.applied_migrations`, beside
the code that writes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg
from psycopg import sql

from eval_harness.settings.datasets import sql_name

# ------------------------------------------------------------------------------ the server

def server_version(conn: psycopg.Connection) -> str:
    """The server's version number, e.g. ``18.3`` (without the build details)."""
    return conn.execute("SHOW server_version").fetchone()[0].split()[0]


def installed_extension_version(conn: psycopg.Connection, extension: str) -> str | None:
    """The version of ``extension`` installed in this database; None when it is not."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = %s",
                       (extension,)).fetchone()
    return None if row is None else row[0]


def available_extension_version(conn: psycopg.Connection, extension: str) -> str | None:
    """The default version of ``extension`` the server could install; None when it has none."""
    row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = %s",
                       (extension,)).fetchone()
    return None if row is None else row[0]


def relation_exists(conn: psycopg.Connection, relation: str) -> bool:
    """Whether ``relation`` (a name as the search path resolves it) exists."""
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()[0]


def make_session_read_only(conn: psycopg.Connection) -> None:
    """Every later transaction of this session is read-only (the doctor only looks)."""
    conn.execute("SET default_transaction_read_only = on")


# ------------------------------------------------------------------------------ privileges

@dataclass(frozen=True)
class SchemaPrivileges:
    """What the current role may do with the harness schema."""

    role: str
    exists: bool
    owner: str | None            # the schema's owner
    owns: bool                   # the role is (or is a member of) the owner
    may_create: bool             # CREATE in the schema (or, when it is missing, in the database)
    may_use: bool                # USAGE on the schema
    read_only_tables: tuple[str, ...]  # harness tables the role may not INSERT into

    @property
    def may_migrate(self) -> bool:
        return self.owns or (self.may_create and not self.exists)


def schema_privileges(conn: psycopg.Connection, schema: str) -> SchemaPrivileges:
    """The current role's privileges on the harness ``schema`` and its tables (reads only)."""
    role, exists, owner, owns, create, use = conn.execute("""
        SELECT current_user, n.oid IS NOT NULL, n.nspowner::regrole::text,
               coalesce(pg_has_role(n.nspowner, 'USAGE'), false),
               CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE')
                    ELSE has_schema_privilege(n.oid, 'CREATE') END,
               coalesce(has_schema_privilege(n.oid, 'USAGE'), false)
        FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = %s""", (schema,)).fetchone()
    read_only = tuple(name for (name,) in conn.execute("""
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = %s AND c.relkind IN ('r', 'p')
          AND NOT has_table_privilege(c.oid, 'INSERT') ORDER BY c.relname""", (schema,)))
    return SchemaPrivileges(role, exists, owner, owns, create, use, read_only)


def select_refusal(conn: psycopg.Connection, schema: str, relation: str) -> str | None:
    """None when the current role may read ``schema.relation``, else one sentence saying
    what stops it and the GRANT that fixes it."""
    role = conn.execute("SELECT current_user").fetchone()[0]
    name, grantee = sql_name(schema, relation), sql_name(role)
    where = f"live relation {name}"
    row = conn.execute("SELECT to_regnamespace(%s)::oid", (sql_name(schema),)).fetchone()
    if row[0] is None:
        return f"{where}: schema {sql_name(schema)} does not exist"
    if not conn.execute("SELECT has_schema_privilege(%s, 'USAGE')", (row[0],)).fetchone()[0]:
        return (f"role '{role}' may not use schema {sql_name(schema)} of {where}: GRANT USAGE "
                f"ON SCHEMA {sql_name(schema)} TO {grantee}")
    oid = conn.execute("SELECT to_regclass(%s)::oid", (sql.Identifier(
        schema, relation).as_string(conn),)).fetchone()[0]
    if oid is None:
        return f"{where} does not exist"
    if not conn.execute("SELECT has_table_privilege(%s, 'SELECT')", (oid,)).fetchone()[0]:
        return f"role '{role}' may not SELECT {where}: GRANT SELECT ON {name} TO {grantee}"
    return None


# PostgreSQL's "permission denied" names the object unqualified (aclcheck_error).
_DENIED = re.compile(r"permission denied for (table|view|materialized view|foreign table|"
                     r"sequence|schema|relation) (.+?)\s*$")
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")


def privilege_refusal(conn: psycopg.Connection, message: str, schema: str) -> str | None:
    """One sentence for the store's "permission denied for <object>" ``message``: the role,
    the object with its schema (the harness ``schema`` first when the name is in several),
    and the GRANT it lacks; None when ``message`` is not such a refusal. Reads only, on a
    connection of the same role (the refused one's transaction is gone)."""
    match = _DENIED.search(message.strip().splitlines()[0] if message.strip() else "")
    if match is None:
        return None
    kind, name = match.groups()
    role = conn.execute("SELECT current_user").fetchone()[0]
    grantee = sql_name(role)
    if kind == "schema":
        return (f"role '{role}' may not use schema {sql_name(name)} (permission denied): "
                f"GRANT USAGE ON SCHEMA {sql_name(name)} TO {grantee}.")
    row = conn.execute("""
        SELECT c.oid, n.nspname, c.relkind FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relname = %s ORDER BY n.nspname <> %s, n.nspname LIMIT 1""",
                       (name, schema)).fetchone()
    if row is None:
        return None
    oid, found_schema, relkind = row
    qualified = sql_name(found_schema, name)
    wanted = ("USAGE",) if relkind == "S" else TABLE_PRIVILEGES
    check = "has_sequence_privilege" if relkind == "S" else "has_table_privilege"
    missing = [p for p in wanted if not conn.execute(
        sql.SQL("SELECT {}(%s::oid, %s)").format(sql.Identifier(check)), (oid, p)).fetchone()[0]]
    if not missing:
        return None
    fix = f"GRANT {', '.join(missing)} ON {'SEQUENCE ' if relkind == 'S' else ''}{qualified} " \
          f"TO {grantee}"
    if found_schema == schema:
        owner = conn.execute("SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname "
                             "= %s", (schema,)).fetchone()[0]
        return (f"role '{role}' lacks {', '.join(missing)} on the harness's {qualified} "
                f"(permission denied): {fix}, or run this command as {owner}, which owns "
                f"schema {sql_name(schema)} (a role that only reads may run report, search, "
                "agreement, review export, judge --dry-run and calibrate --no-write).")
    return (f"role '{role}' lacks {', '.join(missing)} on {qualified} (permission denied): "
            f"{fix}.")

"""What the server and the store hold, read for the doctor and the store commands: the
server's version, extensions, whether a relation exists, the datasets ingested and a stored
ground-truth query's embedding.

Reads only; each runs in the caller's transaction (the doctor's session is read-only). The
migrations applied are read by :func:`eval_harness.store.migrate.applied_migrations`, beside
the code that writes them.
"""

from __future__ import annotations

import psycopg

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


# ------------------------------------------------------------------------------ datasets

def ingested_datasets(conn: psycopg.Connection) -> dict[str, int]:
    """Each dataset in the store, by name, with its number of documents."""
    return dict(conn.execute(
        "SELECT d.name, count(i.id) FROM datasets d LEFT JOIN l2_insights i "
        "ON i.dataset = d.name GROUP BY d.name ORDER BY d.name"))


def stored_query_embedding(conn: psycopg.Connection, dataset: str,
                           text: str) -> tuple | None:
    """``(query_embedding,)`` of a ground-truth query of ``dataset`` whose text is ``text``
    (the embedding may be None); None when ``dataset`` has no such query."""
    return conn.execute("SELECT query_embedding FROM ground_truth WHERE dataset = %s "
                        "AND query = %s LIMIT 1", (dataset, text)).fetchone()


def make_session_read_only(conn: psycopg.Connection) -> None:
    """Every later transaction of this session is read-only (the doctor only looks)."""
    conn.execute("SET default_transaction_read_only = on")

"""What the server and the store hold, read for the doctor and the store commands: the
server's version, extensions, whether a relation exists, the current role's privileges, and
the live datasets (attached or only configured) with a representative query of each.

It owns no harness table (tests/test_layers.py holds the owner map): the register of
datasets is read through :mod:`eval_harness.store.dataset_register` and the query-embedding
cache through :mod:`eval_harness.store.query_embeddings`; the doctor counts each dataset's
documents with :func:`eval_harness.store.ingest.documents_per_dataset`.

Reads only; each runs in the caller's transaction (the doctor's session is read-only). The
migrations applied are read by :func:`eval_harness.store.migrate.applied_migrations`, beside
the code that writes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from eval_harness.settings.datasets import DatasetConfig, sql_name
from eval_harness.store import dataset_register, ground_truth, query_embeddings
from eval_harness.store.corpus import Corpus
from eval_harness.store.live import LiveMappingError
from eval_harness.store.live_mapping import check_mapping, embedder_model

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


# ------------------------------------------------------------------------------ live datasets

@dataclass(frozen=True)
class LiveDataset:
    name: str
    attached: bool
    corpus: Corpus | None         # None: the mapping does not fit the store (see error)
    error: str | None = None
    embedder: str | None = None   # the model that embeds its queries
    ground_truth: Mapping[str, Any] | None = None  # schema, relation, id, query


def live_datasets(conn: psycopg.Connection, configured: Mapping[str, DatasetConfig], *,
                  attached_known: bool) -> list[LiveDataset]:
    """The live datasets attached in the harness schema (when ``attached_known``: the schema
    is current) and those configured in config.yaml but not attached yet (their mapping
    checked in place, reads only), by name."""
    found: dict[str, LiveDataset] = {}
    if attached_known:
        for name, language, model, dim, mapping, gt in dataset_register.attached_live_datasets(
                conn):
            found[name] = LiveDataset(name, True, Corpus.live(name, language, dim, mapping),
                                      embedder=model, ground_truth=gt)
    for name, cfg in configured.items():
        if not cfg.is_live or name in found:
            continue
        try:
            checked = check_mapping(conn, cfg)
        except (LiveMappingError, psycopg.Error) as exc:
            found[name] = LiveDataset(name, False, None, str(exc).strip().splitlines()[0])
            continue
        found[name] = LiveDataset(name, False, checked.corpus,
                                  embedder=embedder_model(cfg.embedder or ""),
                                  ground_truth=checked.ground_truth_record)
    return [found[name] for name in sorted(found)]


def live_relations(configured: Mapping[str, DatasetConfig],
                   live: list[LiveDataset]) -> list[str]:
    """Every RAG relation a live dataset reads, configured or attached (``schema.name``)."""
    found = [str(r) for cfg in configured.values() if cfg.live is not None
             for r in (cfg.live.corpus.relation, cfg.live.ground_truth.relation) if r]
    for dataset in live:
        gt = dataset.ground_truth
        found += ([dataset.corpus.relation_name] if dataset.corpus else []) + (
            [f"{gt['schema']}.{gt['relation']}"] if gt else [])
    return list(dict.fromkeys(found))


def ground_truth_queries(conn: psycopg.Connection, dataset: LiveDataset, *,
                         limit: int) -> tuple[list[str], int]:
    """The first ``limit`` ground-truth query texts of ``dataset`` (by id) and how many it
    has: the harness's mirror when attached, else the live ground truth itself."""
    if dataset.attached:
        return (ground_truth.first_queries(conn, dataset.name, limit),
                ground_truth.count_queries(conn, dataset.name))
    gt = dataset.ground_truth
    if not gt:
        return [], 0
    relation = sql.Identifier(gt["schema"], gt["relation"])
    texts = [t for (t,) in conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT %s").format(
        sql.Identifier(gt["query"]), relation, sql.Identifier(gt["id"])), (limit,)) if t]
    total = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(relation)).fetchone()[0]
    return texts, total


def uncached_query_count(conn: psycopg.Connection, dataset: LiveDataset) -> int | None:
    """How many distinct ground-truth query texts of ``dataset`` have no vector by its
    embedder in the harness's cache (what attaching it must embed); None when unknown (no
    ground-truth mapping). Without the harness schema, nothing is cached."""
    gt = dataset.ground_truth
    if not gt:
        return None
    texts = sql.SQL("SELECT DISTINCT {} AS query FROM {} WHERE {} IS NOT NULL").format(
        sql.Identifier(gt["query"]), sql.Identifier(gt["schema"], gt["relation"]),
        sql.Identifier(gt["query"]))
    return query_embeddings.count_uncached(conn, texts, dataset.embedder)


def _vector_text(value) -> str | None:
    if value is None:
        return None
    values = np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, np.float32)
    return "[" + ",".join(repr(float(x)) for x in values) + "]"


def probe_query(conn: psycopg.Connection, dataset: LiveDataset) -> tuple[str, str | None]:
    """The first ground-truth query's text and embedding (as pgvector text): the harness's
    mirror when attached, else the live ground truth with the cached query embedding, else
    the corpus's first vector (the plan does not depend on which vector it is)."""
    corpus = dataset.corpus
    assert corpus is not None
    text, vector = "", None
    if dataset.attached:
        row = ground_truth.first_query_with_embedding(conn, dataset.name)
        if row is not None:
            text, vector = row[0], _vector_text(row[1])
    elif dataset.ground_truth:
        gt = dataset.ground_truth
        row = conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY {} LIMIT 1").format(
            sql.Identifier(gt["query"]), sql.Identifier(gt["schema"], gt["relation"]),
            sql.Identifier(gt["id"]))).fetchone()
        text = row[0] if row is not None else ""
        vector = _vector_text(query_embeddings.cached_embedding(conn, dataset.embedder, text))
    if vector is None:
        row = conn.execute(sql.SQL(
            "SELECT {}::text FROM {} WHERE {} AND {} IS NOT NULL LIMIT 1").format(
            corpus.embedding_column("d"), corpus.table("d"), corpus.rows_of_dataset("d"),
            corpus.embedding_column("d"))).fetchone()
        vector = row[0] if row is not None else None
    return text, vector

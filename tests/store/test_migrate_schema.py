"""The harness's own schema: everything it owns lives in ``store.schema``; a store
laid out by an earlier version (every table in ``public``) is moved forward without losing a
row; a RAG system's own ``public`` tables of the same names are never touched.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from eval_harness.store import MigrationError, StoreLocation, migrate
from eval_harness.store.migrate import (
    PUBLIC_LAYOUT_TABLES,
    available_migrations,
    check_schema_current,
)


def _objects_outside(conn, schema: str) -> set[tuple[str, str]]:
    """(schema, name) of every relation and function outside ``schema`` and the catalogs."""
    rows = conn.execute("""
        SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', %(s)s)
          AND n.nspname NOT LIKE 'pg_temp%%' AND n.nspname NOT LIKE 'pg_toast_temp%%'
        UNION ALL
        SELECT n.nspname, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', %(s)s)""",
                        {"s": schema}).fetchall()
    return set(rows)


def test_migrations_create_everything_inside_the_harness_schema(empty_database):
    with empty_database.connection() as conn:
        conn.execute("CREATE EXTENSION vector SCHEMA public")  # the RAG system has pgvector
        conn.commit()
        before = _objects_outside(conn, "eval_harness")
        applied = migrate(conn)
        assert applied == [m.name for m in available_migrations()]
        assert _objects_outside(conn, "eval_harness") == before
        tables = {name for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'eval_harness'")}
        assert {"schema_migrations", "l2_insights", "ground_truth", "judge_cache",
                "query_embeddings", "calibrated_weights"} <= tables


def test_a_seed_layout_public_store_is_left_alone(empty_database):
    """A new user's store: public.l2_insights / ground_truth / api_cost_log of the RAG
    system exist, and migrate leaves them alone (no 'relation "l2_insights" already
    exists')."""
    with empty_database.connection() as conn:
        conn.execute("""
            CREATE EXTENSION vector SCHEMA public;
            CREATE TABLE public.l2_insights (id serial PRIMARY KEY, content text,
                                             embedding public.vector(3), metadata jsonb);
            CREATE TABLE public.ground_truth (id serial PRIMARY KEY, query text,
                                              expected_docs integer[], judge1_score float8[]);
            CREATE TABLE public.api_cost_log (id serial PRIMARY KEY, api_name text);
            INSERT INTO public.l2_insights (content, embedding) VALUES ('a', '[1,2,3]');""")
        conn.commit()
        migrate(conn)
        assert conn.execute("SELECT count(*) FROM public.l2_insights").fetchone()[0] == 1
        assert conn.execute("SELECT to_regclass('public.schema_migrations')").fetchone()[0] is None
        # unqualified names are the harness's own tables
        assert conn.execute("SELECT count(*) FROM l2_insights").fetchone()[0] == 0


def _old_layout(location: StoreLocation) -> None:
    """Migrations 0001-0007 applied in public, as versions before the own schema did, with
    rows the user must not lose."""
    old = StoreLocation(location.url, schema="public")
    with old.connection() as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute("""CREATE TABLE schema_migrations (version integer PRIMARY KEY,
                        name text NOT NULL, checksum text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now())""")
        for migration in available_migrations():
            if migration.version > 7:
                break
            conn.execute(migration.sql)
            conn.execute("INSERT INTO schema_migrations VALUES (%s, %s, %s)",
                         (migration.version, migration.name, migration.checksum))
        conn.execute("""
            INSERT INTO judge_cache (key, provider, model, operation, prompt_version, reply)
            VALUES (repeat('a', 64), 'openai', 'gpt-4o', 'relevance', 'v1', '0.9');
            INSERT INTO api_cost_log (api_name, model, operation, input_tokens, estimated_cost)
            VALUES ('openai', 'gpt-4o', 'relevance', 500, 0.00125);
            INSERT INTO gate_results (answer_id, gate, content_hash, gate_version, score,
                                      passed, threshold)
            VALUES ('a1', 'grounding', 'h', 'v', 0.9, true, 0.8);
            INSERT INTO datasets (name) VALUES ('old');
            INSERT INTO l2_insights (dataset, external_id, content, embedding, language)
            VALUES ('old', 'd1', 'aspirin', '[1,0,0]', 'english');""")
        conn.commit()


def test_an_earlier_public_layout_moves_forward_without_losing_rows(empty_database):
    _old_layout(empty_database)
    with empty_database.connection() as conn:
        applied = migrate(conn)
        assert applied[0] == (f"moved {len(PUBLIC_LAYOUT_TABLES)} tables from public into "
                              "eval_harness")
        assert applied[1:] == [m.name for m in available_migrations() if m.version > 7]
        for table, expected in (("judge_cache", 1), ("api_cost_log", 1), ("gate_results", 1),
                                ("l2_insights", 1)):
            assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier("eval_harness", table))).fetchone()[0] == expected
        left = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                            "AND tablename = ANY(%s)", (list(PUBLIC_LAYOUT_TABLES),)).fetchone()
        assert left[0] == 0
        # the identity sequences moved along: new rows still get ids
        conn.execute("INSERT INTO api_cost_log (api_name, model, operation) "
                     "VALUES ('openai', 'gpt-4o', 'relevance')")
        assert conn.execute("SELECT max(id) FROM api_cost_log").fetchone()[0] == 2
        # and the search function works from its new schema
        assert conn.execute("SELECT eh_or_tsquery('english', 'aspirin doses')::text"
                            ).fetchone()[0] == "'aspirin' | 'dose'"
        assert migrate(conn) == []


def test_read_only_check_names_the_missing_schema_and_the_fix(empty_database):
    with empty_database.connection() as conn:
        with pytest.raises(MigrationError, match=r"has no eval-harness schema 'eval_harness' "
                                                 r"yet: run `eval-harness migrate`"):
            check_schema_current(conn, "eval_harness")
        migrate(conn)
        check_schema_current(conn, "eval_harness")


def test_a_configured_schema_name_is_used(empty_database):
    other = StoreLocation(empty_database.url, schema="evals_team_a")
    with other.connection() as conn:
        migrate(conn)
        assert conn.execute("SELECT count(*) FROM evals_team_a.schema_migrations"
                            ).fetchone()[0] == len(available_migrations())
        assert conn.execute("SELECT to_regnamespace('eval_harness')").fetchone()[0] is None


def test_an_up_to_date_schema_is_only_read(empty_database):
    """migrate() on a current schema takes no lock and writes nothing, so a role that may
    only read can run commands that call it."""
    with empty_database.connection() as conn:
        migrate(conn)
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        assert migrate(conn) == []
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE x (a int)")

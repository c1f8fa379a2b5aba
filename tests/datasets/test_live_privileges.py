"""Least privilege (issue #13): the harness runs with a role that may only SELECT the RAG
system's relations and owns its own schema, and its read-only commands run with a role that
may only SELECT.

The documented setup, done here as the superuser in a fresh database: the RAG side has
created the vector extension and its seed-layout tables in ``rag``; the administrator creates
the runner role (LOGIN, no CREATE on the database or on ``public``), grants it USAGE on
``rag`` and SELECT on its tables, and creates the harness schema owned by it::

    CREATE SCHEMA eval_harness AUTHORIZATION eh_runner;

Then, connected as the runner, the whole pipeline: migrate, attach the live dataset, judge
(local judges), agreement, review export, calibrate, answers import and gates, report,
search. Every RAG row stays byte-identical and nothing appears outside the harness schema.
A reader role with USAGE + SELECT on both schemas then runs every read-only command, which
must succeed and change nothing; and where the harness schema was never migrated, a
read-only command says in one sentence to run ``eval-harness migrate`` (exit 2).
"""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

from beir_factory import write_beir
from scratch_databases import scratch_database
from eval_harness.cli import main
from eval_harness.store import StoreLocation
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.embeddings import load_precomputed
from eval_harness.datasets.live import attach_live_dataset
from live_store import WORDS, live_config

HARNESS = "eval_harness"
# Settings the environment could carry into the CLI from the developer's shell.
ENVIRONMENT = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_CONFIG",
               "EVAL_HARNESS_JUDGE1", "EVAL_HARNESS_JUDGE2", "EVAL_HARNESS_PGDATA",
               "EVAL_HARNESS_JUDGE_BUDGET_USD", "DAGSTER_HOME")

CONFIG = """
default_dataset: live
datasets:
  live:
    language: english
    embedder: local:test-random
    live:
      corpus: {relation: rag.l2_insights, id: id, content: content, embedding: embedding,
               tsvector: null}
      ground_truth: {relation: rag.ground_truth, id: id, query: query,
                     expected_docs: expected_docs}
hybrid_search: {semantic: 0.7, keyword: 0.3, candidate_depth: 20}
judges: {judge1: "local:lexical", judge2: "local:embedding", fallback_to_local: true}
# the kappa gate is not what these tests look at (two local judges disagree, which fills
# the review queue): a floor every kappa reaches, so `agreement` exits 0
agreement: {bootstrap_resamples: 200, kappa_floor: -1.0}
calibration: {bootstrap_resamples: 200, cv_folds: 3}
history: {duckdb_path: history.duckdb}
quality_gates: {answers_file: null}
"""


# ------------------------------------------------------------------------------ helpers

@dataclass(frozen=True)
class Role:
    name: str
    password: str

    def url(self, location: StoreLocation) -> str:
        return psycopg.conninfo.make_conninfo(location.url, user=self.name,
                                              password=self.password)


def create_role(conn: psycopg.Connection, prefix: str) -> Role:
    """A LOGIN role with a password (trust or password authentication both let it in)."""
    role = Role(f"{prefix}_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex)
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
        sql.Identifier(role.name), sql.Literal(role.password)))
    return role


def drop_role(conn: psycopg.Connection, role: Role) -> None:
    conn.execute(sql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(sql.Identifier(role.name)))


def admin_connection(location: StoreLocation, *, autocommit: bool = False):
    """The superuser's connection with the server's default search path (public: the RAG
    side's; the harness schema may not exist yet), the vector extension created in public
    as the RAG side did."""
    conn = psycopg.connect(location.url, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    register_vector(conn)
    conn.autocommit = autocommit
    return conn


def grant_select(conn: psycopg.Connection, role: Role, *schemas: str) -> None:
    for schema in schemas:
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {0} TO {1}; "
                             "GRANT SELECT ON ALL TABLES IN SCHEMA {0} TO {1}").format(
            sql.Identifier(schema), sql.Identifier(role.name)))


def run_cli(url: str, config: Path, *argv: str) -> tuple[int, str, str]:
    """``eval-harness --config CONFIG ARGV`` with DATABASE_URL=url: (exit, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as env, redirect_stdout(out), redirect_stderr(err):
        env.setenv("DATABASE_URL", url)
        for name in ENVIRONMENT:
            env.delenv(name, raising=False)
        code = main(["--config", str(config), *argv])
    return code, out.getvalue(), err.getvalue()


def rag_rows(conn: psycopg.Connection) -> dict[str, str]:
    """{table: md5 of every row's text in id order} for every table of ``rag``."""
    tables = [t for (t,) in conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'rag'::regnamespace "
        "AND relkind IN ('r', 'p') ORDER BY relname")]
    assert {"l2_insights", "ground_truth", "api_cost_log"} <= set(tables)
    return {t: conn.execute(sql.SQL(
        "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) FROM {} t").format(
        sql.Identifier("rag", t))).fetchone()[0] for t in tables}


def harness_rows(conn: psycopg.Connection) -> dict[str, str]:
    """{table: md5 of its rows in text order} for every table of the harness schema."""
    tables = [t for (t,) in conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = to_regnamespace(%s) "
        "AND relkind IN ('r', 'p') ORDER BY relname", (HARNESS,))]
    return {t: conn.execute(sql.SQL(
        "SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {} t").format(
        sql.Identifier(HARNESS, t))).fetchone()[0] for t in tables}


def catalog_outside_harness(conn: psycopg.Connection) -> dict[str, list]:
    """Schemas, relations (with owners and privileges), types, functions and extensions
    outside the harness schema; temporary schemas and TOAST tables (those of harness tables
    live in pg_toast) excluded."""
    outside = """n.nspname <> %(harness)s AND n.nspname NOT LIKE 'pg\\_temp\\_%%'
                 AND n.nspname NOT LIKE 'pg\\_toast%%'"""
    queries = {
        "namespaces": "SELECT n.nspname, n.nspowner::regrole::text, n.nspacl::text "
                      f"FROM pg_namespace n WHERE {outside} ORDER BY 1",
        "relations": "SELECT n.nspname, c.relname, c.relkind, c.relowner::regrole::text, "
                     "c.relacl::text FROM pg_class c JOIN pg_namespace n "
                     f"ON n.oid = c.relnamespace WHERE {outside} ORDER BY 1, 2",
        "types": "SELECT n.nspname, t.typname FROM pg_type t JOIN pg_namespace n "
                 f"ON n.oid = t.typnamespace WHERE {outside} ORDER BY 1, 2",
        "functions": "SELECT n.nspname, p.oid::regprocedure::text, p.proowner::regrole::text "
                     "FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                     f"WHERE {outside} ORDER BY 1, 2",
        "extensions": "SELECT extname, extversion, extnamespace::regnamespace::text "
                      "FROM pg_extension ORDER BY 1",
        "database": "SELECT datacl::text FROM pg_database WHERE datname = current_database()",
    }
    return {name: conn.execute(text, {"harness": HARNESS}).fetchall()
            for name, text in queries.items()}


class FolderEmbedder:
    """The query vectors of the BEIR folder's embeddings.npz, by query text (the model that
    made the corpus vectors, as the live mapping's embedder must be)."""

    model = "test-random"

    def __init__(self, folder: Path):
        vectors = load_precomputed(folder / "embeddings.npz")
        texts = {json.loads(line)["_id"]: json.loads(line)["text"]
                 for line in (folder / "queries.jsonl").read_text().splitlines()}
        self.by_text = {texts[q]: vectors.queries[i] for i, q in enumerate(vectors.query_ids)}

    def embed(self, texts):
        return np.stack([self.by_text[t] for t in texts])


def seed_layout_folder(folder: Path) -> Path:
    """60 documents and 15 queries; each query's vector is near its first relevant
    document's, so search and the judges find what the ground truth expects."""
    rng = np.random.default_rng(5)
    docs = {f"doc{i}": " ".join(rng.choice(WORDS, size=12)) for i in range(60)}
    queries, qrels = {}, []
    doc_vectors = rng.normal(size=(60, 8))
    query_vectors = []
    for i in range(15):
        relevant = rng.choice(60, size=3, replace=False)
        queries[f"q{i}"] = " ".join(docs[f"doc{relevant[0]}"].split()[:4] + [f"number{i}"])
        qrels += [(f"q{i}", f"doc{j}", 1) for j in relevant]
        query_vectors.append(doc_vectors[relevant[0]] + rng.normal(scale=0.1, size=8))
    return write_beir(folder, docs, queries, qrels, doc_vectors=doc_vectors,
                      query_vectors=np.asarray(query_vectors))


def answers_file(path: Path) -> Path:
    lines = [{"id": f"a{i}", "query": "aspirin and the heart",
              "answer": f"Aspirin lowers the risk of a heart attack [1]. Answer {i}.",
              "sources": [{"id": "1", "text": "aspirin lowers the risk of a heart attack"}],
              "created_at": "2025-03-03T09:15:00Z"} for i in range(3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


# ------------------------------------------------------------------------------ the store

@dataclass
class Pipeline:
    location: StoreLocation      # the superuser's
    runner: Role
    reader: Role
    config: Path
    root: Path
    steps: dict                  # command -> (exit, stdout, stderr)
    rag_before: dict
    rag_after: dict
    catalog_before: dict
    catalog_after: dict


@pytest.fixture(scope="module")
def pipeline(server_url, tmp_path_factory):
    root = tmp_path_factory.mktemp("least_privilege")
    folder = seed_layout_folder(root / "beir")
    config = root / "config.yaml"
    config.write_text(CONFIG)
    with scratch_database(server_url, "eh_lp") as location:
        with admin_connection(location) as admin:
            build_rag_store(admin, folder, schema="rag", cache_query_vectors=False)
        with admin_connection(location, autocommit=True) as admin:
            admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")  # as on PG >= 15
            runner, reader = create_role(admin, "eh_runner"), create_role(admin, "eh_reader")
            grant_select(admin, runner, "rag")
            admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(HARNESS), sql.Identifier(runner.name)))
            assert not admin.execute("SELECT has_database_privilege(%s, current_database(), "
                                     "'CREATE')", (runner.name,)).fetchone()[0]
            rag_before, catalog_before = rag_rows(admin), catalog_outside_harness(admin)
        try:
            steps = run_as_runner(location, runner, folder, config, root)
            with admin_connection(location) as admin:
                rag_after, catalog_after = rag_rows(admin), catalog_outside_harness(admin)
            yield Pipeline(location, runner, reader, config, root, steps, rag_before,
                           rag_after, catalog_before, catalog_after)
        finally:
            with admin_connection(location, autocommit=True) as admin:
                drop_role(admin, reader)
                drop_role(admin, runner)


def run_as_runner(location: StoreLocation, runner: Role, folder: Path, config: Path,
                  root: Path) -> dict:
    url = runner.url(location)
    steps = {"migrate": run_cli(url, config, "migrate")}
    with replace(location, url=url).connection() as conn:
        # `eval-harness attach` is the CLI for this; the library call is the same work
        steps["attach"] = attach_live_dataset(conn, live_config(), embedder_factory=lambda:
                                              FolderEmbedder(folder))
    steps["judge"] = run_cli(url, config, "judge", "--dataset", "live")
    steps["agreement"] = run_cli(url, config, "agreement", "--dataset", "live", "--json")
    steps["review export"] = run_cli(url, config, "review", "export", str(root / "queue.csv"),
                                     "--dataset", "live")
    steps["calibrate"] = run_cli(url, config, "calibrate", "--dataset", "live", "--json")
    steps["answers import"] = run_cli(url, config, "answers", "import",
                                      str(answers_file(root / "answers.jsonl")))
    steps["gate"] = run_cli(url, config, "gate", "--since", "2025-03-01", "--json")
    steps["report"] = run_cli(url, config, "report", "--dataset", "live", "--json")
    return steps


# ------------------------------------------------------------------------------ the tests

def test_the_runner_role_runs_the_whole_pipeline(pipeline):
    steps = pipeline.steps
    code, out, err = steps["migrate"]
    # the role may not CREATE in the database: migrate used the schema the admin made
    assert code == 0 and "applied: 0001_core_schema.sql" in out, err
    assert steps["attach"].queries == 15 and steps["attach"].embedded == 15
    for name in ("judge", "agreement", "review export", "calibrate", "answers import",
                 "gate", "report"):
        code, out, err = steps[name]
        assert code in (0, 1) and "error" not in err, (name, code, err)
    assert "15 of 15 queries judged" in steps["judge"][1]
    assert steps["judge"][0] == 0 and steps["agreement"][0] == 0
    exported = steps["review export"][1]
    assert exported.startswith("review queue of 'live': ") and "\nexported 0 " not in exported
    assert "answers from" in steps["answers import"][1] and "3 new" in steps["answers import"][1]
    calibration = json.loads(steps["calibrate"][1])
    if calibration["decision"]["decision"] == "changed":  # config.yaml only on a change
        assert calibration["written"]["config"]["path"] == str(pipeline.config)
    else:
        assert calibration["decision"]["decision"] == "kept"
        assert calibration["written"]["config"] is None
    assert json.loads(steps["report"][1])["dataset"] == "live"
    with pipeline.location.connection() as admin:
        owners = {r for (r,) in admin.execute(
            "SELECT DISTINCT c.relowner::regrole::text FROM pg_class c "
            "WHERE c.relnamespace = to_regnamespace(%s)", (HARNESS,))}
        assert owners == {pipeline.runner.name}
        assert admin.execute("SELECT count(*) FROM eval_harness.calibrated_weights "
                             "WHERE dataset = 'live'").fetchone()[0] == 1
        assert admin.execute("SELECT count(*) FROM eval_harness.ground_truth WHERE dataset = "
                             "'live' AND judged_docs IS NOT NULL").fetchone()[0] == 15


def test_the_runner_changed_no_rag_row_and_created_nothing_outside_its_schema(pipeline):
    assert pipeline.rag_after == pipeline.rag_before
    assert pipeline.catalog_after == pipeline.catalog_before


READ_ONLY_COMMANDS = {
    "report": ("report", "--dataset", "live"),
    "search": ("search", "ASKED", "--dataset", "live"),
    "agreement": ("agreement", "--dataset", "live"),
    "review export": ("review", "export", "FILE", "--dataset", "live"),
    "doctor": ("doctor", "--offline"),
}


def test_a_select_only_role_runs_every_read_only_command_and_changes_nothing(pipeline):
    with pipeline.location.connection(autocommit=True) as admin:
        grant_select(admin, pipeline.reader, "rag", HARNESS)
        query = admin.execute("SELECT query FROM rag.ground_truth ORDER BY id "
                              "LIMIT 1").fetchone()[0]
        pending = admin.execute("SELECT count(*) FROM eval_harness.judge_review").fetchone()[0]
        before = (rag_rows(admin), harness_rows(admin), catalog_outside_harness(admin))
    url = pipeline.reader.url(pipeline.location)
    results = {}
    for name, argv in READ_ONLY_COMMANDS.items():
        argv = [str(pipeline.root / "reader.csv") if a == "FILE" else query if a == "ASKED"
                else a for a in argv]
        results[name] = run_cli(url, pipeline.config, *argv)
    for name, (code, out, err) in results.items():
        assert code == 0, (name, out, err)
    out = results["review export"][1]
    assert out.splitlines()[0] == ("review queue of 'live' not refreshed: this role may not "
                                   "write the harness schema, so the queue is exported as it "
                                   "was last refreshed")
    with open(pipeline.root / "reader.csv", newline="", encoding="utf-8") as exported:
        assert len(list(csv.DictReader(exported))) == pending
    assert "permission denied" not in "".join(o + e for _, o, e in results.values())
    assert "1." in results["search"][1]
    with pipeline.location.connection() as admin:
        after = (rag_rows(admin), harness_rows(admin), catalog_outside_harness(admin))
    assert after == before


def test_read_only_commands_on_an_unmigrated_store_say_to_migrate(server_url, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    folder = seed_layout_folder(tmp_path / "beir")
    with scratch_database(server_url, "eh_lp_unmigrated") as location:
        with admin_connection(location) as admin:
            build_rag_store(admin, folder, schema="rag", cache_query_vectors=False)
            reader = create_role(admin, "eh_reader")
            grant_select(admin, reader, "rag")
            admin.commit()
        try:
            url = reader.url(location)
            for command, argv in READ_ONLY_COMMANDS.items():
                argv = [str(tmp_path / "queue.csv") if a == "FILE" else "aspirin"
                        if a == "ASKED" else a for a in argv]
                code, out, err = run_cli(url, config, *argv)
                if command == "doctor":  # not all is well, and it says what to do
                    migrations = re.search(r"^warn +migrations +(.*)$", out, re.M)
                    assert code == 1 and migrations, out
                    assert "no eval-harness schema 'eval_harness' yet" in migrations.group(1)
                    assert "run `eval-harness migrate`" in migrations.group(1)
                    continue
                assert code == 2 and out == "", (command, out)
                assert err == ("eval-harness: error: The store has no eval-harness schema "
                               "'eval_harness' yet: run `eval-harness migrate` once with a "
                               "role that may create the schema (or owns it); read-only "
                               "commands never change the store.\n"), (command, err)
            assert not (tmp_path / "queue.csv").exists()
        finally:
            with admin_connection(location, autocommit=True) as admin:
                drop_role(admin, reader)


def test_dry_runs_write_nothing_and_a_refused_write_names_role_relation_and_grant(pipeline):
    """Issue #26: `judge --dry-run` and `calibrate --no-write` are documented as writing
    nothing, so a SELECT-only role runs them (they read the live dataset as last attached);
    a command that must write says which role lacks which GRANT on which relation, and
    `answers import` does not send a privilege problem to `migrate`."""
    with pipeline.location.connection(autocommit=True) as admin:
        grant_select(admin, pipeline.reader, "rag", HARNESS)
        admin.execute("UPDATE rag.ground_truth SET query = query || ' again' WHERE id = 1")
        before = (rag_rows(admin), harness_rows(admin), catalog_outside_harness(admin))
    url = pipeline.reader.url(pipeline.location)
    role = pipeline.reader.name
    try:
        dry = run_cli(url, pipeline.config, "judge", "--dataset", "live", "--dry-run")
        no_write = run_cli(url, pipeline.config, "calibrate", "--dataset", "live", "--no-write",
                           "--json")
        judge = run_cli(url, pipeline.config, "judge", "--dataset", "live", "--limit", "1")
        imported = run_cli(url, pipeline.config, "answers", "import",
                           str(answers_file(pipeline.root / "reader-answers.jsonl")))
    finally:
        with pipeline.location.connection(autocommit=True) as admin:
            admin.execute("UPDATE rag.ground_truth SET query = left(query, -6) WHERE id = 1")
    for name, (code, out, err) in (("judge --dry-run", dry), ("calibrate --no-write", no_write)):
        assert code in (0, 1) and "permission denied" not in out + err, (name, out, err)
        assert ("dataset 'live' (live, rag.l2_insights): not attached again (this command "
                "writes nothing); its ground truth as attached at ") in err, (name, err)
        assert ("the live one changed since: 0 new, 1 changed, 0 removed queries, which "
                "`eval-harness attach --dataset live` takes in") in err, (name, err)
    assert json.loads(no_write[1])["queries"] == 15
    for name, (code, out, err) in (("judge", judge), ("answers import", imported)):
        line = err.splitlines()[-1]  # judge prints its store line first
        assert code == 2 and f"role '{role}' lacks " in line, (name, line)
        assert re.search(rf"GRANT [A-Z, ]+ ON {HARNESS}\.\w+ TO {role}", line), (name, line)
        assert "migrate" not in line, (name, line)
    with pipeline.location.connection() as admin:
        admin.execute("UPDATE rag.ground_truth SET query = query || ' again' WHERE id = 1")
        after = (rag_rows(admin), harness_rows(admin), catalog_outside_harness(admin))
        admin.rollback()
    assert after == before

"""The RAG system's indexes: what ``doctor`` reports for a live dataset and what
``eval-harness index`` builds (issue #13, "Indexes are the RAG system's").

A seed-layout store (HNSW with the cosine operator class and GIN on
``to_tsvector('english', content)``, id primary key) is attached as a live dataset; indexes are
dropped, replaced or broken and the doctor's lines and the command's statements checked. The
proof that a proposed index is the right one is the planner: with sequential scans disabled,
the search's own candidate subqueries must use it.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql

from eval_harness.cli import main
from eval_harness.settings.datasets import Relation
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live_catalog import live_datasets, probe_query
from eval_harness.datasets.live_indexes import explain_candidates
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.live import attach_live_dataset
from live_store import live_config, no_embedder

EMBEDDING_STATEMENT = ('CREATE INDEX CONCURRENTLY "l2_insights_embedding_cosine_idx" ON '
                       '"rag"."l2_insights" USING hnsw ("embedding" vector_cosine_ops);')
TEXT_STATEMENT = ('CREATE INDEX CONCURRENTLY "l2_insights_content_gin_idx" ON "rag"."l2_insights" '
                  "USING gin (to_tsvector('english'::regconfig, \"content\"));")
CONFIG = """default_dataset: live
datasets:
  live:
    language: english
    embedder: local:test-random
    live:
      corpus: {relation: rag.l2_insights, id: id, content: content, embedding: embedding,
               tsvector: null}
      ground_truth: {relation: rag.ground_truth, id: id, query: query,
                     expected_docs: expected_docs}
judges: {judge1: local:lexical, judge2: local:embedding}
"""


@pytest.fixture
def seed(fresh, beir_folder, monkeypatch):
    """A seed-layout store in schema rag attached as live dataset 'live'; DATABASE_URL
    points at it."""
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2"):
        monkeypatch.delenv(variable, raising=False)
    return fresh


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return str(path)


def run(capsys, *argv) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def doctor(capsys, config) -> tuple[int, list[str]]:
    code, lines, err = run(capsys, "--config", config, "doctor", "--offline")
    assert "Traceback" not in err
    return code, lines


def index_lines(lines: list[str], what: str) -> list[str]:
    """The doctor's 'indexes' lines of dataset 'live' whose text starts with ``what``."""
    prefix = f"'live' {what}"
    return [entry for entry in lines if entry.split()[1] == "indexes"
            and entry.split(None, 2)[2].startswith(prefix)]


def one(lines: list[str], what: str) -> str:
    found = index_lines(lines, what)
    assert len(found) == 1, lines
    return found[0]


def statements(lines: list[str]) -> list[str]:
    """The CREATE INDEX statements the doctor prints, one per 'missing:' line."""
    return [entry.split("missing: ", 1)[1] for entry in index_lines(lines, "missing:")]


def rag_indexes(conn) -> list[str]:
    return sorted(conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'rag' "
                               "AND tablename = 'l2_insights'").fetchall())


def plan_with_indexes_forced(conn, dataset: str = "live") -> dict[str, str]:
    """{side: access} of the search's candidate subqueries when the planner may neither scan
    sequentially nor sort (on 60 rows both beat an index): an index shows up only if it
    serves the search's expression ('whole' when the planner must read the whole relation)."""
    live = [d for d in live_datasets(conn, {}, attached_known=True) if d.name == dataset][0]
    text, vector = probe_query(conn, live)
    conn.execute("SET enable_seqscan = off; SET enable_sort = off")
    try:
        return {p.side: "whole" if p.whole else p.access
                for p in explain_candidates(conn, live.corpus, 50, text, vector)}
    finally:
        conn.execute("RESET enable_seqscan; RESET enable_sort")


def test_doctor_reports_the_seed_indexes_as_serving_the_search(seed, config, capsys):
    code, lines = doctor(capsys, config)
    assert code == 0, lines
    assert one(lines, "embedding:") == ("ok    indexes      'live' embedding: hnsw index "
                                        "rag.l2_insights_embedding_idx on embedding with "
                                        "vector_cosine_ops")
    assert one(lines, "text:") == ("ok    indexes      'live' text: gin index "
                                   "rag.l2_insights_to_tsvector_idx on "
                                   "to_tsvector('english'::regconfig, content)")
    assert one(lines, "id:") == ("ok    indexes      'live' id: unique btree index "
                                 "rag.l2_insights_pkey on id")
    for side in ("semantic query:", "keyword query:"):
        assert one(lines, side).startswith("ok    indexes")
        assert "estimated cost " in one(lines, side)
    assert not index_lines(lines, "missing:")


def test_missing_indexes_are_reported_with_statements_and_dry_run_creates_nothing(
        seed, config, capsys):
    with seed.connection() as conn:
        conn.execute("DROP INDEX rag.l2_insights_embedding_idx, rag.l2_insights_to_tsvector_idx")
        conn.commit()
        before = rag_indexes(conn)
    code, lines = doctor(capsys, config)
    assert code == 0, lines  # a missing index slows the search; it does not stop it
    assert one(lines, "embedding:") == (
        "warn  indexes      'live' embedding: no HNSW or IVFFlat index on embedding with "
        "vector_cosine_ops")
    assert one(lines, "text:") == ("warn  indexes      'live' text: no GIN index on "
                                   "to_tsvector('english'::regconfig, content)")
    assert one(lines, "id:").startswith("ok")
    for side in ("semantic query:", "keyword query:"):
        assert one(lines, side).startswith(
            f"warn  indexes      'live' {side} Seq Scan over all ~60 rows of rag.l2_insights, "
            "estimated cost ")
    assert statements(lines) == [
        EMBEDDING_STATEMENT, TEXT_STATEMENT]
    assert "`eval-harness index --dataset live`" in one(lines, "run those")

    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live", "--dry-run")
    assert code == 0, err
    assert out[1:] == [EMBEDDING_STATEMENT, TEXT_STATEMENT]
    assert "--dry-run: nothing done" in out[0]
    with seed.connection() as conn:
        assert rag_indexes(conn) == before  # doctor and the dry run only looked


def test_index_builds_what_is_missing_and_the_search_uses_it(seed, config, capsys):
    with seed.connection() as conn:
        conn.execute("DROP INDEX rag.l2_insights_embedding_idx, rag.l2_insights_to_tsvector_idx")
        conn.commit()
        assert plan_with_indexes_forced(conn) == {"semantic": "whole", "keyword": "whole"}
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 0, err
    assert [entry for entry in out if entry.startswith("CREATE")] == [EMBEDDING_STATEMENT,
                                                                      TEXT_STATEMENT]
    assert out.index(EMBEDDING_STATEMENT) < out.index(TEXT_STATEMENT)
    code, lines = doctor(capsys, config)
    assert code == 0
    assert all(entry.startswith("ok") for entry in lines if entry.split()[1] == "indexes"), lines
    assert "l2_insights_embedding_cosine_idx on embedding with vector_cosine_ops" in \
        one(lines, "embedding:")
    with seed.connection() as conn:
        assert plan_with_indexes_forced(conn) == {
            "semantic": "Index Scan using l2_insights_embedding_cosine_idx",
            "keyword": "Bitmap Index Scan using l2_insights_content_gin_idx"}
    code, out, _ = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 0 and out[0] == ("dataset 'live': the embedding, text and id indexes on "
                                    "rag.l2_insights are in place; nothing to create")
    assert out[1:] and out[1].startswith("note: with tsvector: null")  # the cost indexes leave


def test_an_l2_index_does_not_serve_the_cosine_search(seed, config, capsys):
    with seed.connection() as conn:
        conn.execute("DROP INDEX rag.l2_insights_embedding_idx")
        conn.execute("CREATE INDEX l2_only ON rag.l2_insights USING hnsw (embedding vector_l2_ops)")
        conn.commit()
    code, lines = doctor(capsys, config)
    assert one(lines, "embedding:") == (
        "warn  indexes      'live' embedding: no HNSW or IVFFlat index on embedding with "
        "vector_cosine_ops; rag.l2_only (hnsw with vector_l2_ops) does not serve the search's "
        "cosine ORDER BY (<=>)")
    assert statements(lines) == [
        EMBEDDING_STATEMENT]


def test_an_untyped_vector_column_needs_the_cast_expression(seed, config, capsys):
    with seed.connection() as conn:
        conn.execute("DROP INDEX rag.l2_insights_embedding_idx")
        conn.execute("ALTER TABLE rag.l2_insights ALTER COLUMN embedding TYPE vector")
        conn.commit()
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        assert dataset_info(conn, "live").corpus.cast_embedding
    statement = ('CREATE INDEX CONCURRENTLY "l2_insights_embedding_cosine_idx" ON '
                 '"rag"."l2_insights" USING hnsw (("embedding"::vector(8)) vector_cosine_ops);')
    code, lines = doctor(capsys, config)
    assert one(lines, "embedding:").endswith("no HNSW or IVFFlat index on "
                                             "(embedding::vector(8)) with vector_cosine_ops")
    assert statements(lines) == [statement]
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 0 and statement in out, err
    code, lines = doctor(capsys, config)
    assert one(lines, "embedding:").startswith("ok    indexes      'live' embedding: hnsw index "
                                               "rag.l2_insights_embedding_cosine_idx on "
                                               "(embedding::vector(8))")
    with seed.connection() as conn:
        assert plan_with_indexes_forced(conn)["semantic"] == \
            "Index Scan using l2_insights_embedding_cosine_idx"


def test_an_invalid_index_is_named_dropped_and_rebuilt(seed, config, capsys):
    with seed.connection() as conn:  # what a failed CREATE INDEX CONCURRENTLY leaves behind
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
                     "'rag.l2_insights_to_tsvector_idx'::regclass")
        conn.commit()
    drop = 'DROP INDEX CONCURRENTLY "rag"."l2_insights_to_tsvector_idx"'
    create = TEXT_STATEMENT.replace("l2_insights_content_gin_idx", "l2_insights_to_tsvector_idx")
    code, lines = doctor(capsys, config)
    assert one(lines, "text:").endswith(
        "rag.l2_insights_to_tsvector_idx is INVALID (left by a failed CREATE INDEX "
        f"CONCURRENTLY): {drop}; then create it again")
    assert statements(lines) == [create]
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 0, err
    assert [entry for entry in out if entry.startswith(("DROP", "CREATE"))] == [f"{drop};",
                                                                                create]
    with seed.connection() as conn:
        assert conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = "
                            "'rag.l2_insights_to_tsvector_idx'::regclass").fetchone()[0]
        conn.execute("CREATE INDEX spare ON rag.l2_insights USING gin "
                     "(to_tsvector('english', content))")
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
                     "'rag.spare'::regclass")
        conn.commit()
    code, lines = doctor(capsys, config)  # a valid index serves; the invalid copy only costs
    assert one(lines, "text:") == (
        "warn  indexes      'live' text: gin index rag.l2_insights_to_tsvector_idx on "
        "to_tsvector('english'::regconfig, content); rag.spare is an INVALID copy: "
        'DROP INDEX CONCURRENTLY "rag"."spare"')
    assert statements(lines) == []


def test_a_failed_build_leaves_an_invalid_index_that_the_next_run_replaces(seed, config,
                                                                           capsys):
    with seed.connection() as conn:  # ids that are not unique: the unique index cannot build
        conn.execute("ALTER TABLE rag.l2_insights DROP CONSTRAINT l2_insights_pkey")
        conn.execute("INSERT INTO rag.l2_insights (id, content) VALUES (1, 'a second id 1')")
        conn.commit()
    statement = ('CREATE UNIQUE INDEX CONCURRENTLY "l2_insights_id_key" ON "rag"."l2_insights" '
                 'USING btree ("id");')
    drop = 'DROP INDEX CONCURRENTLY "rag"."l2_insights_id_key"'
    code, lines = doctor(capsys, config)
    assert one(lines, "id:") == "warn  indexes      'live' id: no unique btree index on id"
    assert statements(lines) == [statement]
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 2 and out[1] == statement
    assert err.startswith(f"eval-harness: error: {statement[:-1]} failed: could not create "
                          "unique index")
    assert err.rstrip().endswith(f"it left rag.l2_insights_id_key INVALID: {drop}; or run this "
                                 "command again (it drops and rebuilds it).")
    code, lines = doctor(capsys, config)
    assert f"rag.l2_insights_id_key is INVALID (left by a failed CREATE INDEX CONCURRENTLY): " \
           f"{drop}; then create it again" in one(lines, "id:")
    with seed.connection() as conn:
        conn.execute("DELETE FROM rag.l2_insights WHERE content = 'a second id 1'")
        conn.commit()
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 0, err
    assert [entry for entry in out if entry.startswith(("DROP", "CREATE"))] == [f"{drop};",
                                                                                statement]
    code, lines = doctor(capsys, config)
    assert one(lines, "id:").startswith("ok    indexes      'live' id: unique btree index "
                                        "rag.l2_insights_id_key on id")


def test_a_configured_dataset_not_attached_yet_is_checked_too(fresh, beir_folder, config,
                                                              capsys, monkeypatch):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    code, lines = doctor(capsys, config)
    assert one(lines, "is configured").startswith(
        "warn  indexes      'live' is configured as live on rag.l2_insights but not attached yet")
    assert one(lines, "embedding:").startswith("ok")
    assert one(lines, "semantic query:").startswith("ok")


def test_index_refuses_an_ingested_dataset(seed, beir_folder, config, capsys):
    with seed.connection() as conn:
        ingest_beir(conn, beir_folder, name="copy")
        before = rag_indexes(conn)
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "copy")
    assert code == 2 and out == []
    assert err == ("eval-harness: error: Dataset 'copy' is ingested: its indexes are the "
                   "harness's own and `eval-harness ingest` manages them; `index` is for live "
                   "datasets.\n")
    with seed.connection() as conn:
        assert rag_indexes(conn) == before


def test_a_view_is_judged_by_its_plan_and_not_indexed(seed, config, capsys):
    with seed.connection() as conn:
        conn.execute("CREATE VIEW rag.docs AS SELECT id, content, embedding FROM rag.l2_insights")
        conn.commit()
        attach_live_dataset(conn, live_config(relation=Relation("rag", "docs")),
                            embedder_factory=no_embedder)
    code, lines = doctor(capsys, config)
    assert one(lines, "rag.docs") == ("warn  indexes      'live' rag.docs is a view: its indexes "
                                      "cannot be checked or created here; the plans below show "
                                      "whether the search finds any")
    assert "of rag.l2_insights, estimated cost" in one(lines, "semantic query:")  # the table
    assert not index_lines(lines, "embedding:") and statements(lines) == []
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 2 and out == []
    assert "rag.docs is a view: create the indexes on the table(s) beneath it" in err


@pytest.fixture
def reader(seed):
    """A role that may read the harness schema and rag.l2_insights, nothing else."""
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with seed.connection(autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA eval_harness, rag TO {r}; "
                             "GRANT SELECT ON ALL TABLES IN SCHEMA eval_harness TO {r}; "
                             "GRANT SELECT ON rag.l2_insights TO {r}").format(
            r=sql.Identifier(role)))
    yield role, psycopg.conninfo.make_conninfo(seed.url, user=role)
    with seed.connection(autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {r}; DROP ROLE {r}").format(r=sql.Identifier(role)))


def test_a_read_only_role_is_told_what_it_may_not_do(seed, reader, config, capsys,
                                                     monkeypatch):
    role, url = reader
    with seed.connection() as conn:
        conn.execute("DROP INDEX rag.l2_insights_to_tsvector_idx")
        conn.commit()
        before = rag_indexes(conn)
    monkeypatch.setenv("DATABASE_URL", url)
    code, lines = doctor(capsys, config)
    assert code == 1, lines
    privileges = [entry for entry in lines if entry.split()[1] == "privileges"]
    assert privileges[0].startswith(f"warn  privileges   role '{role}' may not write ")
    assert "read-only commands (report, search, agreement, review export, doctor) work" in \
        privileges[0]
    assert privileges[1:] == [f"FAIL  privileges   role '{role}' may not SELECT live relation "
                              f"rag.ground_truth: GRANT SELECT ON rag.ground_truth TO {role}"]
    assert one(lines, "text:").startswith("warn")
    code, out, err = run(capsys, "--config", config, "index", "--dataset", "live")
    assert code == 2 and out == [TEXT_STATEMENT]
    assert f"Role '{role}' does not own rag.l2_insights" in err
    with seed.connection() as conn:
        assert rag_indexes(conn) == before

"""Seed compatibility, opt-in: ``datasets.<name>.live.write_judge_scores: true`` writes the
judge scores into the RAG system's own ground-truth rows after a dual-judge run (seed
story 1.11's columns), and by default the RAG relations are not touched at all."""

from __future__ import annotations

import uuid
from dataclasses import replace

import psycopg
import pytest
from psycopg import sql

from eval_harness.judges.dual.run import judge_dataset
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live import attach_live_dataset, write_back_judge_scores
from live_store import live_config, no_embedder, rag_checksum

JUDGE_COLUMNS = ("judge1_score", "judge2_score", "judge1_model", "judge2_model", "kappa")


def judged_settings(settings, location, cfg):
    """The repository's settings on ``location`` with local judges and ``cfg`` only."""
    return replace(settings, database_url=location.url, datasets={cfg.name: cfg},
                   default_dataset=cfg.name, openai_api_key=None, anthropic_api_key=None)


def opted_in(cfg, write: bool = True):
    return replace(cfg, live=replace(cfg.live, write_judge_scores=write))


def harness_scores(conn, dataset: str) -> dict[int, tuple]:
    return {int(external_id): rest for external_id, *rest in conn.execute(
        "SELECT external_id, judge1_score, judge2_score, judge1_model, judge2_model, kappa "
        "FROM ground_truth WHERE dataset = %s AND judged_docs IS NOT NULL", (dataset,))}


def live_scores(conn, columns=JUDGE_COLUMNS) -> dict[int, tuple]:
    return {row[0]: tuple(row[1:]) for row in conn.execute(sql.SQL(
        "SELECT id, {} FROM rag.ground_truth ORDER BY id").format(
        sql.SQL(", ").join(map(sql.Identifier, columns))))}


def test_by_default_the_live_ground_truth_stays_byte_identical(fresh, settings, beir_folder):
    cfg = live_config()
    assert cfg.live.write_judge_scores is False
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        before = rag_checksum(conn)
        summary = judge_dataset(conn, judged_settings(settings, fresh, cfg), "live")
        assert summary.queries_written == 15 and summary.write_back is None
        assert len(harness_scores(conn, "live")) == 15
        assert rag_checksum(conn) == before
        assert all(v == (None,) * 5 for v in live_scores(conn).values())


def test_opt_in_writes_the_stored_judge_scores_into_the_live_rows(fresh, settings,
                                                                  beir_folder):
    cfg = opted_in(live_config())
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        summary = judge_dataset(conn, judged_settings(settings, fresh, cfg), "live")
        assert summary.write_back == ("judge scores written back to rag.ground_truth "
                                      "(judge1_score, judge2_score, judge1_model, "
                                      "judge2_model, kappa): 15 rows changed")
        assert summary.write_back in summary.format().splitlines()
        stored = harness_scores(conn, "live")
        live = live_scores(conn)
        assert len(stored) == 15 and live == {i: tuple(v) for i, v in stored.items()}
        first = next(iter(stored.values()))
        assert first[2] == "local:lexical" and len(first[0]) == len(first[1]) >= 3
        # the other columns of the live rows are the RAG system's and stay as they were
        assert conn.execute("SELECT count(*) FROM rag.ground_truth g JOIN ground_truth h "
                            "ON h.dataset = 'live' AND h.external_id = g.id::text "
                            "WHERE g.query = h.query AND g.expected_docs = h.expected_docs"
                            ).fetchone()[0] == 15
        after_first = rag_checksum(conn)
        again = judge_dataset(conn, judged_settings(settings, fresh, cfg), "live")
        assert again.write_back.endswith(": 0 rows changed")  # nothing rewritten
        assert rag_checksum(conn) == after_first


def test_only_the_seed_columns_the_relation_has_are_written(fresh, settings, beir_folder):
    cfg = opted_in(live_config())
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        conn.execute("ALTER TABLE rag.ground_truth DROP COLUMN kappa, DROP COLUMN judge2_model")
        conn.commit()
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        summary = judge_dataset(conn, judged_settings(settings, fresh, cfg), "live")
        assert "(judge1_score, judge2_score, judge1_model): 15 rows" in summary.write_back
        stored = harness_scores(conn, "live")
        assert live_scores(conn, JUDGE_COLUMNS[:3]) == {
            i: tuple(v[:3]) for i, v in stored.items()}


def test_a_view_is_not_written_and_the_run_stays_stored(fresh, settings, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        conn.execute("CREATE VIEW rag.gt_view AS SELECT * FROM rag.ground_truth")
        conn.commit()
        base = live_config()
        cfg = opted_in(replace(base, live=replace(base.live, ground_truth=replace(
            base.live.ground_truth, relation=replace(base.live.ground_truth.relation,
                                                     name="gt_view")))))
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        before = rag_checksum(conn)
        summary = judge_dataset(conn, judged_settings(settings, fresh, cfg), "live")
        assert summary.write_back == (
            "'datasets.live.live.write_judge_scores': rag.gt_view is a view, not a table (map "
            "the table itself to write them back); the judge scores stay in the harness's own "
            "ground_truth.")
        assert summary.queries_written == 15 and len(harness_scores(conn, "live")) == 15
        assert rag_checksum(conn) == before


def test_a_role_that_may_not_update_gets_one_sentence(fresh, settings, beir_folder):
    cfg = opted_in(live_config())
    role = f"eh_wb_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        judge_dataset(conn, judged_settings(settings, fresh, opted_in(cfg, False)), "live")
        before = rag_checksum(conn)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA rag, eval_harness TO {0}; "
                             "GRANT SELECT ON ALL TABLES IN SCHEMA rag, eval_harness TO {0}")
                     .format(sql.Identifier(role)))
        conn.commit()
    try:
        url = psycopg.conninfo.make_conninfo(fresh.url, user=role, password=password)
        with replace(fresh, url=url).connection() as reader:
            report = write_back_judge_scores(reader, cfg)
        assert report.rows == 0 and str(report) == (
            "'datasets.live.live.write_judge_scores': rag.ground_truth may not be updated by "
            "this role (no UPDATE on judge1_score, judge2_score, judge1_model, judge2_model, "
            "kappa); the judge scores stay in the harness's own ground_truth.")
        with fresh.connection() as conn:
            assert rag_checksum(conn) == before
    finally:
        with fresh.connection(autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {0}; DROP ROLE {0}").format(
                sql.Identifier(role)))


@pytest.mark.parametrize("column_type", ["real[]", "text"])
def test_a_column_of_another_type_is_refused(fresh, beir_folder, column_type):
    cfg = opted_in(live_config())
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        conn.execute(sql.SQL("ALTER TABLE rag.ground_truth ALTER COLUMN judge1_score TYPE {} "
                             "USING NULL").format(sql.SQL(column_type)))
        conn.commit()
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        report = write_back_judge_scores(conn, cfg)
        assert report.refused == (
            f"'datasets.live.live.write_judge_scores': rag.ground_truth has column "
            f"judge1_score of type {column_type}, which cannot hold it (expected double "
            "precision[]); the judge scores stay in the harness's own ground_truth.")

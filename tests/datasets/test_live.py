"""Live datasets: a store laid out like the seeds, evaluated in place.

The same BEIR folder is reached two ways, ingested as a copy and laid out in a ``rag`` schema
like a RAG system's own store and attached as a live dataset; every figure must agree, and
the RAG relations must not change by a byte.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from eval_harness.calibration.run import calibrate_dataset as calibrate
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.live import LiveMappingError, attach_live_dataset
from eval_harness.datasets.live_mapping import check_mapping
from eval_harness.retrieval.hybrid import dataset_info, hybrid_search
from eval_harness.settings.datasets import DatasetConfig, Relation
from live_store import live_config, no_embedder, rag_checksum


def test_live_and_ingested_copy_agree_at_every_weight(fresh, beir_folder):
    with fresh.connection() as conn:
        ingest_beir(conn, beir_folder, name="copy")
        build_rag_store(conn, beir_folder, schema="rag")
        before = rag_checksum(conn)
        report = attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        assert report.queries == 15 and report.embedded == 0 and report.embeddings_cached == 15
        grid = [round(w, 2) for w in np.arange(0.0, 1.0001, 0.1)]
        copy = calibrate(conn, "copy", grid=grid)
        live = calibrate(conn, "live", grid=grid)
        assert [p.p_at_5 for p in live.grid] == [p.p_at_5 for p in copy.grid]
        assert [p.ndcg_at_10 for p in live.grid] == [p.ndcg_at_10 for p in copy.grid]
        info = dataset_info(conn, "live")
        assert info.is_live and info.documents == 60 and info.queries == 15
        hits = hybrid_search(conn, "live", query_text="aspirin heart",
                             query_embedding=np.ones(8, np.float32), k=5)
        copy_hits = hybrid_search(conn, "copy", query_text="aspirin heart",
                                  query_embedding=np.ones(8, np.float32), k=5)
        assert [h.content for h in hits] == [h.content for h in copy_hits]
        assert all(h.external_id == str(h.id) for h in hits)  # the live id is the own id
        assert rag_checksum(conn) == before
        assert conn.execute("SELECT count(*) FROM eval_harness.l2_insights "
                            "WHERE dataset = 'live'").fetchone()[0] == 0


def test_attach_twice_changes_nothing_and_follows_the_live_ground_truth(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        again = attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        assert (again.inserted, again.updated, again.removed, again.embedded) == (0, 0, 0, 0)
        with conn.transaction():  # the RAG system edits its ground truth
            conn.execute("UPDATE rag.ground_truth SET expected_docs = '{1,2}' WHERE id = 1")
            conn.execute("DELETE FROM rag.ground_truth WHERE id = 2")
        changed = attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        assert (changed.updated, changed.removed, changed.queries) == (1, 1, 14)
        assert conn.execute("SELECT expected_docs FROM ground_truth WHERE dataset = 'live' "
                            "AND external_id = '1'").fetchone()[0] == [1, 2]


@pytest.mark.parametrize("change, message", [
    ({"relation": Relation("rag", "nope")}, "rag.nope does not exist"),
    ({"content": "body"}, "has no column 'body'"),
    ({"embedding": "content"}, "is text; it must be vector"),
    ({"tsvector": "content"}, "must be tsvector"),
])
def test_a_wrong_mapping_is_one_sentence_naming_the_key(fresh, beir_folder, change, message):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        with pytest.raises(LiveMappingError, match=message) as caught:
            check_mapping(conn, live_config(**change))
        assert str(caught.value).startswith("'datasets.live.live.corpus.")
        assert "\n" not in str(caught.value)


def test_expected_ids_missing_from_the_corpus_are_named(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        with conn.transaction():
            conn.execute("UPDATE rag.ground_truth SET expected_docs = '{1,999}' WHERE id = 3")
        with pytest.raises(LiveMappingError, match=r"1 ids are not documents of rag.l2_insights "
                                                   r"\(e.g. 999, expected by queries 3\)"):
            attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        assert conn.execute("SELECT count(*) FROM datasets WHERE name = 'live'").fetchone()[0] == 0


def test_embedding_dimensions_must_match_the_embedder(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        cfg = live_config()
        cfg = DatasetConfig(**{**cfg.__dict__, "embedder": "local:all-MiniLM-L6-v2"})
        with pytest.raises(LiveMappingError, match="has 8 dimensions but the embedder "
                                                   "local:all-MiniLM-L6-v2 makes 384"):
            check_mapping(conn, cfg)


def test_queries_are_embedded_once_by_model_and_text(fresh, beir_folder):
    calls = []

    class Counting:
        model = "test-other"

        def embed(self, texts):
            calls.append(list(texts))
            return np.ones((len(texts), 8), np.float32)

    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag", cache_query_vectors=False)
        cfg = DatasetConfig(**{**live_config().__dict__, "embedder": "openai:test-other"})
        first = attach_live_dataset(conn, cfg, embedder_factory=Counting)
        assert first.embedded == 15 and len(calls) == 1
        conn.execute("UPDATE ground_truth SET query_embedding = NULL WHERE dataset = 'live'")
        conn.commit()
        second = attach_live_dataset(conn, cfg, embedder_factory=Counting)
        assert second.embedded == 0 and second.embeddings_cached == 15 and len(calls) == 1


def test_a_stored_tsvector_column_ranks_like_the_expression(fresh, beir_folder):
    """The demo store's layout: a generated tsv column (with its GIN index) mapped as
    ``tsvector: tsv`` gives the figures of the to_tsvector(language, content) mapping."""
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        build_rag_store(conn, beir_folder, schema="rag_tsv", tsvector="tsv")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        attach_live_dataset(conn, live_config("with_tsv", "rag_tsv", tsvector="tsv"),
                            embedder_factory=no_embedder)
        assert conn.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = 'rag_tsv' "
                            "AND indexdef LIKE '%USING gin (tsv)%'").fetchone()[0] == 1
        grid = [0.0, 0.3, 0.7, 1.0]
        expression = calibrate(conn, "live", grid=grid)
        column = calibrate(conn, "with_tsv", grid=grid)
        assert [p.p_at_5 for p in column.grid] == [p.p_at_5 for p in expression.grid]


# ------------------------------------------------------------------ names as SQL reads them

@pytest.mark.unit
def test_relation_and_column_names_are_read_as_sql_reads_them():
    from eval_harness.settings.datasets import parse_sql_name, sql_name

    assert parse_sql_name("ProbeMC.L2Ins") == ["probemc", "l2ins"]  # unquoted: folded
    assert parse_sql_name('"Probe Mixed"."L2 Insights"') == ["Probe Mixed", "L2 Insights"]
    assert parse_sql_name('"a.b"') == ["a.b"]                   # a dot inside quotes
    assert parse_sql_name('"say ""hi"""') == ['say "hi"']        # "" is one quote
    assert parse_sql_name('public."Docs"') == ["public", "Docs"]
    for wrong in ('"open', 'a..b', '""', "a b", "x" * 64, "", "a.", '"x"y'):
        assert parse_sql_name(wrong) is None, wrong
    assert sql_name("rag", "l2_insights") == "rag.l2_insights"
    assert sql_name("Probe Mixed", 'L2 "x"') == '"Probe Mixed"."L2 ""x"""'


LIVE_YAML = """
datasets:
  live:
    embedder: local:test-random
    live:
      corpus: {{relation: '{corpus}', id: '{id}', content: Content, embedding: embedding}}
      ground_truth: {{relation: '{truth}', id: id, query: query, expected_docs: expected_docs}}
"""


@pytest.mark.parametrize("schema, table, corpus, truth, id_column, created_id", [
    # quoted: case, spaces and dots kept; the id column quoted too
    ('"Probe Mixed"', '"L2 Insights"', '"Probe Mixed"."L2 Insights"',
     '"Probe Mixed".ground_truth', '"Doc Id"', '"Doc Id"'),
    # unquoted mixed case: folded to lower case, as CREATE TABLE ProbeMC.L2Ins folds it
    ("ProbeMC", "L2Ins", "ProbeMC.L2Ins", "PROBEMC.Ground_Truth", "ID", "id"),
])
def test_a_mixed_case_relation_is_mapped_as_sql_names_it(fresh, beir_folder, tmp_path, schema,
                                                         table, corpus, truth, id_column,
                                                         created_id):
    from eval_harness.settings import load_settings

    config = tmp_path / "config.yaml"
    config.write_text(LIVE_YAML.format(corpus=corpus.replace("'", "''"), truth=truth,
                                       id=id_column.replace("'", "''")))
    cfg = load_settings(str(config), environ={}).datasets["live"]
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        with conn.transaction():
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"CREATE TABLE {schema}.{table} AS SELECT id AS {created_id}, "
                         f"content AS \"content\", embedding FROM rag.l2_insights")
            conn.execute(f"CREATE TABLE {schema}.ground_truth AS SELECT * FROM rag.ground_truth")
        report = attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        assert report.queries == 15
        hits = hybrid_search(conn, "live", query_text="aspirin heart",
                             query_embedding=np.ones(8, np.float32), k=3)
        assert len(hits) == 3 and len({h.id for h in hits}) == 3
        assert str(report).startswith(f"dataset 'live' (live, {cfg.live.corpus.relation})")


# ------------------------------------------------------------------ rows the harness cannot use

def renumber_queries(conn, offset: int = 5000) -> None:
    """The RAG system's own query ids far from the harness's row ids (1..15 here), so a
    message naming the wrong one shows."""
    with conn.transaction():
        conn.execute("UPDATE rag.ground_truth SET id = id + %s", (offset,))


def test_a_corpus_whose_ids_repeat_is_refused_at_attach(fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        with conn.transaction():
            conn.execute("CREATE VIEW rag.doubled AS SELECT * FROM rag.l2_insights "
                         "UNION ALL SELECT * FROM rag.l2_insights WHERE id % 20 = 0")
        with pytest.raises(LiveMappingError) as caught:
            attach_live_dataset(conn, live_config(relation=Relation("rag", "doubled")),
                                embedder_factory=no_embedder)
        assert str(caught.value) == (
            "'datasets.live.live.corpus.id': rag.doubled.id is not unique: 3 ids occur in more "
            "than one row (e.g. 20, 40, 60), and every search joins documents by id; map a "
            "relation or view with one row per document.")
        assert conn.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0
        with conn.transaction():
            conn.execute("CREATE VIEW rag.nullid AS SELECT CASE WHEN id > 2 THEN id END AS id, "
                         "content, embedding FROM rag.l2_insights")
        with pytest.raises(LiveMappingError, match=r"^'datasets.live.live.corpus.id': 2 rows "
                                                   r"of rag.nullid have no id \(NULL in id\)"):
            check_mapping(conn, live_config(relation=Relation("rag", "nullid")))


def test_a_primary_key_proves_unique_ids_without_reading_the_corpus(fresh, beir_folder):
    from eval_harness.datasets.live_rows import has_unique_index

    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        with conn.transaction():
            conn.execute("CREATE TABLE rag.partial AS SELECT * FROM rag.l2_insights")
            conn.execute("CREATE UNIQUE INDEX ON rag.partial (id) WHERE id > 3")
            conn.execute("CREATE VIEW rag.v AS SELECT * FROM rag.l2_insights")
        oid = {name: conn.execute("SELECT %s::regclass::oid", (name,)).fetchone()[0]
               for name in ("rag.l2_insights", "rag.partial", "rag.v")}
        assert has_unique_index(conn, oid["rag.l2_insights"], "id")
        assert not has_unique_index(conn, oid["rag.partial"], "id")  # partial, and nullable
        assert not has_unique_index(conn, oid["rag.v"], "id")


def test_ids_that_repeat_after_attach_stop_search_report_and_calibrate_naming_own_ids(
        fresh, beir_folder):
    from eval_harness.retrieval.report import retrieval_report

    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        renumber_queries(conn)
        with conn.transaction():  # a table without a key, as many RAG stores have
            conn.execute("CREATE TABLE rag.docs AS SELECT * FROM rag.l2_insights")
        cfg = live_config(relation=Relation("rag", "docs"))
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        with conn.transaction():  # the RAG system adds a second row with an existing id
            conn.execute("INSERT INTO rag.docs SELECT * FROM rag.docs")
        own_ids = {r for (r,) in conn.execute("SELECT external_id FROM ground_truth")}
        for run in (lambda: calibrate(conn, "live", grid=[0.5]),
                    lambda: retrieval_report(conn, "live", semantic_weight=0.5,
                                             keyword_weight=0.5, candidate_depth=20),
                    lambda: hybrid_search(conn, "live", query_text="aspirin heart",
                                          query_embedding=np.ones(8, np.float32))):
            with pytest.raises(ValueError) as caught:
                run()
            message = str(caught.value)
            assert "rag.docs" in message and "is not unique any more" in message, message
            named = re.findall(r"query '(\d+)'", message)
            assert all(q in own_ids for q in named), message  # 50xx, never a row id
            conn.rollback()


def test_rows_without_embedding_or_text_are_named_at_attach_and_never_candidates(
        fresh, beir_folder):
    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        renumber_queries(conn)
        expected = conn.execute("SELECT expected_docs[1] FROM rag.ground_truth "
                                "ORDER BY id LIMIT 1").fetchone()[0]
        no_vector = sorted({expected, 2, 4, 6})
        with conn.transaction():
            conn.execute("ALTER TABLE rag.l2_insights ALTER content DROP NOT NULL")
            conn.execute("UPDATE rag.l2_insights SET embedding = NULL WHERE id = ANY(%s)",
                         (no_vector,))
            conn.execute("UPDATE rag.l2_insights SET content = NULL WHERE id = 9")
        text_of = dict(conn.execute("SELECT id, content FROM rag.l2_insights"))
        report = attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        ids = ", ".join(map(str, no_vector))
        expected_too = conn.execute("SELECT count(DISTINCT e) FROM rag.ground_truth, "
                                    "unnest(expected_docs) e WHERE e = ANY(%s)",
                                    (no_vector,)).fetchone()[0]
        assert expected_too >= 1
        assert report.notices == [
            f"4 rows of rag.l2_insights have no embedding (NULL in embedding; ids {ids}): left "
            "out of search, neither semantic nor keyword candidates, as an empty document "
            f"({expected_too} of them expected by the ground truth, which search cannot "
            "find); embed them to include them",
            "1 row of rag.l2_insights has no text (NULL or empty content; ids 9): read as "
            "empty, found by its embedding only"]
        for weight in (0.0, 0.5):  # their words match, yet they never come back
            hits = hybrid_search(conn, "live", query_text=text_of[no_vector[1]],
                                 query_embedding=np.ones(8, np.float32),
                                 semantic_weight=weight, k=60, candidate_depth=60)
            assert hits and not {h.id for h in hits} & set(no_vector)
        hits = hybrid_search(conn, "live", query_text="x", query_embedding=np.ones(8, np.float32),
                             semantic_weight=1.0, k=60, candidate_depth=60)
        assert [h.content for h in hits if h.id == 9] == [""]  # no text reads as empty
        result = calibrate(conn, "live", grid=[0.0, 0.5, 1.0])
        assert result.n_queries == 15
        candidates = {int(d) for c in result.candidates.doc_ids for d in c if d >= 0}
        assert not candidates & set(no_vector)


def test_an_undefined_score_in_a_live_corpus_names_its_rows_not_a_re_ingest(fresh, beir_folder):
    from eval_harness.retrieval.fusion import NonFiniteScores

    with fresh.connection() as conn:
        build_rag_store(conn, beir_folder, schema="rag")
        renumber_queries(conn)
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
        with conn.transaction():
            conn.execute("UPDATE rag.l2_insights SET embedding = array_fill(0, ARRAY[8])::vector")
        with pytest.raises(NonFiniteScores) as caught:
            calibrate(conn, "live", grid=[0.5])
        message = str(caught.value)
        assert re.match(r"dataset 'live': query '50\d\d' has \d+ candidates", message), message
        assert message.endswith("(cosine similarity is undefined): fix these rows of "
                                "rag.l2_insights.") and "ingest" not in message

"""Stores made by LangChain's PGVector and LlamaIndex's PGVectorStore (the real libraries,
tests/support/rag_library_stores.py), mapped by their one-line presets and attached in
place: the collection's rows only, the library's columns and generated tsvector, the index
advice for what the library did not create, and not a byte of their rows changed."""

from __future__ import annotations

import pytest

from eval_harness.settings import load_settings
from eval_harness.datasets.live_indexes import assess_indexes
from eval_harness.datasets.live import attach_live_dataset
from eval_harness.datasets.live_mapping import check_mapping
from eval_harness.datasets.live_rows import LiveMappingError
from live_store import no_embedder
from rag_library_stores import GROUND_TRUTH, LANGCHAIN_COLLECTION, rag_checksum

CONFIG = """\
datasets:
  prod:
    embedder: local:all-MiniLM-L6-v2
{language}    live:
      corpus: {corpus}
      ground_truth: {{relation: public.{gt}, id: id, query: query, expected_docs: expected_docs}}
"""


def config_of(tmp_path, corpus: str, language: str = ""):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(corpus=corpus, gt=GROUND_TRUTH,
                                    language=f"    language: {language}\n" if language else ""),
                      encoding="utf-8")
    return load_settings(str(config), environ={}).datasets["prod"]


def test_langchain_preset_is_the_collections_rows_only(langchain_store, tmp_path):
    cfg = config_of(tmp_path, langchain_store.corpus_line)
    with langchain_store.connection() as conn:
        before = rag_checksum(conn, langchain_store.relations)
        uuid = conn.execute("SELECT uuid::text FROM langchain_pg_collection WHERE name = %s",
                            (LANGCHAIN_COLLECTION,)).fetchone()[0]
        checked = check_mapping(conn, cfg)
        corpus = checked.corpus
        # the other collection's 8-dimensional vectors are not sampled: 384 from this one
        assert (corpus.dim, corpus.cast_embedding, corpus.tsvector) == (384, True, None)
        assert (corpus.subset.column, corpus.subset.value) == ("collection_id", uuid)
        report = attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        assert report.queries == len(langchain_store.data.query_ids)
        assert f"(collection '{LANGCHAIN_COLLECTION}')" in report.relation
        from eval_harness.datasets.live_catalog import live_datasets
        from eval_harness.datasets.corpus import corpus_version, count_documents
        attached = [d for d in live_datasets(conn, {"prod": cfg}, attached_known=True)
                    if d.name == "prod"][0].corpus
        assert count_documents(conn, attached) == len(langchain_store.data.doc_ids)  # not +12
        version = corpus_version(conn, attached)
        assert version.startswith(f"{len(langchain_store.data.doc_ids)}:")
        # the keyword index (tsvector: null) holds the collection's documents only
        assert conn.execute("SELECT count(*) FROM keyword_documents k JOIN keyword_sources s "
                            "ON s.id = k.source WHERE s.dataset = 'prod'").fetchone()[0] \
            == len(langchain_store.data.doc_ids)
        conn.rollback()
        assert rag_checksum(conn, langchain_store.relations) == before


def test_an_unknown_collection_is_one_sentence_listing_the_collections(langchain_store,
                                                                        tmp_path):
    cfg = config_of(tmp_path, "{preset: langchain, collection: scifactt}")
    with langchain_store.connection() as conn, pytest.raises(LiveMappingError) as caught:
        check_mapping(conn, cfg)
    assert str(caught.value) == (
        "'datasets.prod.live.corpus.collection': public.langchain_pg_collection has no "
        "collection 'scifactt' (collections: 'notes', 'scifact').")
    cfg = config_of(tmp_path, "{preset: langchain, collection: scifact, schema: rag}")
    with langchain_store.connection() as conn, pytest.raises(LiveMappingError) as caught:
        check_mapping(conn, cfg)
    assert "rag.langchain_pg_embedding does not exist" in str(caught.value)


def test_langchain_index_advice_is_an_hnsw_index_restricted_to_the_collection(langchain_store,
                                                                              tmp_path):
    cfg = config_of(tmp_path, langchain_store.corpus_line)
    with langchain_store.connection() as conn:
        corpus = check_mapping(conn, cfg).corpus
        assessment = assess_indexes(conn, corpus)
        embedding, text, ids = assessment.sides
        assert not embedding.ok and not text.ok and ids.ok  # the library made its primary key
        where = f"WHERE \"collection_id\" = '{corpus.subset.value}'"
        assert embedding.statement.startswith(
            'CREATE INDEX CONCURRENTLY "langchain_pg_embedding_embedding_cosine_idx" ON '
            '"public"."langchain_pg_embedding" USING hnsw (("embedding"::vector(384)) '
            'vector_cosine_ops) ' + where), embedding.statement
        assert text.statement.endswith(where)
        # run as printed (in a transaction: without CONCURRENTLY), they serve the search
        with conn.transaction(force_rollback=True):
            for state in (embedding, text):
                conn.execute(state.statement.replace(" CONCURRENTLY", ""))
            assert all(s.ok for s in assess_indexes(conn, corpus).sides)


def test_llamaindex_preset_reads_its_generated_tsvector_and_text_search_config(
        llamaindex_store, tmp_path):
    cfg = config_of(tmp_path, llamaindex_store.corpus_line)
    with llamaindex_store.connection() as conn:
        before = rag_checksum(conn, llamaindex_store.relations)
        corpus = check_mapping(conn, cfg).corpus
        assert (corpus.id, corpus.content, corpus.tsvector, corpus.language, corpus.dim,
                corpus.cast_embedding) == ("node_id", "text", "text_search_tsv", "english", 384,
                                           False)
        embedding, text, ids = assess_indexes(conn, corpus).sides
        # the library's GIN index on text_search_tsv serves; no vector index, node_id not unique
        assert text.ok and text.serving.name == "scifact_idx"
        assert not embedding.ok and 'USING hnsw ("embedding" vector_cosine_ops)' in \
            embedding.statement
        assert not ids.ok and ids.statement.startswith("CREATE UNIQUE INDEX CONCURRENTLY")
        report = attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        assert report.keyword is None  # a stored tsvector: no keyword index needed
        conn.rollback()
        with pytest.raises(LiveMappingError) as caught:
            check_mapping(conn, config_of(tmp_path, llamaindex_store.corpus_line, "german"))
        assert str(caught.value) == (
            "'datasets.prod.language': german, but public.data_scifact.text_search_tsv holds "
            "to_tsvector('english', text) (the text_search_config the store was made with); "
            "set language: english or leave it out.")
        assert rag_checksum(conn, llamaindex_store.relations) == before


def test_llamaindex_without_hybrid_search_has_no_tsvector(server_url, library_downloads,
                                                          scifact_data, tmp_path):
    from eval_harness.store import migrate
    from rag_library_stores import build_llamaindex_store, scifact_slice
    from scratch_databases import scratch_database

    small = scifact_slice(queries=3, documents=20)
    with scratch_database(server_url, "eh_llama_plain") as location:
        build_llamaindex_store(location.url, small, hybrid_search=False, table="plain")
        with location.connection() as conn:
            migrate(conn)
            cfg = config_of(tmp_path, "{preset: llamaindex, table: public.data_plain}", "simple")
            corpus = check_mapping(conn, cfg).corpus
            assert (corpus.tsvector, corpus.language) == (None, "simple")

"""``datasets.<name>.live.corpus`` presets (settings/datasets.py): one line maps a store made
by LangChain or LlamaIndex; what it may not say is refused in one sentence naming the key."""

from __future__ import annotations

import pytest

from eval_harness.settings import load_settings
from eval_harness.settings.datasets import Relation

pytestmark = pytest.mark.unit

CONFIG = """\
datasets:
  prod:
    embedder: local:all-MiniLM-L6-v2
    live:
      corpus: {corpus}
      ground_truth: {{relation: public.eval_queries, id: id, query: query,
                     expected_docs: expected_docs}}
"""


def corpus_of(tmp_path, line: str):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(corpus=line), encoding="utf-8")
    return load_settings(str(config), environ={}).datasets["prod"]


def test_the_langchain_preset_maps_langchains_table_and_names_the_collection(tmp_path):
    cfg = corpus_of(tmp_path, "{preset: langchain, collection: scifact}")
    corpus = cfg.live.corpus
    assert (corpus.relation, corpus.id, corpus.content, corpus.embedding, corpus.tsvector) == (
        Relation("public", "langchain_pg_embedding"), "id", "document", "embedding", None)
    assert (corpus.preset, corpus.collection) == ("langchain", "scifact")
    assert corpus.collections == Relation("public", "langchain_pg_collection")
    assert not cfg.language_given and cfg.language == "english"
    in_schema = corpus_of(tmp_path, "{preset: langchain, collection: docs, schema: Rag}")
    assert in_schema.live.corpus.collections == Relation("rag", "langchain_pg_collection")


def test_the_llamaindex_preset_maps_its_table_node_id_and_generated_tsvector(tmp_path):
    corpus = corpus_of(tmp_path, "{preset: llamaindex, table: public.data_scifact}").live.corpus
    assert (corpus.relation, corpus.id, corpus.content, corpus.embedding, corpus.tsvector) == (
        Relation("public", "data_scifact"), "node_id", "text", "embedding", "text_search_tsv")
    assert corpus.preset == "llamaindex" and corpus.collection is None
    assert corpus_of(tmp_path, "{preset: llamaindex, table: data_x}").live.corpus.relation \
        == Relation("public", "data_x")


@pytest.mark.parametrize("line, said", [
    ("{preset: langchain, collection: a, table: public.x}",
     "'datasets.prod.live.corpus.table'"),
    ("{preset: llamaindex, table: public.data_x, tsvector: tsv}",
     "'datasets.prod.live.corpus.tsvector'"),
    ("{preset: langchain, colection: a}", "did you mean 'datasets.prod.live.corpus.collection'"),
    ("{preset: haystack, table: x}", "'datasets.prod.live.corpus.preset' must be langchain"),
    ("{preset: langchain}", "'datasets.prod.live.corpus.collection' must be the name of the "
                            "LangChain collection"),
    ("{preset: langchain, collection: a, schema: 'a.b'}",
     "'datasets.prod.live.corpus.schema' must be the schema"),
    ("{preset: llamaindex}", "'datasets.prod.live.corpus.table' must be the table "
                             "PGVectorStore made"),
])
def test_a_preset_refuses_what_it_does_not_take_in_one_sentence(tmp_path, line, said):
    from eval_harness.settings import ConfigError

    with pytest.raises(ConfigError) as caught:
        corpus_of(tmp_path, line)
    message = str(caught.value)
    assert said in message, message
    assert "\n" not in message.strip()


LIVE = """\
datasets:
  prod:
    embedder: local:all-MiniLM-L6-v2
    live:
{live}
"""
GROUND_TRUTH = ("      ground_truth: {relation: public.eval_queries, id: id, query: query, "
                "expected_docs: expected_docs}")
QUERIES = "      queries: {relation: public.questions, id: id, query: text}"
CORPUS = "      corpus: {preset: langchain, collection: scifact}"


def live_of(tmp_path, *lines: str):
    config = tmp_path / "config.yaml"
    config.write_text(LIVE.format(live="\n".join(lines)), encoding="utf-8")
    return load_settings(str(config), environ={}).datasets["prod"].live


def refusal(tmp_path, *lines: str) -> str:
    from eval_harness.settings import ConfigError

    with pytest.raises(ConfigError) as caught:
        live_of(tmp_path, *lines)
    message = str(caught.value)
    assert "\n" not in message.strip(), message
    return message


def test_a_corpus_alone_is_a_live_mapping_without_ground_truth(tmp_path):
    live = live_of(tmp_path, CORPUS)
    assert live.ground_truth is None and live.write_judge_scores is False
    assert live.corpus.collection == "scifact"
    # null for both is the same mapping as leaving them out
    assert live_of(tmp_path, CORPUS, "      ground_truth: null", "      queries: null") == live
    assert live_of(tmp_path, CORPUS, QUERIES).ground_truth.labelled is False
    assert live_of(tmp_path, CORPUS, GROUND_TRUTH).ground_truth.labelled is True


def test_ground_truth_and_queries_together_are_refused_in_one_sentence(tmp_path):
    message = refusal(tmp_path, CORPUS, GROUND_TRUTH, QUERIES)
    assert "'datasets.prod.live' takes at most one of 'ground_truth'" in message, message


def test_write_judge_scores_without_a_ground_truth_relation_is_refused(tmp_path):
    message = refusal(tmp_path, CORPUS, "      write_judge_scores: true")
    assert ("'datasets.prod.live.write_judge_scores' is true, but no ground_truth (or "
            "queries) relation is mapped to write the judge scores into; map one or set it "
            "to false.") in message, message
    assert live_of(tmp_path, CORPUS, "      write_judge_scores: false").write_judge_scores \
        is False
    assert live_of(tmp_path, CORPUS, GROUND_TRUTH,
                   "      write_judge_scores: true").write_judge_scores is True

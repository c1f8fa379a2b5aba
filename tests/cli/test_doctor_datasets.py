"""The doctor checks what each configured dataset needs (issue #20, "Your own store, first
time"): the embedder it will build (the local extra, the OpenAI key, the dimensions) and, for
a live corpus mapped with ``tsvector: null``, what its keyword side costs per query,
measured, and the statements that remove the cost. Before, the doctor said every check was
ok and ``attach`` then stopped on the missing extra; and a 1,400-document store took 43 s to
calibrate while every index was in place."""

from __future__ import annotations

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.cli import doctor_datasets, main
from eval_harness.retrieval.hybrid import candidate_scores
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.embeddings import local_embeddings_install_command
from eval_harness.datasets.live import attach_live_dataset
from live_store import WORDS, live_config, no_embedder, rag_checksum

CONFIG = """default_dataset: live
datasets:
  live:
    language: english
    embedder: {embedder}
    live:
      corpus: {{relation: rag.l2_insights, id: id, content: content, embedding: embedding,
               tsvector: {tsvector}}}
      ground_truth: {{relation: rag.ground_truth, id: id, query: query,
                     expected_docs: expected_docs}}
judges: {{judge1: local:lexical, judge2: local:embedding}}
"""


def corpus_folder(folder, *, dim: int):
    rng = np.random.default_rng(11)
    docs = {f"doc{i}": " ".join(rng.choice(WORDS, size=12)) for i in range(60)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=4)) for i in range(15)}
    qrels = [(f"q{i}", f"doc{j}", 1) for i in range(15)
             for j in rng.choice(60, size=3, replace=False)]
    return write_beir(folder, docs, queries, qrels, dim=dim, seed=5)


@pytest.fixture
def rag_store(fresh, monkeypatch):
    """DATABASE_URL points at a fresh store; ``build(dim)`` lays out a seed-layout corpus."""
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2", "EVAL_HARNESS_CONFIG"):
        monkeypatch.delenv(variable, raising=False)
    return fresh


def doctor(capsys, tmp_path, *, embedder: str, tsvector: str = "null") -> tuple[int, list[str]]:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(embedder=embedder, tsvector=tsvector), encoding="utf-8")
    code = main(["--config", str(config), "doctor", "--offline"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out.splitlines()


def named(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if line.split()[1] == name]


def test_a_missing_local_extra_fails_with_the_install_command(rag_store, tmp_path, capsys,
                                                              monkeypatch):
    monkeypatch.setattr(doctor_datasets, "local_embedder_installed", lambda: False)
    with rag_store.connection() as conn:  # the local model's 384 dimensions, no vector cached
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=384), schema="rag",
                        cache_query_vectors=False)
    code, lines = doctor(capsys, tmp_path, embedder="local:all-MiniLM-L6-v2")
    assert code == 1
    [line] = named(lines, "embedder")
    assert line == ("FAIL  embedder     'live' local:all-MiniLM-L6-v2 needs the optional "
                    "local-embeddings extra, which is not installed: attach must embed 15 "
                    "ground-truth queries and stops without it: install it with "
                    f"`{local_embeddings_install_command()}`")


def test_with_every_query_vector_cached_a_missing_extra_only_warns(rag_store, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr(doctor_datasets, "local_embedder_installed", lambda: False)
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=384), schema="rag")
        conn.execute("UPDATE query_embeddings SET model = 'all-MiniLM-L6-v2'")  # theirs
        conn.commit()
    code, lines = doctor(capsys, tmp_path, embedder="local:all-MiniLM-L6-v2")
    [line] = named(lines, "embedder")
    assert line.startswith("warn  embedder     'live' local:all-MiniLM-L6-v2 needs the "
                           "optional local-embeddings extra, which is not installed: every "
                           "ground-truth query's vector is cached")
    assert local_embeddings_install_command() in line


def test_openai_needs_its_key_and_the_corpus_dimensions(rag_store, tmp_path, capsys,
                                                        monkeypatch):
    with rag_store.connection() as conn:  # vectors cached by another model: none of its own
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag")
    code, lines = doctor(capsys, tmp_path, embedder="openai:my-embedder")
    [line] = named(lines, "embedder")
    assert code == 1 and line.startswith(
        "FAIL  embedder     'live' openai:my-embedder needs OPENAI_API_KEY, which is not set: "
        "attach must embed 15 ground-truth queries")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-datasets-0000")
    code, lines = doctor(capsys, tmp_path, embedder="openai:my-embedder")
    assert named(lines, "embedder") == [
        "ok    embedder     'live' openai:my-embedder: OPENAI_API_KEY is set"]
    assert not any("sk-doctor-datasets" in line for line in lines)
    # attached with the corpus's 8 dimensions, then configured with a model that makes 1536
    with rag_store.connection() as conn:
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)  # test-random
    code, lines = doctor(capsys, tmp_path, embedder="openai:text-embedding-3-small")
    assert code == 1 and named(lines, "embedder") == [
        "FAIL  embedder     'live' openai:text-embedding-3-small makes 1536-dimensional vectors "
        "but rag.l2_insights.embedding has 8: set datasets.live.embedder to the model that "
        "embedded the corpus"]


def test_tsvector_null_is_measured_per_query_and_the_fix_removes_it(rag_store, tmp_path,
                                                                     capsys, monkeypatch):
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag")
        before = rag_checksum(conn)
        relations = conn.execute("SELECT count(*) FROM pg_class").fetchone()[0]
    # 60 documents cost next to nothing: any figure is worth a warning here
    monkeypatch.setattr(doctor_datasets, "KEYWORD_COST_WARN_MS", 0.0)
    code, lines = doctor(capsys, tmp_path, embedder="local:test-random")
    cost, fix, derive = named(lines, "keyword")
    assert derive.endswith("'live' the keyword index: `eval-harness attach --dataset live` "
                           "derives it in the harness schema (the fetch then ranks from it, "
                           "the same figures)")
    assert cost.startswith("warn  keyword      'live' tsvector: null, so keyword search parses "
                           "every document a query matches again: ")
    assert " ms per query (median of 5 ground-truth queries, each matching ~" in cost
    assert "; over stored tsvectors the same ranking takes " in cost
    assert ("report, judge and calibrate do not pay it: they rank all 15 ground-truth queries "
            "from the harness's keyword index, which `attach` derives") in cost
    statements = fix.split("a maintenance window): ", 1)[1].split("; then map ")[0]
    assert fix.endswith("then map datasets.live.live.corpus.tsvector: tsv and run "
                        "`eval-harness attach --dataset live`")
    assert statements == (
        'ALTER TABLE "rag"."l2_insights" ADD COLUMN "tsv" tsvector GENERATED ALWAYS AS '
        "(to_tsvector('english'::regconfig, \"content\")) STORED; CREATE INDEX CONCURRENTLY "
        '"l2_insights_tsv_gin_idx" ON "rag"."l2_insights" USING gin ("tsv")')
    cache, connections = named(lines, "fetch")
    assert cache.startswith("ok    fetch        'live' candidate cache: nothing yet (run "
                            "`eval-harness attach --dataset live`)")
    assert "fetches its candidates on one connection" in connections
    with rag_store.connection() as conn:  # the doctor wrote nothing, left nothing behind
        assert rag_checksum(conn) == before
        assert conn.execute("SELECT count(*) FROM pg_class").fetchone()[0] == relations

    # the user runs them as the table's owner and maps the column: the line is gone
    with rag_store.connection() as conn:
        conn.autocommit = True
        for statement in statements.split("; "):
            conn.execute(statement)
    code, lines = doctor(capsys, tmp_path, embedder="local:test-random", tsvector="tsv")
    assert named(lines, "keyword") == []
    assert code == 0, lines


def test_the_doctor_says_how_much_of_a_rerun_the_candidate_cache_answers(
        rag_store, tmp_path, capsys, monkeypatch):
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag")
    monkeypatch.setattr(doctor_datasets, "KEYWORD_COST_WARN_MS", 0.0)
    assert main(["--config", str(write_config(tmp_path)), "attach", "--dataset", "live"]) == 0
    capsys.readouterr()
    _, lines = doctor(capsys, tmp_path, embedder="local:test-random")
    [cost] = named(lines, "keyword")  # attached: the keyword index is the path measured
    assert "report, judge and calibrate rank it from the harness's keyword index" in cost
    assert "candidate cache: 0 of 15 ground-truth queries would be read" in named(
        lines, "fetch")[0]
    with rag_store.connection() as conn:
        candidate_scores(conn, "live", candidate_depth=50)  # what calibrate and report fetch
        conn.commit()
    _, lines = doctor(capsys, tmp_path, embedder="local:test-random")
    assert "candidate cache: 15 of 15 ground-truth queries would be read" in named(
        lines, "fetch")[0]


def write_config(tmp_path, *, embedder: str = "local:test-random", tsvector: str = "null"):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(embedder=embedder, tsvector=tsvector), encoding="utf-8")
    return config


def test_a_cheap_keyword_side_is_said_without_a_warning(rag_store, tmp_path, capsys):
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag")
    code, lines = doctor(capsys, tmp_path, embedder="local:test-random")
    [cost] = named(lines, "keyword")
    assert cost.startswith("ok    keyword      'live' tsvector: null") and code == 0


def test_a_dataset_attached_with_an_older_mapping_says_to_attach_again(rag_store, tmp_path,
                                                                     capsys):
    """The read-only commands read the mapping recorded at attach: a changed config.yaml
    (here the stored tsvector column, mapped at last) takes effect only at the next attach."""
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag",
                        tsvector="tsv")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)  # tsvector: null
    code, lines = doctor(capsys, tmp_path, embedder="local:test-random", tsvector="tsv")
    assert ("warn  indexes      'live' is attached with another mapping than config.yaml's "
            "(corpus.tsvector: null attached, tsv configured); every command reads the attached "
            "one until `eval-harness attach --dataset live` records the new one") in lines
    assert main(["--config", str(tmp_path / "config.yaml"), "attach", "--dataset", "live"]) == 0
    code, lines = doctor(capsys, tmp_path, embedder="local:test-random", tsvector="tsv")
    assert not [line for line in lines if "another mapping" in line]


def test_index_with_nothing_to_create_points_at_the_tsvector_cost(rag_store, tmp_path, capsys):
    """Every index was in place and `index --dry-run` had nothing to create, while keyword
    search parsed every match again: it now says where that cost is measured and fixed."""
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag")
    doctor(capsys, tmp_path, embedder="local:test-random")  # writes the config
    code = main(["--config", str(tmp_path / "config.yaml"), "index", "--dataset", "live",
                 "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and "nothing to create" in out
    assert "note: with tsvector: null every keyword match is parsed again for each query" in out


def test_after_attach_the_keyword_index_carries_the_bulk_commands(rag_store, tmp_path, capsys,
                                                                  monkeypatch):
    """Issue #25: with the keyword index attach keeps, no command pays the parsing (issue #32:
    `search` neither)."""
    with rag_store.connection() as conn:
        build_rag_store(conn, corpus_folder(tmp_path / "beir", dim=8), schema="rag")
        attach_live_dataset(conn, live_config(), embedder_factory=no_embedder)
    monkeypatch.setattr(doctor_datasets, "KEYWORD_COST_WARN_MS", 0.0)
    code, lines = doctor(capsys, tmp_path, embedder="local:test-random")
    [cost] = named(lines, "keyword")
    assert cost.startswith("ok    keyword      'live' tsvector: null, so keyword search parses ")
    assert "report, judge and calibrate rank it from the harness's keyword index" in cost
    assert cost.endswith("ms per query, the same ranking; `search` too, so no command pays "
                         "the figure above")

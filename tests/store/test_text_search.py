"""A text-search configuration that changes under a live dataset.

``ALTER TEXT SEARCH CONFIGURATION public.eng_custom ALTER MAPPING ... WITH simple`` keeps the
name and changes every English word's lexeme. What the harness derived from parsed text is
keyed on the configuration's definition (:mod:`eval_harness.store.text_search`): the next
attach derives the keyword index again and says why in its line, a read-only command before
it ranks with the server's own ``to_tsvector`` (no stale keyword index), the candidate cache
misses, and the figures equal a fresh ingested copy's on the altered configuration. A stored
tsvector column is the user's: nothing is derived again, only the cache misses.

The first test runs the issue's own sequence through the CLI (attach, calibrate, ALTER,
calibrate and doctor before attaching, attach, calibrate, ingest a copy, calibrate it): about
ten seconds, one command after another.
"""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest

from beir_factory import write_beir
from cli_runs import run_cli
from eval_harness.datasets import keyword_index
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live import attach_live_dataset
from eval_harness.retrieval import sql as search_sql
from eval_harness.retrieval.hybrid import candidate_scores, dataset_info
from eval_harness.store.text_search import configuration_definition, definition_change
from live_store import live_config, no_embedder

CONFIGURATION = "public.eng_custom"
# English stemming joins these forms; `simple` keeps each one apart
FORMS = [("running", "runs", "runner"), ("studies", "studying", "study"),
         ("hearts", "heart", "hearted"), ("doses", "dosing", "dose"),
         ("cells", "cell", "celled"), ("tumors", "tumor", "tumorous"),
         ("vaccines", "vaccinated", "vaccine"), ("sleeping", "sleeps", "slept")]
TO_SIMPLE = ("ALTER TEXT SEARCH CONFIGURATION public.eng_custom ALTER MAPPING FOR asciiword, "
             "asciihword, hword_asciipart, word, hword, hword_part WITH simple")


def _folder(root):
    rng = np.random.default_rng(23)
    words = [form for group in FORMS for form in group]
    docs = {f"doc{i}": " ".join(rng.choice(words, size=8)) for i in range(40)}
    pairs = list(combinations(range(len(FORMS)), 2))  # distinct texts: one vector each
    queries = {f"q{i}": f"{FORMS[a][0]} {FORMS[b][0]}"
               for i, (a, b) in enumerate(pairs[k] for k in rng.choice(len(pairs), size=15,
                                                                      replace=False))}
    qrels = [(f"q{i}", f"doc{j}", 1) for i in range(15)
             for j in rng.choice(40, size=3, replace=False)]
    return write_beir(root / "data", docs, queries, qrels, dim=8, seed=4)


def _config(root, tsvector: str = "null") -> str:
    config = root / "config.yaml"
    config.write_text(
        "default_dataset: live\n"
        "datasets:\n"
        f"  live:\n    language: {CONFIGURATION}\n    embedder: local:test-random\n"
        "    live:\n"
        "      corpus: {relation: rag.l2_insights, id: id, content: content, "
        f"embedding: embedding, tsvector: {tsvector}}}\n"
        "      ground_truth: {relation: rag.ground_truth, id: id, query: query, "
        "expected_docs: expected_docs}\n"
        f"  copy: {{path: data, language: {CONFIGURATION}}}\n"
        "history: {duckdb_path: history.duckdb}\n"
        "judges: {judge1: 'local:lexical', judge2: 'local:embedding', budget_usd: null}\n"
        "dagster: {home: dagster-home}\n", encoding="utf-8")
    return str(config)


def make_project(path, fresh):
    """config.yaml with ``live`` on the RAG store's corpus and ``copy`` for the same folder
    (``data``), both on the custom configuration (a copy of english)."""
    folder = _folder(path.parent)
    with fresh.connection() as conn:
        conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {CONFIGURATION} (COPY = english)")
        build_rag_store(conn, folder, schema="rag", language=CONFIGURATION)
        conn.commit()
    _config(path.parent)


pytestmark = pytest.mark.project(config=make_project, database="fresh")


def _p_at_5(capsys, config, dataset: str) -> list[tuple[float, float]]:
    code, out, err = run_cli(capsys, "--config", config, "calibrate", "--dataset", dataset,
                             "--no-write", "--json")
    assert code in (0, 1), err
    return [(point["semantic_weight"], point["p_at_5"]) for point in json.loads(out)["grid"]]


def _keyword_scores_are_ts_rank(conn, dataset: str) -> int:
    """Every candidate's keyword score is the server's ts_rank on the configuration as it is
    now, and every document that matches is a candidate (40 documents, depth 50); returns
    how many (query, document) matches there are."""
    corpus = dataset_info(conn, dataset, with_counts=False).corpus
    matches = 0
    for found in candidate_scores(conn, dataset):
        # every row's own rank (a GIN index on the expression, built before the change,
        # would answer `@@` from the old lexemes: Postgres asks for a REINDEX then)
        expected = {doc: rank for doc, rank in conn.execute(
            "SELECT d.id, ts_rank(to_tsvector(%(c)s::regconfig, d.content), "
            "eh_or_tsquery(%(c)s::regconfig, g.query), 1)::float8 "
            "FROM rag.l2_insights d, eval_harness.ground_truth g WHERE g.id = %(q)s",
            {"c": corpus.language, "q": found.query_id}) if rank > 0}
        got = {int(d): float(k) for d, k in zip(found.doc_ids, found.keyword) if k > 0}
        assert got == expected, found.query_id
        matches += len(expected)
    return matches


def test_an_altered_configuration_is_derived_again_and_equals_a_fresh_copy(project, capsys):
    config = str(project)
    code, out, err = run_cli(capsys, "--config", config, "attach", "--dataset", "live")
    assert code == 0 and "(first build)" in out, err
    before = _p_at_5(capsys, config, "live")
    with project.store.connection() as conn:
        stemmed = _keyword_scores_are_ts_rank(conn, "live")
        conn.execute(TO_SIMPLE)
        conn.commit()
        # a read-only command before the next attach: not ranked from the stale index
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        assert keyword_index.current_source(conn, corpus) is None
        assert keyword_index.stale_configuration(conn, corpus).startswith(
            "the text-search configuration public.eng_custom changed: the dictionaries of")
        assert _keyword_scores_are_ts_rank(conn, "live") < stemmed  # fewer forms match now
    unattached = _p_at_5(capsys, config, "live")
    _, out, _ = run_cli(capsys, "--config", config, "doctor", "--offline")
    assert ("'live' the text-search configuration public.eng_custom changed: the dictionaries "
            "of asciihword, asciiword, hword, hword_asciipart and 2 more since the keyword "
            "index was derived: run `eval-harness attach --dataset live` to derive it again"
            ) in out, out
    code, out, err = run_cli(capsys, "--config", config, "attach", "--dataset", "live")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("keyword index:"))
    assert line.startswith("keyword index: 40 documents derived in ") and line.endswith(
        "(the text-search configuration public.eng_custom changed: the dictionaries of "
        "asciihword, asciiword, hword, hword_asciipart and 2 more)"), line
    after = _p_at_5(capsys, config, "live")
    code, _, err = run_cli(capsys, "--config", config, "ingest", str(project.folder / "data"),
                           "--name", "copy", "--language", CONFIGURATION)
    assert code == 0, err
    copy = _p_at_5(capsys, config, "copy")
    assert after == unattached == copy
    assert after != before  # the change moved the figures: the comparison can fail
    with project.store.connection() as conn:
        corpus = dataset_info(conn, "live", with_counts=False).corpus
        assert keyword_index.current_source(conn, corpus) is not None  # ranked from it again
        _keyword_scores_are_ts_rank(conn, "live")
        code, out, _ = run_cli(capsys, "--config", config, "attach", "--dataset", "live")
        assert "keyword index: unchanged" in out


def _fresh_rows(conn, dataset: str) -> list[tuple]:
    corpus = dataset_info(conn, dataset, with_counts=False).corpus
    return [(int(q), list(ids or []), list(sem or []), list(kw or []))
            for q, ids, sem, kw in search_sql.candidate_rows(conn, corpus, 50, query_ids=None)]


def _cached_rows(conn, dataset: str) -> list[tuple]:
    return [(c.query_id, c.doc_ids.tolist(), c.semantic.tolist(), c.keyword.tolist())
            for c in candidate_scores(conn, dataset)]


@pytest.mark.parametrize("tsvector", [None, "tsv"], ids=["expression", "stored-column"])
def test_the_candidate_cache_misses_after_the_configuration_changes(fresh, tmp_path, tsvector):
    with fresh.connection() as conn:
        conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {CONFIGURATION} (COPY = english)")
        build_rag_store(conn, _folder(tmp_path), schema="rag", language=CONFIGURATION,
                        tsvector=tsvector)
        conn.commit()
        cfg = replace(live_config(tsvector=tsvector), language=CONFIGURATION)
        report = attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        assert (report.keyword is None) == (tsvector is not None)
        first = _cached_rows(conn, "live")
        conn.commit()
        assert conn.execute("SELECT count(*) FROM eval_harness.candidate_cache").fetchone()[0]
        conn.execute(TO_SIMPLE)
        conn.commit()
        again = _cached_rows(conn, "live")
        assert again == _fresh_rows(conn, "live") != first
        if tsvector is not None:  # the user's tsvector: nothing derived, nothing said
            report = attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
            assert report.keyword is None and "keyword index" not in str(report)


def test_the_definition_names_parser_mapping_and_dictionary_options(fresh):
    with fresh.connection() as conn:
        conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {CONFIGURATION} (COPY = english)")
        conn.execute("CREATE TEXT SEARCH DICTIONARY public.eng_stop (TEMPLATE = simple, "
                     "STOPWORDS = english)")
        conn.execute(f"ALTER TEXT SEARCH CONFIGURATION {CONFIGURATION} ALTER MAPPING FOR "
                     "numword WITH public.eng_stop")
        first = configuration_definition(conn, CONFIGURATION)
        assert first["configuration"] == CONFIGURATION
        assert first["parser"]["name"] == "pg_catalog.default"
        assert first["mapping"]["asciiword"] == ["pg_catalog.english_stem"]
        assert first["mapping"]["numword"] == ["public.eng_stop"]
        assert first["dictionaries"]["public.eng_stop"]["options"] == "stopwords = 'english'"
        assert configuration_definition(conn, "english")["configuration"] == "pg_catalog.english"
        conn.execute("ALTER TEXT SEARCH DICTIONARY public.eng_stop (ACCEPT = false)")
        second = configuration_definition(conn, CONFIGURATION)
        assert second != first and second["mapping"] == first["mapping"]
        assert definition_change(first, second) == (
            "the text-search configuration public.eng_custom changed: the template or "
            "options of public.eng_stop")
        conn.rollback()


"""A live dataset whose store has no ground-truth relation (``live: {corpus: ...}`` alone),
through the CLI as a user runs it, on a store LangChain's PGVector made (the real library,
tests/support/rag_library_stores.py): ``doctor`` warns and does not fail, ``attach`` attaches
the corpus and mirrors no query, a rerun changes nothing, the generated queries stay, and the
queries an earlier ``queries:`` mapping mirrored are removed by the next attach."""

from __future__ import annotations

import pytest

from eval_harness.datasets import ground_truth
from eval_harness.datasets.prepare import check_attached_dataset
from eval_harness.settings import load_settings
from eval_harness_pipelines import cli
from live_store import PROJECT_ENVIRONMENT
from rag_library_stores import GROUND_TRUTH, LANGCHAIN_COLLECTION, rag_checksum

CORPUS_ONLY = f"{{preset: langchain, collection: {LANGCHAIN_COLLECTION}}}"
QUERIES = f"      queries: {{relation: public.{GROUND_TRUTH}, id: id, query: query}}\n"


def write_config(folder, name: str, *, queries: bool = False) -> None:
    (folder / "config.yaml").write_text(
        f"default_dataset: {name}\n"
        "datasets:\n"
        f"  {name}:\n"
        "    embedder: local:all-MiniLM-L6-v2\n"
        "    live:\n"
        f"      corpus: {CORPUS_ONLY}\n" + (QUERIES if queries else "")
        + "judges: {judge1: local:lexical, judge2: local:embedding}\n", encoding="utf-8")


@pytest.fixture
def project(langchain_store, tmp_path, monkeypatch):
    """A project folder of its own whose DATABASE_URL is the LangChain store."""
    folder = tmp_path / "rag-eval"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setenv("DATABASE_URL", langchain_store.location.url)
    for variable in PROJECT_ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    return folder


def run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out + err


def stored_queries(store, dataset: str) -> dict[str, int]:
    """{origin: queries} in the harness's ground_truth, as a user would count its rows."""
    with store.connection() as conn:
        return dict(conn.execute("SELECT origin, count(*) FROM ground_truth WHERE dataset = %s "
                                 "GROUP BY origin", (dataset,)).fetchall())


def attach_line(dataset: str) -> str:
    return (f"no ground-truth relation mapped: make queries with `eval-harness ground-truth "
            f"generate --dataset {dataset}` or `ground-truth from-answers --dataset {dataset}`")


def test_doctor_warns_and_attach_takes_the_corpus_alone(langchain_store, project, capsys):
    write_config(project, "docs")
    with langchain_store.connection() as conn:
        before = rag_checksum(conn, langchain_store.relations)
    for attached in (False, True):
        code, out = run(capsys, "doctor", "--offline")
        assert code == 0, out
        assert not [line for line in out.splitlines() if line.startswith("FAIL")], out
        assert (f"warn  queries      'docs' {attach_line('docs')}; until then there is "
                "nothing to evaluate") in out.splitlines(), out
        if not attached:
            code, out = run(capsys, "attach", "--dataset", "docs")
            assert code == 0, out
            documents = len(langchain_store.data.doc_ids)
            assert (f"dataset 'docs' (live, public.langchain_pg_embedding (collection "
                    f"'{LANGCHAIN_COLLECTION}')): {attach_line('docs')}; 0 generated or "
                    "users' queries kept, 0 mirrored ones removed; query embeddings: 0 "
                    "computed, 0 cached") in out, out
            assert f"keyword index: {documents} documents derived" in out, out
            assert stored_queries(langchain_store, "docs") == {}
    # a rerun changes nothing: no query, the keyword index unchanged, the RAG rows untouched
    code, again = run(capsys, "attach", "--dataset", "docs")
    assert code == 0, again
    assert f"{attach_line('docs')}; 0 generated or users' queries kept, 0 mirrored" in again
    assert "keyword index: unchanged" in again, again
    assert stored_queries(langchain_store, "docs") == {}
    with langchain_store.connection() as conn:
        assert rag_checksum(conn, langchain_store.relations) == before


def test_a_mapping_changed_to_its_corpus_alone_loses_the_mirrored_queries_only(
        langchain_store, project, capsys):
    data = langchain_store.data
    write_config(project, "moved", queries=True)
    code, out = run(capsys, "attach", "--dataset", "moved")
    assert code == 0, out
    assert stored_queries(langchain_store, "moved") == {"dataset": len(data.query_ids)}
    # a generated query (its text's vector cached, as the support module caches them all)
    with langchain_store.connection() as conn:
        assert ground_truth.insert_generated_queries(
            conn, "moved", [("gen-1", data.query_texts[0], 1, "question", "test:v1")]) == 1
        conn.commit()

    write_config(project, "moved")
    # what judge --dry-run and calibrate --no-write say before the next attach (they write
    # nothing): the mirrored queries count as removed
    settings = load_settings(str(project / "config.yaml"), environ={})
    with langchain_store.connection() as conn:
        said = check_attached_dataset(conn, settings, "moved")
    assert f"the live one changed since: 0 new, 0 changed, {len(data.query_ids)} removed " \
           "queries" in said, said
    assert said.endswith(f"; {attach_line('moved')}"), said
    code, out = run(capsys, "attach", "--dataset", "moved")
    assert code == 0, out
    assert (f"{attach_line('moved')}; 1 generated or users' queries kept, "
            f"{len(data.query_ids)} mirrored ones removed") in out, out
    assert stored_queries(langchain_store, "moved") == {"generated": 1}
    code, out = run(capsys, "doctor", "--offline")
    assert code == 0, out
    assert ("ok    queries      'moved' has no ground-truth relation mapped and 1 generated or "
            "users' queries") in out, out
    code, out = run(capsys, "attach", "--dataset", "moved")
    assert "1 generated or users' queries kept, 0 mirrored ones removed" in out, out
    assert stored_queries(langchain_store, "moved") == {"generated": 1}

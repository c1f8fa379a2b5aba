"""Live datasets through every entry point: attach, the writing commands that attach first,
the read-only ones that never do, ingest's refusal, the Dagster corpus asset, the demo store.

The RAG store is a small BEIR folder laid out in ``rag`` like the seeds
(:func:`eval_harness.datasets.demo_store.build_rag_store`), on a fresh database per test. Its query
vectors are cached by the layout, and its embedder (``local:test-random``) cannot be built
here: any command that tried to embed a query would fail, so passing tests prove nothing was
embedded twice.
"""

from __future__ import annotations

import json

import dagster as dg
import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.cli.doctor import check_datasets
from eval_harness.datasets.demo_store import build_rag_store
from eval_harness.datasets.live import LiveMappingError
from eval_harness.datasets.prepare import prepare_dataset
from eval_harness.settings import load_settings
from eval_harness_pipelines import cli
from eval_harness_pipelines.assets.datasets import corpus_and_ground_truth
from eval_harness_pipelines.assets.retrieval import retrieval_report
from eval_harness_pipelines.resources import default_resources

WORDS = ("aspirin heart attack dose risk blood pressure stroke vitamin diet sleep exercise "
         "insulin glucose liver kidney fever vaccine virus cell gene protein cancer").split()
LIVE = """
    language: english
    embedder: local:test-random
    live:
      corpus: {{relation: rag.l2_insights, id: id, content: {content}, embedding: embedding,
               tsvector: {tsvector}}}
      ground_truth: {{relation: rag.ground_truth, id: id, query: query,
                     expected_docs: expected_docs}}
"""


def write_config(root, *, content: str = "content", weights: str = "",
                 tsvector: str = "null") -> str:
    config = root / "config.yaml"
    config.write_text(
        "default_dataset: live\n"
        "store: {demo_rag_schema: rag, demo_rag_source: data}\n"
        "datasets:\n  live:" + LIVE.format(content=content, tsvector=tsvector) + weights
        + "  copy: {path: data}\n"
        "history: {duckdb_path: history.duckdb}\n"
        "judges: {judge1: 'local:lexical', judge2: 'local:embedding', budget_usd: null}\n"
        "dagster: {home: dagster-home}\n", encoding="utf-8")
    return str(config)


def make_project(path):
    """config.yaml with the live dataset ``live`` (and the same folder, ``data``, as the
    ingested ``copy``)."""
    rng = np.random.default_rng(11)
    docs = {f"doc{i}": " ".join(rng.choice(WORDS, size=10)) for i in range(40)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=3)) for i in range(12)}
    qrels = [(f"q{i}", f"doc{j}", 1) for i in range(12)
             for j in rng.choice(40, size=2, replace=False)]
    write_beir(path.parent / "data", docs, queries, qrels, dim=8, seed=5)
    write_config(path.parent)


# on a fresh database that holds no RAG tables yet
pytestmark = pytest.mark.project(config=make_project, database="fresh")


@pytest.fixture
def rag(project):
    """The RAG system's own tables in ``rag`` (the user made them; the harness only reads)."""
    with project.store.connection() as conn:
        build_rag_store(conn, project.folder / "data", schema="rag")
    return project


def run_cli(capsys, config, *argv):
    code = cli.main(["--config", config, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def rag_checksum(conn) -> str:
    return ":".join(conn.execute(
        f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) FROM rag.{table} t"
    ).fetchone()[0] for table in ("l2_insights", "ground_truth", "api_cost_log"))


def test_attach_checks_mirrors_and_a_rerun_changes_nothing(rag, capsys):
    with rag.store.connection() as conn:
        before = rag_checksum(conn)
    code, out, err = run_cli(capsys, str(rag), "attach", "--dataset", "live")
    assert code == 0, err
    assert ("dataset 'live' (live, rag.l2_insights): 12 queries (12 new, 0 changed, 0 removed); "
            "query embeddings: 0 computed, 12 cached") in out
    assert "demo RAG store" not in out  # a DATABASE_URL store never gets one
    code, out, _ = run_cli(capsys, str(rag), "attach", "--dataset", "live")
    assert code == 0 and "12 queries (0 new, 0 changed, 0 removed)" in out
    with rag.store.connection() as conn:
        assert rag_checksum(conn) == before
        kind = conn.execute("SELECT kind FROM datasets WHERE name = 'live'").fetchone()[0]
    assert kind == "live"


def test_read_only_commands_never_attach_and_say_what_to_run(rag, capsys):
    for argv in (("report", "--dataset", "live"),
                 ("search", "--dataset", "live", "aspirin", "--semantic-weight", "0"),
                 ("agreement", "--dataset", "live"),
                 ("review", "export", str(rag.folder / "review.csv"), "--dataset", "live")):
        code, out, err = run_cli(capsys, str(rag), *argv)
        assert code == 2 and err.count("\n") == 1, (argv, err)
        assert ("Dataset 'live' is not in the store: it is a live dataset of config.yaml that "
                "is not attached yet; run `eval-harness attach --dataset live` or "
                "`eval-harness run`.") in err
    code, _, err = run_cli(capsys, str(rag), "report", "--dataset", "copy")
    assert code == 2 and err.count("\n") == 1
    assert f"run `eval-harness ingest {rag.folder / 'data'} --name copy` or `eval-harness run " \
           "--dataset copy`." in err
    with rag.store.connection() as conn:
        assert conn.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0


def test_ingest_refuses_a_name_configured_as_live(rag, capsys):
    code, _, err = run_cli(capsys, str(rag), "ingest", str(rag.folder / "data"), "--name", "live")
    assert code == 2 and err.count("\n") == 1
    assert "dataset 'live' is configured as live in config.yaml (read in place from " \
           "rag.l2_insights)" in err and "eval-harness attach --dataset live" in err
    with rag.store.connection() as conn:
        assert conn.execute("SELECT count(*) FROM l2_insights").fetchone()[0] == 0


def test_attach_refuses_an_ingested_dataset_and_a_mapping_that_does_not_fit(rag, capsys):
    code, _, err = run_cli(capsys, str(rag), "attach", "--dataset", "copy")
    assert code == 2 and err.count("\n") == 1 and "dataset 'copy' is not live" in err
    wrong = write_config(rag.folder, content="body")
    code, _, err = run_cli(capsys, wrong, "attach", "--dataset", "live")
    assert code == 2 and err.count("\n") == 1
    assert "'datasets.live.live.corpus.content': rag.l2_insights has no column 'body'" in err
    with rag.store.connection() as conn:
        assert conn.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0


def test_a_database_url_store_never_gets_the_demo_schema(project, capsys):
    code, _, err = run_cli(capsys, str(project), "attach", "--dataset", "live")
    assert code == 2 and err.count("\n") == 1
    assert ("'datasets.live.live.corpus.relation': rag.l2_insights does not exist in the store "
            "at DATABASE_URL, and the demo schema 'rag' (store.demo_rag_schema) is laid out "
            "only in the embedded store, never in yours") in err
    with project.store.connection() as conn:
        assert conn.execute("SELECT to_regnamespace('rag')").fetchone()[0] is None


def test_prepare_dataset_lays_out_the_demo_store_once_on_the_embedded_store(project):
    settings = load_settings(str(project), environ={})  # no DATABASE_URL: embedded
    with project.store.connection() as conn:
        first = prepare_dataset(conn, settings, "live")
        assert first.kind == "live" and first.demo.created and first.demo.documents == 40
        assert (first.attach.inserted, first.attach.embedded,
                first.attach.embeddings_cached) == (12, 0, 12)
        again = prepare_dataset(conn, settings, "live")
        assert not again.demo.created and (again.attach.inserted, again.attach.updated) == (0, 0)
        copy = prepare_dataset(conn, settings, "copy")
        assert copy.kind == "ingested" and copy.attach is None and copy.demo is None
        assert prepare_dataset(conn, settings, "elsewhere").kind == "unconfigured"
        # an ingested dataset is never ingested by prepare_dataset: ingest stays explicit
        assert conn.execute("SELECT count(*) FROM datasets WHERE name = 'copy'"
                            ).fetchone()[0] == 0


def test_the_demo_store_gets_the_tsvector_column_its_mapping_names(project):
    settings = load_settings(write_config(project.folder, tsvector="tsv"), environ={})
    with project.store.connection() as conn:
        prepared = prepare_dataset(conn, settings, "live")
        kind = conn.execute("SELECT format_type(atttypid, NULL), attgenerated FROM pg_attribute "
                            "WHERE attrelid = 'rag.l2_insights'::regclass AND attname = 'tsv'"
                            ).fetchone()
        record = conn.execute("SELECT corpus_mapping ->> 'tsvector' FROM datasets "
                              "WHERE name = 'live'").fetchone()[0]
    assert prepared.demo.created and prepared.attach.queries == 12
    assert kind == ("tsvector", "s") and record == "tsv"  # stored, generated from content


def test_a_missing_demo_source_is_one_sentence(project):
    settings = load_settings(str(project), environ={})
    settings = settings.with_overrides(demo_rag_source=project.folder / "gone")
    with project.store.connection() as conn, pytest.raises(
            LiveMappingError, match=r"^'store.demo_rag_source': .*gone is not a folder"):
        prepare_dataset(conn, settings, "live")


def test_judge_and_calibrate_attach_first(rag, capsys):
    config = write_config(rag.folder, weights="    hybrid_search: {semantic: 0.6, keyword: 0.4}\n")
    code, out, err = run_cli(capsys, config, "calibrate", "--no-write", "--json")
    assert code == 2 and "not attached yet; run `eval-harness attach --dataset live`" in err
    code, out, err = run_cli(capsys, config, "calibrate", "--json")  # a writing run attaches
    assert code in (0, 1), err
    result = json.loads(out)
    assert result["dataset"] == "live" and result["queries"] == 12
    assert result["current_weight"] == 0.6  # the dataset's own weights are the current ones
    code, out, err = run_cli(capsys, str(rag), "judge", "--limit", "2", "--json")
    assert code == 0, err
    assert "dataset 'live' (live, rag.l2_insights): 12 queries (0 new" in err  # attached again
    assert json.loads(out)["queries_written"] == 2


def test_search_and_report_use_the_dataset_weights(rag, capsys):
    config = write_config(rag.folder, weights="    hybrid_search: {semantic: 0.2, keyword: 0.8}\n")
    assert run_cli(capsys, config, "attach", "--dataset", "live")[0] == 0
    code, out, err = run_cli(capsys, config, "report", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["semantic_weight"], report["keyword_weight"]) == (0.2, 0.8)
    with rag.store.connection() as conn:  # a ground-truth query: its vector is stored
        text = conn.execute("SELECT query FROM rag.ground_truth WHERE id = 1").fetchone()[0]
    code, out, err = run_cli(capsys, config, "search", "--dataset", "live", text, "--json")
    assert code == 0, err
    assert (json.loads(out)["semantic_weight"], json.loads(out)["keyword_weight"]) == (0.2, 0.8)


def test_corpus_asset_attaches_a_live_dataset_with_its_metadata(rag):
    weights = write_config(rag.folder, weights="    hybrid_search: {semantic: 0.4, keyword: 0.6}\n")
    resources = default_resources(config_path=weights, database_url=rag.store.url)
    result = dg.materialize([corpus_and_ground_truth, retrieval_report], resources=resources,
                            run_config={"ops": {"corpus": {"config": {"dataset": "live"}},
                                                "retrieval_report": {"config": {
                                                    "dataset": "live"}}}})
    assert result.success
    metadata = {event.asset_key.to_user_string(): {k: v.value for k, v in
                                                   event.materialization.metadata.items()}
                for event in result.get_asset_materialization_events()}
    assert metadata["corpus"]["kind"] == "live" and metadata["corpus"]["documents"] == 40
    assert metadata["corpus"]["relation"] == "rag.l2_insights"
    truth = metadata["ground_truth"]
    assert (truth["queries_new"], truth["queries_changed"], truth["queries_removed"],
            truth["query_embeddings_computed"], truth["query_embeddings_cached"]) == (
        12, 0, 0, 0, 12)
    assert metadata["retrieval_report"]["semantic_weight"] == 0.4


def test_doctor_datasets_line_for_a_live_default(rag):
    settings = load_settings(str(rag), environ={"DATABASE_URL": rag.store.url})
    with rag.store.connection() as conn:
        before = check_datasets(conn, settings)
        prepare_dataset(conn, settings, "live")
        after = check_datasets(conn, settings)
    assert before.status == "warn" and "'live' is live and not attached: run `eval-harness " \
                                       "attach --dataset live`" in before.detail
    assert after.status == "ok" and "default 'live' live, attached (rag.l2_insights)" \
        in after.detail and "live (live)" in after.detail


def test_run_on_a_database_url_store_without_the_rag_tables_stops_before_any_step(project,
                                                                                  capsys):
    code, out, err = run_cli(capsys, str(project), "run")
    assert code == 2 and err.count("\n") == 1
    assert "rag.l2_insights does not exist in the store at DATABASE_URL" in err
    assert "[1/3]" not in out  # no step ran
    with project.store.connection() as conn:
        assert conn.execute("SELECT to_regnamespace('rag')").fetchone()[0] is None

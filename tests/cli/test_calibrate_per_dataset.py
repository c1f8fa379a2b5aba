"""Calibrated weights are per dataset: two datasets calibrated one after the other (the
``calibrate`` command, and the Dagster assets) each get their own config.yaml block, report
and calibrated_weights row, and neither touches the other's. The config writer alone:
tests/calibration/test_config_writeback.py."""

from __future__ import annotations

import json
import uuid

import dagster as dg
import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.calibration.config_writeback import write_calibrated_weights
from eval_harness.calibration.report import report_file_names
from eval_harness.calibration.sql import LATEST_WEIGHTS_SQL
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.retrieval.report import retrieval_report
from eval_harness.settings import load_settings
from eval_harness_pipelines import cli
from eval_harness_pipelines.assets.calibration import calibrated_weights, calibration_grid
from eval_harness_pipelines.resources import (
    DUCKDB_IO_MANAGER_KEY,
    default_resources,
    duckdb_io_manager,
)

WORDS = ("alpha", "bravo", "charlie", "delta")
FILLER = "plain words about nothing in particular"


def write_dataset(folder, *, keyword_finds_relevant: bool, seed: int):
    """4 queries, each with 5 relevant documents and 5 decoys, and 10 unrelated documents.

    keyword_finds_relevant: the relevant documents hold the query's word and lie opposite
    the query's vector while the decoys lie next to it, so only a semantic weight below 0.5
    ranks the relevant ones in the top 5; otherwise the other way round, so only a weight
    above 0.5 does."""
    rng = np.random.default_rng(seed)
    query_vectors = rng.normal(size=(len(WORDS), 8))
    docs, vectors, qrels = {}, [], []
    for q, word in enumerate(WORDS):
        for kind in ("relevant", "decoy"):
            for i in range(5):
                doc_id = f"{word}-{kind}-{i}"
                near_query = (kind == "decoy") == keyword_finds_relevant
                holds_word = (kind == "relevant") == keyword_finds_relevant
                docs[doc_id] = f"{word} {FILLER}" if holds_word else f"{FILLER} {i}"
                side = 1.0 if near_query else -1.0
                vectors.append(side * query_vectors[q] + rng.normal(0, 0.05, 8))
                if kind == "relevant":
                    qrels.append((f"q-{word}", doc_id, 1))
    for i in range(10):
        docs[f"other-{i}"] = f"{FILLER} other {i}"
        vectors.append(rng.normal(size=8))
    return write_beir(folder, docs, {f"q-{w}": w for w in WORDS}, qrels,
                      doc_vectors=np.array(vectors), query_vectors=query_vectors)


@pytest.fixture(scope="module")
def datasets(store, tmp_path_factory):
    """Two fresh datasets: ``keyword`` (best at a low semantic weight) and ``semantic``."""
    root = tmp_path_factory.mktemp("per-dataset")
    tag = uuid.uuid4().hex[:8]
    found = {}
    with store.connection() as conn:
        for kind, keyword_finds in (("keyword", True), ("semantic", False)):
            folder = write_dataset(root / kind, keyword_finds_relevant=keyword_finds,
                                   seed=len(found))
            found[kind] = {"name": f"{kind}_{tag}", "folder": folder}
            ingest_beir(conn, folder, name=found[kind]["name"])
        conn.commit()
    return found


CONFIG = """\
# two datasets, calibrated one after the other
default_dataset: {a}

datasets:
  # the first dataset, block style
  {a}:
    path: {a_folder}   # a BEIR folder
    language: english

  # the second dataset, flow style
  {b}: {{path: {b_folder}, language: english, hybrid_search: {{semantic: 0.2, keyword: 0.8}}}}   # kept on one line

hybrid_search:          # the default of datasets never calibrated
  semantic: 0.7
  keyword: 0.3
  candidate_depth: 20

calibration:
  grid: {{start: 0.0, stop: 1.0, step: 0.1}}
  cv_folds: 2
  bootstrap_resamples: 200
  verdict: {{full_success: 0.75, partial_success: 0.70}}
  decision: {{alpha: 0.5}}   # 4 queries reach p = 1/16 at best: a permissive rule, so the writes run

history:
  duckdb_path: state/history.duckdb
"""


def write_both(path, datasets):
    """CONFIG for the two datasets, ``keyword`` as ``a`` and ``semantic`` as ``b``."""
    path.write_text(CONFIG.format(a=datasets["keyword"]["name"],
                                  a_folder=datasets["keyword"]["folder"],
                                  b=datasets["semantic"]["name"],
                                  b_folder=datasets["semantic"]["folder"]))


pytestmark = pytest.mark.project(config=write_both)


def calibrate(capsys, config, *args) -> dict:
    """``calibrate --json ARGS`` with ``--config config`` (None: no config file)."""
    code = cli.main([*(["--config", str(config)] if config else []), "calibrate", "--json",
                     *args])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return json.loads(out)


def entry_lines(text: str, name: str) -> list[str]:
    """The lines of ``datasets.<name>``: its key line and the indented lines below it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {name}:"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")),
               len(lines))
    return lines[start:end]


def test_two_datasets_each_get_their_own_weights_report_and_row(project, datasets, capsys,
                                                                conn):
    a, b = datasets["keyword"]["name"], datasets["semantic"]["name"]
    original = project.read_text()
    first = calibrate(capsys, project, "--dataset", a)
    after_a = project.read_text()
    reports = project.parent / "reports"
    report_a = (reports / report_file_names(a)[0]).read_bytes()
    plot_a = (reports / report_file_names(a)[1]).read_bytes()
    second = calibrate(capsys, project, "--dataset", b)
    final = project.read_text()

    best_a, best_b = first["best"]["semantic_weight"], second["best"]["semantic_weight"]
    # the weights in force (A: the global 0.7, B: its own 0.2) are wrong for both
    assert best_a <= 0.5 < 0.6 <= best_b  # the data decide, so the two really differ
    assert first["decision"]["decision"] == second["decision"]["decision"] == "changed"
    assert first["best"]["p_at_5"] == second["best"]["p_at_5"] == 1.0
    # config.yaml: A's block as written by A's calibration, byte for byte, after B's
    assert entry_lines(final, a) == entry_lines(after_a, a) == [
        f"  {a}:", f"    path: {datasets['keyword']['folder']}   # a BEIR folder",
        "    language: english", "    hybrid_search:", f"      semantic: {best_a}",
        f"      keyword: {round(1 - best_a, 10)}"]
    # B (flow style) took its weights inside its own braces; nothing else changed
    b_line = (f"  {b}: {{path: {datasets['semantic']['folder']}, language: english, "
              f"hybrid_search: {{semantic: {best_b}, keyword: {round(1 - best_b, 10)}}}}}"
              f"   # kept on one line")
    assert final == after_a.replace(entry_lines(after_a, b)[0], b_line)
    comments = [line.split("#", 1)[1] for line in original.splitlines() if "#" in line]
    assert [line.split("#", 1)[1] for line in final.splitlines() if "#" in line] == comments
    # reloaded settings: each dataset's own weights; the global default untouched
    settings = load_settings(project, environ={})
    assert (settings.hybrid.semantic, settings.hybrid.keyword) == (0.7, 0.3)
    for name, result in ((a, first), (b, second)):
        weights = settings.weights_for(name)
        assert (weights.semantic, weights.keyword) == (result["best"]["semantic_weight"],
                                                       result["best"]["keyword_weight"])
        # hybrid search of the dataset at its own weights scores its calibrated P@5
        report = retrieval_report(conn, name, semantic_weight=weights.semantic,
                                  keyword_weight=weights.keyword,
                                  candidate_depth=weights.candidate_depth)
        assert report.metrics["p_at_5"] == result["best"]["p_at_5"]
    other = settings.weights_for(a)
    assert retrieval_report(conn, b, semantic_weight=other.semantic,
                            keyword_weight=other.keyword,
                            candidate_depth=20).metrics["p_at_5"] < 1.0  # A's weights fail B
    # reports: one pair of files per dataset; B's calibration left A's alone
    assert (reports / report_file_names(a)[0]).read_bytes() == report_a
    assert (reports / report_file_names(a)[1]).read_bytes() == plot_a
    assert first["written"]["report"] != second["written"]["report"]
    for name, result in ((a, first), (b, second)):
        text = (reports / report_file_names(name)[0]).read_text()
        assert result["written"]["report"] == str(reports / f"calibration-results-{name}.md")
        assert f"calibration of `{name}`" in text and f"calibration-p5-{name}.png" in text
        assert any(f"'{name}'" in note for note in result["notes"])
    assert sorted(p.name for p in reports.iterdir()) == sorted(
        [*report_file_names(a), *report_file_names(b)])
    # calibrated_weights: one row each; the RAG system's query picks every dataset's newest
    latest = {row[0]: row for row in conn.execute(LATEST_WEIGHTS_SQL).fetchall()}
    for name, result in ((a, first), (b, second)):
        assert latest[name][:6] == (name, result["best"]["semantic_weight"],
                                    result["best"]["keyword_weight"], 1.0,
                                    result["verdict"]["verdict"], "human")
        assert latest[name][6] == result["written"]["weights"]["run_id"]
    third = calibrate(capsys, project, "--dataset", a)  # A again
    latest = {row[0]: row for row in conn.execute(LATEST_WEIGHTS_SQL).fetchall()}
    assert latest[a][6] == third["written"]["weights"]["run_id"] != first["written"][
        "weights"]["run_id"]
    assert latest[b][6] == second["written"]["weights"]["run_id"]
    assert conn.execute("SELECT count(*) FROM calibrated_weights WHERE dataset = %s",
                        (a,)).fetchone()[0] == 2
    # A again at its new weights: nothing beats them, so kept and config.yaml untouched
    assert third["decision"]["decision"] == "kept" and third["decision"]["gain"] == 0.0
    assert third["written"]["config"] is None and project.read_text() == final


def test_dataset_only_configured_by_defaults_gets_its_row_and_a_clear_note(
        tmp_path, store, datasets, capsys, monkeypatch, conn):
    """No config file at all: the weights go to the table, and the note says why not to
    config.yaml and what to do."""
    name = datasets["semantic"]["name"]
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    result = calibrate(capsys, None, "--dataset", name)
    assert result["written"]["config"] is None
    # the default rule (alpha 0.05) cannot change the weights on 4 queries (p >= 1/16): kept,
    # and the row records the weights in force (the default 0.7 / 0.3); the note for a change
    # without a config file: tests/calibration/test_publish.py
    assert result["decision"]["decision"] == "kept"
    assert result["decision"]["adjusted_p"] >= 1 / 16
    note = next(n for n in result["notes"] if n.startswith("config.yaml: not written"))
    assert "the weights in force were kept (kept 0.7 / 0.3: " in note
    row = conn.execute("SELECT dataset, semantic_weight, keyword_weight, decision FROM "
                       "calibrated_weights WHERE id = %s",
                       (result["written"]["weights"]["calibrated_weights_id"],)).fetchone()
    assert row == (name, 0.7, 0.3, "kept")
    assert (tmp_path / "reports" / f"calibration-results-{name}.md").is_file()
    assert not (tmp_path / "config.yaml").exists()


def test_config_without_the_dataset_is_left_alone_with_a_note(project, datasets, capsys):
    text = project.read_text()
    entry = entry_lines(text, datasets["semantic"]["name"])[0]
    # B is not configured any more, and the global weights (now in force for B) are wrong
    project.write_text(text.replace(entry + "\n", "").replace("semantic: 0.7", "semantic: 0.2")
                       .replace("keyword: 0.3", "keyword: 0.8"))
    before = project.read_bytes()
    result = calibrate(capsys, project, "--dataset", datasets["semantic"]["name"])
    assert project.read_bytes() == before and result["written"]["config"] is None
    assert any(f"dataset '{datasets['semantic']['name']}' has no entry under 'datasets'" in n
               for n in result["notes"])
    assert result["written"]["weights"]["calibrated_weights_id"] > 0


def test_a_config_that_cannot_take_the_weights_stops_before_any_write(
        project, datasets, capsys, conn):
    """An alias shared with another dataset: exit 2 with one sentence; no row, no report,
    config.yaml byte-identical."""
    a, b = datasets["keyword"]["name"], datasets["semantic"]["name"]
    text = project.read_text().replace(
        "    language: english\n",
        "    language: english\n    hybrid_search: &shared {semantic: 0.9, keyword: 0.1}\n")
    text = text.replace("language: english, hybrid_search: {semantic: 0.2, keyword: 0.8}}",
                        "language: english, hybrid_search: *shared}")
    assert "*shared}" in text
    project.write_text(text)
    rows = conn.execute("SELECT count(*) FROM calibrated_weights").fetchone()[0]
    code = cli.main(["--config", str(project), "calibrate", "--dataset", a])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert str(project) in err and f"datasets.{a}.hybrid_search" in err and "by hand" in err
    assert project.read_text() == text
    assert conn.execute("SELECT count(*) FROM calibrated_weights").fetchone()[0] == rows
    assert not (project.parent / "reports").exists()
    assert load_settings(project, environ={}).weights_for(b).semantic == 0.9


def test_dagster_assets_publish_for_the_configured_dataset_only(project, datasets, store,
                                                                tmp_path):
    a, b = datasets["keyword"]["name"], datasets["semantic"]["name"]
    write_calibrated_weights(project, a, 0.2)
    before_a = entry_lines(project.read_text(), a)
    resources = dict(default_resources(config_path=str(project), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    result = dg.materialize(
        [calibration_grid, calibrated_weights], resources=resources,
        run_config={"ops": {"calibration_grid": {"config": {"dataset": b}}}})
    assert result.success
    meta = {e.step_materialization_data.materialization.asset_key.to_user_string():
            e.step_materialization_data.materialization.metadata
            for e in result.get_asset_materialization_events()}
    assert meta["calibrated_weights"]["dataset"].value == b
    assert meta["calibrated_weights"]["config_key"].value == f"datasets.{b}.hybrid_search"
    assert meta["calibration_grid"]["report_path"].value == str(
        tmp_path / "reports" / f"calibration-results-{b}.md")
    settings = load_settings(project, environ={})
    assert settings.weights_for(b).semantic == meta["calibrated_weights"]["semantic_weight"].value
    assert settings.weights_for(a).semantic == 0.2
    assert entry_lines(project.read_text(), a) == before_a
    with store.connection() as conn:
        row = conn.execute("SELECT dataset, run_id FROM calibrated_weights WHERE id = %s",
                           (meta["calibrated_weights"]["calibrated_weights_id"].value,)
                           ).fetchone()
    assert row == (b, result.run_id)

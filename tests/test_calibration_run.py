"""Calibration end to end on a real store: sweep vs SQL hybrid search, metrics vs ranx and
trec_eval, the calibrate command, the config write, the DuckDB history, Dagster assets.
Several datasets side by side: tests/test_calibration_per_dataset.py."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import textwrap
import uuid
import warnings

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from ranx import Qrels, Run, evaluate

from eval_harness_pipelines.assets.calibration import calibrated_weights, calibration_grid, p_at_5_verdict
from eval_harness_pipelines.check_outcomes import BlockingCheckFailed
from eval_harness_pipelines.resources import (DUCKDB_IO_MANAGER_KEY, EvalSettings, default_resources,
                              duckdb_io_manager)
from beir_factory import write_beir
from eval_harness_pipelines import cli
from eval_harness.calibration.history import (append_grid_history, grid_frame,
                                              read_grid_history)
from eval_harness.calibration.run import calibrate_dataset, weight_label
from eval_harness.calibration.weights import ConfigWriteError, write_calibrated_weights
from eval_harness.metrics import ranking
from eval_harness.metrics.calibration import weight_grid
from eval_harness.retrieval.hybrid import hybrid_search
from eval_harness.retrieval.report import retrieval_report
from eval_harness.retrieval.sweep import normalised_scores, rank_top_k
from eval_harness.settings import ConfigError, load_settings
from eval_harness.store.ingest import ingest_beir
from eval_harness.calibration.trec_runs import qrels_file_name, run_file_name, write_trec_runs

VOCAB = ("protein cell gene cancer therapy risk heart brain blood study trial dose mouse "
         "human virus vaccine immune response tumor growth").split()
FINE_GRID = weight_grid(start=0.0, stop=1.0, step=0.01)
FAST = {"cv_folds": 3, "bootstrap_resamples": 500}


@pytest.fixture(scope="module")
def corpus(store, tmp_path_factory):
    """60 short random documents over 20 words (ts_rank ties everywhere), 5 exact duplicates
    (both scores tie: only the id decides), 12 queries with 1..6 relevant documents."""
    rng = np.random.default_rng(11)
    docs = {f"doc{i:02d}": " ".join(rng.choice(VOCAB, size=rng.integers(2, 8)))
            for i in range(60)}
    vectors = rng.normal(size=(65, 8)).astype(np.float32)
    for i in range(5):  # doc60..doc64 duplicate doc00..doc04, text and embedding
        docs[f"doc{60 + i}"] = docs[f"doc{i:02d}"]
        vectors[60 + i] = vectors[i]
    queries = {f"q{i}": " ".join(rng.choice(VOCAB, size=2, replace=False)) for i in range(12)}
    query_vectors = vectors[rng.choice(65, 12)] + rng.normal(0, 0.3, (12, 8)).astype(np.float32)
    qrels = [(q, f"doc{j:02d}", int(rng.integers(1, 3)))
             for q in queries for j in rng.choice(65, size=rng.integers(1, 7), replace=False)]
    name = f"c{uuid.uuid4().hex[:8]}"
    folder = write_beir(tmp_path_factory.mktemp("calibration") / "ds", docs, queries, qrels,
                        doc_vectors=vectors, query_vectors=query_vectors)
    with store.connection() as conn:
        ingest_beir(conn, folder, name=name)
        rows = conn.execute("SELECT id, external_id, query, query_embedding FROM ground_truth "
                            "WHERE dataset = %s", (name,)).fetchall()
    return {"name": name, "folder": folder,
            "queries": {qid: (text, emb) for qid, _, text, emb in rows}}


def sql_runs(conn, corpus, weight: float, keyword: float, depth: int) -> dict[int, list[int]]:
    """Top-10 ids of every ground-truth query by SQL hybrid search at one pair of weights."""
    return {qid: [hit.id for hit in hybrid_search(
                conn, corpus["name"], query_text=text, query_embedding=emb, k=10,
                semantic_weight=weight, keyword_weight=keyword, candidate_depth=depth)]
            for qid, (text, emb) in corpus["queries"].items()}


# ------------------------------------------------------------- sweep == SQL hybrid search
@pytest.mark.parametrize("depth", [2, 10])
def test_sweep_equals_sql_hybrid_search_at_every_weight(conn, corpus, depth):
    """The issue's key test: for all 101 weights 0.00..1.00, the sweep's top 10 of every
    query is SQL hybrid search's top 10 at that weight, and so are all four metrics."""
    result = calibrate_dataset(conn, corpus["name"], grid=FINE_GRID, candidate_depth=depth,
                               **FAST)
    qrels = result.candidates  # ground truth aligned with the candidate rows
    relevance = {qid: {int(d): int(g) for d, g in zip(*_relevant(conn, qid))}
                 for qid in qrels.query_ids}
    assert [p.semantic_weight for p in result.grid] == FINE_GRID.tolist()
    for i, point in enumerate(result.grid):
        assert point.keyword_weight == round(1 - point.semantic_weight, 10)
        ours = rank_top_k(result.candidates, point.semantic_weight,
                          keyword_weight=point.keyword_weight)
        runs = sql_runs(conn, corpus, point.semantic_weight, point.keyword_weight, depth)
        for row, qid in enumerate(result.candidates.query_ids):
            assert ours[row].tolist() == runs[qid], (point.semantic_weight, qid)
        expected = ranking.mean_metrics(runs, relevance)
        assert point.p_at_5 == pytest.approx(expected["p_at_5"], abs=1e-12)
        assert point.recall_at_5 == pytest.approx(expected["recall_at_5"], abs=1e-12)
        assert point.ndcg_at_10 == pytest.approx(expected["ndcg_at_10"], abs=1e-12)
        assert point.mrr_at_10 == pytest.approx(expected["mrr_at_10"], abs=1e-12)
        np.testing.assert_array_equal(
            result.sweep.per_query_p_at_5[i],
            [ranking.precision_at_k(runs[q], relevance[q], k=5) for q in qrels.query_ids])
    if depth == 2:  # the degenerate cases the metrics must handle were really exercised
        assert (result.candidates.mask.sum(axis=1) < 5).any()
    semantic, keyword = normalised_scores(result.candidates)
    fused, mask = 0.5 * semantic + 0.5 * keyword, result.candidates.mask
    assert any(np.unique(row[m]).size < m.sum() for row, m in zip(fused, mask))  # ties


def _relevant(conn, qid):
    return conn.execute("SELECT expected_docs, relevance_grades FROM ground_truth WHERE id = %s",
                        (qid,)).fetchone()


def test_result_holds_best_uplift_cv_rrf_and_verdict(conn, corpus):
    result = calibrate_dataset(conn, corpus["name"], grid=[0.5, 0.6, 0.8, 0.9],
                               current_weight=0.9, candidate_depth=10, **FAST)
    assert result.default_added_to_grid and result.default.semantic_weight == 0.7
    p5 = {p.semantic_weight: p.p_at_5 for p in result.grid}
    top = max(p5.values())
    assert result.best.p_at_5 == top
    # ties go to the weight closest to the configured one (0.9 here)
    assert result.best.semantic_weight == max((w for w, v in p5.items() if v >= top - 1e-12),
                                              key=lambda w: (-abs(w - 0.9), -w))
    assert result.uplift.absolute == pytest.approx(result.best.p_at_5 - result.default.p_at_5)
    assert result.uplift.ci_low <= result.uplift.absolute <= result.uplift.ci_high
    assert 0 < result.uplift.p_value <= 1
    assert 0 <= result.cross_validation.p_at_5 <= 1 and len(result.cross_validation.fold_sizes) == 3
    assert result.verdict_p_at_5 == result.best.p_at_5
    assert result.p_at_5_candidate_ceiling <= result.p_at_5_ceiling
    assert all(p.p_at_5 <= result.p_at_5_ceiling + 1e-12 for p in result.grid)
    text = json.dumps(result.to_dict(), allow_nan=False)  # JSON-safe, no NaN
    assert '"verdict"' in text


def test_unknown_dataset_and_empty_ground_truth(conn, tmp_path):
    with pytest.raises(LookupError, match="ingest"):
        calibrate_dataset(conn, "no-such-dataset")
    name = f"e{uuid.uuid4().hex[:8]}"
    folder = write_beir(tmp_path / "empty", {"d1": "heart", "d2": "brain"}, {"q1": "heart"},
                        [("q1", "d1", 0)])  # no relevant document: no ground-truth query
    ingest_beir(conn, folder, name=name)
    with pytest.raises(ValueError, match="no ground-truth queries"):
        calibrate_dataset(conn, name)


# --------------------------------------------------- TREC runs vs ranx and trec_eval
@pytest.mark.parametrize("depth", [2, 10])
def test_trec_runs_give_our_metrics_in_ranx_and_trec_eval(conn, corpus, tmp_path, depth):
    grid = weight_grid(start=0.0, stop=1.0, step=0.1)
    result = calibrate_dataset(conn, corpus["name"], grid=grid, candidate_depth=depth, **FAST)
    name = corpus["name"]
    paths = write_trec_runs(conn, result, tmp_path)
    assert [p.name for p in paths[1:]] == [run_file_name(name, w) for w in grid]
    assert run_file_name(name, 0.7) == f"run.{name}.semantic-0.70.trec"
    assert paths[0].name == qrels_file_name(name) == f"qrels.{name}.trec"
    warnings.filterwarnings("ignore")  # numba casting warnings inside ranx
    qrels = Qrels.from_file(str(paths[0]), kind="trec")
    with open(paths[0]) as handle:
        trec_qrels = pytrec_eval.parse_qrel(handle)
    for point in result.grid:
        path = tmp_path / run_file_name(name, point.semantic_weight)
        run = Run.from_file(str(path), kind="trec")
        scores = evaluate(qrels, run, ["precision@5", "recall@5", "ndcg@10", "mrr@10"])
        assert scores["precision@5"] == pytest.approx(point.p_at_5, abs=1e-12)
        assert scores["recall@5"] == pytest.approx(point.recall_at_5, abs=1e-12)
        assert scores["ndcg@10"] == pytest.approx(point.ndcg_at_10, abs=1e-12)
        assert scores["mrr@10"] == pytest.approx(point.mrr_at_10, abs=1e-12)
        with open(path) as handle:
            trec_run = pytrec_eval.parse_run(handle)
        top10 = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10])
                 for q, docs in trec_run.items()}
        per_query = pytrec_eval.RelevanceEvaluator(
            trec_qrels, {"P_5", "recall_5", "ndcg_cut_10", "recip_rank"}).evaluate(top10)
        assert np.mean([m["P_5"] for m in per_query.values()]) == pytest.approx(point.p_at_5)
        assert np.mean([m["recall_5"] for m in per_query.values()]) == pytest.approx(
            point.recall_at_5)
        assert np.mean([m["ndcg_cut_10"] for m in per_query.values()]) == pytest.approx(
            point.ndcg_at_10)
        assert np.mean([m["recip_rank"] for m in per_query.values()]) == pytest.approx(
            point.mrr_at_10)
    lines = (tmp_path / run_file_name(name, 0.5)).read_text().splitlines()
    qid, q0, _, rank, score, tag = lines[0].split()
    assert q0 == "Q0" and rank == "1" and tag == f"eval-harness-{name}-semantic-0.50"
    assert qid in {text.split()[0] for text in paths[0].read_text().splitlines()}


# ------------------------------------------------------------------ the calibrate command
CONFIG = """\
# eval-harness test config; comments must survive calibration
default_dataset: {name}   # the dataset under test

datasets:
  {name}:
    path: {folder}
    language: english

hybrid_search:
  semantic: 0.5         # weight of the normalised cosine similarity
  keyword: 0.5          # weight of the normalised ts_rank
  candidate_depth: 10   # top-N of each retriever

calibration:
  grid: {{start: 0.5, stop: 0.9, step: 0.1}}
  cv_folds: 3
  bootstrap_resamples: 500
  verdict:
    full_success: {full}
    partial_success: {partial}

history:
  duckdb_path: state/history.duckdb

agreement:
  kappa_floor: 0.70     # another team's key, untouched
"""


def write_config(path, corpus, *, full=0.75, partial=0.70):
    path.write_text(CONFIG.format(name=corpus["name"], folder=corpus["folder"], full=full,
                                  partial=partial))
    return path


@pytest.fixture
def project(tmp_path, store, corpus, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    return write_config(tmp_path / "config.yaml", corpus)


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_calibrate_json_writes_config_history_and_report(project, corpus, capsys, conn):
    before = project.read_text()
    code, out, err = run_cli(capsys, "--config", str(project), "calibrate", "--json")
    result = json.loads(out)
    assert code == (1 if result["verdict"]["verdict"] == "failure" else 0), err
    assert {"grid", "best", "default", "uplift", "cross_validated_p_at_5", "verdict",
            "p_at_5_ceiling", "rrf", "written"} <= set(result)
    assert [row["semantic_weight"] for row in result["grid"]] == [0.5, 0.6, 0.7, 0.8, 0.9]
    assert set(result["grid"][0]) == {"semantic_weight", "keyword_weight", "p_at_5",
                                      "recall_at_5", "ndcg_at_10", "mrr_at_10", "p_at_5_ceiling"}
    assert {"absolute", "relative", "ci_low", "ci_high", "p_value"} <= set(result["uplift"])
    assert result["default"]["semantic_weight"] == 0.7
    best = result["best"]
    # config.yaml: the dataset's own hybrid_search block inserted after its last line; the
    # global hybrid_search (the default of datasets never calibrated), comments and order kept
    after = project.read_text()
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines())
               if line[:1] in "+-"]
    assert changed == ["+     hybrid_search:", f"+       semantic: {best['semantic_weight']}",
                       f"+       keyword: {best['keyword_weight']}"]
    assert after.index("language: english\n    hybrid_search:") > after.index(corpus["name"])
    assert result["written"]["config"]["key"] == f"datasets.{corpus['name']}.hybrid_search"
    settings = load_settings(project, environ={})
    assert (settings.hybrid.semantic, settings.hybrid.keyword) == (0.5, 0.5)
    weights = settings.weights_for(corpus["name"])
    assert (weights.semantic, weights.keyword) == (
        best["semantic_weight"], round(1 - best["semantic_weight"], 10))
    # hybrid search at the dataset's written weights scores exactly the calibrated P@5
    report = retrieval_report(conn, corpus["name"], semantic_weight=weights.semantic,
                              keyword_weight=weights.keyword, candidate_depth=10)
    assert report.metrics["p_at_5"] == best["p_at_5"] == result["verdict"]["p_at_5"]
    # the calibrated_weights row the RAG system reads
    row_id = result["written"]["weights"]["calibrated_weights_id"]
    assert conn.execute("SELECT dataset, semantic_weight, keyword_weight, p_at_5, verdict, "
                        "label_source, run_id FROM calibrated_weights WHERE id = %s",
                        (row_id,)).fetchone() == (
        corpus["name"], best["semantic_weight"], best["keyword_weight"], best["p_at_5"],
        result["verdict"]["verdict"], "human", result["written"]["weights"]["run_id"])
    # history and report
    history = read_grid_history(project.parent / "state" / "history.duckdb", corpus["name"])
    assert len(history) == 5 and history["is_best"].sum() == 1
    assert history.loc[history["is_best"], "semantic_weight"].item() == best["semantic_weight"]
    report_md = project.parent / "reports" / f"calibration-results-{corpus['name']}.md"
    assert result["written"]["report"] == str(report_md)
    assert "| 0.70 | 0.30 |" in report_md.read_text()
    assert f"# Hybrid weight calibration of `{corpus['name']}`" in report_md.read_text()
    assert f"(calibration-p5-{corpus['name']}.png)" in report_md.read_text()
    plot = project.parent / "reports" / f"calibration-p5-{corpus['name']}.png"
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "nan" not in report_md.read_text().lower()
    # a second run appends another grid
    assert run_cli(capsys, "--config", str(project), "calibrate", "--json")[0] in (0, 1)
    history = read_grid_history(project.parent / "state" / "history.duckdb", corpus["name"])
    assert len(history) == 10 and history["run_at"].nunique() == 2


@pytest.mark.parametrize("full, partial, verdict, exit_code", [
    (0.0, 0.0, "full_success", 0), (1.0, 0.0, "partial_success", 0), (1.0, 1.0, "failure", 1)])
def test_calibrate_exit_code_follows_the_verdict(project, corpus, capsys, full, partial,
                                                 verdict, exit_code):
    write_config(project, corpus, full=full, partial=partial)
    code, out, _ = run_cli(capsys, "--config", str(project), "calibrate", "--no-write")
    assert code == exit_code
    assert f"Verdict: {verdict.replace('_', ' ').upper()}" in out
    assert "semantic  keyword     P@5  Recall@5  nDCG@10  MRR@10" in out and "RRF k=60" in out


def test_dry_run_and_fine_grid_write_nothing(project, capsys, tmp_path):
    before, mtime = project.read_text(), project.stat().st_mtime_ns
    code, out, _ = run_cli(capsys, "--config", str(project), "calibrate", "--no-write",
                           "--grid-step", "0.01", "--json", "--trec-runs", str(tmp_path / "runs"))
    result = json.loads(out)
    assert code in (0, 1) and len(result["grid"]) == 41  # 0.50 .. 0.90
    assert result["written"]["config"] is None and result["written"]["history"] is None
    assert result["written"]["weights"] is None
    assert project.read_text() == before and project.stat().st_mtime_ns == mtime
    assert not (tmp_path / "state").exists() and not (tmp_path / "reports").exists()
    assert len(list((tmp_path / "runs").glob(f"run.{result['dataset']}.semantic-*.trec"))) == 41


def test_calibrate_cannot_run_exits_2(project, capsys):
    code, _, err = run_cli(capsys, "--config", str(project), "calibrate", "--dataset", "nope")
    assert code == 2 and "is not in the store" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "--config", str(project), "calibrate", "--grid-step", "0.003")
    assert code == 2 and "grid step" in err


def test_calibration_config_errors_are_one_sentence(tmp_path):
    path = tmp_path / "config.yaml"
    for text, message in (("calibration:\n  grid: {step: 0.005}\n", "calibration.grid.step"),
                          ("calibration:\n  grid: {start: 0.5, stop: 0.9, step: 0.3}\n",
                           "not a multiple"),
                          ("calibration:\n  verdict: {full_succes: 0.8}\n", "unknown key"),
                          ("calibration:\n  verdict: {full_success: 0.6}\n", "partial_success"),
                          ("calibration:\n  cv_folds: 1\n", "cv_folds")):
        path.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_settings(path, environ={})
    path.write_text("history:\n  duckdb_path: x/h.duckdb\n")
    assert load_settings(path, environ={}).history_duckdb_path == tmp_path / "x" / "h.duckdb"


# ---------------------------------------------------------------------- the config write
def test_config_write_keeps_everything_else_and_the_file_mode(tmp_path, corpus):
    name = corpus["name"]
    path = write_config(tmp_path / "config.yaml", corpus)
    os.chmod(path, 0o640)
    original = path.read_text()
    change = write_calibrated_weights(path, name, 0.8)
    assert change.changed and (change.previous_semantic, change.previous_keyword) == (None, None)
    assert change.key == f"datasets.{name}.hybrid_search"
    text = path.read_text()
    block = "    hybrid_search:\n      semantic: 0.8\n      keyword: 0.2\n"  # not 0.1999..
    assert text == original.replace("    language: english\n",
                                    "    language: english\n" + block)
    assert path.stat().st_mode & 0o777 == 0o640
    mtime = path.stat().st_mtime_ns
    assert not write_calibrated_weights(path, name, 0.8).changed  # same weights: untouched
    assert path.stat().st_mtime_ns == mtime
    change = write_calibrated_weights(path, name, 0.65)  # the block exists: values replaced
    assert (change.previous_semantic, change.previous_keyword) == (0.8, 0.2)
    assert path.read_text() == original.replace(
        "    language: english\n",
        "    language: english\n    hybrid_search:\n      semantic: 0.65\n      keyword: 0.35\n")
    with pytest.raises(ConfigWriteError, match="cannot read"):
        write_calibrated_weights(tmp_path / "missing.yaml", name, 0.6)


def test_crash_between_write_and_rename_leaves_the_original(tmp_path, corpus, monkeypatch):
    path = write_config(tmp_path / "config.yaml", corpus)
    original = path.read_bytes()

    def crash(*_):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_calibrated_weights(path, corpus["name"], 0.9)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # no temp file left


def test_process_killed_between_write_and_rename_leaves_the_original(tmp_path, corpus):
    """A real crash: the process dies (os._exit) after the temp file is written, before the
    rename. The original stays complete; the next calibration writes normally."""
    path = write_config(tmp_path / "config.yaml", corpus)
    original = path.read_bytes()
    script = textwrap.dedent(f"""
        import os
        from eval_harness.calibration.weights import write_calibrated_weights
        os.replace = lambda *args: os._exit(9)
        write_calibrated_weights({str(path)!r}, {corpus['name']!r}, 0.9)
    """)
    completed = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert completed.returncode == 9
    assert path.read_bytes() == original
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "config.yaml"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".config.yaml.")
    assert write_calibrated_weights(path, corpus["name"], 0.9).changed
    assert load_settings(path, environ={}).weights_for(corpus["name"]).semantic == 0.9


# -------------------------------------------------------------------------- DuckDB history
def test_history_writer_waits_for_another_process_holding_the_file(tmp_path, conn, corpus):
    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, **FAST)
    database = tmp_path / "history.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time, duckdb
        con = duckdb.connect({str(database)!r})
        print("locked", flush=True)
        time.sleep(1.5)
        con.close()
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(duckdb.IOException):  # the file really is locked right now
            duckdb.connect(str(database))
        assert append_grid_history(database, grid_frame(result)) == 5
    finally:
        holder.wait(timeout=30)
    history = read_grid_history(database)
    assert len(history) == 5 and set(history["dataset"]) == {corpus["name"]}
    assert history["verdict"].iloc[0] == result.verdict


def test_a_history_from_before_the_verdict_figure_takes_new_grids(tmp_path, conn, corpus):
    """A history file written before the verdict_* columns gets them added on the next
    append; its old rows give their verdict on their own P@5, label source not recorded."""
    from eval_harness.calibration.history import figure_from_grid
    from eval_harness.calibration.sql import GRID_COLUMNS, HISTORY_TABLE
    from eval_harness.calibration.run import VerdictBands

    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, **FAST)
    frame = grid_frame(result)
    old = [c for c in GRID_COLUMNS if not c.startswith("verdict_")]
    database = tmp_path / "old-history.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute(f"CREATE TABLE {HISTORY_TABLE} ("
                    + ", ".join(f"{c} {GRID_COLUMNS[c]}" for c in old) + ")")
        con.register("rows", frame[old].assign(run_at=frame["run_at"] - pd.Timedelta("1D")))
        con.execute(f"INSERT INTO {HISTORY_TABLE} BY NAME SELECT * FROM rows")
    assert append_grid_history(database, frame) == len(frame)
    history = read_grid_history(database)
    before, now = (history[history["run_at"] == t] for t in sorted(set(history["run_at"])))
    bands = VerdictBands()
    figure = figure_from_grid(before, bands)
    assert (figure.p_at_5, figure.label_source) == (result.best.p_at_5, None)
    assert figure_from_grid(now, bands) == result.figure
    assert result.figure.label_source == "human" and result.figure.basis == "p_at_5"


# ------------------------------------------------------------------------- Dagster assets
def _grid(p_at_5: float) -> pd.DataFrame:
    return pd.DataFrame({"semantic_weight": [0.7, 0.8], "p_at_5": [0.1, p_at_5],
                         "is_best": [False, True], "dataset": ["d", "d"]})


@pytest.mark.parametrize("p_at_5, passed, severity, verdict", [
    (0.75, True, dg.AssetCheckSeverity.WARN, "full success"),
    (0.7499, False, dg.AssetCheckSeverity.WARN, "partial success"),
    (0.70, False, dg.AssetCheckSeverity.WARN, "partial success"),
    (0.6999, False, dg.AssetCheckSeverity.ERROR, "failure")])
def test_verdict_check_at_the_band_edges(tmp_path, corpus, p_at_5, passed, severity, verdict):
    settings = EvalSettings(config_path=str(write_config(tmp_path / "config.yaml", corpus)))
    outcome = iter(p_at_5_verdict(calibration_grid=_grid(p_at_5), settings=settings))
    result = next(outcome)  # the result is reported first ...
    assert (result.passed, result.severity) == (passed, severity)
    assert result.metadata["verdict"].value == verdict
    assert result.metadata["p_at_5"].value == p_at_5
    assert result.metadata["full_success"].value == 0.75
    assert result.metadata["partial_success"].value == 0.70
    if severity == dg.AssetCheckSeverity.ERROR:  # ... then a failure stops with its figure
        with pytest.raises(BlockingCheckFailed) as failure:
            next(outcome)
        assert failure.value.description == (
            "Blocking check p_at_5_verdict failed: P@5 0.6999 < 0.70 (FAILURE)")
    else:
        assert next(outcome, None) is None


def test_assets_and_check_materialize(tmp_path, store, corpus):
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0)
    database = tmp_path / "artefacts.duckdb"
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(database))})
    result = dg.materialize([calibration_grid, calibrated_weights, p_at_5_verdict],
                            resources=resources)
    assert result.success
    metadata = {e.step_materialization_data.materialization.asset_key.to_user_string():
                e.step_materialization_data.materialization.metadata
                for e in result.get_asset_materialization_events()}
    grid_meta = metadata["calibration_grid"]
    best = grid_meta["best_semantic_weight"].value
    for key in ("p_at_5_best", "p_at_5_default", "uplift_absolute", "uplift_ci_low",
                "uplift_ci_high", "p_at_5_cross_validated", "p_at_5_ceiling"):
        assert 0 <= abs(grid_meta[key].value) <= 1, key
    weights_meta = metadata["calibrated_weights"]
    assert weights_meta["semantic_weight"].value == best
    assert weights_meta["config_key"].value == f"datasets.{corpus['name']}.hybrid_search"
    settings = load_settings(config, environ={})
    assert settings.weights_for(corpus["name"]).semantic == best
    assert settings.hybrid.semantic == 0.5  # the global default is not calibration's to change
    with store.connection() as conn:
        row = conn.execute("SELECT dataset, semantic_weight, run_id FROM calibrated_weights "
                           "WHERE id = %s",
                           (weights_meta["calibrated_weights_id"].value,)).fetchone()
    assert row == (corpus["name"], best, result.run_id)
    check = result.get_asset_check_evaluations()[0]
    assert check.passed and check.metadata["verdict"].value == "full success"
    with duckdb.connect(str(database)) as con:
        stored = con.execute("SELECT semantic_weight, is_best FROM public.calibration_grid "
                             "ORDER BY semantic_weight").fetchall()
    assert [w for w, _ in stored] == [0.5, 0.6, 0.7, 0.8, 0.9]
    assert [w for w, is_best in stored if is_best] == [best]
    assert len(read_grid_history(tmp_path / "state" / "history.duckdb")) == 5
    report = tmp_path / "reports" / f"calibration-results-{corpus['name']}.md"
    assert grid_meta["report_path"].value == str(report) and report.is_file()


def test_failure_verdict_blocks_with_error(tmp_path, store, corpus):
    config = write_config(tmp_path / "config.yaml", corpus, full=1.0, partial=1.0)
    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    result = dg.materialize([calibration_grid, calibrated_weights, p_at_5_verdict],
                            resources=resources, raise_on_error=False)
    assert not result.success  # a failed blocking ERROR check fails the run
    check = result.get_asset_check_evaluations()[0]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert check.metadata["verdict"].value == "failure"


def test_definitions_hold_the_calibration_job():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("calibration_job")
    keys = {key.to_user_string() for key in job.asset_layer.executable_asset_keys}
    assert {"calibration_grid", "calibrated_weights", "ground_truth"} <= keys
    main = {key.to_user_string()
            for key in defs.resolve_job_def(MAIN_JOB).asset_layer.executable_asset_keys}
    assert "calibrated_weights" not in main  # the main job never rewrites config.yaml
    assert "calibrated_weights_p_at_5_verdict" in job.graph.node_dict  # the check runs too
    assert weight_label(0.7) == "0.70" and weight_label(0.125) == "0.125"


def materialize_judged_calibration(config, store, tmp_path):
    """judging -> agreement (+ kappa check) -> calibration (+ verdict) on ``config``: the
    result, the materialized asset names and the kappa check's evaluation."""
    from eval_harness_pipelines.assets.agreement import judge_agreement, kappa_lower_bound_above_floor
    from eval_harness_pipelines.assets.judging import dual_judge_scores

    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(str(tmp_path / "a.duckdb"))})
    result = dg.materialize(
        [dual_judge_scores, judge_agreement, kappa_lower_bound_above_floor, calibration_grid,
         calibrated_weights, p_at_5_verdict], resources=resources, raise_on_error=False)
    materialized = {e.step_materialization_data.materialization.asset_key.to_user_string()
                    for e in result.get_asset_materialization_events()}
    kappa_check = [c for c in result.get_asset_check_evaluations()
                   if c.check_name == "kappa_lower_bound_above_floor"][0]
    return result, materialized, kappa_check


@pytest.mark.parametrize("kappa_floor, calibrated", [(-1.0, True), (1.0, False)])
def test_agreement_check_gates_calibration(tmp_path, store, corpus, kappa_floor, calibrated):
    """judging -> judge_agreement (blocking kappa check) -> calibration, with local judges:
    an agreement below the floor stops calibration; above it, calibration runs."""
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0)
    config.write_text(config.read_text().replace("kappa_floor: 0.70", f"kappa_floor: {kappa_floor}")
                      + "\njudges:\n  judge1: local:lexical\n  judge2: local:embedding\n")
    result, materialized, kappa_check = materialize_judged_calibration(config, store, tmp_path)
    assert {"dual_judge_scores", "judge_agreement"} <= materialized
    assert kappa_check.passed is calibrated
    assert ("calibration_grid" in materialized) is calibrated
    assert result.success is calibrated


@pytest.mark.parametrize("stand_in_judges, calibrated", [("warn", True), ("block", False)])
def test_local_stand_ins_for_api_judges_warn_instead_of_blocking(
        tmp_path, store, corpus, monkeypatch, stand_in_judges, calibrated):
    """API judges without keys fall back to local ones; their failed kappa gate warns (the
    stand-ins' agreement says nothing about the configured judges) unless told to block."""
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2"):
        monkeypatch.delenv(variable, raising=False)
    config = write_config(tmp_path / "config.yaml", corpus, full=0.0, partial=0.0)
    config.write_text(config.read_text().replace("kappa_floor: 0.70", "kappa_floor: 1.0")
                      .replace("agreement:\n", f"agreement:\n  stand_in_judges: {stand_in_judges}\n")
                      + "\njudges:\n  judge1: openai:gpt-4o\n  judge2: anthropic:claude-haiku-4-5\n")
    _, materialized, kappa_check = materialize_judged_calibration(config, store, tmp_path)
    assert kappa_check.passed is False
    assert "local:lexical for openai:gpt-4o" in kappa_check.metadata["stand_in_judges"].value
    expected = dg.AssetCheckSeverity.WARN if calibrated else dg.AssetCheckSeverity.ERROR
    assert kappa_check.severity == expected
    # the check is declared blocking; each result says whether it blocked this time
    assert kappa_check.metadata["blocks_downstream"].value is not calibrated
    assert ("calibration_grid" in materialized) is calibrated


def test_verdict_sentence_names_an_unreachable_band():
    from eval_harness.calibration.run import VerdictBands, verdict_sentence

    bands = VerdictBands(0.75, 0.70)
    low_ceiling = verdict_sentence("failure", 0.17, bands, ceiling=0.226)
    assert "perfect ranking reaches only P@5 0.2260" in low_ceiling
    assert "perfect ranking" not in verdict_sentence("failure", 0.17, bands, ceiling=0.9)
    assert "perfect ranking" not in verdict_sentence("failure", 0.17, bands)

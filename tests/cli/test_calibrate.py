"""The ``calibrate`` command (eval_harness.cli.calibrate) on a real store: what it writes
(config.yaml, calibrated_weights, the DuckDB history, the report), its exit codes, and a dry
run that writes nothing."""

from __future__ import annotations

import difflib
import json

import pytest

from calibration_corpus import corpus, write_config  # noqa: F401 (fixture)
from cli_runs import run_cli
from eval_harness.calibration.history import read_grid_history
from eval_harness.retrieval.report import retrieval_report
from eval_harness.settings import load_settings

pytestmark = pytest.mark.project(config=write_config)  # the corpus's config


def test_calibrate_keeps_the_weights_in_force_when_the_gain_is_noise(project, corpus, capsys,
                                                                      conn):
    """12 queries at the default rule: no significant gain, so config.yaml stays byte for
    byte; the row records 'kept' with the evidence; text and JSON say it in one line."""
    before = project.read_bytes()
    code, out, err = run_cli(capsys, "--config", str(project), "calibrate", "--json")
    result = json.loads(out)
    decision = result["decision"]
    assert decision["decision"] == "kept" and decision["adjusted_p"] > 0.05
    assert decision["in_force"] == decision["weights"] == {"semantic": 0.5, "keyword": 0.5}
    assert decision["sentence"].startswith("kept 0.5 / 0.5: ")
    assert project.read_bytes() == before and result["written"]["config"] is None
    row = conn.execute("SELECT semantic_weight, keyword_weight, decision, in_force_semantic, "
                       "in_force_keyword, best_semantic, gain, ci_low, ci_high, adjusted_p, "
                       "alpha FROM calibrated_weights WHERE id = %s",
                       (result["written"]["weights"]["calibrated_weights_id"],)).fetchone()
    assert row == (0.5, 0.5, "kept", 0.5, 0.5, result["best"]["semantic_weight"],
                   decision["gain"], decision["ci_low"], decision["ci_high"],
                   decision["adjusted_p"], 0.05)
    code, out, err = run_cli(capsys, "--config", str(project), "calibrate", "--no-write")
    line = next(line for line in out.splitlines() if line.startswith("Decision: "))
    assert line.startswith(f"Decision: {decision['sentence']} (max-statistic permutation test")
    # each grid point's P@5 interval, the same in the text table as in the JSON
    for point in result["grid"]:
        shown = f"[{point['p_at_5_low']:.4f}, {point['p_at_5_high']:.4f}]"
        assert f"{point['p_at_5']:6.4f}  {shown:>16}" in out
    report = project.parent / "reports" / f"calibration-results-{corpus['name']}.md"
    assert f"**Decision: {decision['sentence']}" in report.read_text()
    assert "best grid point (not adopted)" in report.read_text()


def test_calibrate_json_writes_config_history_and_report(project, corpus, capsys, conn):
    # weights in force off the best (0.9 / 0.1) and a permissive rule: the writes run
    project.write_text(project.read_text().replace(
        "  verdict:\n", "  decision: {alpha: 0.99}\n  verdict:\n").replace(
        "semantic: 0.5 ", "semantic: 0.9 ").replace("keyword: 0.5 ", "keyword: 0.1 "))
    before = project.read_text()
    code, out, err = run_cli(capsys, "--config", str(project), "calibrate", "--json")
    result = json.loads(out)
    assert code == (1 if result["verdict"]["verdict"] == "failure" else 0), err
    assert {"grid", "best", "default", "uplift", "cross_validated_p_at_5", "verdict",
            "p_at_5_ceiling", "rrf", "written"} <= set(result)
    assert [row["semantic_weight"] for row in result["grid"]] == [0.5, 0.6, 0.7, 0.8, 0.9]
    assert set(result["grid"][0]) == {"semantic_weight", "keyword_weight", "p_at_5",
                                      "recall_at_5", "ndcg_at_10", "mrr_at_10", "p_at_5_ceiling",
                                      "judged_at_5", "p_at_5_low", "p_at_5_high"}
    assert all(row["p_at_5_low"] <= row["p_at_5_high"] for row in result["grid"])
    assert {"absolute", "relative", "ci_low", "ci_high", "p_value"} <= set(result["uplift"])
    assert result["default"]["semantic_weight"] == 0.7
    best = result["best"]
    assert result["decision"]["decision"] == "changed"
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
    assert (settings.hybrid.semantic, settings.hybrid.keyword) == (0.9, 0.1)
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
    assert "semantic  keyword     P@5      P@5 interval  Recall@5  nDCG@10  MRR@10" in out
    assert "RRF k=60" in out


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

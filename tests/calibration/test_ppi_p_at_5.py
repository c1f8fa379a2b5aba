"""`calibrate --json` with a labelled human sample: the P@5 corrected for judge error (PPI).

The issue's scenario in small. A BEIR dataset whose qrels are hidden from the harness (its
expected_docs are emptied before judging); both judges are ``local:lexical``, which over-rates
documents that share words with the query: by construction, a document carries the query's
words with probability 0.8 when it is not relevant and 0.4 when it is, so the judges' P@5 is
far above the qrels P@5. People label a uniform sample of queries, their verdicts filled from
the hidden qrels. The uncorrected judge P@5 misses the qrels P@5; the PPI interval covers it;
its numbers equal ppi-python's ``ppi_mean_ci`` on per-query vectors the test builds itself.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from beir_factory import write_beir
from eval_harness.agreement.sample import export_sample_csv, import_sample_csv
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.calibration.verdict import precision_verdict
from eval_harness.metrics.ppi import labels_to_halve_width
from eval_harness.settings import load_settings
from eval_harness_pipelines import cli
from review_store import read_csv, write_csv

N_QUERIES, PER_QUERY, N_SAMPLE, DIM = 60, 5, 25, 64
CONFIG = """\
default_dataset: {name}
datasets:
  {name}:
    path: {folder}
    language: english
hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 10}}
calibration:
  grid: {{start: 0.7, stop: 0.7, step: 0.1}}
  cv_folds: 2
  bootstrap_resamples: 200
judges:
  judge1: local:lexical
  judge2: local:lexical
  hybrid_top_k: {per_query}
"""


def _hidden_qrels_dataset(folder, tag):
    """Query k owns documents k_0..k_4 (its top 5 at any weight: their vectors are near the
    query's, every other vector is orthogonal). k_0 is relevant, the others with probability
    0.3; a document repeats the query's words with probability 0.4 if relevant, 0.8 if not."""
    rng = np.random.default_rng(14)
    docs, queries, qrels, doc_vectors, query_vectors = {}, {}, [], [], []
    for k in range(N_QUERIES):
        words = f"kestrel{k}x{tag} marsh{k}y{tag}"
        queries[f"q{k}"] = f"{words} survey"
        axis = np.zeros(DIM)
        axis[k % DIM] = 1.0
        query_vectors.append(axis)
        for j in range(PER_QUERY):
            relevant = j == 0 or rng.random() < 0.3  # a query without qrels is not ingested
            shares_words = rng.random() < (0.4 if relevant else 0.8)
            docs[f"d{k}_{j}"] = (f"a field note on {words} counts" if shares_words
                                 else f"clinical evidence summary number {j}")
            doc_vectors.append(axis + rng.normal(scale=0.05, size=DIM) * (np.arange(DIM) != k))
            if relevant:
                qrels.append((f"q{k}", f"d{k}_{j}", 1))
    write_beir(folder, docs, queries, qrels, doc_vectors=np.asarray(doc_vectors),
               query_vectors=np.asarray(query_vectors))
    return qrels


@pytest.fixture
def scenario(db, store, tmp_path, monkeypatch):
    from eval_harness.datasets.ingest import ingest_beir

    tag = uuid.uuid4().hex[:6]
    name = f"ppi{tag}"
    qrels = _hidden_qrels_dataset(tmp_path / "data", tag)
    ingest_beir(db, tmp_path / "data", name=name)
    db.execute("UPDATE ground_truth SET expected_docs = '{}', relevance_grades = '{}' "
               "WHERE dataset = %s", (name,))  # the harness never sees the qrels
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(name=name, folder=tmp_path / "data", per_query=PER_QUERY))
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    settings = load_settings(config, environ={"DATABASE_URL": store.url,
                                              "DAGSTER_HOME": str(tmp_path / "dagster")})
    summary = judge_dataset(db, replace(settings, openai_api_key=None, anthropic_api_key=None),
                            name)
    assert summary.complete and summary.pairs == N_QUERIES * PER_QUERY
    relevant = {(q, d) for q, d, _ in qrels}
    return {"name": name, "config": config, "relevant": relevant, "tmp": tmp_path}


def _calibrate(capsys, config):
    code = cli.main(["--config", str(config), "calibrate", "--json", "--no-write"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return json.loads(out)


def _label_sample(db, scenario, *, leave_blank: int = 0):
    path = scenario["tmp"] / "sample.csv"
    export_sample_csv(db, scenario["name"], path, n=N_SAMPLE, seed=3)
    rows = read_csv(path)
    for row in rows:
        pair = (row["query_external_id"], row["doc_external_id"])
        row["verdict"] = "relevant" if pair in scenario["relevant"] else "not relevant"
    for row in rows[:leave_blank]:
        row["verdict"] = ""
    write_csv(path, rows)
    import_sample_csv(db, None, path)
    return sorted({row["query_external_id"] for row in rows})


def _per_query_vectors(db, scenario, sampled):
    """Judge P@5 of every query (both lexical scores above 0.5 among its 5 judged docs, which
    are its top 5) and qrels P@5 of the sampled queries, computed here from the store's rows."""
    rows = db.execute("""SELECT g.external_id, g.judge1_score, g.judge2_score,
                                array_agg(d.external_id ORDER BY j.ord)
                         FROM ground_truth g
                         CROSS JOIN LATERAL unnest(g.judged_docs) WITH ORDINALITY AS j(id, ord)
                         JOIN l2_insights d ON d.id = j.id
                         WHERE g.dataset = %s GROUP BY g.id ORDER BY g.id""",
                      (scenario["name"],)).fetchall()
    judge, truth = {}, {}
    for query, s1, s2, docs in rows:
        assert sorted(docs) == [f"d{query[1:]}_{j}" for j in range(PER_QUERY)]
        judge[query] = sum(a > 0.5 and b > 0.5 for a, b in zip(s1, s2)) / PER_QUERY
        truth[query] = sum((query, d) in scenario["relevant"] for d in docs) / PER_QUERY
    y = np.array([truth[q] for q in sampled])
    yhat = np.array([judge[q] for q in sampled])
    return y, yhat, np.array(list(judge.values())), float(np.mean(list(truth.values())))


def test_ppi_corrects_the_biased_judges_and_matches_ppi_python(db, scenario, capsys):
    before = _calibrate(capsys, scenario["config"])
    assert "ppi" not in before["best"]  # no labels yet: the verdict is on the judges' P@5
    assert (before["verdict"]["basis"], before["verdict"]["label_source"]) == ("p_at_5", "judges")

    sampled = _label_sample(db, scenario)
    result = _calibrate(capsys, scenario["config"])
    y, yhat, yhat_all, qrels_p5 = _per_query_vectors(db, scenario, sampled)
    ppi = result["best"]["ppi"]
    assert result["default"]["ppi"] == ppi  # the grid is the default weight alone
    assert (ppi["n_human"], ppi["n_judged"], ppi["incomplete_queries"]) == (
        N_SAMPLE, N_QUERIES, 0)
    lo, hi = ppi_mean_ci(y, yhat, yhat_all, alpha=0.05)
    assert ppi["estimate"] == pytest.approx(float(ppi_mean_pointestimate(y, yhat, yhat_all)[0]),
                                            abs=1e-12)
    assert ppi["interval"] == pytest.approx([float(lo[0]), float(hi[0])], abs=1e-12)
    assert ppi["labels_to_halve_width"] == labels_to_halve_width(
        y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all)
    # halving needs about 4 x 25 = 100 labelled queries, more than the 60 judged ones
    assert ppi["labels_to_halve_width"] is None

    # the claim: the judges alone miss the qrels P@5, the corrected interval covers it
    assert ppi["judge_p_at_5"] == pytest.approx(yhat_all.mean())
    assert ppi["judge_p_at_5"] - qrels_p5 > 0.15
    assert not ppi["interval"][0] <= ppi["judge_p_at_5"] <= ppi["interval"][1]
    assert ppi["interval"][0] <= qrels_p5 <= ppi["interval"][1]

    verdict = result["verdict"]
    assert verdict["basis"] == "ppi" and verdict["p_at_5"] == ppi["estimate"]
    assert verdict["verdict"] == precision_verdict(min(max(ppi["estimate"], 0.0), 1.0))
    assert result["human_sample"]["sampled_queries"] == N_SAMPLE

    code = cli.main(["--config", str(scenario["config"]), "calibrate", "--no-write"])
    text = capsys.readouterr().out
    assert code == (1 if verdict["verdict"] == "failure" else 0)
    assert "on the PPI-corrected P@5" in text
    assert f"{N_SAMPLE} human-labelled of {N_QUERIES} judged" in text
    assert f"labelling more of the {N_QUERIES} judged queries cannot halve it" in text


def test_a_sampled_query_with_an_unlabelled_top_5_is_left_out_and_counted(db, scenario,
                                                                          capsys):
    _label_sample(db, scenario, leave_blank=1)
    ppi = _calibrate(capsys, scenario["config"])["best"]["ppi"]
    assert (ppi["n_human"], ppi["incomplete_queries"]) == (N_SAMPLE - 1, 1)


def test_labels_to_halve_width_is_reported_when_labelling_can_halve_it(db, scenario, capsys):
    path = scenario["tmp"] / "small.csv"
    export_sample_csv(db, scenario["name"], path, n=6, seed=3)
    rows = read_csv(path)
    for row in rows:
        pair = (row["query_external_id"], row["doc_external_id"])
        row["verdict"] = "relevant" if pair in scenario["relevant"] else "not relevant"
    write_csv(path, rows)
    import_sample_csv(db, None, path)
    ppi = _calibrate(capsys, scenario["config"])["best"]["ppi"]
    assert ppi["n_human"] == 6
    assert isinstance(ppi["labels_to_halve_width"], int)
    assert 3 * 6 <= ppi["labels_to_halve_width"] <= N_QUERIES - 6  # at least 4n in all


def test_the_cli_the_stored_row_dagster_and_the_report_give_one_figure_and_verdict(
        db, scenario, capsys, store):
    """Issue #26.5: with a labelled human sample, `calibrate` printed the verdict on the
    PPI-corrected P@5 while its calibrated_weights row and Dagster's p_at_5_verdict carried
    the judges' uncorrected P@5. One figure (the corrected one), one verdict, one label
    source, with its interval, everywhere."""
    import re

    import dagster as dg

    from eval_harness.reporting.sections.calibration import calibration_section
    from eval_harness_pipelines.assets.calibration import (calibrated_weights, calibration_grid,
                                                         p_at_5_verdict)
    from eval_harness_pipelines.resources import (DUCKDB_IO_MANAGER_KEY, default_resources,
                                                  duckdb_io_manager)

    _label_sample(db, scenario)
    config = scenario["tmp"] / "writes.yaml"  # calibrate writes its history beside the test
    config.write_text(scenario["config"].read_text() + "history: {duckdb_path: "
                      f"{scenario['tmp'] / 'history.duckdb'}}}\n")
    verdict = _calibrate(capsys, config)["verdict"]  # --no-write: the JSON's verdict
    assert verdict["basis"] == "ppi"
    assert abs(verdict["p_at_5"] - verdict["uncorrected_p_at_5"]) > 0.05  # they differ

    def newest_row():
        return db.execute("SELECT p_at_5, verdict, label_source FROM calibrated_weights "
                          "WHERE dataset = %s ORDER BY id DESC LIMIT 1",
                          (scenario["name"],)).fetchone()

    code = cli.main(["--config", str(config), "calibrate"])
    text = capsys.readouterr().out
    assert code == (1 if verdict["verdict"] == "failure" else 0)
    assert newest_row()[:2] == (pytest.approx(verdict["p_at_5"], abs=1e-12), verdict["verdict"])
    said = re.search(r"Verdict: ([A-Z ]+) on the PPI-corrected P@5 (\d\.\d{4}) \(95% interval "
                     r"\[(\d\.\d{4}), (\d\.\d{4})\].*labels judges\+ppi\)", text)
    assert said, text
    assert said.group(1) == verdict["verdict"].replace("_", " ").upper()
    assert [float(x) for x in said.groups()[1:]] == [
        round(x, 4) for x in (verdict["p_at_5"], *verdict["interval"])]
    assert newest_row()[2] == verdict["label_source"] == "judges+ppi"

    resources = dict(default_resources(config_path=str(config), database_url=store.url),
                     **{DUCKDB_IO_MANAGER_KEY: duckdb_io_manager(
                         str(scenario["tmp"] / "artefacts.duckdb"))})
    run = dg.materialize([calibration_grid, calibrated_weights, p_at_5_verdict],
                         resources=resources, raise_on_error=False)
    check = run.get_asset_check_evaluations()[0]
    meta = {key: value.value for key, value in check.metadata.items()}
    assert meta["p_at_5"] == pytest.approx(verdict["p_at_5"], rel=1e-3)  # metadata is rounded
    assert [meta["interval_low"], meta["interval_high"]] == pytest.approx(verdict["interval"],
                                                                          rel=1e-3)
    assert (meta["verdict"], meta["label_source"], meta["basis"]) == (
        verdict["verdict"].replace("_", " "), "judges+ppi", "ppi")
    assert check.passed == (verdict["verdict"] == "full_success")
    assert newest_row() == (pytest.approx(verdict["p_at_5"], abs=1e-12), verdict["verdict"],
                            "judges+ppi")  # the row Dagster wrote

    settings = load_settings(config, environ={"DATABASE_URL": store.url})
    section = calibration_section(settings, scenario["name"])  # the run report's, from history
    sentence = section.section.blocks[0].text
    assert f"on the PPI-corrected P@5 {verdict['p_at_5']:.4f}" in sentence
    assert "labels judges+ppi" in sentence

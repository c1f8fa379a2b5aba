"""The per-run report on a real store: every section on realistic data, numbers checked
against independent computations, the self-contained HTML, the DuckDB run history and
missing data. The cost section and the cache hit log: tests/reporting/sections/test_cost.py.

The realistic store is built once for the module: a small BEIR dataset judged by both local
judges, a calibration appended to a temporary DuckDB history, the bundled sample answers of
2025-03-03 and 2025-03-04 evaluated by the configured gates, and cost rows whose tokens and
prices are chosen here (the expected cost and batch saving are worked out in the comments).
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from beir_factory import write_beir
from eval_harness.gates.answers import import_answers
from eval_harness.gates.window import TimeWindow
from eval_harness.calibration.history import append_grid_history, grid_frame
from eval_harness.calibration.run import calibrate_with_settings
from eval_harness.calibration.verdict import VERDICT_LABELS
from eval_harness.gates.registry import configured_gates
from eval_harness.gates.runner import run_quality_gates
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.reporting.run_history import read_run_history, runs_table
from eval_harness.reporting.blocks import SECTION_TITLES
from eval_harness.reporting.run_report import build_run_report
from eval_harness.settings import load_settings
from eval_harness.store import migrate
from eval_harness.datasets.ingest import ingest_beir
from answer_files import SAMPLE, harness_answers_config
from paths import REPO

DAYS = [date(2025, 3, 3), date(2025, 3, 4)]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TOPICS = ["aspirin heart attack", "statin cholesterol", "sleep memory", "coffee liver",
          "vitamin bone", "insulin diabetes", "vaccine immune", "tumor growth"]


# --------------------------------------------------------------------------- fixtures

def base_settings(store, folder: Path):
    """The repository's config on the test store, with local judges, a temporary DuckDB
    history and fewer resamples (speed only; no figure checked here depends on them)."""
    settings = load_settings(harness_answers_config(folder), environ={
        "DATABASE_URL": store.url, "DAGSTER_HOME": str(folder / "dagster")})
    return replace(
        settings, history_duckdb_path=folder / "history.duckdb",
        judges=replace(settings.judges, judge1="local:lexical", judge2="local:embedding"),
        agreement=replace(settings.agreement, bootstrap_resamples=200),
        calibration=replace(settings.calibration, cv_folds=3, bootstrap_resamples=300))


def write_corpus(folder: Path, tag: str) -> Path:
    """8 queries, each with 2 relevant documents (its words, its direction in embedding
    space) and 1 decoy (its words, another direction: the two judges disagree on it)."""
    rng = np.random.default_rng(3)
    axes = np.eye(8, dtype=np.float32)
    docs, doc_vectors, qrels = {}, [], []
    for k, topic in enumerate(TOPICS):
        for j in range(2):
            docs[f"d{k}{j}"] = f"{topic} study {j} {tag}"
            doc_vectors.append(axes[k] + rng.normal(0, 0.05, 8))
            qrels.append((f"q{k}", f"d{k}{j}", 1))
        docs[f"x{k}"] = f"{topic} decoy note {tag}"
        doc_vectors.append(axes[(k + 3) % 8] + rng.normal(0, 0.05, 8))
    queries = {f"q{k}": f"{topic} {tag}" for k, topic in enumerate(TOPICS)}
    query_vectors = axes + rng.normal(0, 0.05, (8, 8))
    return write_beir(folder, docs, queries, qrels, doc_vectors=np.array(doc_vectors),
                      query_vectors=query_vectors)


# Cost rows of the realistic run (USD per million tokens from config.yaml):
#   gpt-4o live:  1000 in, 200 out            -> (1000*2.50 + 200*10.00)/1e6 = 0.004500
#   gpt-4o batch: 2000 in (400 cached), 100 out: list (1600*2.50 + 400*1.25 + 100*10)/1e6
#                 = 0.005500, paid half        = 0.002750, saved 0.002750
#   haiku batch:  3000 in, 300 out: list (3000*1.00 + 300*5.00)/1e6 = 0.004500,
#                 paid half = 0.002250, saved 0.002250
# total paid 0.0095, batch saved 0.0050; plus 3 cache hits that saved 0.0135.
COST_ROWS = [("openai", "gpt-4o", "relevance", 1000, 200, 0, 0.0045, False),
             ("openai", "gpt-4o", "relevance", 2000, 100, 400, 0.00275, True),
             ("anthropic", "claude-haiku-4-5", "relevance", 3000, 300, 0, 0.00225, True)]
EXPECTED_COST, EXPECTED_BATCH_SAVED = 0.0095, 0.0050


@pytest.fixture(scope="module")
def realistic(store, tmp_path_factory):
    folder = tmp_path_factory.mktemp("run_report")
    settings = base_settings(store, folder)
    tag = uuid.uuid4().hex[:8]
    name = f"rr_{tag}"
    run_id = f"nightly-{tag}"
    with store.connection(autocommit=True) as db:
        ingest_beir(db, write_corpus(folder / "beir", tag), name=name)
        judged = judge_dataset(db, settings, name)
        calibration = calibrate_with_settings(db, settings, name)
        append_grid_history(settings.history_duckdb_path, grid_frame(calibration))
        import_answers(db, SAMPLE)
        gates = configured_gates(settings)
        for day in DAYS:
            run_quality_gates(store, TimeWindow.day(day), gates, run_id=run_id)
        for row in COST_ROWS:
            db.execute("INSERT INTO api_cost_log (run_id, api_name, model, operation, "
                       "input_tokens, output_tokens, cached_tokens, estimated_cost, batch) "
                       "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", (run_id, *row))
        db.execute("INSERT INTO api_cache_hit_log (run_id, api_name, model, operation, hits, "
                   "saved_cost) VALUES (%s, 'openai', 'gpt-4o', 'relevance', 3, 0.0135)",
                   (run_id,))
    return {"settings": settings, "dataset": name, "run_id": run_id, "folder": folder,
            "judged": judged, "calibration": calibration, "gates": gates}


class PageParser(HTMLParser):
    """The section headings and image sources of an HTML page (and that it parses)."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.images: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self._in_h2 = True
            self.headings.append("")
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.headings[-1] += data


def parse_page(text: str) -> PageParser:
    parser = PageParser()
    parser.feed(text)
    parser.close()
    return parser


def decoded_png(src: str) -> bytes:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix)
    return base64.b64decode(src[len(prefix):], validate=True)


# --------------------------------------------------------------------------- every section

def test_every_section_renders_with_the_stored_numbers(realistic, conn, tmp_path):
    settings, name, run_id = realistic["settings"], realistic["dataset"], realistic["run_id"]
    report = build_run_report(conn, settings, run_id=run_id, dataset=name, days=DAYS,
                              out_dir=tmp_path / "reports")
    metrics, markdown = report.metrics, report.markdown
    assert report.sections == tuple(SECTION_TITLES)
    assert all(check.status != "NO DATA" for check in report.checks), report.checks

    # Agreement: kappa of the stored scores, binarized at the relevance threshold (> 0.5).
    rows = conn.execute("SELECT judge1_score, judge2_score FROM ground_truth "
                        "WHERE dataset = %s AND judged_docs IS NOT NULL", (name,)).fetchall()
    pairs = [(a, b) for s1, s2 in rows for a, b in zip(s1, s2)
             if a is not None and b is not None]
    labels1, labels2 = ([int(p[i] > 0.5) for p in pairs] for i in (0, 1))
    expected_kappa = cohen_kappa_score(labels1, labels2)
    assert 0 < expected_kappa < 1  # the decoys make the judges disagree
    assert metrics["kappa"] == pytest.approx(expected_kappa, abs=1e-12)
    assert metrics["n_pairs"] == len(pairs) == realistic["judged"].pairs
    assert metrics["kappa_floor"] == 0.70 and isinstance(metrics["agreement_passed"], bool)
    assert metrics["judge1_models"] == "local:lexical"
    assert f"| Cohen's kappa (pooled) | {expected_kappa:.3f} |" in markdown

    # Calibration: the grid appended to the history, graded with the configured bands.
    calibration = realistic["calibration"]
    assert metrics["p_at_5_best"] == pytest.approx(calibration.best.p_at_5)
    assert metrics["best_semantic_weight"] == pytest.approx(calibration.best.semantic_weight)
    assert metrics["p_at_5_default"] == pytest.approx(calibration.default.p_at_5)
    assert metrics["p_at_5_ceiling"] == pytest.approx(calibration.p_at_5_ceiling)
    assert metrics["verdict"] == VERDICT_LABELS[calibration.verdict]
    assert f"{calibration.best.p_at_5:.4f}" in markdown and "P@5 ceiling" in markdown

    # Quality gates: pooled pass rates equal the stored scores against each threshold.
    ids = [row["id"] for row in map(json.loads, SAMPLE.read_text(encoding="utf-8").splitlines())
           if datetime.fromisoformat(row["created_at"]).astimezone(timezone.utc).date() in DAYS]
    assert len(ids) == 20
    for gate in realistic["gates"]:
        scores = dict(conn.execute("SELECT answer_id, score FROM gate_results WHERE gate = %s "
                                   "AND answer_id = ANY(%s)", (gate.name, ids)).fetchall())
        passed = sum(1 for i in ids if scores.get(i) is not None and scores[i] >= gate.threshold)
        assert metrics[f"{gate.name}_pass_rate"] == pytest.approx(passed / len(ids))
        assert metrics[f"{gate.name}_answers"] == 20
    # 6 of the 10 answers of 2025-03-04 have one Markdown defect each (datasets/answers/README)
    assert "| format_compliance | FAIL | blocking | 0.400 |" in markdown
    assert metrics["gates_passed"] is False
    assert "| format_compliance | sa-0304-01 | 0.900 | format issues: empty_heading |" in markdown
    assert "sa-0303-01" not in markdown  # it passes every gate: never among the worst

    # Cost: the run's rows, summed independently and against the hand-worked figures.
    paid = conn.execute("SELECT sum(estimated_cost) FROM api_cost_log WHERE run_id = %s",
                        (run_id,)).fetchone()[0]
    assert metrics["cost_usd"] == pytest.approx(paid) == pytest.approx(EXPECTED_COST)
    assert metrics["batch_saved_usd"] == pytest.approx(EXPECTED_BATCH_SAVED)
    assert (metrics["calls"], metrics["batch_calls"], metrics["cache_hits"]) == (3, 2, 3)
    assert metrics["cache_saved_usd"] == pytest.approx(0.0135)
    assert metrics["cost_scope"] == "run"
    [total] = [line for line in markdown.splitlines() if line.startswith("| **total**")][:1]
    assert [cell.strip(" *") for cell in total.strip("|").split("|")] == [
        "total", "", "", "3", "2", "6000", "400", "600", "0.0095", "0.0050", "3", "0.0135"]

    # Files: HTML parses, has every heading and only inline PNGs, the same as on disk.
    page = parse_page(report.html_path.read_text(encoding="utf-8"))
    assert [h.split(" ")[0] for h in page.headings] == \
        [title.split(" ")[0] for title in SECTION_TITLES.values()]
    assert all(any(h.startswith(title) for h in page.headings)
               for title in SECTION_TITLES.values())
    images = [decoded_png(src) for src in page.images]
    # the calibration grid, four trends and the judges by run date (the run wrote a record)
    assert len(images) == 6 and all(image.startswith(PNG_MAGIC) for image in images)
    assert "judges-record.png" in {path.name for path in report.png_paths}
    assert sorted(images) == sorted(path.read_bytes() for path in report.png_paths)
    assert report.directory.parent == tmp_path / "reports" / "runs"
    assert report.directory.name.endswith(f"-{run_id[:8]}")
    assert {p.parent for p in report.png_paths} == {report.directory}
    for path in report.png_paths:
        assert f"]({path.name})" in markdown
    latest = (tmp_path / "reports" / "latest.md").read_text(encoding="utf-8")
    assert f"](runs/{report.directory.name}/calibration-grid.png)" in latest
    assert (tmp_path / "reports" / "latest.html").read_text(encoding="utf-8") == report.html


def test_history_keeps_one_row_set_per_run_and_a_second_run_adds_a_point(realistic, conn,
                                                                          tmp_path):
    settings, name = realistic["settings"], realistic["dataset"]
    settings = replace(settings, history_duckdb_path=tmp_path / "history.duckdb")
    append_grid_history(settings.history_duckdb_path, grid_frame(realistic["calibration"]))
    first = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc)
    build_run_report(conn, settings, run_id="run-a", dataset=name, days=DAYS,
                     out_dir=tmp_path / "r", now=first)
    history = read_run_history(settings.history_duckdb_path, name)
    recorded = history[history["run_id"] == "run-a"]
    assert len(recorded) == recorded["metric"].nunique() > 10  # one row per metric
    assert set(history["run_id"]) == {"run-a"}

    again = build_run_report(conn, settings, run_id="run-a", dataset=name, days=DAYS,
                             out_dir=tmp_path / "r", now=first + timedelta(minutes=5))
    history = read_run_history(settings.history_duckdb_path, name)
    assert len(history) == len(recorded)  # replaced, not duplicated
    assert len(runs_table(history)) == 1

    second = build_run_report(conn, settings, run_id="run-b", dataset=name, days=DAYS,
                              out_dir=tmp_path / "r", now=first + timedelta(days=1))
    runs = runs_table(read_run_history(settings.history_duckdb_path, name))
    assert list(runs["run_id"]) == ["run-a", "run-b"]
    assert runs["kappa"].tolist() == pytest.approx([again.metrics["kappa"]] * 2)
    assert runs["cost_usd"].tolist() == [0.0, 0.0]  # neither run id has cost rows
    assert "| 2026-01-02 02:00 | run-b |" in second.markdown  # newest first
    trend_pngs = [p for p in second.png_paths if p.name.startswith("trend-")]
    assert len(trend_pngs) == 4 and all(p.read_bytes().startswith(PNG_MAGIC)
                                        for p in trend_pngs)
    # A report without a run id records nothing.
    build_run_report(conn, settings, run_id=None, dataset=name, days=DAYS,
                     out_dir=tmp_path / "r", now=first + timedelta(days=2))
    assert len(runs_table(read_run_history(settings.history_duckdb_path, name))) == 2


# --------------------------------------------------------------------------- missing data

def test_missing_data_renders_hints_instead_of_failing(empty_database, store, tmp_path):
    settings = replace(base_settings(store, tmp_path), root=tmp_path)
    hints = {}
    with empty_database.connection() as conn:
        # Stage 1: not even migrated.
        bare = build_run_report(conn, settings, run_id="r1", now=datetime(2026, 2, 1,
                                                                          tzinfo=timezone.utc))
        assert bare.sections == tuple(SECTION_TITLES)
        assert bare.html_path.parent.parent == tmp_path / "reports" / "runs"
        assert "`eval-harness migrate`" in bare.markdown
        assert bare.metrics["kappa"] is None and bare.metrics["cost_usd"] is None
        parse_page(bare.html)
        migrate(conn)
        conn.commit()
        # Stage 2: migrated and empty.
        empty = build_run_report(conn, settings, run_id="r2")
        hints["agreement"] = "is not in the store" in empty.markdown
        hints["calibration"] = "No calibration of dataset 'scifact' in the history" in \
            empty.markdown
        hints["gates"] = "No answers in `answers` yet" in empty.markdown
        hints["cost"] = "made no billed provider call" in empty.markdown
        assert empty.metrics["cost_usd"] == 0.0 and empty.metrics["calls"] == 0
        # Stage 3: answers without gate results; the default day is the latest with answers.
        import_answers(conn, SAMPLE)
        answers_only = build_run_report(conn, settings, run_id="r3")
        hints["no results"] = ("No stored gate result for these answers: run the gates "
                               "(`eval-harness gate --partition 2025-03-05`)") in \
            answers_only.markdown
        assert answers_only.metrics["gate_days"] == "2025-03-05"
        assert answers_only.metrics["format_compliance_pass_rate"] == 0.0
    assert all(hints.values()), hints
    page = parse_page((tmp_path / "reports" / "latest.html").read_text(encoding="utf-8"))
    assert len(page.headings) == len(SECTION_TITLES)
    # the history has the three runs' points, but nothing to plot but cost
    assert [p.name for p in answers_only.png_paths] == ["trend-gates.png", "trend-cost.png"]


def test_a_dataset_without_judged_pairs_says_to_run_the_judges(store, conn, tmp_path):
    tag = uuid.uuid4().hex[:8]
    with store.connection(autocommit=True) as db:
        ingest_beir(db, write_corpus(tmp_path / "beir", tag), name=f"rr_{tag}")
    report = build_run_report(conn, base_settings(store, tmp_path), run_id=None,
                              dataset=f"rr_{tag}", days=[date(2001, 1, 1)],
                              out_dir=tmp_path / "r")
    assert "No judged pairs yet" in report.markdown and "`eval-harness judge`" in report.markdown
    assert report.metrics["agreement_passed"] is False and report.metrics["kappa"] is None
    # a day without answers fails every gate: there is no evidence the answers are good
    assert report.metrics["gates_passed"] is False
    assert "no answers in the window" in report.markdown
    assert report.metrics["cost_scope"] == "last 30 days"
    assert "not recorded in the history" in report.markdown

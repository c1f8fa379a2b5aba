"""Judge agreement on the real store: loading scores, the review queue (export -> edit ->
import), adjudicated overrides, the Dagster asset and its blocking check, and the CLI.

Judge scores are written straight into ground_truth with SQL, as the judge layer would.
"""

from __future__ import annotations

import json
import re

import dagster as dg
import pytest

from eval_harness_pipelines.assets.agreement import judge_agreement, kappa_lower_bound_above_floor
from eval_harness_pipelines.resources import default_resources
from eval_harness_pipelines import cli
from eval_harness.agreement.data import (JudgeScoresError, dataset_agreement, final_labels,
                                         kappa_gate, load_final_labels, load_judge_pairs)
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.agreement.review import (CSV_COLUMNS, ReviewFileError, adjudicated_labels,
                                 export_review_csv, import_review_csv, queue_disagreements)
from eval_harness.settings import AgreementSettings, ConfigError, load_settings
from review_store import (N_QUERIES, QUERIES, agreeing_scores, disagreeing_scores, read_csv,
                          review_rows, set_scores, write_csv)

SETTINGS = AgreementSettings(bootstrap_resamples=300)


# ---------------------------------------------------------------------------------------
# Loading scores, final labels


def test_pairs_load_with_unscored_and_human_labels(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, None), ("d2", 0.2, 0.3)],
                                     "q2": [("d3", float("nan"), 0.7), ("d4", 0.6, 0.4)]})
    pairs = load_judge_pairs(db, dataset["name"])
    assert len(pairs) == 4 and pairs.n_queries == N_QUERIES and len(pairs.queries) == 2
    assert pairs.scores2 == (None, 0.3, 0.7, 0.4)
    assert pairs.scores1 == (0.9, 0.2, None, 0.6)  # NaN is unscored, never a value
    assert pairs.human == (1, 0, 1, 0)  # in expected_docs <=> human-relevant
    assert pairs.judge1_models == ("judge-a",)
    result = dataset_agreement(db, dataset["name"], SETTINGS)
    assert result.report.n_scored == 2 and result.report.n_unscored == 2


def test_misaligned_scores_are_refused_with_the_query_named(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, 0.8), ("d2", 0.1, 0.2)]})
    db.execute("UPDATE ground_truth SET judge2_score = ARRAY[0.5]::float8[] "
               "WHERE dataset = %s AND external_id = 'q1'", (dataset["name"],))
    with pytest.raises(JudgeScoresError, match=r"query 'q1'.*2 judged_docs but 1 judge2_score"):
        load_judge_pairs(db, dataset["name"])


def test_a_document_judged_twice_is_refused(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, 0.1), ("d1", 0.8, 0.1)]})
    with pytest.raises(JudgeScoresError, match="lists a document twice"):
        load_judge_pairs(db, dataset["name"])
    with pytest.raises(ValueError, match="lists a document twice"):
        queue_disagreements(db, dataset["name"], threshold=0.4)


def test_final_labels_mean_of_judges_unless_adjudicated(db, dataset):
    name = dataset["name"]
    set_scores(db, name, {"q1": [("d1", 0.9, 0.3), ("d2", 0.4, 0.5), ("d3", 0.9, None)]})
    pairs = load_judge_pairs(db, name)
    key = pairs.keys[0]
    plain = final_labels(pairs, {}, threshold=0.5)
    # (0.9 + 0.3) / 2 = 0.6 > 0.5; (0.4 + 0.5) / 2 = 0.45; one judge only: no label
    assert [(f.label, f.source) for f in plain] == [(1, "judges"), (0, "judges"), (None, None)]
    overridden = final_labels(pairs, {key: 0, pairs.keys[2]: 1}, threshold=0.5)
    assert [(f.label, f.source) for f in overridden] == [
        (0, "adjudicated"), (0, "judges"), (1, "adjudicated")]


# ---------------------------------------------------------------------------------------
# The queue


def test_requeue_is_idempotent_and_keeps_verdicts_until_scores_change(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    first = queue_disagreements(db, name, threshold=0.4)
    assert (first.new, first.pending, first.adjudicated) == (4, 4, 0)
    before = review_rows(db, name)
    again = queue_disagreements(db, name, threshold=0.4)
    assert (again.new, again.requeued, again.unchanged, again.removed) == (0, 0, 4, 0)
    assert review_rows(db, name) == before  # not even a timestamp moved

    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    rows[0]["verdict"] = "relevant"
    import_review_csv(db, name, write_csv(tmp_path / "r.csv", rows))
    kept = queue_disagreements(db, name, threshold=0.4)
    assert (kept.unchanged, kept.adjudicated, kept.pending) == (4, 1, 3)
    # a higher threshold drops pending rows but keeps the verdict made on unchanged scores
    raised = queue_disagreements(db, name, threshold=0.9)
    assert (raised.removed, raised.adjudicated, raised.pending) == (3, 1, 0)

    # the judges re-score the adjudicated pair: it goes back to pending, revision 2
    scores = disagreeing_scores()
    scores["q1"][0] = ("d1", 0.95, 0.05)
    set_scores(db, name, scores)
    assert adjudicated_labels(db, name) == {}  # a stale verdict never overrides new scores
    requeued = queue_disagreements(db, name, threshold=0.4)
    assert (requeued.requeued, requeued.new, requeued.adjudicated) == (1, 3, 0)
    row = db.execute("""SELECT r.status, r.verdict, r.score_revision, r.judge1_score
                        FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
                        WHERE g.dataset = %s AND g.external_id = 'q1'""", (name,)).fetchone()
    assert row == ("pending", None, 2, 0.95)

    # judges now agree everywhere: the queue empties
    set_scores(db, name, agreeing_scores())
    assert queue_disagreements(db, name, threshold=0.4).removed == 4
    assert review_rows(db, name) == []


def test_difference_of_exactly_the_threshold_is_not_queued(db, dataset):
    set_scores(db, dataset["name"], {"q1": [("d1", 0.9, 0.5), ("d2", 0.1, 0.55)]})
    counts = queue_disagreements(db, dataset["name"], threshold=0.4)
    assert counts.new == 1  # 0.9 - 0.5 is 0.4 (not above); 0.55 - 0.1 = 0.45 is


# ---------------------------------------------------------------------------------------
# Export -> edit -> import


def test_review_round_trip_export_edit_import(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    exported = export_review_csv(db, name, tmp_path / "review.csv")
    assert (exported.rows, exported.pending, exported.adjudicated) == (4, 4, 0)
    lines = exported.path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == ",".join(CSV_COLUMNS) and len(lines) == 5
    rows = read_csv(exported.path)
    assert [r["query_external_id"] for r in rows] == ["q1", "q3", "q5", "q7"]
    assert all(r["verdict"] == "" and r["status"] == "pending" for r in rows)
    assert rows[0]["query"] == QUERIES["q1"] and rows[0]["doc_snippet"].startswith("Document 1")
    assert rows[0]["judge1_score"] == "0.9" and rows[0]["score_diff"] == "0.8"
    assert rows[1]["query"] == "'+3 question | about topic 3"

    rows[0].update(verdict="Relevant", reviewer="ana", note="clearly on topic")
    rows[1].update(verdict="not  relevant", reviewer="ana")
    imported = import_review_csv(db, name, write_csv(tmp_path / "edited.csv", rows))
    assert (imported.adjudicated, imported.unchanged, imported.blank) == (2, 0, 2)
    stored = {(r[2], r[3]): r for r in db.execute("""
        SELECT r.status, r.verdict, g.external_id, d.external_id, r.reviewer, r.note,
               r.adjudicated_at IS NOT NULL
        FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
        JOIN l2_insights d ON d.id = r.doc_id WHERE g.dataset = %s""", (name,))}
    assert stored[("q1", "d1")] == ("adjudicated", "relevant", "q1", "d1", "ana",
                                    "clearly on topic", True)
    assert stored[("q3", "d5")][:2] == ("adjudicated", "not relevant")
    assert stored[("q5", "d9")][:2] == ("pending", None)

    # importing the same file again changes nothing; the next export shows the verdicts
    again = import_review_csv(db, name, tmp_path / "edited.csv")
    assert (again.adjudicated, again.unchanged) == (0, 2)
    rows = read_csv(export_review_csv(db, name, tmp_path / "review2.csv").path)
    assert [r["verdict"] for r in rows] == ["relevant", "not relevant", "", ""]
    assert [r["status"] for r in rows][:2] == ["adjudicated", "adjudicated"]


def test_adjudicated_label_overrides_both_judges(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    # q1/d1: judges 0.9 vs 0.1 (mean 0.5: not relevant); the human says relevant
    rows[0]["verdict"] = "relevant"
    import_review_csv(db, name, write_csv(tmp_path / "r.csv", rows))
    labels = {(f.query_id, f.doc_id): f for f in load_final_labels(db, name, threshold=0.5)}
    overrides = adjudicated_labels(db, name)
    (key, verdict), = overrides.items()
    assert verdict == 1 and labels[key].label == 1 and labels[key].source == "adjudicated"
    result = dataset_agreement(db, name, SETTINGS)
    assert result.n_adjudicated_overrides == 1
    judge1, judge2, final = result.versus_human
    # judge 2 misses the relevant doc of q1, q3, q5, q7; the final labels recover q1 only
    assert judge2.report.recall == pytest.approx(4 / 8)
    assert final.report.recall == pytest.approx(5 / 8)
    assert judge1.report.recall == 1.0 and judge1.report.precision == 1.0


@pytest.mark.parametrize("damage, rows_named", [
    ("header", [1]), ("verdict", [3]), ("unknown_id", [2]), ("duplicate", [6]),
    ("dataset", [4]), ("short_row", [5]), ("several", [2, 3, 5]),
])
def test_malformed_file_changes_nothing_and_names_rows(db, dataset, tmp_path, damage,
                                                       rows_named):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    for row in rows:
        row["verdict"] = "relevant"  # every row valid and filled ...
    header = list(CSV_COLUMNS)
    path = tmp_path / "bad.csv"
    if damage == "header":
        header[header.index("verdict")] = "verdcit"
        rows = [{("verdcit" if k == "verdict" else k): v for k, v in r.items()} for r in rows]
    elif damage == "verdict":
        rows[1]["verdict"] = "maybe"
    elif damage == "unknown_id":
        rows[0]["doc_id"] = "999999999"
    elif damage == "duplicate":
        rows.append(dict(rows[1]))
    elif damage == "dataset":
        rows[2]["dataset"] = "other"
    elif damage == "several":
        rows[0]["query_id"] = "x"
        rows[1]["verdict"] = "yes"
        rows[3]["verdict"] = "irrelevant"
    write_csv(path, rows, header)
    if damage == "short_row":
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[4] = ",".join(lines[4].split(",")[:5])
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = review_rows(db, name)
    with pytest.raises(ReviewFileError) as caught:
        import_review_csv(db, name, path)
    assert caught.value.rows == rows_named
    message = str(caught.value)
    assert "nothing was imported" in message and "\n" not in message
    for row in rows_named:
        assert f"row {row}:" in message
    assert review_rows(db, name) == before  # ... yet nothing at all was written


def test_stale_file_is_refused(db, dataset, tmp_path):
    name = dataset["name"]
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    rows = read_csv(export_review_csv(db, name, tmp_path / "r.csv").path)
    rows[0]["verdict"] = "relevant"
    rows[2]["verdict"] = "not relevant"
    path = write_csv(tmp_path / "edited.csv", rows)
    # the judges re-score q5/d9 after the export (not yet re-queued)
    scores = disagreeing_scores()
    scores["q5"][0] = ("d9", 0.8, 0.2)
    set_scores(db, name, scores)
    before = review_rows(db, name)
    with pytest.raises(ReviewFileError, match=r"row 4: the row is stale") as caught:
        import_review_csv(db, name, path)
    assert caught.value.rows == [4]
    assert review_rows(db, name) == before
    # after the queue is refreshed the file is still stale (its revision is old)
    queue_disagreements(db, name, threshold=0.4)
    with pytest.raises(ReviewFileError, match=r"row 4: the row is stale"):
        import_review_csv(db, name, path)
    # a row without a verdict may be stale: it is skipped, not refused
    rows[2]["verdict"] = ""
    imported = import_review_csv(db, name, write_csv(tmp_path / "edited.csv", rows))
    assert (imported.adjudicated, imported.blank) == (1, 3)


# ---------------------------------------------------------------------------------------
# Gate and report


def test_gate_uses_the_lower_bound_not_the_point_estimate():
    assert not kappa_gate(lower_bound=0.62, kappa=0.78, floor=0.7, n_scored=50).passed
    assert kappa_gate(lower_bound=0.70, kappa=0.78, floor=0.7, n_scored=50).passed
    nothing = kappa_gate(lower_bound=None, kappa=None, floor=0.7, n_scored=0)
    assert not nothing.passed and "No (query, document) pair is scored" in nothing.description
    one_query = kappa_gate(lower_bound=None, kappa=0.9, floor=0.7, n_scored=4)
    assert not one_query.passed and "at least 2 judged queries" in one_query.description


def test_markdown_report_has_every_section_and_no_nan(db, dataset):
    name = dataset["name"]
    text = format_agreement_markdown(dataset_agreement(db, name, SETTINGS))  # nothing judged
    assert "Gate: FAIL" in text and "No statistics" in text
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    text = format_agreement_markdown(dataset_agreement(db, name, SETTINGS))
    for heading in ("# Judge agreement", "## Judge 1 vs judge 2", "## Per-query kappa",
                    "## Worst-agreeing queries", "## Judges vs human labels", "## Review queue"):
        assert heading in text
    assert "Landis & Koch" in text and "4 pair(s) wait for a human verdict" in text
    assert "question 1 \\| about" in text  # a pipe in a query cannot break the table
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)


def test_agreement_settings_parse_and_reject_bad_values(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("agreement:\n  kappa_floor: 0.6\n  bootstrap_resamples: 500\n")
    parsed = load_settings(config, environ={}).agreement
    assert (parsed.kappa_floor, parsed.bootstrap_resamples, parsed.disagreement_threshold) == (
        0.6, 500, 0.4)
    assert load_settings(environ={"EVAL_HARNESS_CONFIG": str(config)}).agreement.kappa_floor \
        == 0.6
    for bad in ("kappa_flor: 0.7", "disagreement_threshold: 1.5", "bootstrap_resamples: 0",
                "relevance_threshold: high"):
        config.write_text(f"agreement:\n  {bad}\n")
        with pytest.raises(ConfigError, match="agreement"):
            load_settings(config, environ={})


# ---------------------------------------------------------------------------------------
# Dagster asset + blocking check, CLI


@pytest.fixture
def project(tmp_path, dataset, store, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(f"""
default_dataset: {dataset['name']}
datasets:
  {dataset['name']}:
    path: data
agreement:
  kappa_floor: 0.70
  bootstrap_resamples: 300
dagster:
  home: dagster-home
""")
    monkeypatch.setenv("DATABASE_URL", store.url)
    monkeypatch.delenv("EVAL_HARNESS_CONFIG", raising=False)
    return {"config": config, "root": tmp_path, **dataset}


def materialize_agreement(project, store):
    resources = default_resources(config_path=str(project["config"]), database_url=store.url)
    result = dg.materialize([judge_agreement, kappa_lower_bound_above_floor],
                            resources=resources, raise_on_error=False)
    materialization = result.get_asset_materialization_events()[0] \
        .step_materialization_data.materialization
    (check,) = result.get_asset_check_evaluations()
    return result, {k: v.value for k, v in materialization.metadata.items()}, check


def test_asset_check_passes_when_judges_agree(project, store, db):
    set_scores(db, project["name"], agreeing_scores())
    result, metadata, check = materialize_agreement(project, store)
    assert result.success and check.passed
    assert metadata["kappa"] == 1.0 and metadata["kappa_ci_low"] == 1.0
    assert metadata["n_scored"] == 2 * N_QUERIES and metadata["n_unscored"] == 0
    assert metadata["landis_koch"] == "Almost Perfect Agreement"
    assert metadata["gwet_ac1"] == 1.0 and metadata["krippendorff_alpha"] > 0.9
    assert check.metadata["floor"].value == 0.7 and check.metadata["lower_bound"].value == 1.0
    report = project["root"] / "reports" / "agreement.md"
    assert report.is_file() and "Gate: PASS" in report.read_text(encoding="utf-8")


def test_asset_check_fails_on_a_low_lower_bound_and_blocks(project, store, db):
    set_scores(db, project["name"], disagreeing_scores())
    result, metadata, check = materialize_agreement(project, store)
    assert not result.success  # the blocking check failed the run
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    assert metadata["kappa_ci_low"] < 0.7 and metadata["n_scored"] == 2 * N_QUERIES
    assert metadata["review_pending"] == 4 and metadata["review_queued_new"] == 4
    assert check.metadata["lower_bound"].value == metadata["kappa_ci_low"]
    assert check.metadata["kappa"].value == metadata["kappa"]
    assert check.metadata["floor"].value == 0.7
    assert "below the floor 0.70" in check.description


def test_asset_check_fails_clearly_when_nothing_is_scored(project, store):
    result, metadata, check = materialize_agreement(project, store)
    assert metadata["n_scored"] == 0 and metadata["kappa"] is None
    assert metadata["n_unscored"] == 0 and metadata["landis_koch"] == "Undefined"
    assert not check.passed and "No (query, document) pair is scored" in check.description


def run_cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_review_round_trip_and_agreement_exit_codes(project, db, capsys, tmp_path):
    cfg = project["config"]
    set_scores(db, project["name"], disagreeing_scores())
    code, out, err = run_cli(capsys, "--config", cfg, "agreement")
    assert code == 1 and "Gate: FAIL" in out  # ran, found the labels untrustworthy
    code, out, _ = run_cli(capsys, "--config", cfg, "agreement", "--json")
    parsed = json.loads(out)
    assert code == 1 and parsed["gate"]["passed"] is False and parsed["report"]["n_scored"] == 16

    file = tmp_path / "out" / "review.csv"
    code, out, err = run_cli(capsys, "--config", cfg, "review", "export", file)
    assert code == 0 and "exported 4 pair(s) (4 pending, 0 adjudicated)" in out, err
    rows = read_csv(file)
    rows[0]["verdict"] = "sort of"
    write_csv(file, rows)
    code, out, err = run_cli(capsys, "--config", cfg, "review", "import", file)
    assert code == 2 and err.count("\n") == 1 and "row 2: verdict 'sort of'" in err
    rows[0]["verdict"] = "not relevant"
    write_csv(file, rows)
    code, out, err = run_cli(capsys, "--config", cfg, "review", "import", file)
    assert code == 0 and "1 verdict(s) stored" in out, err

    set_scores(db, project["name"], agreeing_scores())
    code, out, _ = run_cli(capsys, "--config", cfg, "agreement", "--dataset", project["name"])
    assert code == 0 and "Gate: PASS" in out
    code, _, err = run_cli(capsys, "--config", cfg, "review", "export", file, "--dataset", "nope")
    assert code == 2 and "Dataset 'nope' is not in the store" in err
    code, _, err = run_cli(capsys, "--config", cfg, "review", "import", tmp_path / "missing.csv")
    assert code == 2 and "no such file" in err


def test_agreement_is_its_own_job_until_the_judges_feed_it():
    from eval_harness_pipelines.definitions import defs
    from eval_harness_pipelines.jobs import MAIN_JOB
    defs = defs()  # what Dagster loads: the definitions of ./config.yaml

    dg.Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("agreement_job")
    assert job.asset_layer.selected_asset_keys == {dg.AssetKey("judge_agreement")}
    assert dg.AssetKey("judge_agreement") not in \
        defs.resolve_job_def(MAIN_JOB).asset_layer.selected_asset_keys

"""The judges against people, on the real store with the judges run through the SDKs against
the fake LLM server: each judge's kappa with the human verdicts (human sample and adjudicated
review queue) against sklearn, written onto the newest judges' record rows with its interval
and n by the agreement step, shown by `agreement`, `--json` and the run report; and a human
sample verdict on an anchored pair reaching the next run's drift comparison."""

from __future__ import annotations

import json

import pytest
from sklearn.metrics import cohen_kappa_score

from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.judge_pairs import load_judge_pairs
from eval_harness.agreement.people import human_verdicts, recorded_agreement
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.agreement.review import export_review_csv, import_review_csv, queue_disagreements
from eval_harness.agreement.sample import export_sample_csv, import_sample_csv
from eval_harness.judges.anchors.drift import drift_reasons
from eval_harness.judges.anchors.sql import frozen_anchors
from eval_harness.judges.dual.record import load_record
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.reporting.blocks import Table
from eval_harness.reporting.sections.agreement import agreement_section
from eval_harness.settings.judges import AnchorSettings, DriftSettings
from eval_harness_pipelines import cli
from fake_llm_judges import DriftingJudge, JudgeBehaviours
from fake_llm_server import judge_settings
from judge_cli_env import judge_cli_environment
from judge_runs import LLM, small_dataset
from review_store import read_csv, write_csv

THRESHOLD = 0.5


def _dataset(conn, tmp_path, queries: int = 8) -> str:
    return small_dataset(conn, tmp_path, "people", queries=queries)


def _label(key) -> str:
    """A person's verdict on a pair, fixed by its ids: not what either judge says."""
    return "relevant" if (key[0] * 7 + key[1]) % 3 == 0 else "not relevant"


def _fill_sample(conn, name, path, verdict_of=_label, *, n: int) -> dict:
    rows = read_csv(export_sample_csv(conn, name, path, n=n).path)
    for row in rows:
        row["verdict"] = verdict_of((int(row["query_id"]), int(row["doc_id"])))
    import_sample_csv(conn, name, write_csv(path, rows))
    return {(int(r["query_id"]), int(r["doc_id"])): r["verdict"] == "relevant" for r in rows}


def test_each_judges_kappa_with_people_matches_sklearn_and_reaches_the_record(
        settings, conn, tmp_path, fake):
    name = _dataset(conn, tmp_path)
    fake.responder = JudgeBehaviours({"claude-haiku-4-5": DriftingJudge(0, 0.3)})
    config = judge_settings(settings, fake, budget_usd=None, **LLM)
    run = judge_dataset(conn, config, name)
    assert [r.people_kappa for r in load_record(conn, name)] == [None, None]

    sample = _fill_sample(conn, name, tmp_path / "sample.csv", n=5)
    queue_disagreements(conn, name, threshold=0.2)
    queued = read_csv(export_review_csv(conn, name, tmp_path / "review.csv").path)
    assert queued  # the drifting judge 2 disagrees with judge 1 on some pairs
    for row in queued:  # a person settles each: the opposite of the sample's verdict, if any
        key = (int(row["query_id"]), int(row["doc_id"]))
        row["verdict"] = "not relevant" if sample.get(key, False) else "relevant"
    import_review_csv(conn, name, write_csv(tmp_path / "review.csv", queued))
    people = {**sample, **{(int(r["query_id"]), int(r["doc_id"])): r["verdict"] == "relevant"
                           for r in queued}}  # an adjudication wins over the sample's verdict
    assert human_verdicts(conn, name).labels == people

    pairs = load_judge_pairs(conn, name)
    result = dataset_agreement(conn, name, config.agreement)
    for judge, scores in ((1, pairs.scores1), (2, pairs.scores2)):
        both = [(s > THRESHOLD, people[k]) for k, s in zip(pairs.keys, scores)
                if k in people and s is not None]
        expected = cohen_kappa_score([int(a) for a, _ in both], [int(b) for _, b in both])
        figures = result.people[judge - 1].report
        assert figures.kappa.value == pytest.approx(expected, abs=1e-12)
        assert figures.n_scored == len(both)
        interval = figures.kappa_interval
        assert interval.low <= figures.kappa.value <= interval.high
        assert interval.n_queries == len({k[0] for k in people if k in set(pairs.keys)})
    assert result.people_sources == {"human sample": len(set(sample) - {
        (int(r["query_id"]), int(r["doc_id"])) for r in queued}), "adjudicated": len(queued)}

    result, recorded = recorded_agreement(conn, result)  # what `agreement` and the asset do
    assert recorded.written and recorded.record_runs == {1: run.run_id, 2: run.run_id}
    rows = load_record(conn, name)
    assert rows == list(result.record)
    for row, judge in zip(rows, result.people):
        interval = judge.report.kappa_interval
        assert (row.people_kappa, row.people_kappa_low, row.people_kappa_high) == (
            judge.report.kappa.value, interval.low, interval.high)
        assert (row.people_pairs, row.people_queries) == (judge.report.n_scored,
                                                          interval.n_queries)
        kappa = result.report.kappa_interval
        assert (row.kappa_other_low, row.kappa_other_high) == (kappa.low, kappa.high)
        assert row.kappa_other_low <= row.kappa_other <= row.kappa_other_high

    text = format_agreement_markdown(result)
    record = text.split("## Judges' record", 1)[1].split("## Judges vs people", 1)[0]
    assert f"{rows[0].people_kappa:.3f} [{rows[0].people_kappa_low:.3f}, " in record
    assert f"({rows[0].people_pairs} pairs, {rows[0].people_queries} queries)" in record
    assert "judge 1 (openai:gpt-4o) against people: kappa" in text
    as_json = json.loads(json.dumps(result.to_dict(), allow_nan=False))  # `agreement --json`
    assert as_json["record"][0]["people_kappa"] == rows[0].people_kappa
    assert as_json["people"][1]["report"]["n_scored"] == rows[1].people_pairs
    section = agreement_section(conn, config, name).section  # the run report
    table = next(b for b in section.blocks if isinstance(b, Table) and b.caption
                 and b.caption.startswith("Judges' record"))
    assert table.rows[0][7].startswith(f"{rows[0].people_kappa:.3f} [")


def test_a_sample_verdict_on_an_anchor_changes_the_next_comparisons_human_agreement(
        settings, conn, tmp_path, fake, store, monkeypatch, capsys):
    name = _dataset(conn, tmp_path, queries=6)
    config = judge_settings(settings, fake, budget_usd=None, **LLM,
                            anchors=AnchorSettings(True, 20, 0))
    judge_dataset(conn, config, name)  # freezes 20 anchors, none with a human verdict
    anchored = {(row[4], row[5]): row[9] for row in frozen_anchors(conn, name) if row[0] == 1}
    before = judge_dataset(conn, config, name).anchors[0]
    assert (before.human_pairs, before.human_agreement) == (0, None)

    # people label every sampled pair the opposite of judge 1's frozen label on the anchors
    external = {qid: q.external_id for qid, q in load_judge_pairs(conn, name).queries.items()}
    _fill_sample(conn, name, tmp_path / "sample.csv", lambda key: (
        "not relevant" if anchored.get((external[key[0]], key[1]), False) else "relevant"),
        n=6)
    result, recorded = recorded_agreement(conn, dataset_agreement(conn, name,
                                                                  config.agreement))
    assert recorded.anchors_updated == 2 * len(anchored)  # both judges' rows of each anchor
    after = judge_dataset(conn, config, name).anchors[0]
    assert after.human_pairs == len(anchored) and after.human_agreement == 0.0
    assert any("agrees with the human verdicts on 0%" in reason
               for reason in drift_reasons(after, DriftSettings()))

    # people change their minds; `eval-harness judge` hands the anchors the verdicts itself
    _fill_sample(conn, name, tmp_path / "sample.csv", lambda key: (
        "relevant" if anchored.get((external[key[0]], key[1]), False) else "not relevant"),
        n=6)
    conn.commit()
    config_file = tmp_path / "config.yaml"
    config_file.write_text(f"""
default_dataset: {name}
datasets:
  {name}:
    path: {tmp_path / name}
judges:
  budget_usd: 1.0
  judge1: openai:gpt-4o
  judge2: anthropic:claude-haiku-4-5
  anchors: {{pairs: 20, seed: 0}}
  rate_limits:
    openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
    anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
""")
    judge_cli_environment(monkeypatch, store, fake, tag="people")
    assert cli.main(["--config", str(config_file), "judge", "--json"]) == 0
    judge1 = json.loads(capsys.readouterr()[0])["anchors"][0]
    assert (judge1["human_pairs"], judge1["human_agreement"]) == (len(anchored), 1.0)

"""Staged dual judging on a real store: judge 2 stops once kappa's lower bound on its sample
clears the floor, the rest of the pairs are "judge 2 not asked", and the saving is what
`judge --dry-run` says judge 2 would still pay."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import replace

import pytest

from colliding_processes import beir
from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.judge_pairs import load_final_labels
from eval_harness.agreement.labels import load_judge_labels
from eval_harness.agreement.review import queue_disagreements
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.dual.dry_run import estimate_judge_run
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.judges.staging.staged import (
    interim_looks,
    sample_order,
    sample_sizes,
    stop_rule,
    stored_saving,
)
from eval_harness.reporting.sections.agreement import agreement_section
from eval_harness.settings import AgreementSettings, ConfigError
from eval_harness.settings.judges import StagedSettings, parse_judge_settings
from fake_llm_server import default_reply, judge_settings

N_QUERIES = 12
STAGED = StagedSettings(enabled=True, seed=0, first_queries=3, step_queries=3)


@pytest.fixture
def dataset(tmp_path, conn):
    """12 queries, 2 expected documents each plus hybrid hits, texts unique to this test."""
    tag = uuid.uuid4().hex[:8]
    folder = beir(tmp_path / "data", n_docs=30, n_queries=N_QUERIES, tag=tag)
    name = f"staged_{tag}"
    ingest_beir(conn, folder, name=name)
    return name


def _staged(settings, **judges):
    return replace(settings, judges=replace(settings.judges, staged=STAGED, hybrid_top_k=2,
                                            **judges))


def _rows(conn, name):
    return conn.execute("""
        SELECT id, judged_docs, judge1_score, judge2_score, judge1_status, judge2_status, kappa
        FROM ground_truth WHERE dataset = %s ORDER BY id""", (name,)).fetchall()


def _coin(api, system, user, body):
    """Judge 2 of the disagreeing pair: relevant or not by a hash of the prompt, unrelated to
    what judge 1 (the default reply, word overlap) says."""
    if api == "anthropic" and "Relevance score" in user:
        return "1.0" if hashlib.sha256(user.encode()).digest()[0] % 2 else "0.0"
    return default_reply(api, system, user, body)


def test_agreeing_local_judges_stop_after_the_first_sample(settings, conn, dataset):
    local = _staged(replace(settings, openai_api_key=None, anthropic_api_key=None),
                    judge1="local:lexical", judge2="local:lexical")
    summary = judge_dataset(conn, local, dataset)
    staging = summary.staging
    assert summary.complete and summary.queries_written == N_QUERIES
    # identical judges: kappa 1 on 3 queries, its lower bound 1.0 >= 0.70 at the first look
    assert staging.cleared and len(staging.steps) == 1 and staging.lower_bound == 1.0
    assert staging.sample_queries == 3 and staging.skipped_queries == N_QUERIES - 3
    rows = _rows(conn, dataset)
    sampled = {p.query_id for p in _first(conn, local, dataset, 3)}
    skipped_pairs = 0
    for qid, docs, s1, s2, st1, st2, kappa in rows:
        assert st1 == ["scored"] * len(docs) and None not in s1
        if qid in sampled:
            assert st2 == ["scored"] * len(docs) and s2 == s1 and kappa is not None
        else:
            assert st2 == ["skipped"] * len(docs) and s2 == [None] * len(docs)
            assert kappa is None
            skipped_pairs += len(docs)
    assert summary.judge2_skipped == staging.skipped_pairs == skipped_pairs > 0
    assert summary.judge2_counts.scored == summary.pairs - skipped_pairs
    assert staging.saved_usd == 0 and staging.saved_requests == 0  # a local judge 2 is free
    assert "judge 2 skipped" in summary.format()
    # 12 queries by 3: early looks at 3, 6 and 9 share the gate's one-sided 2.5%
    assert staging.looks == 3 and staging.steps[0].confidence == pytest.approx(1 - 0.05 / 3)
    assert ("stopped after a sample of 3 of 12 queries (lower bound of kappa with alpha 2.5% "
            "spent over 3 looks (Bonferroni: each look reads a 98.33% interval): 1.000 >= floor "
            "0.70, look 1)") in summary.format()
    assert summary.metadata()["staging_stop_rule"] == staging.rule.describe()
    assert summary.to_dict()["staging"]["looks"] == 3
    again = judge_dataset(conn, local, dataset)  # same seed: the same sample, the same rows
    assert again.staging.sample_queries == 3 and _rows(conn, dataset) == rows


def _first(conn, settings, dataset, n):
    from eval_harness.judges.dual.plan import plan_queries
    return sample_order(plan_queries(conn, dataset, settings), settings.judges.staged.seed)[:n]


def test_disagreeing_judges_grow_the_sample_to_every_query(settings, conn, dataset, fake):
    fake.responder = _coin
    config = _staged(judge_settings(settings, fake, judge1="openai:gpt-4o",
                                    judge2="anthropic:claude-haiku-4-5"))
    summary = judge_dataset(conn, config, dataset)
    staging = summary.staging
    assert not staging.cleared and staging.sample_queries == N_QUERIES
    assert [s.queries for s in staging.steps] == [3, 6, 9, 12]
    # the early looks read the spent level, the last (every query) the gate's own
    assert [s.confidence for s in staging.steps] == [pytest.approx(1 - 0.05 / 3)] * 3 + [0.95]
    assert all(s.lower_bound is None or s.lower_bound < 0.70 for s in staging.steps)
    assert staging.skipped_pairs == summary.judge2_skipped == 0 and staging.saved_usd == 0
    assert summary.complete and summary.provider_calls == 2 * summary.pairs
    assert len(fake.chat_records("anthropic")) == summary.pairs
    assert all(st2 == ["scored"] * len(docs) for _, docs, *_, st2, _ in _rows(conn, dataset))
    assert "never reached the floor" in summary.format()


def test_agreement_labels_and_review_treat_skipped_pairs_as_not_asked(settings, conn, dataset,
                                                                      fake):
    config = _staged(judge_settings(settings, fake, judge1="openai:gpt-4o",
                                    judge2="anthropic:claude-haiku-4-5"))
    summary = judge_dataset(conn, config, dataset)
    staging = summary.staging
    assert staging.cleared and staging.skipped_pairs > 0
    result = dataset_agreement(conn, dataset, config.agreement)
    assert result.n_judge2_skipped == staging.skipped_pairs
    assert result.n_pairs == summary.pairs
    # the judge-judge statistics see the sample only, and nothing in it is "unscored"
    assert result.report.n_pairs == summary.pairs - staging.skipped_pairs
    assert result.report.n_unscored == 0 and result.gate.passed
    assert len(result.report.per_query) == staging.sample_queries
    rows = {qid: (docs, s1, st2) for qid, docs, s1, _, _, st2, _ in _rows(conn, dataset)}
    labels = load_final_labels(conn, dataset, threshold=0.5)
    assert len(labels) == summary.pairs and all(f.label is not None for f in labels)
    for label in labels:
        docs, s1, st2 = rows[label.query_id]
        i = docs.index(label.doc_id)
        if st2[i] == "skipped":
            assert label.source == "judge1" and label.label == int(s1[i] > 0.5)
        else:
            assert label.source == "judges"
    # calibration's judge labels (agreement.disagreement_rule) read them the same way
    judge_labels = load_judge_labels(conn, dataset, config.agreement)
    assert judge_labels.sources.get("judge1") == staging.skipped_pairs
    assert judge_labels.sources.get("unscored", 0) == 0
    for label in labels:
        assert judge_labels.labels[label.query_id][label.doc_id] == label.label \
            or label.source == "judges"  # the rule may differ from the mean on a disagreement
    # make one skipped pair look like a disagreement to a careless reader: judge 1 says 1.0
    qid = next(q for q, (_, _, st2) in rows.items() if st2[0] == "skipped")
    conn.execute("UPDATE ground_truth SET judge1_score[1] = 1.0 WHERE id = %s", (qid,))
    conn.commit()
    counts = queue_disagreements(conn, dataset, threshold=0.4)
    queued = conn.execute("SELECT ground_truth_id FROM judge_review r JOIN ground_truth g "
                          "ON g.id = r.ground_truth_id WHERE g.dataset = %s",
                          (dataset,)).fetchall()
    assert qid not in {q for (q,) in queued} and counts.pending == len(queued)


def test_the_saving_is_what_a_dry_run_says_judge_2_would_still_pay(settings, conn, dataset,
                                                                   fake):
    config = _staged(judge_settings(settings, fake, judge1="openai:gpt-4o",
                                    judge2="anthropic:claude-haiku-4-5"))
    before = estimate_judge_run(conn, config, dataset).judges[1]
    conn.rollback()
    summary = judge_dataset(conn, config, dataset)
    staging = summary.staging
    sample_pairs = summary.pairs - staging.skipped_pairs
    assert staging.cleared and staging.sample_queries == 3
    # judge 1 paid every pair, judge 2 only its sample
    assert len(fake.chat_records("openai")) == summary.pairs
    assert len(fake.chat_records("anthropic")) == sample_pairs
    after = estimate_judge_run(conn, config, dataset).judges[1]
    conn.rollback()
    assert before.to_pay == summary.pairs and after.to_pay == staging.skipped_pairs
    assert staging.saved_requests == after.to_pay
    assert staging.saved_input_tokens == after.input_tokens
    assert staging.saved_output_tokens == after.output_tokens
    assert staging.saved_usd == pytest.approx(after.cost_usd) and staging.saved_usd > 0
    assert summary.to_dict()["staging"]["saved_usd"] == pytest.approx(after.cost_usd, abs=1e-6)
    assert summary.metadata()["judge2_skipped"] == staging.skipped_pairs
    # the report computes the same figures from the store
    stored = stored_saving(conn, config, dataset)
    assert (stored.skipped_pairs, stored.skipped_queries, stored.saved_requests) == (
        staging.skipped_pairs, staging.skipped_queries, staging.saved_requests)
    assert stored.saved_usd == pytest.approx(staging.saved_usd)
    section = agreement_section(conn, config, dataset).section
    text = " ".join(getattr(block, "text", "") for block in section.blocks)
    assert f"judge 2 was not asked for {staging.skipped_pairs} pair(s)" in text
    assert "lower bound of kappa with alpha 2.5% spent over 3 looks" in text
    assert f"{staging.saved_usd:.4f} USD" in text


@pytest.mark.unit
def test_sample_sizes_grow_by_step_and_end_at_every_query():
    assert list(sample_sizes(10, first=3, step=4)) == [3, 7, 10]
    assert list(sample_sizes(2, first=20, step=20)) == [2]
    assert list(sample_sizes(0, first=3, step=3)) == [0]


@pytest.mark.unit
def test_the_stop_rule_spends_alpha_over_the_looks_that_can_stop_early():
    agreement = AgreementSettings()
    # 300 queries by 20: 15 looks, the last (every query) skips nothing -> 14 early looks
    rule = stop_rule(agreement, StagedSettings(enabled=True), 300)
    assert rule.looks == interim_looks(300, first=20, step=20) == 14
    assert rule.look_confidence == pytest.approx(1 - 0.05 / 14)
    assert rule.confidence_at(280, 300) == rule.look_confidence
    assert rule.confidence_at(300, 300) == 0.95
    assert rule.describe() == ("lower bound of kappa with alpha 2.5% spent over 14 looks "
                               "(Bonferroni: each look reads a 99.64% interval)")
    one = stop_rule(agreement, StagedSettings(enabled=True, first_queries=20), 30)
    assert one.looks == 1 and one.look_confidence == 0.95
    assert "one early look: no alpha to spend" in one.describe()
    none = stop_rule(agreement, StagedSettings(enabled=True, first_queries=20), 12)
    assert none.looks == 0 and "no early look" in none.describe()


@pytest.mark.unit
def test_staged_settings_parse_and_refuse_bad_values():
    assert parse_judge_settings({}).staged == StagedSettings()
    assert not StagedSettings().enabled
    assert parse_judge_settings({"staged": True}).staged == StagedSettings(enabled=True)
    given = parse_judge_settings({"staged": {"enabled": True, "first_queries": 5,
                                             "step_queries": 2, "seed": 7}, "shards": 8})
    assert given.staged == StagedSettings(True, 7, 5, 2) and given.shards == 8
    for section, message in [({"staged": {"first_querys": 5}}, "judges.staged.first_querys"),
                             ({"staged": {"first_queries": 1}}, "judges.staged.first_queries"),
                             ({"staged": {"enabled": "yes"}}, "judges.staged.enabled"),
                             ({"staged": 3}, "judges.staged"),
                             ({"shards": 0}, "judges.shards")]:
        with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
            parse_judge_settings(section)

"""The LLM quality gates (grounding, answer_reward) through the real OpenAI SDK against the
local fake server, on a real store; and the local judges end to end through Dagster.

Each test stores its answers on its own day of 2024-08 with unique texts, so neither the
gate results nor the shared judge cache of other tests can answer for them.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import date, timedelta

import dagster as dg
import pytest
from psycopg.types.json import Jsonb

from eval_harness.gates.answers import import_configured_answers
from eval_harness.gates.gate import ANSWER_REWARD, GROUNDING, reward_to_score
from eval_harness.gates.registry import build_gates, judged_gates
from eval_harness.gates.runner import run_quality_gates
from eval_harness.gates.window import TimeWindow
from eval_harness.settings import GateSettings
from eval_harness.settings.judges import RetrySettings
from eval_harness_pipelines.assets.quality_gates import quality_gate_assets
from eval_harness_pipelines.resources import default_resources
from fake_llm_server import judge_settings, poor_verdicts_for

POOR = "POOR-ANSWER"
_days = iter(date(2024, 8, 1) + timedelta(days=i) for i in range(60))
pytestmark = pytest.mark.fake_llm(responder=poor_verdicts_for(POOR))  # poor for POOR answers


def llm_settings(settings, fake):
    """judge 1 = openai:gpt-4o on the fake server; both LLM gates on, rule gates off; one
    quick retry so an outage ends fast."""
    configured = judge_settings(settings, fake, judge1="openai:gpt-4o", judge2="local:lexical",
                                retry=RetrySettings(max_retries=1, base_delay_seconds=0.01))
    gates = configured.quality_gates
    enabled = {**gates.gates,
               "format_compliance": dataclasses.replace(gates.gate("format_compliance"),
                                                        enabled=False),
               "citation_coverage": dataclasses.replace(gates.gate("citation_coverage"),
                                                        enabled=False),
               GROUNDING: GateSettings(True, 0.8, 0.9, True),
               ANSWER_REWARD: GateSettings(True, 0.3, 0.9, False)}
    return dataclasses.replace(configured,
                               quality_gates=dataclasses.replace(gates, gates=enabled))


def store_answers(conn, texts: list[str]) -> tuple[TimeWindow, list[str]]:
    day = next(_days)
    tag = uuid.uuid4().hex[:8]
    ids = [f"llm-{tag}-{i}" for i in range(len(texts))]
    for answer_id, text in zip(ids, texts):
        conn.execute("INSERT INTO answers (id, query, answer, sources, created_at) "
                     "VALUES (%s, %s, %s, %s, %s)",
                     (answer_id, f"Does aspirin help? {tag}", f"{text} {tag} [1].",
                      Jsonb([{"id": "d1", "text": "Aspirin reduces heart attack risk. " * 40}]),
                      f"{day.isoformat()}T10:00:00Z"))
    conn.commit()
    return TimeWindow.day(day), ids


def gates_of(settings):
    return build_gates(settings.quality_gates, judged=judged_gates(settings))


def results(conn, ids, gate):
    rows = conn.execute("SELECT answer_id, score, passed, details FROM gate_results "
                        "WHERE gate = %s AND answer_id = ANY(%s) ORDER BY answer_id",
                        (gate, ids)).fetchall()
    return {row[0]: row[1:] for row in rows}


def count(conn, table, ids):
    return conn.execute(f"SELECT count(*) FROM {table} WHERE answer_id = ANY(%s)",
                        (ids,)).fetchone()[0]


def test_both_gates_judge_log_reflect_and_queue_once_and_rerun_costs_nothing(
        settings, conn, store, fake):
    configured = llm_settings(settings, fake)
    window, ids = store_answers(conn, ["Aspirin reduces heart attack risk",
                                       "Aspirin lowers the risk of heart attacks",
                                       f"{POOR} Bananas are yellow"])
    gates = gates_of(configured)
    assert "judge=openai:gpt-4o prompt=grounding-v1 temperature=0 max_tokens=500 " \
           "source_chars=500" in gates[0].version

    report = run_quality_gates(store, window, gates)

    grounding = results(conn, ids, GROUNDING)
    assert [row[:2] for row in grounding.values()] == [(1.0, True)] * 3
    reward = results(conn, ids, ANSWER_REWARD)
    # default reply: 2 * (0.4*0.9 + 0.4*0.8 + 0.2*0.6) - 1 = 0.6; the POOR one:
    # 2 * (0.4*0.2 + 0.4*0.1 + 0.2*0.1) - 1 = -0.72
    assert reward[ids[0]][0] == pytest.approx(reward_to_score(0.6))
    assert reward[ids[2]][:2] == (pytest.approx(reward_to_score(-0.72)), False)
    assert "reflexion" in reward[ids[2]][2] and "reflexion" not in reward[ids[0]][2]
    summary = {s.gate: s for s in report.summaries}
    assert summary[GROUNDING].passed and summary[GROUNDING].evaluated_now == 3
    assert not summary[ANSWER_REWARD].passed and not summary[ANSWER_REWARD].blocking

    log = conn.execute("SELECT answer_id, reward, model, prompt_version, input_tokens > 0, "
                       "cost > 0 FROM evaluation_log WHERE answer_id = ANY(%s) ORDER BY answer_id",
                       (ids,)).fetchall()
    assert [(r[0], r[2], r[3], r[4], r[5]) for r in log] == [
        (i, "openai:gpt-4o", "evaluation-v1", True, True) for i in ids]
    episode = conn.execute("SELECT answer_id, problem, lesson, query_embedding FROM "
                           "episode_memory WHERE answer_id = ANY(%s)", (ids,)).fetchall()
    assert episode == [(ids[2], "The answer ignored the context.", "Answer from the sources.",
                        None)]  # no ground-truth query with this text: no embedding
    queue = conn.execute("SELECT answer_id, improvement_hint, issues FROM regeneration_queue "
                         "WHERE answer_id = ANY(%s)", (ids,)).fetchall()
    assert queue == [(ids[2], "Answer the question asked.", ["ignores the question"])]
    # 3 grounding + 3 evaluations + 1 reflexion, each billed once by the judge pipeline
    assert fake.chat_requests == 7
    assert conn.execute("SELECT count(*) FROM api_cost_log WHERE run_id = %s",
                        (report.run_id,)).fetchone()[0] == 7

    rerun = run_quality_gates(store, window, gates_of(configured))
    assert all(s.evaluated_now == 0 for s in rerun.summaries)
    assert fake.chat_requests == 7  # zero new requests
    assert (count(conn, "evaluation_log", ids), count(conn, "episode_memory", ids),
            count(conn, "regeneration_queue", ids)) == (3, 1, 1)


@pytest.mark.parametrize("fault", ["503", "malformed"])
def test_a_judge_outage_fails_the_answers_and_the_run_completes(settings, conn, store, fake,
                                                               fault):
    configured = llm_settings(settings, fake)
    window, ids = store_answers(conn, ["Aspirin reduces heart attack risk",
                                       f"{POOR} Bananas are yellow"])
    fake.fault_rule = lambda api, user: fault

    report = run_quality_gates(store, window, gates_of(configured))

    for gate in (GROUNDING, ANSWER_REWARD):
        stored = results(conn, ids, gate)
        assert [row[:2] for row in stored.values()] == [(None, False)] * 2
        errors = [row[2]["error"] for row in stored.values()]
        expected = "server_error" if fault == "503" else "unscored"
        assert all(expected in error for error in errors), errors
    summary = {s.gate: s for s in report.summaries}
    assert not summary[GROUNDING].passed and summary[GROUNDING].unscored == 2
    assert (count(conn, "evaluation_log", ids), count(conn, "episode_memory", ids),
            count(conn, "regeneration_queue", ids)) == (0, 0, 0)

    fake.fault_rule = None
    recovered = run_quality_gates(store, window, gates_of(configured))
    if fault == "malformed":  # unscored replies are cached: asking again would not help
        assert all(s.evaluated_now == 0 for s in recovered.summaries)
        return
    # the provider is back: the answers it failed on are asked again
    assert {s.gate: s.evaluated_now for s in recovered.summaries} == {GROUNDING: 2,
                                                                      ANSWER_REWARD: 2}
    assert {s.gate: s.unscored for s in recovered.summaries} == {GROUNDING: 0, ANSWER_REWARD: 0}
    assert (count(conn, "evaluation_log", ids), count(conn, "episode_memory", ids),
            count(conn, "regeneration_queue", ids)) == (2, 1, 1)


def test_local_judges_gate_the_sample_answers_through_dagster(settings, fresh, tmp_path):
    """No API keys: judge 1 falls back to local:lexical; the materialization evaluates the
    sample day with every configured gate, both LLM gates included, and a rerun nothing."""
    assert settings.quality_gates.gate(GROUNDING) == GateSettings(True, 0.8, 0.9, True)
    # a database of its own: other tests' gate runs on the shared store gate this day too
    with fresh.connection() as conn:
        import_configured_answers(conn, settings)
        config = tmp_path / "config.yaml"
        config.write_text((settings.config_path.read_text())
            .replace("answers_file: datasets/",
                     f"answers_file: {settings.config_path.parent}/datasets/")
            .replace("path: datasets/", f"path: {settings.config_path.parent}/datasets/"))
        answers_asset, checks = quality_gate_assets(settings)
        resources = default_resources(config_path=str(config), database_url=fresh.url)

        def materialize():
            return dg.materialize([answers_asset, *checks], partition_key="2025-03-05",
                                  resources=resources, raise_on_error=False)

        first = materialize()
        metadata = first.asset_materializations_for_node("answers")[0].metadata
        assert metadata[f"{GROUNDING}_evaluated_now"].value == 10
        assert metadata[f"{ANSWER_REWARD}_evaluated_now"].value == 10
        # sa-0305-08: one claim the local judge cannot tell (support 0.615, in its band) decides
        # the answer's verdict, so the answer is unscored, never passed (local-grounding-v1)
        assert metadata[f"{GROUNDING}_unscored_now"].value == 1
        evaluations = {e.check_name: e for e in first.get_asset_check_evaluations()}
        assert set(evaluations) == {"format_compliance", "citation_coverage", GROUNDING,
                                    ANSWER_REWARD}
        # 2025-03-05 is the ungrounded day (datasets/answers/README.md): sa-0305-02 contradicts its
        # source, sa-0305-05 evades it (both 0 of their claims), sa-0305-08 is unscored (it ranks
        # first among the worst); grounding, a blocking gate, fails there while the rule-based
        # gates pass
        grounding = evaluations[GROUNDING]
        assert not grounding.passed and grounding.severity == dg.AssetCheckSeverity.ERROR
        assert grounding.metadata["passed_answers"].value == 4
        worst = grounding.metadata["worst_answer_ids"].value
        assert worst[:3] == ["sa-0305-08", "sa-0305-02", "sa-0305-05"]
        assert evaluations["format_compliance"].passed and evaluations["citation_coverage"].passed
        assert not evaluations[ANSWER_REWARD].passed  # 3 of 10 (warns only: not blocking)
        log = conn.execute("SELECT count(*) FROM evaluation_log WHERE answer_id LIKE 'sa-0305-%%' "
                           "AND model = 'local:lexical'").fetchone()[0]
        assert log == 10
        second = materialize()
        assert second.asset_materializations_for_node("answers")[0].metadata[
            "answers_evaluated_now"].value == 0

"""The rows the answer_reward gate writes: ``evaluation_log`` (each scored evaluation),
``episode_memory`` (one reflexion per answer) and ``regeneration_queue`` (answers for the live
assistant to regenerate); their only owner (tests/test_layers.py). Each function runs in the
caller's transaction (:mod:`eval_harness.gates.llm_gates`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from eval_harness.datasets import ground_truth


def reflected_answer_ids(conn: psycopg.Connection, answer_ids: Sequence[str]) -> set[str]:
    """Those of ``answer_ids`` that already have a reflexion in ``episode_memory``."""
    rows = conn.execute("SELECT answer_id FROM episode_memory WHERE answer_id = ANY(%s)",
                        (list(answer_ids),)).fetchall()
    return {row[0] for row in rows}


def log_answer_evaluation(conn: psycopg.Connection, *, run_id: str, answer_id: str,
                          query: str, answer: str, reward: float, reasoning: str,
                          criteria: Any, model: str, prompt_version: str,
                          input_tokens: int, output_tokens: int, cost: float) -> None:
    """One ``evaluation_log`` row: a scored answer_reward evaluation."""
    conn.execute(
        "INSERT INTO evaluation_log (run_id, answer_id, query, answer, reward, reasoning, "
        "criteria, model, prompt_version, input_tokens, output_tokens, cost) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (run_id, answer_id, query, answer, reward, reasoning, Jsonb(criteria), model,
         prompt_version, input_tokens, output_tokens, cost))


def remember_reflexion(conn: psycopg.Connection, *, answer_id: str, query: str,
                       reward: float, problem: str, lesson: str, model: str,
                       prompt_version: str) -> None:
    """The answer's reflexion into ``episode_memory``, unless it has one; the query
    embedding is that of a ground truth query with exactly this text, else NULL."""
    conn.execute(sql.SQL(
        "INSERT INTO episode_memory (answer_id, query, query_embedding, reward, problem, "
        "lesson, model, prompt_version) "
        "SELECT %(id)s, %(query)s, {embedding}, %(reward)s, %(problem)s, %(lesson)s, %(model)s, "
        "%(version)s ON CONFLICT (answer_id) DO NOTHING").format(
            embedding=ground_truth.embedding_of_query_text()),
        {"id": answer_id, "query": query, "reward": reward, "problem": problem,
         "lesson": lesson, "model": model, "version": prompt_version})


def queue_regeneration(conn: psycopg.Connection, *, answer_id: str, content_hash: str,
                       reward: float, improvement_hint: str, issues: list,
                       run_id: str) -> None:
    """The answer into ``regeneration_queue``; an answer already queued is queued again
    (pending, with this hint) only when its content changed."""
    conn.execute(
        "INSERT INTO regeneration_queue AS q (answer_id, content_hash, reward, "
        "improvement_hint, issues, run_id) VALUES (%s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (answer_id) DO UPDATE SET content_hash = EXCLUDED.content_hash, "
        "reward = EXCLUDED.reward, improvement_hint = EXCLUDED.improvement_hint, "
        "issues = EXCLUDED.issues, run_id = EXCLUDED.run_id, queued_at = now(), "
        "consumed_at = NULL WHERE q.content_hash <> EXCLUDED.content_hash",
        (answer_id, content_hash, reward, improvement_hint, Jsonb(issues), run_id))

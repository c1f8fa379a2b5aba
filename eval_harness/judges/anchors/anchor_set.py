"""The anchor set of a dataset: chosen and frozen once, re-judged by every later run.

The first run with ``judges.anchors`` on freezes a seeded sample of ``pairs`` of its judged
(query, document) pairs (:func:`choose_anchors`, :func:`freeze_from_run`): the texts, the
score and label each judge gave then, its spec and prompt version
(:func:`prompt_version`), and the human verdict on the pair where the review queue has one.
Every later run re-judges the set with the judges as config has them
(:func:`rejudge_anchors`: an LLM judge past the reply cache, a local judge anew) and stores
each judge's comparison with its frozen self (:mod:`.drift`). Verdicts people give later are
written onto the set by the agreement step through :func:`give_verdicts`.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import asdict, replace
from typing import Mapping, Sequence

import numpy as np
import psycopg

from eval_harness.datasets.ground_truth import query_external_ids
from eval_harness.datasets.judge_review import adjudicated_labels
from eval_harness.judges.anchors import sql
from eval_harness.judges.anchors.drift import AnchorComparison, compare_judge
from eval_harness.judges.client.budget import BudgetLineExhausted
from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.dual.scores import judgement_score
from eval_harness.judges.local.relevance import LOCAL_PROMPT_VERSION
from eval_harness.judges.protocol import Passage
from eval_harness.settings.judges import AnchorSettings, DriftSettings

PURPOSE = "anchor"  # api_cost_log.purpose of an anchor scoring


def choose_anchors(pairs: Sequence[tuple[str, int]], *, size: int, seed: int) -> list[int]:
    """Indices of a seeded sample of ``size`` of ``pairs`` ((query key, doc id)), in the
    pairs' sorted order; the same seed draws the same pairs whatever order they come in."""
    order = sorted(range(len(pairs)), key=lambda i: pairs[i])
    if len(order) <= size:
        return order
    picked = np.random.default_rng(seed).choice(len(order), size=size, replace=False)
    return [order[i] for i in sorted(picked)]


def human_fingerprint(rows: Sequence[tuple]) -> str:
    """A short digest of the human verdicts on one judge's anchors (``frozen_anchors`` rows):
    the same verdicts, the same digest."""
    verdicts = sorted((r[4], r[5], r[10]) for r in rows if r[10] is not None)
    return hashlib.sha256(repr(verdicts).encode()).hexdigest()[:16]


def prompt_version(judge) -> str | None:
    """The judge's prompt version; a local judge's is its heuristics' version."""
    if not hasattr(judge, "relevance_request"):
        return LOCAL_PROMPT_VERSION if getattr(judge, "provider", None) == "local" else None
    return judge.relevance_request("", "").prompt_version


def freeze_from_run(conn: psycopg.Connection, session, planned: Sequence[PlannedQuery],
                    first_scores: Mapping[int, tuple[list, list]],
                    documents: Mapping[int, Passage], settings: AnchorSettings, *,
                    dataset: str, threshold: float) -> int:
    """Freeze the anchor set of ``dataset`` from this run's stored scores (when it has none
    yet); how many pairs were frozen (0 when the set already exists)."""
    if sql.frozen_anchors(conn, dataset):
        return 0
    judged = [(plan, position, doc_id) for plan in planned if plan.query_id in first_scores
              for position, doc_id in enumerate(plan.doc_ids)
              if any(first_scores[plan.query_id][slot][position] is not None
                     for slot in (0, 1))]
    chosen = choose_anchors([(p.external_id, d) for p, _, d in judged], size=settings.pairs,
                            seed=settings.seed)
    humans = adjudicated_labels(conn, dataset)
    rows = []
    for index in chosen:
        plan, position, doc_id = judged[index]
        document = documents.get(doc_id)
        for slot, judge in ((1, session.judge1), (2, session.judge2)):
            score = first_scores[plan.query_id][slot - 1][position]
            if score is None:
                continue
            rows.append((slot, judge.spec, prompt_version(judge), plan.external_id, doc_id,
                         plan.text, "" if document is None else document.text, score,
                         score > threshold, humans.get((plan.query_id, doc_id))))
    sql.freeze_anchors(conn, dataset, rows)
    conn.commit()
    return len(chosen)


async def rejudge_anchors(conn: psycopg.Connection, session, drift: DriftSettings, *,
                          dataset: str, threshold: float, slots: Sequence[int] = (1, 2),
                          passages: Mapping[tuple[str, int], tuple[Passage, Passage]]
                          | None = None) -> list[AnchorComparison]:
    """Re-judge the frozen anchors of ``dataset`` with the judges in ``slots`` as config has
    them (an LLM judge past the cache, a local judge anew: it is free), and store and
    return each judge's comparison ([] before the set is frozen). ``passages``: the run's
    (query, document) passages by (query key, doc id), whose stored vectors
    ``local:embedding`` needs (an anchor without them is unscored, not compared)."""
    frozen = sql.frozen_anchors(conn, dataset)
    out = []
    for slot, judge in ((1, session.judge1), (2, session.judge2)):
        rows = [r for r in frozen if r[0] == slot]
        if not rows or slot not in slots:
            continue
        window = asyncio.Semaphore(64)
        is_llm = hasattr(judge, "relevance_request")

        async def score(row):
            q, d = (passages or {}).get((row[4], row[5]), (None, None))
            # the texts asked then; the vectors stored now (local:embedding's input)
            query = Passage(row[6], None, getattr(q, "embedding", None))
            document = Passage(row[7], row[5], getattr(d, "embedding", None))
            async with window:
                if is_llm:
                    return await judge.relevance(query, document, retest=True,
                                                 purpose=PURPOSE)
                return await judge.relevance(query, document)

        results = await asyncio.gather(*(score(r) for r in rows), return_exceptions=True)
        done = [r for r in results if not isinstance(r, BaseException)]
        cut_short = any(isinstance(r, BudgetLineExhausted) for r in results)
        comparison = compare_judge(
            slot, [(r[8], r[10]) for r in rows],
            [None if isinstance(r, BaseException) else judgement_score(r) for r in results],
            spec=judge.spec, prompt_version=prompt_version(judge), frozen_spec=rows[0][1],
            frozen_prompt_version=rows[0][3], threshold=threshold,
            confidence=drift.confidence, requests=sum(r.calls for r in done),
            cost_usd=sum(r.cost_usd for r in done))
        comparison = replace(comparison, cut_short=cut_short)
        sql.store_anchor_run(conn, {**asdict(comparison), "run_id": session.run_id,
                                           "dataset": dataset, "judge_spec": comparison.spec,
                                           "human_labels": human_fingerprint(rows)})
        conn.commit()
        out.append(comparison)
    return out


def give_verdicts(conn: psycopg.Connection, dataset: str,
                  verdicts: Mapping[tuple[int, int], bool]) -> int:
    """Write ``verdicts`` (``(ground_truth.id, doc id)`` -> relevant?) onto the anchors of
    ``dataset`` that are those pairs (each judge's row), in the caller's transaction; how many
    anchor rows changed. An anchor without a verdict there keeps the one it has."""
    external = query_external_ids(conn, sorted({qid for qid, _ in verdicts}))
    return sql.set_human_labels(conn, dataset, [
        (external[qid], doc, label) for (qid, doc), label in sorted(verdicts.items())
        if qid in external])

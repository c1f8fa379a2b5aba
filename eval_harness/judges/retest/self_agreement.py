"""Test-retest: each judge measured against itself.

With ``judges.retest`` on (or ``eval-harness judge --retest``), after a run has judged and
stored its queries, each judge re-scores every pair of a seeded sample of ``queries`` of
them ``repeats`` times **past the reply cache** (:meth:`LLMJudge.relevance` with
``retest=True``: sent even though the reply is cached, logged in ``api_cost_log`` with
purpose ``retest``, never cached, so the labels keep the reply they were read from).

Repeat 0 of a pair is the score the run stored for it (from the cache: nothing is paid for
it again); repeats 1.. are the retests. Every scoring is stored in ``judge_retests``
(:mod:`.sql`), and the figures come from
:func:`eval_harness.metrics.agreement.retest.retest_agreement`: the label flip rate (share of
retest labels that differ from the first), Krippendorff's alpha on the scores (interval) and
on the labels, the share of pairs whose label is not stable, each with a query-bootstrap
interval.

Only queries this run wrote take part (their first scores are known); with staged judging,
judge 2 is retested on the queries it judged. A local judge is deterministic and free: it is
re-scored too (its figures show flip rate 0), which costs nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import psycopg

from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.dual.scores import judgement_score
from eval_harness.judges.retest import sql
from eval_harness.judges.protocol import JudgeResult, Passage
from eval_harness.metrics.agreement.results import to_jsonable
from eval_harness.metrics.agreement.retest import RetestAgreement, retest_agreement
from eval_harness.settings.judges import RetestSettings


@dataclass(frozen=True)
class JudgeRetest:
    """One judge's test-retest in one run."""

    judge: int                  # 1 or 2
    spec: str
    prompt_version: str | None
    queries: int
    pairs: int
    repeats: int
    requests: int               # retest calls billed (re-asks included)
    cost_usd: float
    agreement: RetestAgreement | None  # None: no pair to retest

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({**{k: getattr(self, k) for k in (
            "judge", "spec", "prompt_version", "queries", "pairs", "repeats", "requests",
            "cost_usd")}, "agreement": None if self.agreement is None
            else self.agreement.to_dict()})

    def line(self) -> str:
        return retest_line(self.judge, self.spec, self.agreement, queries=self.queries,
                           pairs=self.pairs, repeats=self.repeats, cost_usd=self.cost_usd)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _bounds(interval, fmt) -> str:
    if interval.low is None:
        return "[no interval]"
    return f"[{fmt(interval.low)}, {fmt(interval.high)}]"


def retest_line(judge: int, spec: str, agreement: RetestAgreement | None, *, queries: int,
                pairs: int, repeats: int, cost_usd: float | None = None) -> str:
    """``judge 1 (spec) flips 4.2% [2.1%, 6.8%] of its labels on retest; alpha 0.91 [0.86,
    0.95] ...``: the figures of one judge's test-retest, in one line."""
    where = f"judge {judge} ({spec})"
    if agreement is None or agreement.flip_rate is None:
        return f"{where}: test-retest had no pair scored twice ({queries} queries sampled)"
    two = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    cost = "" if cost_usd is None else f", ${cost_usd:.4f}"
    return (f"{where} flips {_pct(agreement.flip_rate)} "
            f"{_bounds(agreement.flip_interval, _pct)} of its labels on retest; alpha "
            f"{two(agreement.alpha_scores)} {_bounds(agreement.alpha_scores_interval, two)} on "
            f"scores, {two(agreement.alpha_labels)} "
            f"{_bounds(agreement.alpha_labels_interval, two)} on labels; "
            f"{_pct(agreement.unstable_share)} of pairs unstable ({queries} queries, "
            f"{pairs} pairs, {repeats} repeats, "
            f"{agreement.flip_interval.confidence:.0%} query bootstrap{cost})")


def retest_sample(planned: Sequence[PlannedQuery], *, queries: int,
                  seed: int) -> list[PlannedQuery]:
    """A seeded sample of ``queries`` of ``planned`` (all when fewer), in query-id order;
    the same seed and queries draw the same sample whatever order they were planned in."""
    ordered = sorted(planned, key=lambda p: p.query_id)
    if len(ordered) <= queries:
        return ordered
    picked = np.random.default_rng(seed).choice(len(ordered), size=queries, replace=False)
    return [ordered[i] for i in sorted(picked)]


async def run_retest(conn: psycopg.Connection, session, sample: Sequence[PlannedQuery],
                     first_scores: Mapping[int, tuple[list, list]],
                     documents: Mapping[int, Passage], settings: RetestSettings, *,
                     dataset: str, threshold: float,
                     bootstrap: Mapping[str, Any] | None = None) -> list[JudgeRetest]:
    """Retest both judges on ``sample`` (queries this run wrote: ``first_scores`` maps a
    query id to the stored scores of judge 1 and judge 2, None where unscored or not
    asked); store every scoring and return each judge's figures (``bootstrap``:
    ``n_resamples`` and ``confidence`` of the intervals)."""
    reports = []
    for index, judge in ((1, session.judge1), (2, session.judge2)):
        plans = [p for p in sample if p.query_id in first_scores
                 and any(s is not None for s in first_scores[p.query_id][index - 1])]
        reports.append(await _retest_judge(conn, session, index, judge, plans, first_scores,
                                           documents, settings, dataset=dataset,
                                           threshold=threshold, bootstrap=bootstrap or {}))
    return reports


async def _retest_judge(conn, session, index: int, judge, plans: Sequence[PlannedQuery],
                        first_scores, documents, settings: RetestSettings, *, dataset: str,
                        threshold: float, bootstrap: Mapping[str, Any]) -> JudgeRetest:
    is_llm = hasattr(judge, "relevance_request")
    window = asyncio.Semaphore(64)  # coroutines at a time; the pipeline paces the provider

    async def score(plan: PlannedQuery, doc_id: int) -> JudgeResult:
        query = Passage(plan.text, plan.query_id, plan.embedding)
        document = documents.get(doc_id) or Passage("", doc_id)
        async with window:
            if is_llm:
                return await judge.relevance(query, document, query_id=plan.query_id,
                                             retest=True)
            return await judge.relevance(query, document, query_id=plan.query_id)

    jobs = [(plan, position, doc_id, repeat) for plan in plans
            for position, doc_id in enumerate(plan.doc_ids)
            for repeat in range(1, settings.repeats + 1)]
    results = await asyncio.gather(*(score(plan, doc_id) for plan, _, doc_id, _ in jobs),
                                   return_exceptions=True)
    rows, matrix, query_ids, version = [], {}, {}, None
    for plan in plans:
        for position, doc_id in enumerate(plan.doc_ids):
            first = first_scores[plan.query_id][index - 1][position]
            matrix[(plan.query_id, doc_id)] = [first] + [None] * settings.repeats
            query_ids[(plan.query_id, doc_id)] = plan.external_id
    requests, cost = 0, 0.0
    for (plan, _, doc_id, repeat), result in zip(jobs, results):
        if isinstance(result, BaseException):
            continue  # a stopped run: the retest scoring is missing, not guessed
        requests += result.calls
        cost += result.cost_usd
        version = version or result.prompt_version
        matrix[(plan.query_id, doc_id)][repeat] = judgement_score(result)
    for (query_id, doc_id), scores in matrix.items():
        for repeat, value in enumerate(scores):
            rows.append((query_id, query_ids[(query_id, doc_id)], doc_id, repeat, value,
                         None if value is None else value > threshold))
    sql.store_retests(conn, run_id=session.run_id, dataset=dataset, judge=index,
                      judge_spec=judge.spec, prompt_version=version, rows=rows)
    conn.commit()
    agreement = figures_of(list(matrix.values()), [query_ids[k] for k in matrix],
                           threshold=threshold, seed=settings.seed, **bootstrap)
    return JudgeRetest(index, judge.spec, version, len(plans), len(matrix), settings.repeats,
                       requests, cost, agreement)


def figures_of(scores: Sequence[Sequence[float | None]], query_ids: Sequence[Any], *,
               threshold: float, seed: int = 0, **bootstrap: Any) -> RetestAgreement | None:
    """The test-retest figures of stored scorings (None when there is no pair);
    ``bootstrap``: ``n_resamples`` and ``confidence`` for the intervals."""
    if not scores:
        return None
    matrix = np.array([[np.nan if v is None else v for v in row] for row in scores])
    return retest_agreement(matrix, query_ids=list(query_ids), threshold=threshold, seed=seed,
                            **bootstrap)


@dataclass(frozen=True)
class StoredRetest:
    """One judge's test-retest as stored in ``judge_retests`` (figures recomputed)."""

    judge: int
    spec: str
    queries: int
    pairs: int
    repeats: int
    agreement: RetestAgreement | None

    def line(self) -> str:
        return retest_line(self.judge, self.spec, self.agreement, queries=self.queries,
                           pairs=self.pairs, repeats=self.repeats)


def stored_retests(conn: psycopg.Connection, dataset: str, *, threshold: float,
                   run_id: str | None = None, **bootstrap: Any) -> list[StoredRetest]:
    """The newest (or ``run_id``'s) test-retest of ``dataset`` from ``judge_retests``, per
    judge; [] when none is stored."""
    rows = sql.retest_rows(conn, dataset, run_id=run_id)
    by_judge: dict[int, dict] = {}
    for judge, spec, query_key, doc_id, repeat, score in rows:
        entry = by_judge.setdefault(judge, {"spec": spec, "pairs": {}})
        scores = entry["pairs"].setdefault((query_key, doc_id), {})
        scores[repeat] = score
    out = []
    for judge, entry in sorted(by_judge.items()):
        repeats = max(max(s) for s in entry["pairs"].values())
        keys = list(entry["pairs"])
        matrix = [[entry["pairs"][k].get(r) for r in range(repeats + 1)] for k in keys]
        out.append(StoredRetest(judge, entry["spec"], len({k[0] for k in keys}), len(keys),
                                repeats, figures_of(matrix, [k[0] for k in keys],
                                                    threshold=threshold, **bootstrap)))
    return out

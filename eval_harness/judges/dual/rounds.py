"""Judging and storing planned queries, each under its claim (:mod:`.claims`).

:class:`JudgingRounds` judges a round of planned queries (all of them, or one step of staged
judging's sample), many at a time: for each query it claims the query, asks both judges for
every pair (:func:`judge_pairs`), flushes the ledger (the replies are stored before the
scores), writes the query's row and only then gives up the claim. A query another run has
claimed is put aside; when the round's other queries are done, the run says once that it is
waiting for another run and takes the ones put aside as their claims come free (their
replies are then cached: they cost nothing). The round's pooled scores feed staged judging.

A stop signal (:mod:`eval_harness.stopping`) ends a round early: queries not started are not
judged (the pipeline refuses their requests; local judges are not asked), the ones whose
pairs are all judged are stored. A lost store ends it at once
(:class:`~eval_harness.judges.client.stops.StoreLost`).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import psycopg

from eval_harness.judges.dual.claims import QueryClaims
from eval_harness.judges.dual.plan import PlannedQuery
from eval_harness.judges.dual.scores import QueryChanged, judgement_score, store_query_judgements
from eval_harness.judges.dual.summary import JudgeRunSummary
from eval_harness.judges.protocol import JudgeResult, Outcome, Passage
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.client.stops import RunStopped, StoreLost
from eval_harness.progress import ProgressCallback
from eval_harness.store.crash import is_server_failure

log = logging.getLogger("eval_harness.judges")


async def _not_asked() -> None:
    return None


async def judge_pairs(session: JudgeSession, query: Passage, documents: Sequence[Passage], *,
                      query_id: int | None,
                      on_pair: Callable[[Passage, Sequence[object]], None] = (
                          lambda document, results: None),
                      with_judge2: bool = True
                      ) -> tuple[list[JudgeResult[float]], list[JudgeResult[float] | None]]:
    """Both judges' relevance results for every document (judges in parallel per pair).

    Every started call is allowed to finish (a paid reply is never thrown away); then
    :class:`~eval_harness.judges.client.stops.RunStopped` is raised if the budget or a provider's
    exhausted quota or a rejected key stopped the run before all were judged. With
    ``with_judge2=False`` (staged judging) judge 2 is not asked: its results are None.
    ``on_pair(document, results)`` is called as each pair is done (a result or exception
    per judge).
    """
    async def pair(document: Passage):
        results = await asyncio.gather(
            session.judge1.relevance(query, document, query_id=query_id),
            session.judge2.relevance(query, document, query_id=query_id) if with_judge2
            else _not_asked(),
            return_exceptions=True)
        on_pair(document, results)
        return results

    pairs = await asyncio.gather(*(pair(d) for d in documents))
    errors = [r for results in pairs for r in results if isinstance(r, BaseException)]
    if errors:
        stopped = [e for e in errors if isinstance(e, RunStopped)]
        raise (stopped or errors)[0]
    return [r[0] for r in pairs], [r[1] for r in pairs]


def _kept(results: Sequence[object], *, local: bool) -> int:
    """How many of ``results`` are judgements a stopped run keeps: an LLM judge's once its
    reply is stored, a local judge's (never stored on its own) once its query is written."""
    return sum(isinstance(r, JudgeResult) and r.outcome is not Outcome.FAILED
               and r.judge.startswith("local:") == local for r in results)


class JudgingRounds:
    """Judge and store rounds of planned queries for one run (module docstring).

    ``pooled`` collects, over every query judged by both judges, judge 1's and judge 2's
    scores and the query id of each pair (what staged judging's kappa is computed on)."""

    def __init__(self, conn: psycopg.Connection, session: JudgeSession, summary: JudgeRunSummary,
                 documents: dict[int, Passage], *, threshold: float, concurrency: int,
                 progress: ProgressCallback | None, claims: QueryClaims) -> None:
        self._conn, self._session, self._summary = conn, session, summary
        self._documents, self._threshold = documents, threshold
        self._progress, self._claims = progress, claims
        self._window = asyncio.Semaphore(max(4, 4 * concurrency))  # queries in flight
        self._judged = 0
        self.pooled: tuple[list, list, list] = ([], [], [])
        # query id -> the stored scores of judge 1 and judge 2 (what test-retest starts from)
        self.first_scores: dict[int, tuple[list, list]] = {}
        # query id -> (document id, judge 1 or 2) of the LLM replies this run stored for a
        # query whose row it has not written yet (once written, the row says what is stored)
        self._replies: dict[int, set[tuple[int, int]]] = {}

    async def judge_round(self, plans: Sequence[PlannedQuery], with_judge2: bool) -> None:
        """Judge and store ``plans`` (judge 2 only ``with_judge2``); the queries another run
        has claimed come last, once their claims are free (a stopped run leaves them)."""
        waiting = await self._judge_all(plans, with_judge2)
        if not waiting or self._session.pipeline.stopped:
            return
        self._summary.queries_waited += len(waiting)
        log.warning(f"waiting for another run judging {len(waiting)} queries of dataset "
                    f"'{self._summary.dataset}' (this run judged its others; their replies "
                    "will be cached, so they cost this run nothing)")
        while waiting and not self._session.pipeline.stopped and not self._session.halted:
            free = await self._claims.wait_for_some({p.text for p in waiting},
                                                    until=lambda: self._session.halted,
                                                    halted=self._session.pipeline.halted)
            try:
                await self._judge_all([p for p in waiting if p.text in free], with_judge2)
            finally:
                self._claims.release(free)
            waiting = [p for p in waiting if p.text not in free]

    def pair_done(self, query_id: int, document: Passage, results: Sequence[object] = ()) -> None:
        self._judged += 1
        self._summary.judgements_kept += _kept(results, local=False)  # its reply is stored
        for judge, result in enumerate(results, start=1):
            if _kept([result], local=False):
                self._replies.setdefault(query_id, set()).add((int(document.id), judge))
        if self._progress is not None:
            self._progress(self._judged, self._summary.pairs)

    def unwritten_replies(self) -> list[tuple[int, int, int]]:
        """``(query id, document id, judge)`` of the replies this run stored for queries whose
        rows it has not written (a stopped run's rerun finds them in the reply cache)."""
        return [(query_id, doc_id, judge) for query_id, pairs in self._replies.items()
                for doc_id, judge in pairs]

    async def _judge_all(self, plans: Sequence[PlannedQuery],
                         with_judge2: bool) -> list[PlannedQuery]:
        """Judge ``plans`` side by side; the ones claimed by another run, not judged."""
        tasks = [asyncio.ensure_future(self._judge_query(plan, with_judge2)) for plan in plans]
        try:
            judged = await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return [plan for plan, done in zip(plans, judged) if not done]

    async def _judge_query(self, plan: PlannedQuery, with_judge2: bool) -> bool:
        """Claim, judge, store and release one query; False when another run holds it."""
        async with self._window:
            if self._session.halted:  # local judges send nothing the pipeline could refuse
                self._session.pipeline.interrupt()  # a no-op once the pipeline is stopped
                return True  # not judged: the rerun does it
            with self._store_errors():
                if not self._claims.try_claim(plan.text):
                    return False
            try:
                query = Passage(plan.text, plan.query_id, plan.embedding)
                docs = [self._documents.get(d) or Passage("", d) for d in plan.doc_ids]
                try:
                    results1, results2 = await judge_pairs(
                        self._session, query, docs, query_id=plan.query_id,
                        on_pair=lambda document, results: self.pair_done(
                            plan.query_id, document, results),
                        with_judge2=with_judge2)
                except StoreLost:
                    raise  # nothing more can be stored: end the run now
                except RunStopped:
                    return True  # the pipeline is stopped: the rest finish from cache or fail
                self._session.pipeline.flush_ledger()  # the replies before the scores
                with self._store_errors():
                    self._store(plan, results1, results2, with_judge2)
            finally:
                if self._session.pipeline.stopped != "store":  # else gone with the session
                    with self._store_errors():
                        self._claims.release([plan.text])
            return True

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """A statement of the run on its connection: a server that went away stops the
        pipeline (:meth:`~eval_harness.judges.client.runner.CallPipeline.store_lost`)."""
        try:
            yield
        except psycopg.OperationalError as exc:
            if not is_server_failure(exc):
                raise
            raise self._session.pipeline.store_lost(exc) from exc

    def _store(self, plan: PlannedQuery, results1, results2, with_judge2: bool) -> None:
        summary, session = self._summary, self._session
        try:
            _, changed = store_query_judgements(
                self._conn, plan.query_id, plan.doc_ids, results1, results2,
                judge1=session.judge1.spec, judge2=session.judge2.spec,
                threshold=self._threshold, run_id=session.run_id, planned=plan)
        except QueryChanged:
            summary.changed_meanwhile += 1
            return
        summary.queries_written += 1
        self._replies.pop(plan.query_id, None)
        summary.judgements_kept += _kept([*results1, *results2], local=True)
        summary.queries_changed += changed
        summary.pairs_written += len(plan.doc_ids)
        self.first_scores[plan.query_id] = ([judgement_score(r) for r in results1],
                                            [judgement_score(r) for r in results2])
        for result in results1:
            summary.judge1_counts.add(result)
        for result in results2:
            if result is None:
                summary.judge2_skipped += 1
            else:
                summary.judge2_counts.add(result)
        if with_judge2:
            self.pooled[0].extend(judgement_score(r) for r in results1)
            self.pooled[1].extend(judgement_score(r) for r in results2)
            self.pooled[2].extend([plan.query_id] * len(plan.doc_ids))

"""Dual-judge ground truth (seed story 1.11): both judges score every (query, document) pair.

For each ground-truth query the judged documents are its ``expected_docs`` followed by the
top ``judges.hybrid_top_k`` (default 5) of hybrid search at the configured weights that are
not already among them. Both judges score every pair, in parallel. Per query, ``ground_truth``
receives ``judged_docs``, ``judge1_score`` / ``judge2_score`` (float8[] aligned with
``judged_docs``; NULL where a judgement is unscored or failed), the two judge specs
(``judge1_model`` / ``judge2_model``), the per-query Cohen's kappa of the labels
``score > agreement.relevance_threshold`` over the pairs both judges scored (NULL if none),
each judgement's outcome and the prompt versions. A query is written when all its pairs are
judged; re-judging writes the same row again (an UPDATE, never a duplicate) and, thanks to
the reply cache, makes no provider call. The run counts the queries it wrote and, of those,
the ones whose stored judgement changed (new, or other documents, scores, outcomes, judges or
prompt versions): a rerun on unchanged data writes every query and changes none.

Crashes and concurrent runs:

* Paid replies, their cost rows and retry rows are committed as they arrive, and the ledger
  is flushed again before a query's scores are written, so a run killed at any point leaves
  no written query whose replies are not cached: the rerun pays only for judgements that
  have no stored reply.
* A run holds a session-level advisory lock on its dataset (``eval_harness.judge:<name>``)
  from planning to the end. A second run of the same dataset waits for it (saying so once on
  the ``eval_harness.judges`` logger), then finds every reply in the cache: each pair is paid
  for once, and the ground truth and the cache cannot disagree. Shard runs share the
  dataset's lock and hold their shard's (:func:`judge_run_lock`).
* Whatever the runs' layout (shards of different counts, two datasets holding the same
  query), no judgement is paid twice: each query is judged under its claim, an advisory lock
  on its text held from its first request until its row is written (:mod:`.claims`). A query
  another run has claimed is judged last, from the cache, once that run is done with it
  (:mod:`.rounds`).
* A run the user stops (SIGINT / SIGTERM, :mod:`eval_harness.stopping`) sends nothing more,
  stores the replies already on their way and every query whose pairs are all judged, then
  :func:`judge_dataset` raises :class:`~eval_harness.stopping.Interrupted` saying how many
  judgements are kept. A store that goes away stops the run at once
  (:class:`~eval_harness.judges.client.stops.StoreLost`): nothing is bought that could not be
  stored.
* A query is written only if its text, expected documents and embedding are still those it
  was planned with. A query that an ingest changed meanwhile (which cleared its scores) is not
  given scores judged on its old text; the run reports it and a rerun judges it anew.

With ``judges.anchors`` on, the frozen anchor set is re-judged past the cache before anything
else (a judge changed in config is compared with the old one before its labels are used), and
the first such run freezes the set (:mod:`eval_harness.judges.anchors`); once per dataset,
judge and UTC day, whatever the shards or processes (:mod:`eval_harness.judges.anchors.nightly`).
Retests and anchors spend their own budget lines (``judges.retest.budget_usd``,
``judges.anchors.budget_usd``): a line used up stops its step with one sentence in the
summary, and the run goes on.

A run that ends unstopped writes the judges' record, a row per judge with its spec and the
figures the run measured (:mod:`.record`).

With ``judges.retest`` on (``judge --retest``), once the queries are stored each judge
re-scores a seeded sample of them past the cache (:mod:`eval_harness.judges.retest`); the
figures are in the summary. With ``judges.staged`` on, judge 2 is asked only for a growing
sample of the queries (:mod:`eval_harness.judges.staging`).

Entry points: :func:`judge_dataset` (the CLI and the Dagster asset) and
:func:`store_dual_judge_scores` (the seed's tool semantics, for callers outside Dagster).
Which pairs are judged is :mod:`.plan`; judging and storing them, :mod:`.rounds`;
one query's kappa and its write, :mod:`.scores`; what a run did, :mod:`.summary`;
the statements, :mod:`eval_harness.datasets.ground_truth`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

from eval_harness import stopping
from eval_harness.datasets import ground_truth
from eval_harness.datasets.live import write_back_judge_scores
from eval_harness.judges.anchors.anchor_set import freeze_from_run
from eval_harness.judges.anchors.nightly import anchors_of_the_night, freeze_once, run_passages
from eval_harness.judges.anchors.refreeze import refreeze
from eval_harness.judges.client.batch import prefill_cache_by_batch
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.client.stops import StoreLost
from eval_harness.judges.dual.claims import QueryClaims
from eval_harness.judges.dual.plan import PlannedQuery, load_documents, plan_queries, pool_sizes
from eval_harness.judges.dual.record import write_record
from eval_harness.judges.dual.rounds import JudgingRounds, judge_pairs
from eval_harness.judges.dual.scores import judgement_score, pair_kappa, store_query_judgements
from eval_harness.judges.dual.shards import queries_of_shard
from eval_harness.judges.dual.summary import JudgeRunSummary
from eval_harness.judges.protocol import Passage
from eval_harness.judges.retest.self_agreement import retest_sample, run_retest
from eval_harness.judges.staging.staged import judge_staged
from eval_harness.progress import ProgressCallback
from eval_harness.retrieval.hybrid import as_vector
from eval_harness.settings import Settings
from eval_harness.store.locks import session_lock

T = TypeVar("T")
log = logging.getLogger("eval_harness.judges")
JUDGE_LOCK_PREFIX = "eval_harness.judge:"  # + dataset name: advisory lock key (hashtext)


# ---------------------------------------------------------------------------------------
# Judging and storing


def _needs_embeddings(session: JudgeSession) -> bool:
    return any(j.provider == "local" and j.model == "embedding"
               for j in (session.judge1, session.judge2))


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise RuntimeError("an event loop is already running here; await the *_async variant "
                       "of this function instead")


@contextmanager
def judge_run_lock(conn: psycopg.Connection, dataset: str,
                   shard: tuple[int, int] | None = None) -> Iterator[None]:
    """Hold the dataset's judge-run advisory lock (session level) while the block runs.

    Waits for another run of the same dataset to end; the lock also ends with the connection,
    so a killed run never leaves it behind. Commits ``conn`` (the run commits per query anyway).
    A shard's run (``(i, n)``) holds the dataset's lock shared and its shard's exclusively:
    shards run side by side, the same shard twice waits, and a whole-dataset run waits for
    every shard (and they for it).
    """
    where = "" if shard is None else f" shard {shard[0]}/{shard[1]}"

    def say_so() -> None:
        log.warning(f"another judge run of dataset '{dataset}'{where} is in progress; waiting "
                    "for it to end (its replies are cached, so they cost this run nothing)")

    if shard is None:
        with session_lock(conn, JUDGE_LOCK_PREFIX + dataset, on_wait=say_so):
            yield
        return
    with session_lock(conn, JUDGE_LOCK_PREFIX + dataset, on_wait=say_so, shared=True), \
            session_lock(conn, f"{JUDGE_LOCK_PREFIX}{dataset}#{shard[0]}/{shard[1]}",
                         on_wait=say_so):
        yield


async def judge_dataset_async(conn: psycopg.Connection, settings: Settings, dataset: str, *,
                              limit: int | None = None, batch: bool = False,
                              run_id: str | None = None,
                              progress: ProgressCallback | None = None,
                              session_options: dict | None = None,
                              retry_unscored: bool = False,
                              shard: tuple[int, int] | None = None,
                              refreeze_anchors: bool = False) -> JudgeRunSummary:
    """Judge every planned pair of ``dataset`` with both judges and write ``ground_truth``.

    ``shard=(i, n)`` judges only the queries of shard ``i`` of ``n``
    (:func:`eval_harness.judges.dual.shards.shard_of`). With ``judges.staged`` on, judge 2 scores
    a growing random sample of the queries until kappa's lower bound clears the floor
    (:mod:`eval_harness.judges.staging.staged`; per shard when sharded).

    One run per dataset at a time (:func:`judge_run_lock`). A live dataset configured with
    ``live.write_judge_scores: true`` then gets the stored scores written back into its own
    ground-truth rows (:func:`eval_harness.datasets.live.write_back_judge_scores`; the CLI and
    the Dagster asset both come through here). ``progress(done, total)`` is
    called as pairs are judged (see :mod:`eval_harness.progress`). ``session_options`` go to
    :class:`JudgeSession` (tests inject ``sleep``/``clock``). ``retry_unscored``: a judgement
    whose cached replies leave it unscored is asked anew (see :mod:`eval_harness.judges.llm`).
    ``refreeze_anchors`` (with ``judges.anchors`` on): the run replaces the dataset's anchor
    set with one frozen from the current judges (:mod:`eval_harness.judges.anchors.refreeze`).
    """
    with judge_run_lock(conn, dataset, shard):
        summary = await _judge_dataset(conn, settings, dataset, limit=limit, batch=batch,
                                       run_id=run_id, progress=progress,
                                       session_options=session_options,
                                       retry_unscored=retry_unscored, shard=shard,
                                       refreeze_anchors=refreeze_anchors)
        config = settings.datasets.get(dataset)
        if summary.stopped == "interrupt":
            return summary  # the rerun writes back what it completes
        if config is not None and config.live is not None and config.live.write_judge_scores:
            # still under the run lock: what is written back is what this run left stored
            # (shards running side by side write back one at a time)
            with session_lock(conn, f"{JUDGE_LOCK_PREFIX}{dataset}#write-back"):
                summary.write_back = str(write_back_judge_scores(conn, config))
        return summary


async def _judge_dataset(conn: psycopg.Connection, settings: Settings, dataset: str, *,
                         limit: int | None, batch: bool, run_id: str | None,
                         progress: ProgressCallback | None,
                         session_options: dict | None,
                         retry_unscored: bool = False,
                         shard: tuple[int, int] | None = None,
                         refreeze_anchors: bool = False) -> JudgeRunSummary:
    started = time.monotonic()
    planned = queries_of_shard(plan_queries(conn, dataset, settings, limit=limit), shard)
    threshold = settings.agreement.relevance_threshold
    staged = settings.judges.staged
    async with JudgeSession(settings, conn, run_id=run_id, budget_dataset=dataset,
                            **(session_options or {})) as session:
        for judge in (session.judge1, session.judge2):
            if hasattr(judge, "retry_unscored"):  # LLM judges (local ones never re-ask)
                judge.retry_unscored = retry_unscored
        summary = JudgeRunSummary(dataset, session.run_id, "batch" if batch else "live",
                                  session.judge1.spec, session.judge2.spec, session.notices,
                                  queries=len(planned),
                                  pairs=sum(len(p.doc_ids) for p in planned),
                                  pool_sizes=pool_sizes(planned),
                                  shard=None if shard is None else f"{shard[0]}/{shard[1]}")
        documents = load_documents(conn, dataset, [d for p in planned for d in p.doc_ids],
                                   with_embeddings=_needs_embeddings(session))
        if batch:  # staged: judge 2's sample is asked live, the rest not at all
            judges = (session.judge1,) if staged.enabled else (session.judge1, session.judge2)
            summary.batch = await prefill_cache_by_batch(
                session.pipeline, _batch_plan(judges, planned, documents), settings.judges.batch,
                **{k: v for k, v in (session_options or {}).items() if k in ("sleep", "clock")})
        if progress is not None:
            progress(0, summary.pairs)
        anchors = settings.judges.anchors
        refreeze_anchors = refreeze_anchors and anchors.enabled  # the old set is not re-judged
        if anchors.enabled and not refreeze_anchors:  # before any label: a changed judge first
            summary.anchors = await anchors_of_the_night(
                conn, session, settings.judges.drift, dataset=dataset, threshold=threshold,
                passages=run_passages(planned, documents))
        claims = QueryClaims(conn)
        rounds = JudgingRounds(conn, session, summary, documents, threshold=threshold,
                               concurrency=settings.judges.concurrency, progress=progress,
                               claims=claims)
        try:
            if not staged.enabled:
                await rounds.judge_round(planned, with_judge2=True)
            else:
                summary.staging = await judge_staged(conn, settings, session, planned,
                                                     documents, rounds, batch=batch)
            if session.pipeline.stopped == "store":  # seen by the watch, not by a call
                raise StoreLost(session.pipeline.stop_reason, session.pipeline.store_error)
            if anchors.enabled and not session.pipeline.stopped:
                if refreeze_anchors:
                    def freeze() -> int:
                        return freeze_from_run(conn, session, planned, rounds.first_scores,
                                               documents, anchors, dataset=dataset,
                                               threshold=threshold)

                    summary.refrozen = await refreeze(conn, session, freeze, dataset=dataset,
                                                      threshold=threshold)
                    summary.anchors_frozen = summary.refrozen.frozen
                else:  # of shards finishing together, one freezes the set
                    summary.anchors_frozen = await freeze_once(
                        conn, session, planned, rounds.first_scores, documents, anchors,
                        dataset=dataset, threshold=threshold)
            retest = settings.judges.retest
            if retest.enabled and not session.pipeline.stopped:
                summary.retest = await run_retest(
                    conn, session, retest_sample(planned, queries=retest.queries,
                                                 seed=retest.seed),
                    rounds.first_scores, documents, retest, dataset=dataset,
                    threshold=threshold, bootstrap={
                        "n_resamples": settings.agreement.bootstrap_resamples,
                        "confidence": settings.agreement.confidence})
        except StoreLost as exc:
            exc.kept = summary.kept()
            raise
        finally:
            claims.release_all()
            # one sentence per budget line that stopped its step (the run went on)
            summary.budget_lines = [sentence for purpose in ("anchor", "retest")
                                    for sentence in _line_used_up(session, purpose)]
        stats = session.stats
        summary.pooled_kappa = pair_kappa(*rounds.pooled[:2], threshold=threshold)
        summary.stopped = session.pipeline.stopped
        summary.stop_reason = session.pipeline.stop_reason
        if summary.stopped == "interrupt":  # the line says what is stored, not what was added
            usable(conn)
            summary.judgements_stored = ground_truth.stored_judgements(
                conn, dataset, judges=(session.judge1.spec, session.judge2.spec),
                planned=[(p.query_id, p.doc_ids) for p in planned],
                replies=rounds.unwritten_replies())
        summary.budget_scope = session.budget_scope
        summary.budget_usd = settings.judges.budget_usd
        if session.pipeline.stopped != "store":
            summary.spent_together_usd = session.spent_together()
        summary.paused_s = sum(session.pipeline.limiter(name).controller.paused_seconds
                               for name in session.pipeline.providers)
        summary.wait_notices = session.wait_notices()
        session.fallback_notices.record(summary.wait_notices)  # the summary says them
        if not summary.stopped:  # the judges' record: one row per judge, upserted per run id
            write_record(conn, summary, (session.judge1, session.judge2))
    for name in ("provider_calls", "billed_calls", "batch_requests", "cache_hits", "retries",
                 "input_tokens", "output_tokens", "cost_usd", "refused", "limiter_wait_s",
                 "backoff_wait_s"):
        setattr(summary, name, getattr(stats, name))
    summary.elapsed_s = time.monotonic() - started
    return summary


def _line_used_up(session: JudgeSession, purpose: str) -> list[str]:
    """The sentence saying the budget line of ``purpose`` stopped its step ([] if not)."""
    line = session.pipeline.budget_lines.get(purpose)
    return [] if line is None or not line.exhausted else [line.exhausted]


def _batch_plan(judges: Sequence, planned: Sequence[PlannedQuery],
                documents: dict[int, Passage]):
    plan = []
    for judge in judges:
        if not hasattr(judge, "relevance_request"):
            continue  # local judges need no batch
        for query in planned:
            for doc_id in query.doc_ids:
                document = documents.get(doc_id) or Passage("", doc_id)
                plan.append((judge.relevance_request(query.text, document), query.query_id))
    return plan


def judge_dataset(conn: psycopg.Connection, settings: Settings, dataset: str,
                  **options: Any) -> JudgeRunSummary:
    """:func:`judge_dataset_async` for synchronous callers (CLI, Dagster). A stop signal
    ends it with :class:`~eval_harness.stopping.Interrupted` once what was judged is stored
    (see the module docstring)."""
    with stopping.cooperative():
        try:
            summary = _run(judge_dataset_async(conn, settings, dataset, **options))
        except (stopping.Interrupted, psycopg.errors.QueryCanceled) as exc:
            # stopped before any pair: while planning, or waiting for another run's lock
            kept = stored_before_judging(conn, dataset) if stopping.requested() else None
            if kept is not None:
                stopping.note_kept(kept)  # also for a caller that learns of the stop later
                if isinstance(exc, stopping.Interrupted):
                    exc.kept = kept
            raise
        if summary.stopped == "interrupt":
            stopping.note_kept(summary.stored())
    return summary


def stored_before_judging(conn: psycopg.Connection, dataset: str) -> str | None:
    """What a run stopped before it judged anything leaves stored: the judgements of
    ``dataset`` in the store (by any judges: which ones the run would use is not known yet);
    None when the store cannot say."""
    try:
        usable(conn)
        stored = ground_truth.stored_judgements(conn, dataset)
    except psycopg.Error:
        return None
    return (f"{stored:,} judgements of dataset '{dataset}' stored (the stop came before any "
            "pair was judged)")


def usable(conn: psycopg.Connection) -> None:
    """Roll back a transaction that a cancelled statement (a stopped lock wait) aborted, so
    that ``conn`` can count what is stored."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        conn.rollback()


# ---------------------------------------------------------------------------------------
# The seed's tool


async def store_dual_judge_scores_async(query_id: int, query: str, docs: Sequence[dict], *,
                                        conn: psycopg.Connection, settings: Settings,
                                        run_id: str | None = None,
                                        session_options: dict | None = None) -> dict[str, Any]:
    """Seed story 1.11's ``store_dual_judge_scores``: both judges score ``docs``
    (``[{"id": int, "content": str}, ...]``) for ground-truth query ``query_id``; the scores
    are stored in ``ground_truth`` and returned with the query's kappa.

    Returns ``{"query_id", "judge1_scores", "judge2_scores", "kappa", "judge1_model",
    "judge2_model", "judge1_status", "judge2_status", "cost_usd"}``; a score is None where
    the judgement is unscored or failed (see the status lists).
    """
    row = ground_truth.ground_truth_embedding(conn, query_id)
    if row is None:
        raise LookupError(f"Ground-truth query {query_id} does not exist; ingest the dataset "
                          "or pass the id of an existing query.")
    doc_ids = []
    for position, doc in enumerate(docs, start=1):
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), int) \
                or not isinstance(doc.get("content"), str):
            raise ValueError(f"docs[{position}] must be {{'id': int, 'content': str}}, got "
                             f"{doc!r:.80}.")
        doc_ids.append(doc["id"])
    if len(set(doc_ids)) != len(doc_ids):
        raise ValueError("docs lists a document id twice; each document is judged once.")
    async with JudgeSession(settings, conn, run_id=run_id, budget_dataset=row[1],
                            **(session_options or {})) as session:
        stored = load_documents(conn, row[1], doc_ids,
                                with_embeddings=_needs_embeddings(session))
        passages = [Passage(d["content"], d["id"], getattr(stored.get(d["id"]), "embedding", None))
                    for d in docs]
        embedding = None if row[0] is None else as_vector(row[0])
        claims = QueryClaims(conn)  # a run judging the same query text goes first
        await claims.wait_for_some([query], until=lambda: session.halted,
                                   halted=session.pipeline.halted)
        try:
            results1, results2 = await judge_pairs(session, Passage(query, query_id, embedding),
                                                   passages, query_id=query_id)
            kappa, _ = store_query_judgements(
                conn, query_id, doc_ids, results1, results2, judge1=session.judge1.spec,
                judge2=session.judge2.spec, threshold=settings.agreement.relevance_threshold,
                run_id=session.run_id)
        finally:
            claims.release_all()
        cost = session.stats.cost_usd
    return {"query_id": query_id, "judge1_scores": [judgement_score(r) for r in results1],
            "judge2_scores": [judgement_score(r) for r in results2], "kappa": kappa,
            "judge1_model": session.judge1.spec, "judge2_model": session.judge2.spec,
            "judge1_status": [r.outcome.value for r in results1],
            "judge2_status": [r.outcome.value for r in results2], "cost_usd": cost}


def store_dual_judge_scores(query_id: int, query: str, docs: Sequence[dict], *,
                            conn: psycopg.Connection, settings: Settings,
                            run_id: str | None = None) -> dict[str, Any]:
    """Synchronous :func:`store_dual_judge_scores_async` (the seed's tool semantics)."""
    return _run(store_dual_judge_scores_async(query_id, query, docs, conn=conn,
                                              settings=settings, run_id=run_id))

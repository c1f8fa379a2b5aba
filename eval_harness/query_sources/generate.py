"""``eval-harness ground-truth generate``: ground truth written from a dataset's documents.

Each query is written from one document of the corpus, which it names
(``source_document``), in one of three kinds (``ground_truth.kinds``): a plain question the
document answers, a paraphrase with little word overlap with it, and a query no document
answers (for abstention and for the gates).

* **Which documents**: the corpus's non-empty documents in a seeded order
  (:func:`~eval_harness.datasets.corpus.seeded_documents`); the ``i``-th document of that
  order gets the ``i``-th kind of a smooth weighted round robin over the kinds' shares. A
  document that already gave a generated query is not used again, so asking for more
  queries later extends the set with the next documents of the same order.
* **Who writes**: ``ground_truth.generator`` (default ``judges.judge1``) through the judges'
  call pipeline: the reply cache (a rerun pays nothing), a budget line of its own
  (``ground_truth.budget_usd``), the cost log, ``--dry-run`` prices. Without its API key the
  offline writer (:mod:`.offline_writer`) writes them, the embedded default.
* **The critic** (``ground_truth.critic``): ``judges.judge2`` reads each query with its
  document and drops one that gives the answer away or that the document cannot answer; the
  offline rules (:func:`.offline_writer.critique`) do so without its key. An offline
  unanswerable query asks about subjects a keyword search finds in no document; an LLM one
  is kept only when the critic says its document cannot answer it. Every dropped query is
  listed with its reason; so is a query that repeats one already stored (normalised text).
* **Stored once**: a query's id is ``generated-`` and a hash of its document, kind and text;
  the queries are stored after each batch of documents (a stopped run keeps them), then
  embedded with the dataset's embedder where one is available. Once the dataset has ``N``
  generated queries a rerun adds none and sends nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import psycopg

from eval_harness import stopping
from eval_harness.datasets import corpus as corpus_reads
from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import Corpus
from eval_harness.errors import InvalidInput
from eval_harness.judges.client.budget import BudgetLineExhausted
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.reply_cache import cache_key, cached_keys_among
from eval_harness.judges.client.session import (
    JudgeSession,
    planning_judge,
    resolve_judge_specs,
)
from eval_harness.judges.client.stops import RunStopped
from eval_harness.judges.prompts import GENERATION_VERSION
from eval_harness.judges.protocol import Outcome
from eval_harness.query_sources import offline_writer
from eval_harness.query_sources.embedding import embed_new_queries
from eval_harness.query_sources.users_queries import normalised
from eval_harness.retrieval.hybrid import (
    DatasetInfo,
    candidate_scores,
    dataset_info,
    hybrid_search,
)
from eval_harness.retrieval.report import fused_runs
from eval_harness.settings import Settings
from eval_harness.settings.ground_truth import OFFLINE_GENERATOR
from eval_harness.settings.judges import JudgeSettings

KINDS = ("question", "paraphrase", "unanswerable")
PURPOSE = "ground_truth"          # the cost log's purpose and budget line of these calls
STATS_DOCUMENTS = 2000            # documents sampled for the offline writer's statistics
BATCH_DOCUMENTS = 8               # documents written from between two stores
PAGE_DOCUMENTS = 200              # documents of the seeded order read at a time
ID_PREFIX = "generated-"
TOP_K = 5                         # "source document in the top 5"


@dataclass(frozen=True)
class GeneratedQuery:
    id: str
    text: str
    source_document: str          # the document's own id
    kind: str
    doc_id: int = field(default=0, repr=False)   # the harness's id of the document

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "source_document": self.source_document,
                "kind": self.kind}


@dataclass
class GenerationReport:
    dataset: str
    asked: int
    writer: str
    critic: str
    queries: list[GeneratedQuery] = field(default_factory=list)   # stored by this run
    dropped: list[dict] = field(default_factory=list)
    already: int = 0              # generated queries the dataset had before this run
    documents_left: bool = True   # False: every document was tried
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    notices: list[str] = field(default_factory=list)
    source_in_top_5: float | None = None   # of the dataset's answerable generated queries
    source_hits: int = 0      # of them, how many

    @property
    def new(self) -> int:
        return len(self.queries)

    def to_dict(self) -> dict:
        return {"dataset": self.dataset, "queries": [q.to_dict() for q in self.queries],
                "new": self.new, "dropped": self.dropped, "already": self.already,
                "writer": self.writer, "critic": self.critic, "calls": self.calls,
                "cache_hits": self.cache_hits, "cost_usd": round(self.cost_usd, 6),
                "source_in_top_5": self.source_in_top_5}


def kind_sequence(weights: dict[str, float]) -> Iterator[str]:
    """The kinds in smooth weighted round robin (nginx's rule): over any stretch each kind's
    share is its weight's, spread out rather than in runs.

    >>> from itertools import islice
    >>> list(islice(kind_sequence({"question": 2, "paraphrase": 1, "unanswerable": 0}), 6))
    ['question', 'paraphrase', 'question', 'question', 'paraphrase', 'question']
    """
    live = {k: float(w) for k, w in weights.items() if w > 0}
    if not live:
        raise InvalidInput("ground_truth.kinds gives every kind 0: give one a share above 0.")
    total = sum(live.values())
    current = dict.fromkeys(live, 0.0)
    while True:
        for kind in live:
            current[kind] += live[kind]
        chosen = max(current, key=lambda k: (current[k], -KINDS.index(k)))
        current[chosen] -= total
        yield chosen


def query_id(source_document: str, kind: str, text: str) -> str:
    digest = hashlib.md5(f"{source_document}|{kind}|{normalised(text)}".encode()).hexdigest()
    return ID_PREFIX + digest[:16]


def writer_and_critic(settings: Settings) -> tuple[str, str]:
    """The specs that write and criticise (``local:offline``: the offline writer or rules),
    after the judges' key fallback."""
    judge1, judge2, _ = resolve_judge_specs(settings.with_overrides(judges=_with_generator(
        settings)))
    writer = judge1 if not judge1.startswith("local:") else OFFLINE_GENERATOR
    if not settings.ground_truth.critic:
        return writer, "none"
    return writer, judge2 if not judge2.startswith("local:") else OFFLINE_GENERATOR


def _with_generator(settings: Settings) -> JudgeSettings:
    """The judges' settings with the generator as judge 1 (the fallback rule is theirs)."""
    generator = settings.ground_truth.generator
    if generator is None:
        return settings.judges
    if generator == OFFLINE_GENERATOR:
        return replace(settings.judges, judge1="local:lexical")
    return replace(settings.judges, judge1=generator)


@dataclass
class _Plan:
    info: DatasetInfo
    stats: offline_writer.TermStatistics
    used_documents: set[int]
    known_texts: set[str]
    need: int
    foreign: list[str]   # subjects no document mentions (unanswerable queries)
    kinds: Iterator[str] = field(default_factory=lambda: iter(()))
    positions: list[str] = field(default_factory=list)

    def kind_at(self, position: int) -> str:
        """The kind of the ``position``-th document of the seeded order."""
        while len(self.positions) <= position:
            self.positions.append(next(self.kinds))
        return self.positions[position]


def _plan(conn: psycopg.Connection, settings: Settings, dataset: str, n: int,
          seed: int) -> tuple[_Plan, int]:
    if n < 1:
        raise InvalidInput(f"--queries must be a positive number, got {n}.")
    info = dataset_info(conn, dataset)
    existing = ground_truth.generated_queries(conn, dataset)
    sample = corpus_reads.seeded_documents(conn, info.corpus, seed=seed, limit=STATS_DOCUMENTS)
    if not sample:
        raise InvalidInput(f"Dataset '{dataset}' has no document with text to write queries "
                           "from.")
    stats = offline_writer.TermStatistics(content for _, _, content in sample)
    known = {normalised(t) for t in ground_truth.query_texts(conn, dataset).values()}
    need = max(0, n - len(existing))
    return _Plan(info, stats, {int(r[3]) for r in existing if r[3] is not None}, known,
                 need, _foreign_subjects(conn, dataset) if need else [],
                 kind_sequence(settings.ground_truth.kinds.weights())), len(existing)


def _documents(conn: psycopg.Connection, corpus: Corpus, seed: int, used: set[int],
               need: int) -> Iterator[list[tuple[int, str, str, int]]]:
    """Batches of :data:`BATCH_DOCUMENTS` ``(id, own id, content, position)`` in the seeded
    order, used ones left out (their positions still count, so the kinds stay where they
    were). The order is read a page at a time (the ones used before, and room for the
    critic's drops): one sort of the corpus's ids per page, not per batch."""
    offset, page = 0, max(PAGE_DOCUMENTS, len(used) + 3 * need)
    while True:
        rows = corpus_reads.seeded_documents(conn, corpus, seed=seed, limit=page, offset=offset)
        if not rows:
            return
        fresh = [(int(i), str(own), content, offset + k)
                 for k, (i, own, content) in enumerate(rows) if int(i) not in used]
        offset += len(rows)
        for start in range(0, len(fresh), BATCH_DOCUMENTS):
            yield fresh[start:start + BATCH_DOCUMENTS]


def generate_queries(conn: psycopg.Connection, settings: Settings, dataset: str, *, n: int,
                     seed: int = 0) -> GenerationReport:
    """Store generated queries until ``dataset`` has ``n`` of them (module docstring); the
    report lists this run's queries and what the critic dropped."""
    writer, critic = writer_and_critic(settings)
    plan, already = _plan(conn, settings, dataset, n, seed)
    report = GenerationReport(dataset, n, writer, critic, already=already)
    if plan.need:
        try:
            asyncio.run(_write(conn, settings, plan, report, seed))
        finally:
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR:
                conn.commit()
        notice = embed_new_queries(conn, settings, plan.info)
        if notice:
            report.notices.append(notice)
        conn.commit()
    _hit_rate(conn, settings, report)
    return report


def _keep(plan: _Plan, report: GenerationReport, doc: tuple, kind: str, text: str | None,
          reason: str | None, stored: list[GeneratedQuery]) -> None:
    """Add the query ``text`` of ``doc`` to ``stored``, or its reason to the dropped ones."""
    doc_id, own, _, _ = doc
    if text is not None and reason is None and normalised(text) in plan.known_texts:
        reason = "repeats a query the dataset has"
    if text is None or reason is not None:
        report.dropped.append({"text": text, "source_document": own, "kind": kind,
                               "reason": reason or "no query written"})
        return
    plan.known_texts.add(normalised(text))
    plan.used_documents.add(doc_id)
    stored.append(GeneratedQuery(query_id(own, kind, text), text, own, kind, doc_id))


def _store(conn: psycopg.Connection, plan: _Plan, report: GenerationReport,
           stored: list[GeneratedQuery]) -> None:
    generator = f"{report.writer} {_version(report.writer)}"
    kept = stored[:max(0, plan.need - report.new)]
    ground_truth.insert_generated_queries(conn, plan.info.name, [
        (q.id, q.text, q.doc_id, q.kind, generator) for q in kept])
    conn.commit()  # a stopped run keeps every batch stored so far
    report.queries.extend(kept)


def _version(writer: str) -> str:
    return offline_writer.OFFLINE_VERSION if writer == OFFLINE_GENERATOR else GENERATION_VERSION


def _foreign_subjects(conn: psycopg.Connection, dataset: str) -> list[str]:
    """The subjects of :data:`~.offline_writer.FOREIGN_SUBJECTS` a keyword search finds in no
    document of ``dataset``: what its unanswerable queries may ask about."""
    return [subject for subject in offline_writer.FOREIGN_SUBJECTS
            if not hybrid_search(conn, dataset, query_text=subject, query_embedding=None, k=1,
                                 semantic_weight=0.0, keyword_weight=1.0, candidate_depth=10)]


def _offline(spec: str) -> bool:
    return spec in (OFFLINE_GENERATOR, "none")


async def _write(conn: psycopg.Connection, settings: Settings, plan: _Plan,
                 report: GenerationReport, seed: int) -> None:
    """Write, criticise and store batch after batch until the plan's need is met; a judge
    session (cache, budget line, limits) only when a writer or critic is an LLM."""
    async with contextlib.AsyncExitStack() as stack:
        session = None
        if not (_offline(report.writer) and _offline(report.critic)):
            session = await stack.enter_async_context(
                JudgeSession(settings, conn, budget_dataset=plan.info.name))
            session.add_budget_line(PURPOSE, settings.ground_truth.budget_usd,
                                    key="ground_truth.budget_usd", step="writing queries")
        writer = None if session is None or _offline(report.writer) \
            else session.judge(report.writer)
        critic = None if session is None or _offline(report.critic) \
            else session.judge(report.critic)
        try:
            for batch in _documents(conn, plan.info.corpus, seed, plan.used_documents,
                                    plan.need):
                stopping.check()  # a local writer keeps the loop busy: look between batches
                batch = batch[:max(1, 2 * (plan.need - report.new))]
                results = await asyncio.gather(*(
                    _one(plan, report, writer, critic, doc, plan.kind_at(doc[3]), seed)
                    for doc in batch), return_exceptions=True)
                stored: list[GeneratedQuery] = []
                for doc, result in zip(batch, results):
                    if not isinstance(result, BaseException):
                        _keep(plan, report, doc, *result, stored)
                _store(conn, plan, report, stored)  # what finished, before any stop is raised
                stop = next((r for r in results if isinstance(r, BaseException)), None)
                if stop is not None:
                    raise stop
                if report.new >= plan.need:
                    break
            else:
                report.documents_left = False
        except BudgetLineExhausted as exc:
            report.notices.append(f"ground_truth.budget_usd is used up ({exc}); "
                                  f"{report.new} queries were stored, rerun tomorrow or raise "
                                  "it for the rest.")
        except RunStopped:
            stopping.check()  # a stop signal is the user's: said as every command says it
            raise
        finally:
            if session is not None:
                stats = session.stats
                report.calls, report.cache_hits = stats.billed_calls, stats.cache_hits
                report.cost_usd = stats.cost_usd


async def _one(plan: _Plan, report: GenerationReport, writer, critic, doc: tuple, kind: str,
               seed: int) -> tuple[str, str | None, str | None]:
    """``(kind, text, reason dropped)`` of one document's query."""
    _, own, content, _ = doc
    if writer is None:
        written = offline_writer.write_query(content, kind, plan.stats, seed=seed, doc_key=own,
                                             foreign=plan.foreign)
        text, reason = written.text, written.reason
    else:
        result = await writer.generate_query(content, kind, purpose=PURPOSE)
        if result.outcome is not Outcome.SCORED:
            return kind, None, f"the writer's reply was not usable ({result.error})"
        text, reason = result.value, None
    if text is None or reason is not None or report.critic == "none":
        return kind, text, reason
    if critic is None:
        return kind, text, offline_writer.critique(content, text, kind, plan.stats)
    verdict = await critic.critique_query(content, text, purpose=PURPOSE)
    if verdict.outcome is not Outcome.SCORED:
        return kind, text, f"the critic's reply was not usable ({verdict.error})"
    answerable, gives_away = verdict.value
    if gives_away:
        return kind, text, "gives the answer away (critic)"
    if kind == "unanswerable" and answerable:
        return kind, text, "answerable from its document (critic)"
    if kind != "unanswerable" and not answerable:
        return kind, text, "not answerable from its document (critic)"
    return kind, text, None


def _hit_rate(conn: psycopg.Connection, settings: Settings, report: GenerationReport) -> None:
    """How often an answerable generated query's source document is in the hybrid top 5 at
    the weights in force (keyword only for a query without embedding), from the one
    candidate fetch every command ranks by (its cache included)."""
    sources = {int(r[0]): int(r[3]) for r in ground_truth.generated_queries(conn, report.dataset)
               if r[4] != "unanswerable" and r[3] is not None}
    if not sources:
        return
    weights = settings.weights_for(report.dataset)
    runs = fused_runs(candidate_scores(conn, report.dataset, query_ids=list(sources),
                                       candidate_depth=weights.candidate_depth),
                      weights.semantic, weights.keyword, depth=TOP_K)
    report.source_hits = sum(sources[q] in runs.get(q, ()) for q in sources)
    report.source_in_top_5 = report.source_hits / len(sources)


# ------------------------------------------------------------------------------ dry run

@dataclass(frozen=True)
class GenerationEstimate:
    dataset: str
    writer: str
    critic: str
    queries_to_write: int
    requests: int
    cached: int
    max_cost_usd: float

    def to_dict(self) -> dict:
        return {"dataset": self.dataset, "writer": self.writer, "critic": self.critic,
                "queries_to_write": self.queries_to_write, "requests": self.requests,
                "cached": self.cached, "to_pay": self.requests - self.cached,
                "max_cost_usd": round(self.max_cost_usd, 6)}

    def line(self) -> str:
        if _offline(self.writer) and _offline(self.critic):
            return (f"ground-truth generate --dry-run: {self.queries_to_write} queries to write "
                    f"for '{self.dataset}' by the offline writer: no call, $0.")
        return (f"ground-truth generate --dry-run: {self.queries_to_write} queries to write for "
                f"'{self.dataset}' (writer {self.writer}, critic {self.critic}): about "
                f"{self.requests} requests, {self.cached} of them cached, at most "
                f"${self.max_cost_usd:.4f} (ground_truth.budget_usd "
                "is its own budget line); nothing was sent or stored.")


def estimate_generation(conn: psycopg.Connection, settings: Settings, dataset: str, *, n: int,
                        seed: int = 0) -> GenerationEstimate:
    """What ``generate`` would send for the next documents it would use: one writing and one
    critique per query (the critique priced on the document and a query of typical length;
    dropped queries take more documents, which no estimate foresees). Reads only."""
    writer, critic = writer_and_critic(settings)
    plan, _ = _plan(conn, settings, dataset, n, seed)
    requests = cached = 0
    worst = 0.0
    if plan.need and not (_offline(writer) and _offline(critic)):
        prices = PriceTable(settings.judges.prices)
        docs: list[tuple] = []
        for batch in _documents(conn, plan.info.corpus, seed, plan.used_documents, plan.need):
            docs.extend(batch)
            if len(docs) >= plan.need:
                break
        built = []
        for doc in docs[:plan.need]:
            kind = plan.kind_at(doc[3])
            if writer != OFFLINE_GENERATOR:
                built.append(planning_judge(settings, writer).generation_request(doc[2], kind))
            if critic not in (OFFLINE_GENERATOR, "none"):
                built.append(planning_judge(settings, critic).critique_request(
                    doc[2], "x" * 80))
        keys = [cache_key(r) for r in built]
        hit = cached_keys_among(conn, keys)
        for request, key in zip(built, keys):
            requests += 1
            if key in hit:
                cached += 1
            else:
                prices.require(request.model, f"{request.provider}:{request.model}")
                worst += prices.worst_case(request)
    return GenerationEstimate(dataset, writer, critic, plan.need, requests, cached, worst)

"""Staged dual judging: judge 2 only where it is needed.

``judges.staged`` (seed story 3.9 "staged dual judge"). Judge 1
scores every planned pair. Judge 2 scores a seeded random sample of *queries* (all pairs of
each): first ``first_queries``, then ``step_queries`` more per step. After each step the
pooled Cohen's kappa of the sample gets the kind of interval the kappa gate uses
(:func:`eval_harness.metrics.agreement.agreement_report`: query bootstrap,
``agreement.bootstrap_resamples``), at a level corrected for looking more than once
(:class:`StopRule`); as soon as its lower bound reaches ``agreement.kappa_floor``, judge 2
stops. The other queries' pairs are stored with judge 2's status :data:`SKIPPED` and no
score: "judge 2 was not asked", neither an unscored nor a failed judgement. Their labels
come from judge 1 alone (:func:`eval_harness.agreement.judge_pairs.final_labels`). If the
bound never reaches the floor, the sample grows to every query and judge 2 judges everything,
as without staging.

Why queries and not pairs: the interval is a bootstrap over queries (documents of one query
are judged against the same text, so they are not independent); sampling whole queries keeps
exactly the unit the gate resamples, and a query is stored whole, by both judges or by judge
1 only. Being a uniform random sample of queries, the sample's kappa estimates the kappa of
the whole dataset, which is what the gate then reads (it uses the pairs both judges scored).
Looking at the interval after every step is a repeated test: read at ``agreement.confidence``
every time, the more steps, the likelier a lucky early stop (judges whose true kappa is at
the floor stopped early in 9.2% of 1,000 simulated runs with four looks, where one look is
meant to err 2.5% of the time; 4.5% with the correction). So the looks that can stop judge 2
early, the sample sizes below every query (known in advance from ``first_queries`` and
``step_queries``), share the one-sided alpha of the gate's bound,
``(1 - agreement.confidence) / 2``, equally: Bonferroni's alpha spending
(:func:`eval_harness.metrics.agreement.spent_confidence`, whose module says why this rule
and not Pocock's boundaries or a confidence sequence). With the default 95% and four such
looks each reads a 98.75% interval. The last look, every query, skips nothing and reads the
gate's own interval. The cost: a lower bound read at a higher level is lower, so
well-agreeing judges clear the floor a step later now and then (the simulation in
tests/judges/staging/test_staged_peeking.py and benchmarks/staged_judging.py say how much);
fewer, larger steps spend less.

The order in which queries join the sample is a permutation of the planned queries (by
ground-truth id) drawn with ``judges.staged.seed``: a rerun on unchanged data takes the same
sample, finds its replies in the cache, stops at the same step and pays nothing.

What staging saved is estimated like ``judge --dry-run`` (:mod:`eval_harness.judges.dual.dry_run`):
judge 2's request for every skipped pair, less those already in the reply cache and the
repeats, at the price table's rates (``ceil(chars / 4)`` input tokens, a typical reply:
:func:`eval_harness.judges.client.pricing.estimated_input_tokens`).

The sample's order and sizes (:func:`sample_order`, :func:`sample_sizes`) are read by
``judge --dry-run`` too, so it plans judge 2's requests as a staged run asks them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterator, Sequence

import numpy as np
import psycopg

from eval_harness.datasets import ground_truth
from eval_harness.judges.client.pricing import (PriceTable, estimated_input_tokens,
                                                estimated_output_tokens)
from eval_harness.judges.client.reply_cache import cache_key, cached_keys_among
from eval_harness.judges.client.session import JudgeSession, planning_judge
from eval_harness.judges.dual.plan import PlannedQuery, load_documents
from eval_harness.judges.protocol import Passage, Usage
from eval_harness.metrics.agreement import (AgreementInputError, agreement_report,
                                            spent_confidence)
from eval_harness.settings import AgreementSettings, Settings
from eval_harness.settings.judges import LOCAL, StagedSettings


# ---------------------------------------------------------------------------------------
# The sample and the stop rule


def sample_order(planned: Sequence[PlannedQuery], seed: int) -> list[PlannedQuery]:
    """The order in which queries join judge 2's sample: a seeded permutation of the planned
    queries sorted by ground-truth id (so it depends on the queries, not on their order)."""
    ordered = sorted(planned, key=lambda p: p.query_id)
    permutation = np.random.default_rng(seed).permutation(len(ordered))
    return [ordered[i] for i in permutation]


def sample_sizes(n_queries: int, *, first: int, step: int) -> Iterator[int]:
    """Cumulative sample sizes: ``first``, ``first + step``, ... and finally ``n_queries``."""
    size = min(first, n_queries)
    while True:
        yield size
        if size >= n_queries:
            return
        size = min(size + step, n_queries)


def first_sample(planned: Sequence[PlannedQuery], staged: StagedSettings) -> list[PlannedQuery]:
    """The queries judge 2 judges in a staged run at the least: its first sample."""
    size = next(sample_sizes(len(planned), first=staged.first_queries,
                             step=staged.step_queries))
    return sample_order(planned, staged.seed)[:size]


def interim_looks(n_queries: int, *, first: int, step: int) -> int:
    """How many of :func:`sample_sizes` are looks that can stop judge 2 early: those below
    ``n_queries`` (the last, every query, skips nothing). Known before the first look, so
    staged judging spends its alpha over them
    (:mod:`eval_harness.metrics.agreement.sequential`)."""
    return sum(size < n_queries for size in sample_sizes(n_queries, first=first, step=step))


@dataclass(frozen=True)
class StopRule:
    """When judge 2 stops: the lower bound of kappa on the sample reaches ``floor``, read at
    ``confidence`` corrected for the ``looks`` planned looks that can stop it early
    (Bonferroni alpha spending; module docstring)."""

    floor: float          # agreement.kappa_floor
    confidence: float     # agreement.confidence: the gate's level, one look
    looks: int            # planned sample sizes below every query

    @property
    def look_confidence(self) -> float:
        """The two-sided level each early look reads (its lower end: one-sided alpha/looks)."""
        return spent_confidence(self.confidence, looks=max(self.looks, 1))

    def confidence_at(self, queries_in_sample: int, n_queries: int) -> float:
        """The level read at a sample of ``queries_in_sample`` of ``n_queries``: spent at an
        early look, the gate's own at the last (every query: nothing is skipped)."""
        return self.confidence if queries_in_sample >= n_queries else self.look_confidence

    def clears(self, step: "StageStep") -> bool:
        return step.lower_bound is not None and step.lower_bound >= self.floor

    def describe(self) -> str:
        """How the bound is read, in the words every staged message uses."""
        one_sided = (1.0 - self.confidence) / 2
        if self.looks == 0:
            return (f"lower {self.confidence:.0%} bound of kappa (the first sample is every "
                    "query: no early look)")
        if self.looks == 1:
            return (f"lower {self.confidence:.0%} bound of kappa (one early look: no alpha "
                    "to spend)")
        return (f"lower bound of kappa with alpha {one_sided:.1%} spent over {self.looks} "
                f"looks (Bonferroni: each look reads a {self.look_confidence:.2%} interval)")


def stop_rule(agreement: AgreementSettings, staged: StagedSettings, n_queries: int) -> StopRule:
    """The stop rule of a staged run over ``n_queries`` planned queries."""
    return StopRule(agreement.kappa_floor, agreement.confidence,
                    interim_looks(n_queries, first=staged.first_queries,
                                  step=staged.step_queries))


@dataclass
class StageStep:
    queries: int                  # queries in the sample after this step
    pairs_scored: int             # pairs of the sample both judges scored
    kappa: float | None
    lower_bound: float | None     # of the interval at ``confidence``; None: undefined
    confidence: float | None = None  # the level read at this look (StopRule.confidence_at)


def sample_agreement(scores1: Sequence[float | None], scores2: Sequence[float | None],
                     query_ids: Sequence[int], settings: AgreementSettings,
                     queries_in_sample: int, *, confidence: float | None = None) -> StageStep:
    """Kappa and the lower bound of its interval on the sample, computed as the kappa gate
    computes them but at ``confidence`` (default ``agreement.confidence``; the stop rule
    passes :meth:`StopRule.confidence_at`). Undefined when no pair is scored by both judges
    or fewer than 2 queries are."""
    level = settings.confidence if confidence is None else confidence
    try:
        report = agreement_report(scores1, scores2, query_ids=query_ids,
                                  threshold=settings.relevance_threshold,
                                  n_resamples=settings.bootstrap_resamples,
                                  confidence=level)
    except AgreementInputError:  # nothing scored by both judges yet
        return StageStep(queries_in_sample, 0, None, None, level)
    return StageStep(queries_in_sample, report.n_scored, report.kappa.value,
                     report.kappa_interval.low, level)


# ---------------------------------------------------------------------------------------
# What staging did and saved


@dataclass
class StagingReport:
    """What staged dual judging did in one run; ``to_dict`` is strict JSON."""

    floor: float
    confidence: float
    seed: int
    looks: int = 0                     # planned early looks the alpha is spent over (StopRule)
    queries: int = 0                   # planned queries of the run
    sample_queries: int = 0            # queries judge 2 scored
    skipped_queries: int = 0           # queries judge 2 was not asked
    skipped_pairs: int = 0
    cleared: bool = False              # the lower bound reached the floor
    steps: list[StageStep] = field(default_factory=list)
    saved_requests: int = 0            # judge 2 requests not sent (uncached, distinct)
    saved_input_tokens: int = 0
    saved_output_tokens: int = 0
    saved_usd: float = 0.0             # their estimated cost at the price table's rates

    @property
    def rule(self) -> StopRule:
        return StopRule(self.floor, self.confidence, self.looks)

    @property
    def lower_bound(self) -> float | None:
        return self.steps[-1].lower_bound if self.steps else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(lower_bound=self.lower_bound, saved_usd=round(self.saved_usd, 6),
                    stop_rule=self.rule.describe(), look_confidence=self.rule.look_confidence)
        return data

    def format(self) -> str:
        level = f"{self.confidence:.0%}"
        bound = "undefined" if self.lower_bound is None else f"{self.lower_bound:.3f}"
        rule = self.rule.describe()
        if self.cleared and not self.skipped_queries:
            head = (f"staged judging: the lower {level} bound of kappa reached the floor "
                    f"{self.floor:.2f} ({bound}) only with every query in the sample (at the "
                    f"early looks: {rule})")
        elif self.cleared:
            head = (f"staged judging: judge 2 stopped after a sample of {self.sample_queries} of "
                    f"{self.queries} queries ({rule}: {bound} >= floor {self.floor:.2f}, "
                    f"look {len(self.steps)})")
        else:
            last = self.steps[-1] if self.steps else None
            at = "" if last is None or last.confidence is None else \
                f", its lower {last.confidence:.2%} bound"
            head = (f"staged judging: the lower bound of kappa on the sample never reached the "
                    f"floor {self.floor:.2f} ({rule}; last look"
                    f"{'' if last is None else f' at {last.queries} queries'}{at}: {bound}); "
                    "judge 2 judged every query")
        return (f"{head}; judge 2 skipped {self.skipped_pairs} pairs of {self.skipped_queries} "
                f"queries, saving {self.saved_requests} requests, ~{self.saved_input_tokens} "
                f"input / ~{self.saved_output_tokens} output tokens, ~${self.saved_usd:.4f} "
                "(price-table estimate)")


def estimate_saved(conn: psycopg.Connection, report: StagingReport, judge2,
                   skipped: Sequence[PlannedQuery], documents: dict[int, Passage],
                   prices: PriceTable, *, batch: bool = False) -> None:
    """Fill ``report.saved_*``: judge 2's requests for the ``skipped`` queries' pairs that
    the run would have paid for (not in the reply cache, each distinct request once), their
    estimated tokens and cost (:mod:`eval_harness.judges.dual.dry_run`'s rules). A local judge 2
    sends nothing: nothing saved in money."""
    if not hasattr(judge2, "relevance_request"):
        return
    requests = {}
    for plan in skipped:
        for doc_id in plan.doc_ids:
            request = judge2.relevance_request(plan.text, documents.get(doc_id)
                                               or Passage("", doc_id))
            requests.setdefault(cache_key(request), request)
    cached = cached_keys_among(conn, list(requests)) if requests else set()
    conn.commit()  # a read; the run's connection holds no transaction across awaits
    model = judge2.spec.split(":", 1)[1]
    for key, request in requests.items():
        if key in cached:
            continue
        report.saved_requests += 1
        report.saved_input_tokens += estimated_input_tokens(request)
        report.saved_output_tokens += estimated_output_tokens(request)
    report.saved_usd = prices.cost(model, Usage(report.saved_input_tokens,
                                                 report.saved_output_tokens), batch=batch)


def stored_saving(conn: psycopg.Connection, settings: Settings,
                  dataset: str) -> StagingReport | None:
    """What staged judging saved on ``dataset`` as the store holds it now (the report's
    figure): the pairs whose ``judge2_status`` is ``skipped``, and judge 2's requests for
    them priced like :func:`estimate_saved` (for the judge 2 that wrote those rows). None
    when no pair was skipped. Only reads the store."""
    rows = ground_truth.judge2_skipped_rows(conn, dataset)
    if not rows:
        return None
    agreement = settings.agreement
    report = StagingReport(agreement.kappa_floor, agreement.confidence,
                           settings.judges.staged.seed, skipped_queries=len(rows),
                           skipped_pairs=sum(len(r[4]) for r in rows), cleared=True)
    skipped = [PlannedQuery(int(qid), ext, text, None, tuple(docs))
               for qid, ext, text, _, docs in rows]
    by_judge: dict[str, list[PlannedQuery]] = {}
    for plan, row in zip(skipped, rows):
        by_judge.setdefault(row[3] or "", []).append(plan)
    prices = PriceTable(settings.judges.prices)
    documents = load_documents(conn, dataset, [d for p in skipped for d in p.doc_ids],
                               with_embeddings=False)
    for spec, plans in by_judge.items():
        provider, _, model = spec.partition(":")
        if provider == LOCAL or prices.lookup(model) is None:
            continue  # a local judge 2 costs nothing; an unpriced model cannot be estimated
        judge = planning_judge(settings, spec)
        part = StagingReport(report.floor, report.confidence, report.seed)
        estimate_saved(conn, part, judge, plans, documents, prices)
        report.saved_requests += part.saved_requests
        report.saved_input_tokens += part.saved_input_tokens
        report.saved_output_tokens += part.saved_output_tokens
        report.saved_usd += part.saved_usd
    return report


# ---------------------------------------------------------------------------------------
# The staged run


async def judge_staged(conn: psycopg.Connection, settings: Settings, session: JudgeSession,
                       planned: Sequence[PlannedQuery], documents: dict[int, Passage],
                       rounds, *, batch: bool) -> StagingReport:
    """Both judges on a growing seeded sample of queries until kappa's lower bound on it,
    with alpha spent over the planned looks, clears the floor, then judge 1 alone on the
    rest (the module docstring). ``rounds``: the run's
    :class:`~eval_harness.judges.dual.rounds.JudgingRounds` (it judges and stores each round's
    queries and pools their scores; the rounds import the run's summary, which holds this
    module's report, so it is not named here)."""
    staged, agreement = settings.judges.staged, settings.agreement
    rule = stop_rule(agreement, staged, len(planned))
    report = StagingReport(rule.floor, rule.confidence, staged.seed, rule.looks,
                           queries=len(planned))
    order = sample_order(planned, staged.seed)
    done = 0
    for size in sample_sizes(len(order), first=staged.first_queries, step=staged.step_queries):
        await rounds.judge_round(order[done:size], with_judge2=True)
        done = size
        if session.pipeline.stopped:
            break
        step = sample_agreement(*rounds.pooled, agreement, done,
                                confidence=rule.confidence_at(done, len(order)))
        report.steps.append(step)
        if rule.clears(step):
            report.cleared = True
            break
    report.sample_queries = done
    rest = order[done:]
    if rest and not session.pipeline.stopped:
        await rounds.judge_round(rest, with_judge2=False)
        report.skipped_queries = len(rest)
        report.skipped_pairs = sum(len(p.doc_ids) for p in rest)
        estimate_saved(conn, report, session.judge2, rest, documents,
                       PriceTable(settings.judges.prices), batch=batch)
    return report

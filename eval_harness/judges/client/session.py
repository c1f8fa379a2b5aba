"""Build the judges of a run from settings: providers, pipeline, fallbacks, and clean-up.

    async with JudgeSession(settings, conn, run_id="nightly-42") as session:
        result = await session.judge1.relevance(query, document)
        evaluation = await session.judge("anthropic:claude-haiku-4-5").evaluate_answer(...)

**Fallback.** With ``judges.fallback_to_local: true`` (the default), a judge whose provider
key (its ``key_variable``: ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...) is not set, where the
provider needs one, is replaced by a local judge:
judge 1 by ``local:lexical``, judge 2 by ``local:embedding`` (or by whichever local judge the
other judge does not already use, so the two stay different signals). This is said once per
run (a warning on the ``eval_harness.judges`` logger), once per command however many runs it
starts (:mod:`eval_harness.judges.client.notice_scope`), and listed in :attr:`notices`. With
``fallback_to_local: false`` a missing key is an error naming the variable.

Which notices were said is the state of a :class:`FallbackNotices`, not of the process: each
session makes its own unless given one (``notices=``), so two runs in one process (tests,
Dagster's in-process executor) each say theirs. A caller that opens several sessions for one
run passes them the same :class:`FallbackNotices`. :func:`resolve_judge_specs` called without
one (the doctor, gate versions) keeps one process-wide record.

**Stopping.** Entered with ``async with``, a session stops its pipeline when the user stops
the run (:mod:`eval_harness.stopping`: SIGINT / SIGTERM; see
:meth:`~eval_harness.judges.client.runner.CallPipeline.interrupt`) and when the server ends the
ledger's connection (:mod:`eval_harness.store.liveness`; see
:meth:`~eval_harness.judges.client.runner.CallPipeline.store_lost`), so no request is bought that
could not be stored.

Keys come from :class:`~eval_harness.settings.Settings` only; they are passed to the SDK
clients and never logged, stored or shown (provider error text is sanitised).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Iterable
from contextlib import ExitStack
from typing import TYPE_CHECKING

import psycopg

from eval_harness import stopping
from eval_harness.errors import UnknownName
from eval_harness.judges.client.budget import Budget, BudgetLine
from eval_harness.judges.client.ledger import JudgeLedger
from eval_harness.judges.client.limiter import Clock, Sleep
from eval_harness.judges.client.notice_scope import first_in_command
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.providers import provider as provider_named
from eval_harness.judges.client.quota import (
    HEARTBEAT_SECONDS,
    LABEL_LINE,
    QuotaHolder,
    SharedBudget,
    SharedBudgetLine,
    account_of,
    budget_scope,
    spent_in_scope,
)
from eval_harness.judges.client.retry import RetryPolicy, wait_asked_notice
from eval_harness.judges.client.runner import CallPipeline
from eval_harness.judges.llm import LLMJudge
from eval_harness.judges.local.relevance import EmbeddingJudge, LexicalJudge
from eval_harness.judges.protocol import Judge
from eval_harness.settings.judges import LOCAL, validate_judge_spec
from eval_harness.store.liveness import watch_idle_connection

if TYPE_CHECKING:
    from eval_harness.settings import Settings

log = logging.getLogger("eval_harness.judges")
# What resolve_judge_specs said when called outside any session (no FallbackNotices given).
# Sessions never use it: their notices are their own (see FallbackNotices).
_announced: set[str] = set()


class JudgeUnavailable(UnknownName):
    """A judge cannot be built (missing key, missing price); the message says what to set."""


class FallbackNotices:
    """The notices one run has said (judges that fell back to local ones; a provider that
    asked to wait longer than calls wait): each distinct notice is logged once (a warning on
    ``logger``) per instance, however many sessions of the run share it.

    ``said`` is the set to record them in (a new one by default).
    """

    def __init__(self, logger: logging.Logger = log, *, said: set[str] | None = None) -> None:
        self._log = logger
        self._said = set() if said is None else said

    @property
    def said(self) -> frozenset[str]:
        return frozenset(self._said)

    def announce(self, notices: Iterable[str]) -> None:
        for notice in notices:
            if notice not in self._said:
                self._said.add(notice)
                if first_in_command(notice):  # a command of many runs says it once
                    self._log.warning(notice)

    def record(self, notices: Iterable[str]) -> None:
        """Count ``notices`` as said without logging them (the caller says them elsewhere,
        e.g. in a run summary)."""
        self._said.update(notices)


def resolve_judge_specs(settings: Settings, *, notices: FallbackNotices | None = None
                        ) -> tuple[str, str, tuple[str, ...]]:
    """The two judges actually used, and one notice per judge that fell back to a local one.

    The notices are announced through ``notices`` (a session's own); without it, through the
    process-wide record of calls made outside a session.
    """
    config = settings.judges
    chosen = {"judge1": config.judge1, "judge2": config.judge2}
    preferred = {"judge1": "local:lexical", "judge2": "local:embedding"}
    fallbacks = []
    for slot, other in (("judge1", "judge2"), ("judge2", "judge1")):
        spec = chosen[slot]
        name = spec.split(":", 1)[0]
        if name == LOCAL:
            continue
        provider = provider_named(name)
        if provider.api_key(settings) or not provider.key_required:
            continue
        variable = provider.key_variable
        if not config.fallback_to_local:
            raise JudgeUnavailable(
                f"{slot} is {spec} but {variable} is not set; set it, choose a local judge "
                f"(judges.{slot}: local:lexical) or set judges.fallback_to_local: true.")
        fallback = preferred[slot]
        if chosen[other] == fallback:  # keep the two judges different signals
            fallback = "local:embedding" if fallback == "local:lexical" else "local:lexical"
        chosen[slot] = fallback
        fallbacks.append(f"{slot}: {variable} is not set, so {fallback} judges instead of "
                         f"{spec}")
    (notices if notices is not None else FallbackNotices(said=_announced)).announce(fallbacks)
    return chosen["judge1"], chosen["judge2"], tuple(fallbacks)


def server_of(settings: Settings, provider) -> tuple[str | None, str]:
    """The base URL the settings point ``provider`` at (None: its default) and its
    normalised form (the server in the cache key); JudgeUnavailable when it is not usable."""
    base_url = provider.configured_base_url(settings)
    try:
        return base_url, provider.endpoint(base_url)
    except ValueError as exc:  # the value is not repeated: it may hold credentials
        raise JudgeUnavailable(f"{provider.base_url_variable} is not usable ({exc}); fix it, "
                               f"or unset it to use {provider.name}'s own API.") from None


def planning_judge(settings: Settings, spec: str) -> LLMJudge:
    """The LLM judge ``spec`` (``provider:model``) without a pipeline: it builds the requests
    a run would send (the same prompts, the same server in their cache keys) and sends
    nothing, for estimates (``judge --dry-run``, what staged judging saved). No provider
    client is built, only the normalised base URL its provider would talk to
    (:func:`server_of`)."""
    provider = provider_named(spec.split(":", 1)[0])
    return LLMJudge(spec, None, settings.judges, base_url=server_of(settings, provider)[1])


class JudgeSession:
    """Both judges of a run and the call pipeline (cache, budget, limits, retries) they share.

    ``sleep``, ``clock`` and ``rng`` are injectable so tests check exact retry schedules
    without waiting. ``notices`` records which fallback notices were said: the session's own
    unless given (pass one :class:`FallbackNotices` to every session of a run).
    """

    def __init__(self, settings: Settings, conn: psycopg.Connection, *,
                 run_id: str | None = None, sleep: Sleep = asyncio.sleep,
                 clock: Clock = time.monotonic, rng: random.Random | None = None,
                 notices: FallbackNotices | None = None,
                 budget_dataset: str | None = None) -> None:
        self.settings = settings
        self.run_id = run_id or uuid.uuid4().hex[:12]
        config = settings.judges
        self.fallback_notices = FallbackNotices() if notices is None else notices
        spec1, spec2, self.notices = resolve_judge_specs(settings,
                                                         notices=self.fallback_notices)
        self._conn = conn
        self._watching = ExitStack()
        self.ledger = JudgeLedger(conn, run_id=self.run_id)
        self.prices = PriceTable(config.prices)
        self.quota = QuotaHolder(conn)
        self._heartbeat: asyncio.Task | None = None
        self._beat_now = asyncio.Event()
        # a dataset's judging spends one budget with every other process judging it tonight
        self.budget_scope = (None if budget_dataset is None
                             else budget_scope(conn, budget_dataset))
        self.pipeline = CallPipeline(
            providers={}, ledger=self.ledger, prices=self.prices,
            budget=self._budget(config.budget_usd, LABEL_LINE),
            retry=RetryPolicy(config.retry, rng),
            rate_limits=config.rate_limits, concurrency=config.concurrency,
            clock=clock, sleep=sleep)
        self.pipeline.on_busy = lambda provider: self._beat_now.set()
        # retests and anchors spend their own lines, never the labels' budget
        self.pipeline.add_budget_line("retest", self._budget(
            config.retest.budget_usd, "retest", key="judges.retest.budget_usd",
            step="test-retest"))
        self.pipeline.add_budget_line("anchor", self._budget(
            config.anchors.budget_usd, "anchor", key="judges.anchors.budget_usd",
            step="re-judging the anchors"))
        self._accounts: dict[str, str] = {}  # provider -> account (see .quota)
        self._judges: dict[str, Judge] = {}
        self.judge1 = self.judge(spec1)
        self.judge2 = self.judge(spec2)

    def _budget(self, limit: float | None, line: str, **line_words):
        """The budget (``line_words``: a budget line's key and step) of this session: the
        store's, shared by the scope's processes, or this process's own without a scope."""
        if self.budget_scope is None:
            return BudgetLine(limit, **line_words) if line_words else Budget(limit)
        where = {"scope": self.budget_scope, "line": line, "holder": self.quota.holder}
        if line_words:
            return SharedBudgetLine(self._conn, limit, **where, **line_words)
        return SharedBudget(self._conn, limit, **where)

    def add_budget_line(self, purpose: str, limit: float | None, *, key: str,
                        step: str) -> None:
        """Calls made with ``purpose`` spend a line of their own, ``limit`` USD (per dataset
        and UTC day, shared by the scope's processes), never the labels' budget; ``key`` is
        the config key that sets it, ``step`` what stops when it is used up."""
        self.pipeline.add_budget_line(purpose, self._budget(limit, purpose, key=key, step=step))

    def spent_together(self) -> float | None:
        """What every process of this session's budget scope spent on labels (None without
        a scope)."""
        if self.budget_scope is None:
            return None
        return spent_in_scope(self._conn, self.budget_scope)

    @property
    def stats(self):
        return self.pipeline.stats

    @property
    def halted(self) -> bool:
        """Whether the user or the store stopped the run (a stop signal counts at once, before
        the event loop has passed it on: local judges may keep the loop busy)."""
        return self.pipeline.halted.is_set() or stopping.requested() is not None

    def wait_notices(self) -> tuple[str, ...]:
        """One sentence per provider whose server asked to wait longer than calls wait
        (``judges.retry.max_wait_seconds``), with the figure and the calls given up; said
        once per run when the session closes, unless the caller says it (and records it in
        :attr:`fallback_notices`) first."""
        max_wait = self.pipeline.retry.settings.max_wait_seconds
        notices = []
        for provider, asked in sorted(self.pipeline.stats.waits_asked.items()):
            controller = self.pipeline.limiter(provider).controller
            paused = controller.max_pause if controller.capped_pauses else None
            notices.append(wait_asked_notice(provider, asked, max_wait_s=max_wait,
                                             paused_s=paused))
        return tuple(notices)

    def judge(self, spec: str) -> Judge:
        """The judge named ``spec`` (built once per session). No fallback here: a paid judge
        asked for by name needs its key and a price."""
        spec = validate_judge_spec(spec, "judge")
        if spec not in self._judges:
            self._judges[spec] = self._build(spec)
        return self._judges[spec]

    def _build(self, spec: str) -> Judge:
        name, model = spec.split(":", 1)
        config = self.settings.judges
        if name == LOCAL:
            return (LexicalJudge if model == "lexical" else EmbeddingJudge)(config.local)
        provider = provider_named(name)
        key = provider.api_key(self.settings)
        if not key and provider.key_required:
            raise JudgeUnavailable(f"judge {spec} needs {provider.key_variable}; it is not set.")
        try:
            self.prices.require(model, spec)
        except LookupError as exc:
            raise JudgeUnavailable(str(exc)) from None
        if name not in self.pipeline.providers:
            limit = config.rate_limits.get(name, provider.default_rate_limit)
            client = self._client(provider, key)
            self.pipeline.add_provider(client, limit, config.concurrency, secret=key)
            self._accounts[name] = account_of(name, getattr(client, "base_url", None), key)
            if self.quota.registered:  # a judge asked for after the session started
                self._from_store(self.quota.register, {name: self._accounts[name]})
                self.pipeline.limiter(name).set_share(self.quota.share(name))
        return LLMJudge(spec, self.pipeline, config, base_url=self.pipeline.base_url(name))

    def _client(self, provider, key: str | None):
        """``provider``'s client for this run, pointed at its configured server."""
        config = self.settings.judges
        base_url = server_of(self.settings, provider)[0]
        return provider.client(api_key=key, base_url=base_url, timeout=config.timeout_seconds,
                               send_temperature=config.send_temperature.get(
                                   provider.name, provider.sends_temperature))

    async def aclose(self) -> None:
        """Say the run's wait notices, write what is buffered (cache, cost and retry rows)
        and close the HTTP clients (with the store gone, nothing is written: it would only
        fail again)."""
        self.fallback_notices.announce(self.wait_notices())
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None
        try:
            if self.pipeline.stopped != "store":
                self.pipeline.flush_ledger()
                self._from_store(self.quota.leave)
        finally:
            self._watching.close()
            for provider in self.pipeline.providers.values():
                await provider.aclose()

    async def __aenter__(self) -> JudgeSession:
        """Start watching for a stop signal and for the store going away (see above)."""
        loop = asyncio.get_running_loop()
        pipeline = self.pipeline

        def interrupt() -> None:  # called from the signal handler: only schedule
            loop.call_soon_threadsafe(pipeline.interrupt)

        self._watching.enter_context(stopping.on_stop(interrupt))
        self._watching.enter_context(watch_idle_connection(self._conn, pipeline.store_lost,
                                                           loop))
        if self._accounts:  # only API judges share a rate (local ones send nothing)
            self._from_store(self.quota.register, self._accounts)
            self._apply_shares({p: self.quota.share(p) for p in self._accounts})
            self._heartbeat = asyncio.create_task(self._beating())
        return self

    def _from_store(self, read_or_write, *args):
        """A statement of the quota's; a store error stops the run like the ledger's."""
        try:
            return read_or_write(*args)
        except psycopg.Error as exc:
            raise self.pipeline.store_lost(exc) from exc

    def _apply_shares(self, shares: dict[str, float]) -> None:
        for provider, share in shares.items():
            self.pipeline.limiter(provider).set_share(share)

    async def _beating(self) -> None:
        """Every heartbeat (or at once when a provider gets its first call since it was
        idle): say this session is alive and which providers it is using, and send at the
        shares that follow (see :mod:`eval_harness.judges.client.quota`)."""
        while self.pipeline.stopped != "store":
            try:
                await asyncio.wait_for(self._beat_now.wait(), HEARTBEAT_SECONDS)
            except TimeoutError:
                pass
            self._beat_now.clear()
            try:
                shares = self.quota.beat(self.pipeline.take_busy())
            except psycopg.Error as exc:
                self.pipeline.store_lost(exc)
                return
            self._apply_shares(shares)

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

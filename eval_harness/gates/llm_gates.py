"""The two LLM-judged quality gates, built on the judge layer: grounding and answer_reward.

Both use **judge 1** of :class:`~eval_harness.judges.JudgeSession` (``judges.judge1``, e.g.
``openai:gpt-4o``). Without that provider's API key and with ``judges.fallback_to_local``
(the default), judge 1 is ``local:lexical``: the embedded, offline, free default. Every call
goes through the judge pipeline, so the reply cache, the budget, the retries and the
``api_cost_log`` row of each billed call come from there; nothing here writes cost rows.

grounding
    The judge (temperature ``judges.temperatures.grounding``, 0 by default) lists the answer's
    claims and whether the cited sources support each; score = supported claims / claims. For
    an LLM judge each source is cut to ``quality_gates.grounding_source_chars`` characters first
    (the numbers of the sources cut are in ``details["sources_cut"]``). An answer without
    claims asserts nothing unsupported and scores 1.0 (recorded in the details).

    ``local:lexical`` reads each source whole, up to :data:`LOCAL_SOURCE_CHARS` (it aligns each
    claim with the best sentence or two, so a long source costs time, not accuracy), and keeps
    each claim's evidence in the details (source, span, support, what the span lacks). Its
    "cannot tell" (:mod:`eval_harness.judges.local.verdicts`) is never passed: an answer
    whose verdict depends on undecided claims, or with no claim the judge can check, is
    recorded unscored (``details["error"]`` starts "cannot tell:"; not asked again, the judge
    being deterministic); otherwise it is scored, undecided claims counted unsupported.

answer_reward
    The judge scores relevance (40%), accuracy (40%) and completeness (20%) against the
    sources cut to the prompts' 4,000 characters (not the grounding cut: completeness is
    judged against the whole context); reward -1..+1,
    mapped to the gates' scale by :func:`~eval_harness.gates.gate.reward_to_score`. A reward
    below ``quality_gates.reflexion_threshold`` asks the judge for a reflexion (temperature
    ``judges.temperatures.reflexion``); the record hook then writes, in the transaction that
    stores the gate results: one ``evaluation_log`` row per scored evaluation, the reflexion
    into ``episode_memory`` (once per answer id: an answer that already has one is not
    reflected on again, so that call is not paid twice) and the answer into
    ``regeneration_queue`` with the judge's improvement hint and issues (once; queued again
    only when its content changed).

    The reflexion's query embedding is the stored ``ground_truth.query_embedding`` of a ground
    truth query with exactly the same text, if there is one. Otherwise it is NULL: the gate run
    loads no embedding model (the local one is an optional extra and may be absent, and a paid
    embedding call per reflexion is not worth it here).

A run the user stops (SIGINT / SIGTERM) or a store that goes away stops the judge at once
(nothing more is sent): an answer not judged by then gets no result (None; the runner stores
only the others), and a lost store is raised (:class:`~eval_harness.judges.client.stops.StoreLost`).
A judge that fails (outcome failed or unscored, an exception, the budget used up) gives a
failed result: not passed, score None, the error in ``details["error"]``; the run itself goes
on. When no usable reply was obtained (provider down, budget, exception) ``details["retry"]``
is true and the next run asks again; a reply that did not parse even after the re-ask
(unscored) is kept as it is: the cache would give the same reply again.

Every output of a judged gate names the judge that decides it (:func:`gate_judge_line`:
``judge 1 openai:gpt-4o``, or ``judge 1 local:lexical, the offline stand-in (...)``).

The gate version names the judge actually used, its prompt version, temperature, maximum
output tokens and the source cut (and, for a local judge, its support threshold), so changing
any of them re-evaluates every answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import psycopg

from eval_harness.gates import reflexion_sql
from eval_harness.gates.gate import (ANSWER_REWARD, GROUNDING, GateRun, JudgedGate,
                                     reward_to_score, score_threshold)
from eval_harness.gates.result import GateResult
from eval_harness.gates.window import Answer
from eval_harness.judges import prompts
from eval_harness.judges.local.verdicts import CANNOT_TELL_MARGIN, GROUNDING_VERSION
from eval_harness.judges.local.relevance import CLAIM_SUPPORT_THRESHOLD, LOCAL_PROMPT_VERSION
from eval_harness.judges.protocol import JudgeResult, Outcome
from eval_harness.judges.client.stops import BudgetExhausted, RunInterrupted, StoreLost
from eval_harness.judges.client.providers import provider as provider_named
from eval_harness.judges.client.session import FallbackNotices, JudgeSession, resolve_judge_specs
from eval_harness.settings import Settings
from eval_harness.store.connection import locate_store

ALIGNED_GROUNDING_JUDGES = frozenset({"local:lexical"})  # read sources whole, windowed
LOCAL_SOURCE_CHARS = 20_000  # the local judge's cut: bounds its time (about linear in length)


def gate_judge_spec(settings: Settings, *, notices: FallbackNotices | None = None) -> str:
    """The judge the LLM gates use: judge 1 after the fallback to a local judge."""
    return resolve_judge_specs(settings, notices=notices)[0]


def gate_judge_line(settings: Settings, *, notices: FallbackNotices | None = None) -> str:
    """Which judge decides the LLM gates, as every gate output says it: ``judge 1
    openai:gpt-4o``; a local judge is named as the offline stand-in, with why it is the one
    (the API key it fell back for, or configured as ``judges.judge1``)."""
    spec = gate_judge_spec(settings, notices=notices)
    if not spec.startswith("local:"):
        return f"judge 1 {spec}"
    configured = settings.judges.judge1
    if configured == spec or configured.startswith("local:"):
        why = "configured as judges.judge1"
    else:
        variable = provider_named(configured.split(":", 1)[0]).key_variable
        why = f"{variable} is not set, so it replaces {configured}"
    return f"judge 1 {spec}, the offline stand-in ({why})"


def judged_gate_version(settings: Settings, operation: str,
                        source_chars: int | None = None, *,
                        notices: FallbackNotices | None = None) -> str:
    """What a judged gate's score depends on besides the answer (see the module docstring);
    ``source_chars`` is the sources' cut (default: ``quality_gates.grounding_source_chars``)."""
    spec = gate_judge_spec(settings, notices=notices)
    judges = settings.judges
    if spec in ALIGNED_GROUNDING_JUDGES and operation == "grounding":
        judge = (f"{spec} prompt={GROUNDING_VERSION} support={judges.local.lexical_support:g} "
                 f"cannot_tell={CANNOT_TELL_MARGIN:g}")
        source_chars = LOCAL_SOURCE_CHARS if source_chars is None else source_chars
    elif spec.startswith("local:"):
        local = judges.local
        threshold = CLAIM_SUPPORT_THRESHOLD if spec == "local:lexical" else local.trigram_support
        judge = f"{spec} prompt={LOCAL_PROMPT_VERSION} support={threshold:g}"
    else:
        judge = (f"{spec} prompt={prompts.VERSIONS[operation]} "
                 f"temperature={judges.temperatures[operation]:g} "
                 f"max_tokens={judges.max_tokens[operation]}")
    chars = settings.quality_gates.grounding_source_chars if source_chars is None else source_chars
    return f"v1 judge={judge} source_chars={chars}"


def source_texts(answer: Answer, limit: int) -> list[str]:
    """The answer's source texts, each cut to ``limit`` characters (marked where cut)."""
    if not isinstance(answer.sources, list):
        raise TypeError("sources is not a JSON list")
    return [prompts.truncate(str(source.get("text", "")), limit) for source in answer.sources]


def _failure(gate: str, threshold: float, error: str, latency_ms: float, *,
             retry: bool = True) -> GateResult:
    """A failed result; ``retry``: the next run asks again (no usable reply was obtained)."""
    return GateResult.unscored(gate, threshold, error, latency_ms=latency_ms,
                               details={"retry": retry})


def _judge_error(result: JudgeResult) -> str:
    return f"judge {result.judge} {result.operation} {result.outcome.value}: {result.error}"


def _usage(result: JudgeResult) -> dict[str, Any]:
    return {"judge": result.judge, "prompt_version": result.prompt_version,
            "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd, "cache_hits": result.cache_hits}


def _run(coroutine):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise RuntimeError("the judged gates run their own event loop; call them outside one")


@dataclass(frozen=True)
class _JudgedGateRunner:
    """Runs one judged gate's batch: a judge session on its own connection, answers in
    parallel (the pipeline bounds concurrency), one result per answer, never an exception."""

    settings: Settings
    gate: str
    session_options: dict | None = None

    @property
    def threshold(self) -> float:
        return score_threshold(self.gate, self.settings.quality_gates.gate(self.gate))

    def __call__(self, answers: Sequence[Answer], run: GateRun) -> list[GateResult | None]:
        started = perf_counter()
        try:
            with locate_store(self.settings).connection() as conn:
                return _run(self._evaluate(conn, answers, run))
        except StoreLost:
            raise  # nothing could be stored: the gate run ends
        except Exception as exc:  # the store or the session failed: every answer fails
            latency = (perf_counter() - started) * 1000.0 / max(1, len(answers))
            return [_failure(self.gate, self.threshold, f"{type(exc).__name__}: {exc}", latency)
                    for _ in answers]

    async def _evaluate(self, conn: psycopg.Connection, answers: Sequence[Answer],
                        run: GateRun) -> list[GateResult | None]:
        async with JudgeSession(self.settings, conn, run_id=run.run_id,
                                **(self.session_options or {})) as session:
            context = self._context(conn, answers)
            results = list(await asyncio.gather(
                *(self._one(session, answer, context) for answer in answers)))
            pipeline = session.pipeline
            if pipeline.stopped == "store":
                raise StoreLost(pipeline.stop_reason, pipeline.store_error)
            return results

    def _context(self, conn: psycopg.Connection, answers: Sequence[Answer]) -> Any:
        return None

    async def _one(self, session: JudgeSession, answer: Answer,
                   context: Any) -> GateResult | None:
        started = perf_counter()
        if session.halted:  # a local judge sends nothing the pipeline could refuse
            return None
        try:
            return await self._score(session, answer, context, started)
        except (RunInterrupted, StoreLost):
            return None  # not judged: no result (its replies so far are cached)
        except BudgetExhausted as exc:
            error = f"budget: {exc}"
        except Exception as exc:  # one bad answer must not fail the others
            error = f"{type(exc).__name__}: {exc}"
        return _failure(self.gate, self.threshold, error, (perf_counter() - started) * 1000.0)

    async def _score(self, session: JudgeSession, answer: Answer, context: Any,
                     started: float) -> GateResult:
        raise NotImplementedError


def sources_cut(answer: Answer, limit: int) -> list[int]:
    """1-based numbers of the answer's sources longer than ``limit`` (cut for the judge)."""
    return [i for i, source in enumerate(answer.sources, start=1)
            if len(str(source.get("text", "")).strip()) > limit]


def grounding_result(grounding: Any, details: dict[str, Any], threshold: float,
                     latency_ms: float) -> GateResult:
    """The gate's result for a judge's grounding (see the module docstring): supported share,
    1.0 without claims, unscored when a local judge cannot tell."""
    share = grounding.supported_share
    bounds = getattr(grounding, "share_bounds", None)
    why = getattr(grounding, "cannot_tell", None)
    if why is None and bounds is not None and bounds[0] < threshold <= bounds[1]:
        why = (f"{grounding.undecided} of {len(grounding.claims)} claims are 'cannot tell' "
               f"and decide the verdict (supported share {bounds[0]:.2f} to {bounds[1]:.2f})")
    if why is not None:
        return GateResult.unscored(GROUNDING, threshold, f"cannot tell: {why}",
                                   latency_ms=latency_ms, details={**details, "retry": False})
    if share is None:
        details["note"] = "the answer makes no claim, so none is unsupported"
    return GateResult(GROUNDING, 1.0 if share is None else share, False, threshold, details,
                      latency_ms)


class _GroundingRunner(_JudgedGateRunner):
    async def _score(self, session, answer, context, started):
        aligned = session.judge1.spec in ALIGNED_GROUNDING_JUDGES
        limit = (LOCAL_SOURCE_CHARS if aligned
                 else self.settings.quality_gates.grounding_source_chars)
        result = await session.judge1.grounding(answer.answer, source_texts(answer, limit))
        latency = (perf_counter() - started) * 1000.0
        if not result.scored:
            return _failure(GROUNDING, self.threshold, _judge_error(result), latency,
                            retry=result.outcome is Outcome.FAILED)
        details = {**result.value.to_dict(), **_usage(result)}
        cut = sources_cut(answer, limit)
        if cut:  # a cut is never silent: a local judge says "cannot tell" for what it hides
            details.update(sources_cut=cut, source_chars=limit)
        return grounding_result(result.value, details, self.threshold, latency)


class _AnswerRewardRunner(_JudgedGateRunner):
    def _context(self, conn, answers) -> set[str]:
        """Answer ids that already have a reflexion: not reflected on again."""
        return reflexion_sql.reflected_answer_ids(conn, [a.id for a in answers])

    async def _score(self, session, answer, reflected, started):
        # the whole context (up to the prompts' cap): completeness needs more than 500 chars
        sources = source_texts(answer, prompts.MAX_SOURCE_CHARS)
        judge = session.judge1
        result = await judge.evaluate_answer(answer.query, sources, answer.answer)
        if not result.scored:
            return _failure(ANSWER_REWARD, self.threshold, _judge_error(result),
                            (perf_counter() - started) * 1000.0,
                            retry=result.outcome is Outcome.FAILED)
        evaluation = result.value
        details = {**evaluation.to_dict(), **_usage(result), "model": judge.model}
        if (evaluation.reward < self.settings.quality_gates.reflexion_threshold
                and answer.id not in reflected):
            reflexion = await judge.reflexion(answer.query, answer.answer, evaluation.reasoning,
                                              issues=evaluation.issues)
            if reflexion.scored:
                details["reflexion"] = {**reflexion.value.to_dict(),
                                        "prompt_version": reflexion.prompt_version}
            else:  # the evaluation stands; the missing reflexion is reported, not invented
                details["reflexion_error"] = _judge_error(reflexion)
        return GateResult(ANSWER_REWARD, reward_to_score(evaluation.reward), False,
                          self.threshold, details, (perf_counter() - started) * 1000.0)


def record_answer_evaluations(conn: psycopg.Connection, answers: Sequence[Answer],
                              results: Sequence[GateResult], run: GateRun, *,
                              reflexion_threshold: float) -> None:
    """answer_reward's side effects, in the caller's transaction (see the module docstring)."""
    for answer, result in zip(answers, results):
        details = result.details
        if result.score is None or "reward" not in details:
            continue  # a failed evaluation has nothing to log; its error is in gate_results
        reflexion_sql.log_answer_evaluation(
            conn, run_id=run.run_id, answer_id=answer.id, query=answer.query,
            answer=answer.answer, reward=details["reward"], reasoning=details["reasoning"],
            criteria=details["criteria"], model=details["judge"],
            prompt_version=details["prompt_version"], input_tokens=details["input_tokens"],
            output_tokens=details["output_tokens"], cost=details["cost_usd"])
        if details["reward"] >= reflexion_threshold:
            continue
        reflexion = details.get("reflexion")
        if reflexion is not None:
            reflexion_sql.remember_reflexion(
                conn, answer_id=answer.id, query=answer.query, reward=details["reward"],
                problem=reflexion["problem"], lesson=reflexion["lesson"],
                model=details["judge"], prompt_version=reflexion["prompt_version"])
        reflexion_sql.queue_regeneration(
            conn, answer_id=answer.id, content_hash=answer.content_hash,
            reward=details["reward"], improvement_hint=details["improvement_hint"],
            issues=list(details["issues"]), run_id=run.run_id)


def grounding_gate(settings: Settings, *, session_options: dict | None = None) -> JudgedGate:
    notices = (session_options or {}).get("notices")
    return JudgedGate(judged_gate_version(settings, "grounding", notices=notices),
                      _GroundingRunner(settings, GROUNDING, session_options),
                      decided_by=gate_judge_line(settings, notices=notices))


def answer_reward_gate(settings: Settings, *,
                       session_options: dict | None = None) -> JudgedGate:
    threshold = settings.quality_gates.reflexion_threshold

    def record(conn, answers, results, run) -> None:
        record_answer_evaluations(conn, answers, results, run, reflexion_threshold=threshold)

    notices = (session_options or {}).get("notices")
    judge = judged_gate_version(settings, "evaluation", prompts.MAX_SOURCE_CHARS, notices=notices)
    version = (f"{judge} "
               f"reflexion_below={threshold:g}")
    return JudgedGate(version, _AnswerRewardRunner(settings, ANSWER_REWARD, session_options),
                      record, decided_by=gate_judge_line(settings, notices=notices))

"""A judge backed by a chat model (``openai:<model>`` or ``anthropic:<model>``).

Each question becomes one :class:`ChatRequest` (prompt from :mod:`~eval_harness.judges.prompts`,
temperature and max tokens from config) sent through the shared
:class:`~eval_harness.judges.client.runner.CallPipeline`. A reply that does not parse is sent back
once with the parse error; if the second reply does not parse either, the result is
"unscored" with both raw replies. A call that fails (retries exhausted, permanent error) gives
a "failed" result. Neither is ever turned into a number.

Both replies of an unscored result are cached, so a rerun finds it unscored again. With
:attr:`LLMJudge.retry_unscored` set (``eval-harness judge --retry-unscored``), a question
whose cached replies leave it unscored is asked anew past the cache (a new paid call, and
its re-ask if needed); the new replies replace the cached ones. Nothing else is re-asked.

``relevance(..., retest=True)`` is a test-retest scoring (:mod:`eval_harness.judges.retest`):
the question and its re-ask go past the cache and are logged as retests (``purpose``:
'retest', or 'anchor' for the anchor set of :mod:`eval_harness.judges.anchors`), and their
replies are not cached, so the labels keep the reply they were read from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from eval_harness.judges import prompts
from eval_harness.judges.client.runner import CallOutcome, CallPipeline
from eval_harness.judges.parsing import (
    ParseError,
    parse_critique,
    parse_evaluation,
    parse_generated_query,
    parse_grounding,
    parse_reflexion,
    parse_relevance,
)
from eval_harness.judges.protocol import (
    AnswerEvaluation,
    ChatRequest,
    Grounding,
    JudgeResult,
    Message,
    Outcome,
    Passage,
    Reflexion,
    as_passage,
)
from eval_harness.settings.judges import JudgeSettings

T = TypeVar("T")


class LLMJudge:
    """``base_url``: the normalised base URL of the server the pipeline sends this provider's
    calls to (``pipeline.base_url(provider)``); None is the provider's default server. It is
    part of every request's cache key."""

    def __init__(self, spec: str, pipeline: CallPipeline, settings: JudgeSettings, *,
                 base_url: str | None = None) -> None:
        self.spec = spec
        self.provider, self.model = spec.split(":", 1)
        self.base_url = base_url
        self._pipeline = pipeline
        self._settings = settings
        self.retry_unscored = False  # see the module docstring

    def __repr__(self) -> str:
        return f"LLMJudge({self.spec!r})"

    # -- requests (also used to plan batches) ---------------------------------------------

    def request(self, operation: str, prompt: prompts.Prompt) -> ChatRequest:
        return ChatRequest(provider=self.provider, model=self.model, operation=operation,
                           prompt_version=prompt.version, system=prompt.system,
                           messages=(Message("user", prompt.user),),
                           temperature=self._settings.temperatures[operation],
                           max_tokens=self._settings.max_tokens[operation],
                           base_url=self.base_url)

    def relevance_request(self, query: Passage | str, document: Passage | str) -> ChatRequest:
        return self.request("relevance", prompts.relevance_prompt(as_passage(query).text,
                                                                  as_passage(document).text))

    # -- the four questions ---------------------------------------------------------------

    async def relevance(self, query: Passage | str, document: Passage | str, *,
                        query_id: int | None = None,
                        retest: bool = False, purpose: str | None = None) -> JudgeResult[float]:
        return await self._ask(self.relevance_request(query, document), parse_relevance, query_id,
                               retest=retest, purpose=purpose)

    async def evaluate_answer(self, query: str, context: Sequence[str], answer: str, *,
                              query_id: int | None = None) -> JudgeResult[AnswerEvaluation]:
        request = self.request("evaluation", prompts.evaluation_prompt(query, context, answer))
        return await self._ask(request, parse_evaluation, query_id)

    async def grounding(self, answer: str, sources: Sequence[str], *,
                        query_id: int | None = None) -> JudgeResult[Grounding]:
        request = self.request("grounding", prompts.grounding_prompt(answer, sources))
        return await self._ask(request, partial(parse_grounding, n_sources=len(sources)), query_id)

    async def reflexion(self, query: str, answer: str, reasoning: str, *,
                        issues: Sequence[str] = (),
                        query_id: int | None = None) -> JudgeResult[Reflexion]:
        request = self.request("reflexion", prompts.reflexion_prompt(query, answer, reasoning,
                                                                     issues))
        return await self._ask(request, parse_reflexion, query_id)

    # -- ground truth from documents (eval_harness.query_sources) ------------------------

    def generation_request(self, document: str, kind: str) -> ChatRequest:
        return self.request("generation", prompts.generation_prompt(document, kind))

    def critique_request(self, document: str, query: str) -> ChatRequest:
        return self.request("critique", prompts.critique_prompt(document, query))

    async def generate_query(self, document: str, kind: str, *,
                             purpose: str | None = None) -> JudgeResult[str]:
        """One query of ``kind`` written from ``document`` (cached like every call)."""
        return await self._ask(self.generation_request(document, kind), parse_generated_query,
                               None, purpose=purpose)

    async def critique_query(self, document: str, query: str, *,
                             purpose: str | None = None) -> JudgeResult[tuple[bool, bool]]:
        """``(answerable, gives_away)`` of ``query`` for ``document``."""
        return await self._ask(self.critique_request(document, query), parse_critique, None,
                               purpose=purpose)

    # -- ask, parse, re-ask once ----------------------------------------------------------

    async def _ask(self, request: ChatRequest, parse: Callable[[str], T],
                   query_id: int | None, *, retest: bool = False,
                   purpose: str | None = None) -> JudgeResult[T]:
        started = time.monotonic()
        outcomes: list[CallOutcome] = []
        result = await self._ask_once(request, parse, query_id, outcomes, started,
                                      refresh=False, retest=retest, purpose=purpose)
        if retest:
            return result
        if (self.retry_unscored and result.outcome is Outcome.UNSCORED
                and all(o.cache_hit for o in outcomes)):
            # left unscored by an earlier run's replies: ask anew, past the cached ones
            outcomes.clear()
            result = await self._ask_once(request, parse, query_id, outcomes, started,
                                          refresh=True, purpose=purpose)
        return result

    async def _ask_once(self, request: ChatRequest, parse: Callable[[str], T],
                        query_id: int | None, outcomes: list[CallOutcome], started: float, *,
                        refresh: bool, retest: bool = False,
                        purpose: str | None = None) -> JudgeResult[T]:
        def result(value, outcome: Outcome, error: str | None) -> JudgeResult:
            return JudgeResult(
                value=value, outcome=outcome, judge=self.spec, operation=request.operation,
                prompt_version=request.prompt_version,
                replies=tuple(o.completion.text for o in outcomes if o.ok), error=error,
                input_tokens=sum(o.completion.usage.input_tokens for o in outcomes if o.billed),
                output_tokens=sum(o.completion.usage.output_tokens for o in outcomes if o.billed),
                cost_usd=sum(o.cost_usd for o in outcomes), latency_s=time.monotonic() - started,
                attempts=sum(o.attempts for o in outcomes),
                calls=sum(o.billed for o in outcomes),
                cache_hits=sum(o.cache_hit for o in outcomes))

        first = await self._pipeline.call(request, query_id=query_id, refresh=refresh,
                                          retest=retest, purpose=purpose)
        outcomes.append(first)
        if not first.ok:
            return result(None, Outcome.FAILED, f"{first.error.kind}: {first.error.message}")
        try:
            return result(parse(first.completion.text), Outcome.SCORED, None)
        except ParseError as exc:
            problem = str(exc)
        again = request.followed_by(first.completion.text,
                                    prompts.correction(request.operation, problem))
        second = await self._pipeline.call(again, query_id=query_id, refresh=refresh,
                                           retest=retest, purpose=purpose)
        outcomes.append(second)
        if not second.ok:
            return result(None, Outcome.FAILED,
                          f"re-ask after '{problem}' failed: {second.error.kind}: "
                          f"{second.error.message}")
        try:
            return result(parse(second.completion.text), Outcome.SCORED, None)
        except ParseError as exc:
            return result(None, Outcome.UNSCORED, f"{exc} (after one re-ask: {problem})")

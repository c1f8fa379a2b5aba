"""The LLM judge's re-ask rule (eval_harness.judges.llm) on an in-memory call pipeline: a reply
that does not parse is sent back once with the parse error, a second unparseable reply is
"unscored" with both replies kept, a failed call is "failed", and none of them becomes a
number. No server and no store: the pipeline answers from a script and records what it was
asked."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from eval_harness.judges import prompts
from eval_harness.judges.client.retry import ErrorInfo
from eval_harness.judges.client.runner import CallOutcome
from eval_harness.judges.llm import LLMJudge
from eval_harness.judges.parsing import ParseError, parse_relevance
from eval_harness.judges.protocol import ChatRequest, Completion, Message, Outcome, Usage
from eval_harness.settings.judges import JudgeSettings

pytestmark = pytest.mark.unit

QUERY, DOCUMENT = "does aspirin prevent heart attacks?", "aspirin lowers heart attack risk"
OVERLOADED = ErrorInfo("overloaded", True, 529, None, "retries exhausted")


@dataclass
class Asked:
    request: ChatRequest
    refresh: bool
    retest: bool
    purpose: str


@dataclass
class ScriptedPipeline:
    """Answers each call with the next scripted reply: a text (a completion of 10 + 2 tokens,
    from the cache when ``cached``) or an :class:`ErrorInfo` (the call failed)."""

    script: list[str | ErrorInfo]
    cached: bool = False
    asked: list[Asked] = field(default_factory=list)

    async def call(self, request: ChatRequest, *, query_id: int | None = None,
                   refresh: bool = False, retest: bool = False,
                   purpose: str = "retest") -> CallOutcome:
        self.asked.append(Asked(request, refresh, retest, purpose))
        reply = self.script.pop(0)
        if isinstance(reply, ErrorInfo):
            return CallOutcome(None, reply, attempts=3)
        return CallOutcome(Completion(reply, Usage(10, 2)), attempts=0 if self.cached else 1,
                           cache_hit=self.cached, cost_usd=0.0 if self.cached else 0.001)


def judged(pipeline: ScriptedPipeline, *, retry_unscored: bool = False):
    """The relevance judgement of the one (query, document) pair through ``pipeline``."""
    judge = LLMJudge("openai:gpt-4o", pipeline, JudgeSettings())
    judge.retry_unscored = retry_unscored
    return asyncio.run(judge.relevance(QUERY, DOCUMENT))


def problem_of(reply: str) -> str:
    with pytest.raises(ParseError) as raised:
        parse_relevance(reply)
    return str(raised.value)


def test_a_reply_that_parses_is_asked_once():
    pipeline = ScriptedPipeline(["0.8"])
    result = judged(pipeline)
    assert (result.outcome, result.value, result.error) == (Outcome.SCORED, 0.8, None)
    assert result.replies == ("0.8",) and result.calls == 1 and len(pipeline.asked) == 1
    assert result.input_tokens == 10 and result.output_tokens == 2
    assert result.cost_usd == pytest.approx(0.001)


def test_an_unparseable_reply_is_sent_back_once_with_its_parse_error():
    pipeline = ScriptedPipeline(["It is quite relevant.", "0.7"])
    result = judged(pipeline)
    assert (result.outcome, result.value) == (Outcome.SCORED, 0.7)
    assert result.replies == ("It is quite relevant.", "0.7") and result.calls == 2
    first, again = (asked.request for asked in pipeline.asked)
    # the same question, then the judge's own reply and the correction naming the error
    assert again.messages == first.messages + (
        Message("assistant", "It is quite relevant."),
        Message("user", prompts.correction("relevance", problem_of("It is quite relevant."))))
    assert again.messages[-1].content.startswith("Your reply could not be used: the reply does "
                                                 "not start with a number")
    assert (again.model, again.prompt_version) == (first.model, first.prompt_version)


def test_an_empty_reply_is_shown_to_the_judge_as_empty():
    pipeline = ScriptedPipeline(["   ", "0.1"])
    assert judged(pipeline).value == 0.1
    assert pipeline.asked[1].request.messages[1] == Message("assistant", "(empty reply)")


def test_two_unparseable_replies_are_unscored_never_a_number():
    pipeline = ScriptedPipeline(["relevant", "very relevant"])
    result = judged(pipeline)
    assert result.outcome is Outcome.UNSCORED and result.value is None
    assert result.replies == ("relevant", "very relevant") and result.calls == 2
    assert result.error == (f"{problem_of('very relevant')} "
                            f"(after one re-ask: {problem_of('relevant')})")
    assert len(pipeline.asked) == 2  # never a third time


def test_a_failed_call_is_failed_and_not_re_asked():
    pipeline = ScriptedPipeline([OVERLOADED])
    result = judged(pipeline)
    assert result.outcome is Outcome.FAILED and result.value is None
    assert result.error == "overloaded: retries exhausted" and result.replies == ()
    assert result.calls == 0 and result.attempts == 3 and len(pipeline.asked) == 1


def test_a_failed_re_ask_is_failed_and_names_the_parse_error():
    pipeline = ScriptedPipeline(["relevant", OVERLOADED])
    result = judged(pipeline)
    assert result.outcome is Outcome.FAILED and result.value is None
    assert result.error == (f"re-ask after '{problem_of('relevant')}' failed: "
                            "overloaded: retries exhausted")
    assert result.replies == ("relevant",) and result.attempts == 1 + 3


def test_retry_unscored_asks_a_cached_unscored_question_anew_past_the_cache():
    pipeline = ScriptedPipeline(["relevant", "very relevant"], cached=True)
    assert judged(pipeline).outcome is Outcome.UNSCORED
    assert [asked.refresh for asked in pipeline.asked] == [False, False]

    pipeline = ScriptedPipeline(["relevant", "very relevant", "0.4"], cached=True)
    result = judged(pipeline, retry_unscored=True)
    assert (result.outcome, result.value) == (Outcome.SCORED, 0.4)
    assert [asked.refresh for asked in pipeline.asked] == [False, False, True]
    assert result.replies == ("0.4",)  # the new reply replaces the cached ones


def test_retry_unscored_leaves_a_question_left_unscored_by_this_runs_own_calls():
    pipeline = ScriptedPipeline(["relevant", "very relevant"])
    assert judged(pipeline, retry_unscored=True).outcome is Outcome.UNSCORED
    assert len(pipeline.asked) == 2


def test_a_retest_goes_past_the_cache_once_with_its_purpose():
    pipeline = ScriptedPipeline(["relevant", "very relevant"], cached=True)
    judge = LLMJudge("openai:gpt-4o", pipeline, JudgeSettings())
    judge.retry_unscored = True
    result = asyncio.run(judge.relevance(QUERY, DOCUMENT, retest=True, purpose="anchor"))
    assert result.outcome is Outcome.UNSCORED and len(pipeline.asked) == 2
    assert all(asked.retest and asked.purpose == "anchor" for asked in pipeline.asked)

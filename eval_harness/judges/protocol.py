"""What a judge is asked, what it answers, and the one protocol every judge implements.

A judge answers four questions (seed stories 1.11, 2.5, 2.6 and the R5 feedback loop):

* ``relevance(query, document)``: how relevant the document is to the query, 0.0-1.0;
* ``evaluate_answer(query, context, answer)``: reward -1.0..+1.0 from relevance 40% /
  accuracy 40% / completeness 20%, with reasoning, the criterion scores, issues and an
  improvement hint;
* ``grounding(answer, sources)``: the answer's claims and whether the sources support each;
* ``reflexion(query, answer, reasoning)``: what went wrong (problem) and what to do next time
  (lesson).

Every call returns a :class:`JudgeResult`: the value, or ``None`` with ``outcome`` telling
why ("unscored": the judge answered but the reply did not parse, even after one re-ask;
"failed": no usable answer was obtained, e.g. retries were exhausted). A missing value is
never replaced by a neutral guess. The raw reply, tokens, cost, latency and attempts travel
with the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Generic, Literal, Protocol, Sequence, TypeVar, runtime_checkable

import numpy as np


OPERATIONS: tuple[str, ...] = ("relevance", "evaluation", "grounding", "reflexion")
T = TypeVar("T")

# Weights of the answer-evaluation criteria (story 2.5); the reward is computed from them here,
# never taken from a model's own arithmetic.
CRITERIA_WEIGHTS: dict[str, float] = {"relevance": 0.4, "accuracy": 0.4, "completeness": 0.2}


class Outcome(str, Enum):
    SCORED = "scored"      # a value that passed parsing and range checks
    UNSCORED = "unscored"  # the judge replied, but not in a usable form (after one re-ask)
    FAILED = "failed"      # no usable reply: retries exhausted, permanent error, missing input


# ---------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class Passage:
    """A query or a document as a judge sees it. ``embedding`` is used by ``local:embedding``."""

    text: str
    id: int | str | None = None
    embedding: np.ndarray | None = field(default=None, compare=False, repr=False)


def as_passage(value: Passage | str) -> Passage:
    return value if isinstance(value, Passage) else Passage(str(value))


# ---------------------------------------------------------------------------------------
# Values


def reward_from_criteria(relevance: float, accuracy: float, completeness: float) -> float:
    """Story 2.5: weighted = 0.4 * relevance + 0.4 * accuracy + 0.2 * completeness, each in
    [0, 1]; reward = 2 * weighted - 1, so 0 -> -1.0 (catastrophic) and 1 -> +1.0 (excellent)."""
    weighted = (CRITERIA_WEIGHTS["relevance"] * relevance + CRITERIA_WEIGHTS["accuracy"] * accuracy
                + CRITERIA_WEIGHTS["completeness"] * completeness)
    return round(2.0 * weighted - 1.0, 6)


@dataclass(frozen=True)
class AnswerEvaluation:
    """An answer's evaluation: criterion scores in [0, 1] and the reward derived from them."""

    relevance: float
    accuracy: float
    completeness: float
    reasoning: str
    issues: tuple[str, ...] = ()
    improvement_hint: str | None = None

    @property
    def reward(self) -> float:
        return reward_from_criteria(self.relevance, self.accuracy, self.completeness)

    @property
    def criteria(self) -> dict[str, float]:
        return {"relevance": self.relevance, "accuracy": self.accuracy,
                "completeness": self.completeness}

    def to_dict(self) -> dict[str, Any]:
        return {"reward": self.reward, "criteria": self.criteria, "reasoning": self.reasoning,
                "issues": list(self.issues), "improvement_hint": self.improvement_hint}


@dataclass(frozen=True)
class ClaimCheck:
    """One claim of an answer; ``source`` is the 1-based number of the supporting source."""

    claim: str
    supported: bool
    source: int | None = None
    support: float | None = None  # a local judge's support of the claim, 0..1 (LLMs: None)


@dataclass(frozen=True)
class Grounding:
    claims: tuple[ClaimCheck, ...]

    @property
    def supported_share(self) -> float | None:
        """Share of claims the sources support; ``None`` for an answer without claims."""
        if not self.claims:
            return None
        return sum(c.supported for c in self.claims) / len(self.claims)

    def to_dict(self) -> dict[str, Any]:
        return {"claims": [{"claim": c.claim, "supported": c.supported, "source": c.source,
                            **({} if c.support is None else {"support": c.support})}
                           for c in self.claims],
                "supported_share": self.supported_share}


@dataclass(frozen=True)
class Reflexion:
    problem: str
    lesson: str

    def to_dict(self) -> dict[str, str]:
        return {"problem": self.problem, "lesson": self.lesson}


# ---------------------------------------------------------------------------------------
# Provider requests and replies


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class ChatRequest:
    """One chat call to a provider, complete enough to be sent, cached and priced (its key
    in the reply cache: :func:`eval_harness.judges.client.reply_cache.cache_key`).

    ``base_url`` is the server the call goes to, normalised (see
    :func:`eval_harness.judges.client.providers.base.normalised_base_url`); ``None`` is the
    provider's default server.
    """

    provider: str            # a chat provider's name (eval_harness.judges.client.providers)
    model: str
    operation: str           # one of OPERATIONS
    prompt_version: str
    system: str
    messages: tuple[Message, ...]
    temperature: float
    max_tokens: int
    base_url: str | None = None

    def estimated_input_tokens(self) -> int:
        """A deliberate overestimate (3 characters per token, 8 tokens per message) used for
        the rate limiter and the budget before the provider reports real usage."""
        chars = len(self.system) + sum(len(m.content) for m in self.messages)
        return chars // 3 + 8 * (len(self.messages) + 1)

    def followed_by(self, reply: str, correction: str) -> "ChatRequest":
        """This conversation plus the judge's reply and our correction (the re-ask)."""
        shown = reply if reply.strip() else "(empty reply)"
        return replace(self, messages=self.messages + (Message("assistant", shown),
                                                       Message("user", correction)))


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0    # all input tokens, cached ones included
    output_tokens: int = 0
    cached_tokens: int = 0   # the part of input_tokens served from the provider's prompt cache


@dataclass(frozen=True)
class Completion:
    text: str
    usage: Usage


# ---------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class JudgeResult(Generic[T]):
    """A judge's answer to one question, with everything it took to get it.

    ``replies`` holds every raw reply in order (two after a re-ask); ``raw`` is the last.
    ``attempts`` counts HTTP requests sent (retries included), ``calls`` billed provider
    calls, ``cache_hits`` calls answered by the cache.
    """

    value: T | None
    outcome: Outcome
    judge: str
    operation: str
    prompt_version: str
    replies: tuple[str, ...] = ()
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    calls: int = 0
    cache_hits: int = 0

    @property
    def scored(self) -> bool:
        return self.outcome is Outcome.SCORED

    @property
    def raw(self) -> str | None:
        return self.replies[-1] if self.replies else None


# ---------------------------------------------------------------------------------------
# The protocol


@runtime_checkable
class Judge(Protocol):
    """What the harness asks of a judge; LLM-backed and local judges both implement it."""

    spec: str      # "openai:gpt-4o", "anthropic:claude-haiku-4-5", "local:lexical", ...
    provider: str  # a chat provider (eval_harness.judges.client.providers) or "local"
    model: str

    async def relevance(self, query: Passage | str, document: Passage | str, *,
                        query_id: int | None = None) -> JudgeResult[float]: ...

    async def evaluate_answer(self, query: str, context: Sequence[str], answer: str, *,
                              query_id: int | None = None) -> JudgeResult[AnswerEvaluation]: ...

    async def grounding(self, answer: str, sources: Sequence[str], *,
                        query_id: int | None = None) -> JudgeResult[Grounding]: ...

    async def reflexion(self, query: str, answer: str, reasoning: str, *,
                        issues: Sequence[str] = (),
                        query_id: int | None = None) -> JudgeResult[Reflexion]: ...

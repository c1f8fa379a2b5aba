"""Judges of the fake LLM server that cannot be trusted: a *noisy* judge that answers the same
request differently with a set probability, and a *drifting* judge that changes under the
same name after a given number of requests.

Both are responders (``server.responder = JudgeBehaviours({...})``), configured per model
(the request's ``model``); models not listed, and every prompt but the relevance one, get the
base responder's answer (:func:`fake_llm_replies.default_reply` by default). Everything is
deterministic per (seed, request content, attempt): the attempt is how many times this
server's responder has seen the same model and prompt before, so a test run twice gets the
same replies.

* :class:`NoisyJudge`: the first answer to a request is the base answer; each later answer
  to the same request (a retest past the cache) has its label flipped with probability
  ``flip_probability``: the score is reflected across ``threshold`` (0.8 -> 0.2 at 0.5; a
  score exactly at the threshold becomes threshold + 0.1). So the share of retest labels that
  differ from the first is ``flip_probability`` in expectation.
* :class:`DriftingJudge`: after ``after_requests`` relevance requests to the model, and from
  ``from_date`` on when one is given (the provider changed the model that day: the date is
  the responder's ``today()``, by default the fake server's clock, ``server.day``), a fixed
  share ``flip_share`` of requests (chosen by a seeded hash of the prompt, the same for every
  attempt) get their label flipped, and every score is shifted by ``score_shift`` (clamped to
  [0, 1]); before that, the base answer.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime

from fake_llm_replies import Responder, default_reply


@dataclass(frozen=True)
class NoisyJudge:
    flip_probability: float
    seed: int = 0
    threshold: float = 0.5


@dataclass(frozen=True)
class DriftingJudge:
    after_requests: int
    flip_share: float
    score_shift: float = 0.0
    seed: int = 0
    threshold: float = 0.5
    from_date: date | None = None  # drifts only from this date on (and after the requests)


def utc_today() -> date:
    return datetime.now(UTC).date()


def uniform(*parts: object) -> float:
    """A deterministic number in [0, 1) from ``parts`` (a seeded hash)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def flipped(score: float, threshold: float) -> float:
    """``score`` reflected across ``threshold`` (its label flips), in [0, 1]."""
    reflected = 2 * threshold - score
    if (reflected > threshold) == (score > threshold):  # exactly at the threshold
        reflected = threshold + 0.1
    return min(1.0, max(0.0, reflected))


class JudgeBehaviours:
    """A responder applying a :class:`NoisyJudge` or :class:`DriftingJudge` per model."""

    def __init__(self, behaviours: Mapping[str, NoisyJudge | DriftingJudge], *,
                 base: Responder = default_reply,
                 today: Callable[[], date] = utc_today) -> None:
        self.behaviours = dict(behaviours)
        self.base = base
        self.today = today  # the date a request is answered on (the fake server's clock)
        self._lock = threading.Lock()
        self._attempts: Counter = Counter()   # (model, system, user) -> answers given
        self._requests: Counter = Counter()   # model -> relevance requests answered
        self.flips: Counter = Counter()       # model -> answers whose label was flipped

    def __call__(self, api: str, system: str, user: str, body: dict) -> str:
        reply = self.base(api, system, user, body)
        model = body.get("model", "")
        behaviour = self.behaviours.get(model)
        if behaviour is None or "Relevance score" not in user:
            return reply
        with self._lock:
            attempt = self._attempts[(model, system, user)]
            self._attempts[(model, system, user)] += 1
            self._requests[model] += 1
            count = self._requests[model]
        score = float(reply)
        if isinstance(behaviour, NoisyJudge):
            if attempt > 0 and uniform(behaviour.seed, model, user, attempt) \
                    < behaviour.flip_probability:
                score = self._flip(model, score, behaviour.threshold)
        elif count > behaviour.after_requests and (
                behaviour.from_date is None or self.today() >= behaviour.from_date):
            if uniform(behaviour.seed, model, user) < behaviour.flip_share:
                score = self._flip(model, score, behaviour.threshold)
            score = min(1.0, max(0.0, score + behaviour.score_shift))
        return f"{score:.2f}"

    def _flip(self, model: str, score: float, threshold: float) -> float:
        with self._lock:
            self.flips[model] += 1
        return flipped(score, threshold)

    def requests_of(self, model: str) -> int:
        """Relevance requests to ``model`` answered so far."""
        with self._lock:
            return self._requests[model]

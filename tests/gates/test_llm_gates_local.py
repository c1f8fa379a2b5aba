"""The grounding gate with the offline judge: evidence kept, "cannot tell" unscored, no
silent cut."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from time import perf_counter
from types import SimpleNamespace

import pytest

from eval_harness.gates.gate import GROUNDING
from eval_harness.gates.llm_gates import (
    LOCAL_SOURCE_CHARS,
    _GroundingRunner,
    grounding_result,
    judged_gate_version,
)
from eval_harness.gates.window import Answer
from eval_harness.judges.local.relevance import LexicalJudge
from eval_harness.judges.local.verdicts import (
    CANNOT_TELL,
    GROUNDING_VERSION,
    SUPPORTED,
    UNSUPPORTED,
    ClaimEvidence,
    LocalGrounding,
)
from eval_harness.judges.protocol import ClaimCheck, Grounding, JudgeResult, Outcome
from eval_harness.settings import load_settings
from paths import REPO

pytestmark = pytest.mark.unit

FACT = "The bridge over the river Wear was opened in 1929 and carries 18,000 vehicles a day."
PADDING = "Puffins nest on the cliffs of the island every summer, and birdwatchers count them. "


@pytest.fixture(scope="module")
def settings():
    return load_settings(REPO / "config.yaml", environ={})  # no API key: local:lexical


def claims(*verdicts: str) -> tuple[ClaimEvidence, ...]:
    return tuple(ClaimEvidence(f"claim {i}", v == SUPPORTED, 1 if v == SUPPORTED else None,
                               support=0.5, verdict=v) for i, v in enumerate(verdicts))


@pytest.mark.parametrize("verdicts, score", [
    ((SUPPORTED,) * 4 + (CANNOT_TELL,), 0.8),           # passes whatever the undecided one is
    ((SUPPORTED, UNSUPPORTED, CANNOT_TELL), 1 / 3),     # fails whatever it is
    ((SUPPORTED, CANNOT_TELL), None),                   # 0.5 or 1.0: the judge cannot tell
    ((CANNOT_TELL,), None),
])
def test_cannot_tell_is_unscored_only_when_it_decides_the_verdict(verdicts, score):
    result = grounding_result(LocalGrounding(claims(*verdicts)), {"judge": "local:lexical"},
                              0.8, 1.0)
    if score is None:
        assert result.score is None and not result.passed
        assert result.details["error"].startswith("cannot tell: ")
        assert result.details["retry"] is False  # deterministic: asking again changes nothing
        assert result.details["judge"] == "local:lexical"
    else:
        assert result.score == pytest.approx(score)


def test_no_checkable_claim_is_unscored_for_the_local_judge_and_1_for_an_llm():
    local = grounding_result(LocalGrounding((), cannot_tell="no claim to check"), {}, 0.8, 0.0)
    assert local.score is None and "no claim to check" in local.details["error"]
    llm = grounding_result(Grounding(()), {}, 0.8, 0.0)
    assert llm.score == 1.0 and "makes no claim" in llm.details["note"]
    scored = grounding_result(Grounding((ClaimCheck("a b", True, 1),)), {}, 0.8, 0.0)
    assert scored.score == 1.0


def test_the_gate_version_names_the_aligned_judge_and_its_own_cut(settings):
    version = judged_gate_version(settings, "grounding")
    assert f"judge=local:lexical prompt={GROUNDING_VERSION} support=0.66 cannot_tell=0.05" \
        in version
    assert version.endswith(f"source_chars={LOCAL_SOURCE_CHARS}")
    # answer_reward keeps the claim check it was validated with, at its own threshold
    assert "prompt=local-v3 support=0.73" in judged_gate_version(settings, "evaluation", 4000)


def answer_with(*sources: str, text: str) -> Answer:
    return Answer("a-1", "When did the bridge open?", text,
                  [{"id": str(i), "text": s} for i, s in enumerate(sources, start=1)],
                  datetime(2025, 3, 3, tzinfo=UTC), "hash")


def score(settings, judge, answer: Answer):
    runner = _GroundingRunner(settings, GROUNDING)
    return asyncio.run(runner._score(SimpleNamespace(judge1=judge), answer, None,
                                     perf_counter()))


def test_the_local_judge_reads_a_long_source_whole_and_keeps_the_evidence(settings):
    source = PADDING * 12 + FACT + " " + PADDING * 12  # the fact far past 500 characters
    answer = answer_with(source, text="The Wear bridge opened in 1929 and carries 18,000 "
                                      "vehicles a day [1].")
    result = score(settings, LexicalJudge(settings.judges.local), answer)
    assert result.score == 1.0 and result.details["sources_cut"] == []
    (claim,) = result.details["claims"]
    assert claim["verdict"] == SUPPORTED and claim["source"] == 1
    start, end = claim["evidence"]["start"], claim["evidence"]["end"]
    assert FACT in source[start:end] and claim["support"] >= 0.66
    assert result.details["prompt_version"] == GROUNDING_VERSION
    json.dumps(result.details)  # stored as JSON in gate_results.details


def test_a_source_beyond_the_local_cut_is_cannot_tell_and_recorded(settings):
    source = PADDING * (LOCAL_SOURCE_CHARS // len(PADDING) + 1) + FACT
    answer = answer_with(source, text="The Wear bridge opened in 1929 [1].")
    result = score(settings, LexicalJudge(settings.judges.local), answer)
    assert result.score is None and result.details["error"].startswith("cannot tell")
    assert result.details["sources_cut"] == [1]
    assert result.details["source_chars"] == LOCAL_SOURCE_CHARS
    assert result.details["claims"][0]["verdict"] == CANNOT_TELL


class _RecordingJudge:
    """An LLM judge stand-in: records the sources it is shown, supports every claim."""

    spec, provider, model = "openai:gpt-4o", "openai", "gpt-4o"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def grounding(self, answer, sources, *, query_id=None):
        self.seen = list(sources)
        value = Grounding((ClaimCheck("The Wear bridge opened in 1929.", True, 1),))
        return JudgeResult(value, Outcome.SCORED, self.spec, "grounding", "grounding-v1")


def test_an_llm_judge_still_gets_the_configured_cut_and_the_cut_is_recorded(settings):
    source = PADDING * 12 + FACT
    judge = _RecordingJudge()
    result = score(settings, judge, answer_with(source, "Short.", text="It opened in 1929 [1]."))
    limit = settings.quality_gates.grounding_source_chars
    assert judge.seen[0].endswith("[...]") and len(judge.seen[0]) <= limit + 6
    assert judge.seen[1] == "Short."
    assert result.score == 1.0
    assert result.details["sources_cut"] == [1] and result.details["source_chars"] == limit


def test_the_lexical_judge_returns_evidence_through_the_protocol(settings):
    judge = LexicalJudge(replace(settings.judges.local))
    result = asyncio.run(judge.grounding("The Wear bridge opened in 1931.", [FACT]))
    assert result.scored and result.prompt_version == GROUNDING_VERSION
    (claim,) = result.value.claims
    assert not claim.supported and claim.conflict["conflicts"] == [
        "figures not in the span: 1931"]
    assert json.loads(result.raw)["signals"] == ["word coverage", "figures", "negation",
                                                 "names"]

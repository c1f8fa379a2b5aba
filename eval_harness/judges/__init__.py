"""LLM judges and dual-judge ground truth.

One judge protocol (:class:`~eval_harness.judges.protocol.Judge`): relevance 0-1, answer
evaluation (reward -1..+1 with criteria, reasoning, issues and an improvement hint), grounding
(claims and whether each is supported) and reflexion (problem + lesson). Providers:
``openai:<model>``, ``anthropic:<model>`` and the offline ``local:lexical`` /
``local:embedding``. Every LLM call goes through one pipeline (cache -> budget -> rate limiter
-> provider -> retry -> parse -> cost and retry logging), see :mod:`.runner`.

Typical use (the quality gates, notebooks)::

    from eval_harness.judges import JudgeSession

    async with JudgeSession(settings, conn) as session:
        result = await session.judge1.evaluate_answer(query, sources, answer)
        if result.scored and result.value.reward < 0.3:
            reflexion = await session.judge1.reflexion(query, answer, result.value.reasoning,
                                                       issues=result.value.issues)

Dual-judge ground truth: :func:`judge_dataset` (CLI ``eval-harness judge``, Dagster asset
``dual_judge_scores``) and :func:`store_dual_judge_scores` (the seed's tool).

Names are imported lazily: ``eval_harness.settings`` imports :mod:`.config` from here, so this
package must not import anything that imports the settings module at load time.
"""

from importlib import import_module

_EXPORTS = {
    "JudgeSession": "session", "JudgeUnavailable": "session", "resolve_judge_specs": "session",
    "Judge": "protocol", "JudgeResult": "protocol", "Outcome": "protocol", "Passage": "protocol",
    "AnswerEvaluation": "protocol", "Grounding": "protocol", "ClaimCheck": "protocol",
    "Reflexion": "protocol", "reward_from_criteria": "protocol",
    "FallbackNotices": "session",
    "QuotaExhausted": "runner", "RunStopped": "runner",
    "judge_dataset": "dual", "judge_dataset_async": "dual", "JudgeRunSummary": "dual_summary",
    "store_dual_judge_scores": "dual", "store_dual_judge_scores_async": "dual",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

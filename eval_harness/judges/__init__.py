"""LLM judges and dual-judge ground truth.

One judge protocol (:class:`~eval_harness.judges.protocol.Judge`): relevance 0-1, answer
evaluation (reward -1..+1 with criteria, reasoning, issues and an improvement hint), grounding
(claims and whether each is supported) and reflexion (problem + lesson). Judges are named
``provider:model``: a chat API (``openai:<model>``, ``anthropic:<model>``; one module each in
:mod:`eval_harness.judges.client.providers`) or the offline ``local:lexical`` /
``local:embedding``.

Layout:

* :mod:`.protocol`, :mod:`.prompts`, :mod:`.parsing`: the judge protocol, the prompts and
  the parsing of replies; :mod:`.llm`: the chat-model judge.
* :mod:`.client`: the request pipeline every LLM call goes through (cache -> budget -> rate
  limiter -> provider -> retry -> parse -> cost and retry logging, see
  :mod:`.client.runner`), the reply cache (:mod:`.client.reply_cache`), the session that
  builds a run's judges (:mod:`.client.session`), batches, the ledger, and one module per
  provider (:mod:`.client.providers`).
* :mod:`.local`: the offline judges (relevance, grounding alignment and its verdicts).
* :mod:`.dual`: dual-judge runs (:func:`~eval_harness.judges.dual.run.judge_dataset`, CLI
  ``eval-harness judge``, Dagster asset ``dual_judge_scores``), shards, the judges' record,
  dry run.
* One package per instrument a run carries: :mod:`.anchors` (the anchor set and the drift
  check, :mod:`.anchors.drift`), :mod:`.retest` (test-retest), :mod:`.staging` (staged dual
  judging).

Typical use (the quality gates, notebooks)::

    from eval_harness.judges.client.session import JudgeSession

    async with JudgeSession(settings, conn) as session:
        result = await session.judge1.evaluate_answer(query, sources, answer)
        if result.scored and result.value.reward < 0.3:
            reflexion = await session.judge1.reflexion(query, answer, result.value.reasoning,
                                                       issues=result.value.issues)

Import names from the module that defines them; this package imports nothing.
"""

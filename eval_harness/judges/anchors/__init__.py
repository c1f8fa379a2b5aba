"""The anchor set and the drift check: a few judged pairs frozen once, re-judged by every run to
see a judge drift.

With ``judges.anchors`` on, the first run that judges a dataset chooses a seeded sample of
``pairs`` of its judged (query, document) pairs and freezes them in ``judge_anchors``
(:mod:`.anchor_set`, statements in :mod:`.sql`): the texts, the score and label each judge gave
then, its spec and prompt version, and the human verdict on the pair where people gave one.

Every later run re-judges the anchors **before** it judges anything else, past the reply cache
(:meth:`LLMJudge.relevance` with ``retest=True``, logged in ``api_cost_log`` with purpose
``anchor``, never cached), and compares each judge with its frozen self (:mod:`.drift`): the
label flip rate with a Wilson interval, the mean paired score shift with a t interval, and
agreement with the human verdicts on anchors. Each comparison is stored in
``judge_anchor_runs``; the ``judge_drift`` asset check reads the newest
(:func:`.drift.drift_check` is its rule). A judge whose model or prompt version changed in
config since the anchors were frozen is thereby compared with the old one before any of its
labels are used, and the run summary says so ("judge 1 changed openai:gpt-4o ->
openai:gpt-4.1: ..."). A retest never replaces a cached reply; a new judge's anchor replies
are its first, so they are cached and its labels on those pairs cost nothing more.

A local judge (``local:*``) is re-judged too: it is deterministic and free (no request, no
cost row), so a comparison of a local judge shows 0 flips unless its code or its version
(``local-v3``, recorded like a prompt version) changed, which is what it then detects.
``local:embedding`` uses the stored vectors of the pair (an anchor whose vectors this run
did not load is unscored and left out of the comparison).

Modules:

* :mod:`.anchor_set`: choosing, freezing and re-judging the set; human verdicts onto it;
* :mod:`.drift`: one judge against its frozen self, and the drift check's rule;
* :mod:`.nightly`: anchors paid for once per dataset, judge spec and UTC day (shard runs, two
  processes or a backfill of several runs in one night re-judge them once; the others use that
  comparison, ``reused_from`` naming the run that measured it);
* :mod:`.refreeze`: ``eval-harness judge --refreeze-anchors``;
* :mod:`.cost`: what re-judging the set costs (``judge --dry-run``);
* :mod:`.sql`: every statement on ``judge_anchors`` and ``judge_anchor_runs``.

The statistics (the Wilson bound, the paired shift) are :mod:`eval_harness.metrics.drift`'s;
the settings are ``judges.anchors`` and ``judges.drift``. Import names from the module that
defines them; this package imports nothing.
"""

"""Dual-judge runs: planning (:mod:`.plan`), the run (:mod:`.run`) judging in rounds under query
claims (:mod:`.rounds`, :mod:`.claims`), per-query scores (:mod:`.scores`), shards
(:mod:`.shards`), the summary (:mod:`.summary`), the judges' record (:mod:`.record`) and the dry
run (:mod:`.dry_run`). The instruments a run carries have a package each:
:mod:`eval_harness.judges.anchors` (the anchor set, the drift check),
:mod:`eval_harness.judges.retest` (test-retest) and :mod:`eval_harness.judges.staging` (staged
judging)."""

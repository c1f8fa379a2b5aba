"""Dual-judge runs: planning (:mod:`.plan`), the run (:mod:`.run`) judging in rounds under query
claims, per-query scores, staged judging, shards, the summary and the dry run."""

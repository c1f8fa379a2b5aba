"""Is this change worse than main? Named result sets and the paired comparison of two.

``report --record NAME`` stores one dataset's retrieval metrics per ground-truth query and
``gate --record NAME`` each gate's score per answer (:mod:`~eval_harness.comparison.records`),
with the configuration, code version, corpus and ground-truth versions they were measured at.
``compare BASE CANDIDATE`` (:mod:`~eval_harness.comparison.compare`) pairs the two records'
units (queries; answers by their query), and for every metric and gate gives the mean
difference, its paired bootstrap interval and a paired randomisation test, Holm-corrected over
every row, with a verdict against ``ci.compare.margin``
(:mod:`eval_harness.metrics.paired`); :mod:`~eval_harness.comparison.output` writes it as
JSON, a terminal table, a Markdown pull-request comment and JUnit XML. ``sql`` owns the two
tables.
"""

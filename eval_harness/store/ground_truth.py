"""The owner of the ``ground_truth`` table: every statement that reads or writes it.

``ground_truth`` holds one row per (dataset, query, document) pair: the human relevance label
(qrels), each judge's score and label, and how the pair was settled. Judging writes the judge
columns, ingest and attach write the human labels, agreement and calibration read the labels,
the gates and reports read counts. They all call the functions here; no other module holds SQL
that names the table (tests/test_layers.py checks it).
"""

from __future__ import annotations

# The judge status of a pair judge 2 was not asked (staged dual judging): neither scored nor
# failed, so the pair is settled by judge 1 alone.
SKIPPED = "skipped"

"""The judge agreement report in Markdown (eval_harness.agreement.report), on the real store."""

from __future__ import annotations

import re

from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.agreement.review import queue_disagreements
from review_store import FAST_AGREEMENT as SETTINGS, disagreeing_scores, set_scores


def test_markdown_report_has_every_section_and_no_nan(db, dataset):
    name = dataset["name"]
    text = format_agreement_markdown(dataset_agreement(db, name, SETTINGS))  # nothing judged
    assert "Gate: FAIL" in text and "No statistics" in text
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    text = format_agreement_markdown(dataset_agreement(db, name, SETTINGS))
    for heading in ("# Judge agreement", "## Judge 1 vs judge 2", "## Per-query kappa",
                    "## Worst-agreeing queries", "## Judges vs human labels", "## Review queue"):
        assert heading in text
    assert "Landis & Koch" in text and "4 pair(s) wait for a human verdict" in text
    assert "question 1 \\| about" in text  # a pipe in a query cannot break the table
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)

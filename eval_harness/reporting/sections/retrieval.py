"""The retrieval section of the report ``eval-harness report`` writes: P@5, Recall@5, nDCG@10
and MRR@10 at the configured weights, as the command printed them (its
:class:`~eval_harness.retrieval.report.RetrievalReport`; nothing is searched again here)."""

from __future__ import annotations

from eval_harness.datasets.ground_truth import described_origins
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import BuiltSection, Paragraph, Section, Table
from eval_harness.retrieval.report import METRIC_LABELS, RetrievalReport

# Not one of the run report's SECTION_TITLES: only `eval-harness report` adds this section.
RETRIEVAL_TITLE = "Retrieval at the configured weights"


def retrieval_section(report: RetrievalReport) -> BuiltSection:
    """The metrics of ``report`` as a table; its figures as flat metrics (``retrieval_*``)."""
    lead = Paragraph(
        f"Dataset `{report.dataset}`: {report.queries} ground-truth queries, "
        f"{report.documents} documents; hybrid weights semantic {report.semantic_weight:g} / "
        f"keyword {report.keyword_weight:g}, candidate depth {report.candidate_depth} "
        f"({report.seconds:.1f} s)." + _left_out(report))
    table = Table(("metric", "value"),
                  tuple((label, fmt.num(report.metrics[key]))
                        for key, label in METRIC_LABELS.items()), (False, True))
    metrics = {f"retrieval_{key}": float(report.metrics[key]) for key in METRIC_LABELS}
    return BuiltSection(Section("retrieval", RETRIEVAL_TITLE, (lead, table)),
                        metrics)


def _left_out(report: RetrievalReport) -> str:
    """The queries of other origins the human-label figures leave out, in a sentence."""
    if not report.unlabelled_origins:
        return ""
    held = described_origins(dict(report.unlabelled_origins))
    return (f" Human labels only: the dataset's {held} queries have none and are left out "
            "(calibrate --labels judges measures them).")

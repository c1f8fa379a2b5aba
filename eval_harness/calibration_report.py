"""reports/calibration-results.md and its plot of P@5 against the semantic weight."""

from __future__ import annotations

import io
from pathlib import Path

from eval_harness.calibration_run import (CalibrationResult, summary_lines, weight_label)
from eval_harness.config_writer import write_file_atomically
from eval_harness.reports import write_report

REPORT_NAME = "calibration-results.md"
PLOT_NAME = "calibration-p5.png"


def write_calibration_report(folder: Path, result: CalibrationResult) -> tuple[Path, Path]:
    """Write the Markdown report and the PNG plot into ``folder``, each atomically."""
    plot = write_file_atomically(Path(folder) / PLOT_NAME, plot_p_at_5(result))
    report = write_report(Path(folder), REPORT_NAME, calibration_markdown(result, PLOT_NAME))
    return report, plot


def calibration_markdown(result: CalibrationResult, plot_name: str = PLOT_NAME) -> str:
    """The report: setting, grid table, reference method, uplift, cross-validation, verdict."""
    lines = [
        "# Hybrid weight calibration", "",
        f"Dataset `{result.dataset}`: {result.n_queries} ground-truth queries, "
        f"{result.n_documents} documents, candidate depth {result.candidate_depth}; "
        f"calibrated {result.calibrated_at:%Y-%m-%d %H:%M} UTC. Keyword weight = 1 - semantic "
        f"weight. Rankings are hybrid search's own (min-max fusion, ties by document id).", "",
        "| semantic | keyword | P@5 | Recall@5 | nDCG@10 | MRR@10 | |",
        "|---:|---:|---:|---:|---:|---:|---|"]
    for point in result.grid:
        marks = [name for name, chosen in (("**best**", point == result.best),
                                           ("default", point == result.default)) if chosen]
        lines.append(f"| {weight_label(point.semantic_weight)} | "
                     f"{weight_label(point.keyword_weight)} | {point.p_at_5:.4f} | "
                     f"{point.recall_at_5:.4f} | {point.ndcg_at_10:.4f} | "
                     f"{point.mrr_at_10:.4f} | {', '.join(marks)} |")
    rrf = result.rrf
    lines += [f"| RRF k={result.rrf_k} | | {rrf.p_at_5:.4f} | {rrf.recall_at_5:.4f} | "
              f"{rrf.ndcg_at_10:.4f} | {rrf.mrr_at_10:.4f} | reference method |", "",
              f"P@5 ceiling (mean of min(5, relevant)/5, what a perfect ranker gets on this "
              f"ground truth): **{result.p_at_5_ceiling:.4f}**; counting only relevant "
              f"documents among the candidates: {result.p_at_5_candidate_ceiling:.4f}.", ""]
    lines += [f"- {line}" for line in summary_lines(result)]
    lines += ["", f"![P@5 against the semantic weight]({plot_name})", ""]
    return "\n".join(lines)


def plot_p_at_5(result: CalibrationResult) -> bytes:
    """PNG bytes: P@5 per semantic weight, the ceiling, RRF, the default and the best."""
    import matplotlib

    matplotlib.use("Agg")  # no display; safe in Dagster workers and CI
    from matplotlib.figure import Figure

    weights = [point.semantic_weight for point in result.grid]
    figure = Figure(figsize=(6.4, 4.0), dpi=110)
    axes = figure.subplots()
    axes.plot(weights, [point.p_at_5 for point in result.grid], marker="o", label="P@5")
    axes.axhline(result.p_at_5_ceiling, linestyle="--", color="grey",
                 label=f"ceiling {result.p_at_5_ceiling:.3f}")
    axes.axhline(result.rrf.p_at_5, linestyle=":", color="tab:green",
                 label=f"RRF k={result.rrf_k} {result.rrf.p_at_5:.3f}")
    axes.scatter([result.default.semantic_weight], [result.default.p_at_5], s=80,
                 facecolors="none", edgecolors="tab:orange", zorder=3,
                 label=f"default {weight_label(result.default.semantic_weight)}")
    axes.scatter([result.best.semantic_weight], [result.best.p_at_5], s=120, marker="*",
                 color="tab:red", zorder=4,
                 label=f"best {weight_label(result.best.semantic_weight)}")
    axes.set_xlabel("semantic weight (keyword = 1 - semantic)")
    axes.set_ylabel("mean P@5")
    axes.set_title(f"Calibration of '{result.dataset}' ({result.n_queries} queries)")
    axes.set_ylim(0.0, max(result.p_at_5_ceiling, max(p.p_at_5 for p in result.grid)) * 1.1
                  or 1.0)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()

"""A calibration as text: the grid table, the decision, uplift, cross-validation and the
verdict, one line each (``eval-harness calibrate``'s output and the Dagster asset's log)."""

from __future__ import annotations

import math

from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.intervals import interval_note, p_at_5_interval
from eval_harness.calibration.result import CalibrationResult
from eval_harness.datasets.ground_truth import described_origins


def format_table(result: CalibrationResult) -> str:
    """The grid table, the reference method, uplift, cross-validation and the verdict."""
    lines = [f"Calibration: dataset '{result.dataset}', {result.n_queries} ground-truth queries, "
             f"{result.n_documents} documents, candidate depth {result.candidate_depth}",
             label_source_line(result), "",
             f"  {'semantic':>8}  {'keyword':>7}  {'P@5':>6}  {'P@5 interval':>16}"
             f"  {'Recall@5':>8}  {'nDCG@10':>7}  {'MRR@10':>6}  {'Judged@5':>8}"]
    for point in result.grid:
        marks = [name for name, chosen in (("best", point == result.best),
                                           ("default", point == result.default),
                                           ("in force", _same(point.semantic_weight,
                                                              result.current_weight)))
                 if chosen]
        lines.append(f"  {weight_label(point.semantic_weight):>8}  "
                     f"{weight_label(point.keyword_weight):>7}  {point.p_at_5:6.4f}  "
                     f"{p_at_5_interval(point):>16}  {point.recall_at_5:8.4f}  "
                     f"{point.ndcg_at_10:7.4f}  {point.mrr_at_10:6.4f}"
                     f"  {point.judged_at_5:8.4f}"
                     + (f"  <- {', '.join(marks)}" if marks else ""))
    rrf = result.rrf
    lines.append(f"  {'RRF k=' + str(result.rrf_k):>17}  {rrf.p_at_5:6.4f}  {'':>16}  "
                 f"{rrf.recall_at_5:8.4f}  {rrf.ndcg_at_10:7.4f}  {rrf.mrr_at_10:6.4f}"
                 f"  (reference method)")
    lines += ["", interval_note(result), f"P@5 ceiling (a perfect ranker on this ground truth): "
                  f"{result.p_at_5_ceiling:.4f}; within the candidates: "
                  f"{result.p_at_5_candidate_ceiling:.4f}"]
    lines += summary_lines(result)
    lines += result.judged.lines()
    lines.append(f"\n({result.seconds['total']:.2f} s: candidates "
                 f"{result.seconds['fetch_candidates']:.2f} s, sweep "
                 f"{result.seconds['sweep']:.3f} s, statistics "
                 f"{result.seconds['statistics']:.2f} s)")
    return "\n".join(lines)


def label_source_line(result: CalibrationResult) -> str:
    """Which labels the figures rest on, and where their queries came from when not all are
    the dataset's own, in one line."""
    origins = result.query_origins
    queries = ("" if set(origins) <= {"dataset"}
               else "; queries: " + described_origins(dict(origins)))
    if result.label_source != "judges":
        return f"Labels: human (the ground truth's expected_docs){queries}"
    detail = result.judge_labels or {}
    pairs = ", ".join(f"{n} {source}" for source, n in sorted(detail.get("pairs", {}).items()))
    return (f"Labels: judges (disagreement rule {detail.get('disagreement_rule')}; pairs: "
            f"{pairs or 'none'}; an adjudicated verdict overrides both judges){queries}")


def decision_line(result: CalibrationResult) -> str:
    """The decision on the weights and its evidence, in one line (:mod:`.decision`)."""
    decision = result.decision
    if decision.corrected:  # judge labels with a human sample: both guards (.decision)
        interval = (f"interval: prediction-powered inference over queries, "
                    f"{1 - decision.alpha:.0%}; a change needs adjusted p <= alpha and the "
                    f"interval's lower bound > {max(0.0, decision.min_gain):g}")
    else:
        interval = f"interval: paired bootstrap over queries, {1 - decision.alpha:.0%}"
    return (f"Decision: {decision.sentence} (max-statistic permutation test over "
            f"{len(result.grid)} grid points against the weights in force, alpha "
            f"{decision.alpha:g}, min_gain {decision.min_gain:g}; {interval})")


def summary_lines(result: CalibrationResult) -> list[str]:
    """The decision, best vs default, uplift with interval, cross-validated P@5, verdict:
    one line each (the uplift and cross-validation describe the grid; the decision alone
    decides)."""
    uplift, best, default = result.uplift, result.best, result.default
    relative = "n/a" if uplift.relative is None else f"{uplift.relative:+.1%}"
    lines = [decision_line(result),
             f"Best: semantic {weight_label(best.semantic_weight)} / keyword "
             f"{weight_label(best.keyword_weight)}, P@5 {best.p_at_5:.4f}; default "
             f"{weight_label(default.semantic_weight)} / {weight_label(default.keyword_weight)}, "
             f"P@5 {default.p_at_5:.4f}",
             f"Uplift: {uplift.absolute:+.4f} absolute ({relative} relative), "
             f"{uplift.confidence:.0%} paired bootstrap interval [{uplift.ci_low:+.4f}, "
             f"{uplift.ci_high:+.4f}], paired randomization test p = {uplift.p_value:.4f}"]
    cv = result.cross_validation
    if cv is None:
        lines.append("Cross-validated P@5: not computed (fewer than 2 queries)")
    else:
        lines.append(f"Cross-validated P@5 ({len(cv.fold_sizes)} folds): {cv.p_at_5:.4f}, "
                     f"in-sample {best.p_at_5:.4f}, optimism {best.p_at_5 - cv.p_at_5:+.4f} "
                     f"(fold weights {', '.join(weight_label(w) for w in cv.fold_weights)})")
    if result.corrected is not None:
        lines += result.corrected.lines()
    lines.append(result.figure.sentence(result.bands, result.p_at_5_ceiling))
    return lines


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)

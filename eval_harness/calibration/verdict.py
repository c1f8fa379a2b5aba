"""The P@5 verdict of a calibration (story 2.9) and the one figure it is given on.

The rule (:func:`precision_verdict`): P@5 ``>= full_success`` is full success, ``>=
partial_success`` partial success, else failure. A calibration's verdict rests on one P@5 at
the weights in force after the decision (:mod:`.decision`: the best grid point when the
decision changed the weights to it, else the weights kept; a verdict on weights the decision
did not adopt would describe weights nobody runs), named with those weights and its label
source, and every output says the same figure (:func:`verdict_figure` decides, once):

* labels ``human`` (expected_docs: qrels, the RAG system's ground truth): the P@5 on that
  complete ground truth. A human sample beside it is reported (:mod:`.ppi_p_at_5`) but does
  not replace it: nothing is estimated that the complete labels give exactly;
* labels ``judges`` and no labelled human sample: the judges' P@5, as the grid has it;
* labels ``judges`` with a labelled human sample (:mod:`.ppi_p_at_5`): the P@5 corrected by
  prediction-powered inference (clipped to [0, 1]), with its 95% interval, label source
  :data:`PPI_LABEL_SOURCE`. The judges alone are biased; the corrected figure is the one
  with a valid interval, and the judges' own figure is shown beside it.

Where it goes: the calibration result (:mod:`.result`) and so the CLI's text and JSON, the
``calibrated_weights`` row (CLI and Dagster), and the grid frame's ``verdict_*`` columns
(:func:`eval_harness.calibration.history.grid_frame`), from which the DuckDB history,
Dagster's ``p_at_5_verdict`` check and the run report read it back
(:func:`eval_harness.calibration.history.figure_from_grid`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from eval_harness.calibration.grid import GridPoint, weight_label
from eval_harness.calibration.ppi_p_at_5 import CorrectedP5

Verdict = Literal["full_success", "partial_success", "failure"]
PPI_LABEL_SOURCE = "judges+ppi"  # the judges' labels corrected by a human sample (PPI)
VERDICT_LABELS = {"full_success": "full success", "partial_success": "partial success",
                  "failure": "failure"}
VERDICT_MEANING = {
    "full_success": "ready for production",
    "partial_success": "deploy with monitoring",
    "failure": "architecture review or more ground truth needed"}


@dataclass(frozen=True)
class VerdictBands:
    """P@5 thresholds of the story 2.9 verdict."""

    full_success: float = 0.75
    partial_success: float = 0.70


def precision_verdict(p_at_5: float, *, full_success: float = 0.75,
                      partial_success: float = 0.70) -> Verdict:
    """Story 2.9 verdict: ``p_at_5 >= full_success`` is "full_success", ``partial_success
    <= p_at_5 < full_success`` "partial_success", below that "failure". Comparisons are
    exact (no rounding), so 0.7499 is partial and 0.6999 is failure. Bands out of order or
    a P@5 outside [0, 1] raise ``ValueError``.

    Examples
    --------
    >>> precision_verdict(0.75), precision_verdict(0.7499), precision_verdict(0.6999)
    ('full_success', 'partial_success', 'failure')
    >>> precision_verdict(0.65, full_success=0.7, partial_success=0.6)
    'partial_success'
    """
    if not 0.0 <= partial_success <= full_success <= 1.0:
        raise ValueError(f"verdict bands need 0 <= partial_success <= full_success <= 1, "
                         f"got {partial_success} and {full_success}.")
    if not (isinstance(p_at_5, (int, float, np.floating)) and math.isfinite(p_at_5)
            and 0.0 <= p_at_5 <= 1.0):
        raise ValueError(f"P@5 must be a number in [0, 1], got {p_at_5!r}.")
    if p_at_5 >= full_success:
        return "full_success"
    if p_at_5 >= partial_success:
        return "partial_success"
    return "failure"


@dataclass(frozen=True)
class VerdictFigure:
    """The P@5 a verdict is given on, where it comes from, and the verdict under ``bands``."""

    verdict: Verdict
    p_at_5: float
    label_source: str | None          # human | judges | judges+ppi (None: not recorded)
    semantic_weight: float
    interval: tuple[float, float] | None = None  # PPI: the 95% interval over queries
    judges_p_at_5: float | None = None  # PPI: the judges' own P@5, uncorrected
    n_human: int | None = None          # PPI: human-labelled queries
    n_judged: int | None = None         # PPI: judged queries
    keyword_weight: float | None = None  # None: not recorded (a history from before it)
    weights: str | None = None          # the decision: changed / kept (None: none recorded)

    @property
    def at(self) -> str:
        """The weights the verdict is given at, in words."""
        pair = f"semantic {weight_label(self.semantic_weight)}"
        if self.keyword_weight is not None:
            pair += f" / keyword {weight_label(self.keyword_weight)}"
        which = {"kept": "the weights kept", "changed": "the new weights"}.get(
            self.weights or "", "the calibrated weights")
        return f"{which}, {pair}"

    @property
    def basis(self) -> str:
        """``ppi`` when the figure is the corrected estimate, else ``p_at_5``."""
        return "ppi" if self.interval is not None else "p_at_5"

    def to_dict(self) -> dict[str, Any]:
        """The ``verdict`` object of ``calibrate --json`` (without the bands)."""
        data = {"verdict": self.verdict, "p_at_5": self.p_at_5,
                "label_source": self.label_source, "basis": self.basis,
                "semantic_weight": self.semantic_weight,
                "keyword_weight": self.keyword_weight, "weights": self.weights}
        if self.interval is not None:
            data.update(interval=list(self.interval), level=0.95,
                        uncorrected_p_at_5=self.judges_p_at_5, n_human=self.n_human,
                        n_judged=self.n_judged)
        return data

    def sentence(self, bands: VerdictBands, ceiling: float | None = None) -> str:
        """The verdict in one sentence, with its figure, label source and (PPI) interval."""
        if self.interval is None:
            return verdict_sentence(self.verdict, self.p_at_5, bands, ceiling,
                                    label_source=self.label_source, at=self.at)
        lo, hi = self.interval
        return (f"Verdict: {VERDICT_LABELS[self.verdict].upper()} on the PPI-corrected P@5 "
                f"{self.p_at_5:.4f} (95% interval [{lo:.4f}, {hi:.4f}], {self.n_human} "
                f"human-labelled of {self.n_judged} judged queries; judges alone "
                f"{self.judges_p_at_5:.4f}; labels {self.label_source}) at {self.at}; "
                f"full success >= {bands.full_success:g}, partial success >= "
                f"{bands.partial_success:g}: {VERDICT_MEANING[self.verdict]}")


def verdict_sentence(verdict: Verdict, p_at_5: float, bands: VerdictBands,
                     ceiling: float | None = None, *, label_source: str | None = None,
                     at: str = "the calibrated weights") -> str:
    """The verdict in one sentence; with the P@5 ``ceiling`` of the ground truth, a band
    that no ranking can reach is said too (e.g. one relevant document per query)."""
    label = VERDICT_LABELS[verdict].upper()
    labels = f", labels {label_source}" if label_source else ""
    text = (f"Verdict: {label} (P@5 {p_at_5:.4f} at {at}{labels}; full "
            f"success >= {bands.full_success:g}, partial success >= "
            f"{bands.partial_success:g}): {VERDICT_MEANING[verdict]}")
    if ceiling is not None and verdict != "full_success" and ceiling < bands.full_success:
        text += (f". Even a perfect ranking reaches only P@5 {ceiling:.4f} on this ground "
                 "truth (too few relevant documents per query), so these bands do not fit it")
    return text


def verdict_figure(point: GridPoint, bands: VerdictBands, *, label_source: str,
                   weights: str | None, corrected: CorrectedP5 | None) -> VerdictFigure:
    """The figure a calibration's verdict is given on (module docstring) and the verdict under
    ``bands``: at ``point`` (the weights in force after the decision, ``weights`` saying how:
    changed or kept), labelled ``label_source``; ``corrected``: the PPI-corrected P@5 there,
    when a labelled human sample gave one."""
    at = {"semantic_weight": point.semantic_weight, "keyword_weight": point.keyword_weight,
          "weights": weights}
    if corrected is None or label_source != "judges":
        return graded_figure(point.p_at_5, bands, label_source=label_source, **at)
    ppi = corrected.ppi
    return graded_figure(min(max(ppi.estimate, 0.0), 1.0), bands,
                         label_source=PPI_LABEL_SOURCE, **at,
                         interval=(float(ppi.interval[0]), float(ppi.interval[1])),
                         judges_p_at_5=corrected.judge_p_at_5, n_human=ppi.n_human,
                         n_judged=ppi.n_judged)


def graded_figure(p_at_5: float, bands: VerdictBands, **fields: Any) -> VerdictFigure:
    """A :class:`VerdictFigure` of ``p_at_5`` (and ``fields``), graded under ``bands``."""
    verdict = precision_verdict(p_at_5, full_success=bands.full_success,
                                partial_success=bands.partial_success)
    return VerdictFigure(verdict=verdict, p_at_5=float(p_at_5), **fields)

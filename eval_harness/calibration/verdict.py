"""The P@5 verdict of a calibration (story 2.9) and the one figure it is given on.

A calibration's verdict rests on one P@5 at the weights in force after the decision
(:mod:`.decision`: the best grid point when the decision changed the weights to it, else the
weights kept; a verdict on weights the decision did not adopt would describe weights nobody
runs), named with those weights and its label source, and every output says the same figure
(:func:`verdict_figure` decides, once):

* labels ``human`` (expected_docs: qrels, the RAG system's ground truth): the P@5 on that
  complete ground truth. A human sample beside it is reported (:mod:`.corrected`) but does not
  replace it: nothing is estimated that the complete labels give exactly;
* labels ``judges`` and no labelled human sample: the judges' P@5, as the grid has it;
* labels ``judges`` with a labelled human sample (:mod:`.corrected`): the P@5 corrected by
  prediction-powered inference (clipped to [0, 1]), with its 95% interval, label source
  :data:`PPI_LABEL_SOURCE`. The judges alone are biased; the corrected figure is the one
  with a valid interval, and the judges' own figure is shown beside it.

Where it goes: the CLI's text and JSON (:mod:`.run`), the ``calibrated_weights`` row (CLI and
Dagster), and the grid frame's ``verdict_*`` columns (:func:`figure_columns`), from which the
DuckDB history, Dagster's ``p_at_5_verdict`` check and the run report read it back
(:func:`figure_from_row`, :func:`eval_harness.calibration.history.figure_from_grid`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eval_harness.metrics.calibration import Verdict, precision_verdict

if TYPE_CHECKING:
    import pandas as pd

    from eval_harness.calibration.run import CalibrationResult

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
    keyword_weight: float | None = None  # None: not recorded
    weights: str | None = None          # the decision: changed / kept (None: none recorded)

    @property
    def at(self) -> str:
        """The weights the verdict is given at, in words."""
        from eval_harness.calibration.run import weight_label

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
        data: dict[str, Any] = {"verdict": self.verdict, "p_at_5": self.p_at_5,
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


def verdict_figure(result: CalibrationResult, bands: VerdictBands | None = None) -> VerdictFigure:
    """The figure ``result``'s verdict is given on (module docstring) and the verdict under
    ``bands`` (default: the calibration's own)."""
    bands = bands or result.bands
    point = result.verdict_point
    at = {"semantic_weight": point.semantic_weight, "keyword_weight": point.keyword_weight,
          "weights": result.verdict_weights}
    corrected = result.corrected.at_verdict(result) if result.corrected is not None else None
    if corrected is None or result.label_source != "judges":
        return _graded(point.p_at_5, bands, label_source=result.label_source, **at)
    ppi = corrected.ppi
    return _graded(min(max(ppi.estimate, 0.0), 1.0), bands, label_source=PPI_LABEL_SOURCE,
                   **at, interval=(float(ppi.interval[0]), float(ppi.interval[1])),
                   judges_p_at_5=corrected.judge_p_at_5, n_human=ppi.n_human,
                   n_judged=ppi.n_judged)


def figure_columns(figure: VerdictFigure) -> dict[str, Any]:
    """The grid frame's ``verdict_*`` columns (the same on every row of one calibration)."""
    lo, hi = figure.interval if figure.interval is not None else (math.nan, math.nan)
    return {"verdict_p_at_5": figure.p_at_5, "verdict_label_source": figure.label_source,
            "verdict_interval_low": lo, "verdict_interval_high": hi,
            "verdict_judges_p_at_5": (math.nan if figure.judges_p_at_5 is None
                                      else figure.judges_p_at_5),
            "verdict_n_human": figure.n_human or 0, "verdict_n_judged": figure.n_judged or 0,
            "verdict_semantic_weight": figure.semantic_weight,
            "verdict_keyword_weight": (math.nan if figure.keyword_weight is None
                                       else figure.keyword_weight),
            "verdict_weights": figure.weights}


def figure_from_row(best: pd.Series, bands: VerdictBands) -> VerdictFigure:
    """The verdict figure the calibrated row of a grid frame carries (:func:`figure_columns`)
    and the verdict under ``bands``."""
    at = {"semantic_weight": float(best["verdict_semantic_weight"]),
          "keyword_weight": _number(best.get("verdict_keyword_weight")),
          "weights": _text(best.get("verdict_weights"))}
    figure = float(best["verdict_p_at_5"])
    lo, hi = _number(best.get("verdict_interval_low")), _number(best.get("verdict_interval_high"))
    ppi = lo is not None and hi is not None
    return _graded(figure, bands, label_source=_text(best.get("verdict_label_source")),
                   **at, interval=(lo, hi) if ppi else None,
                   judges_p_at_5=_number(best.get("verdict_judges_p_at_5")) if ppi else None,
                   n_human=int(best["verdict_n_human"]) if ppi else None,
                   n_judged=int(best["verdict_n_judged"]) if ppi else None)


def _graded(p_at_5: float, bands: VerdictBands, **fields: Any) -> VerdictFigure:
    verdict = precision_verdict(p_at_5, full_success=bands.full_success,
                                partial_success=bands.partial_success)
    return VerdictFigure(verdict=verdict, p_at_5=float(p_at_5), **fields)


def _number(value) -> float | None:
    """A frame cell as a float; None for a missing cell, None or NaN."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None

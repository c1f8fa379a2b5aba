"""How many more queries people should label: ``eval-harness review sample --plan``.

From the judges' agreement with people on the labelled human sample (the PPI terms of
:mod:`eval_harness.metrics.ppi_plan`), for a dataset calibrated on judge labels:

* ``target_width``: the human-labelled queries the 95% (``1 - alpha``) PPI interval on P@5 at
  the weights in force needs to be at most that wide;
* ``gain`` (with ``power``): the human-labelled queries a PPI test of the gain
  P@5(candidate) - P@5(in force), one PPI over the per-query differences
  (:mod:`.ppi_gain`), needs to detect a true gain of that size with that power at
  ``alpha``. The candidate is the grid point the judges' labels rank best apart from the
  weights in force: the one a decision would test.

The judge P@5 is the calibration sweep's on judge labels (``calibrate --labels judges``), the
human P@5 the sampled queries' whose top 5 is all labelled, the frame the queries the sample
is drawn from. Uniform sampling (the sample of :mod:`eval_harness.agreement.sample`) is what
the plan assumes. Without a labelled human sample there is nothing to plan from: the answer
is the first sample to draw (:data:`FIRST_SAMPLE_QUERIES` queries).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import psycopg

from scipy.stats import norm

from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.ppi_gain import paired_differences, query_figures, sample_frame
from eval_harness.calibration.ppi_p_at_5 import human_sample_verdicts
from eval_harness.calibration.result import CalibrationResult
from eval_harness.calibration.run import calibrate_with_settings
from eval_harness.metrics.ppi_plan import LabelPlan, plan_for_power, plan_for_width
from eval_harness.settings import Settings

# The first sample the plan asks for: enough queries for the variance of the judges' error
# to be estimated at all (the plan is only as good as that estimate).
FIRST_SAMPLE_QUERIES = 30


@dataclass(frozen=True)
class HumanLabelPlan:
    """What :func:`plan_human_labels` found; :meth:`paragraph` is what the command prints."""

    dataset: str
    alpha: float
    in_force: float                        # semantic weight the P@5 plan is at
    sampled_queries: int                   # drawn (labelled or not)
    width: LabelPlan | None = None         # None without --target-width
    target_width: float | None = None
    gain: LabelPlan | None = None          # None without --gain
    target_gain: float | None = None
    power: float | None = None
    candidate: float | None = None         # the weight the gain is measured for
    first_sample: bool = False             # no labelled sample yet: nothing to plan from
    too_few: bool = False                  # labelled, but fewer than 2 complete queries

    def paragraph(self) -> str:
        if self.first_sample:
            return (f"No query of the human sample of '{self.dataset}' is labelled yet, so "
                    "there is no judge-human agreement to plan from: draw and label a first "
                    f"sample of {FIRST_SAMPLE_QUERIES} queries (`eval-harness review sample "
                    f"FILE.csv --dataset {self.dataset} --n {FIRST_SAMPLE_QUERIES}`, label every "
                    "row, `eval-harness review import FILE.csv`), then plan again.")
        if self.too_few:
            return (f"The human sample of '{self.dataset}' has fewer than 2 queries whose top 5 "
                    "is all labelled, so there is no judge-human agreement to plan from yet: "
                    "label every row of the sample file and import it, then plan again.")
        level = f"{1 - self.alpha:.0%}"
        parts = []
        if self.width is not None:
            plan = self.width
            parts.append(
                f"Now {plan.n_human} of {plan.n_judged} judged queries of '{self.dataset}' are "
                f"human-labelled; the {level} PPI interval on P@5 at the weights in force "
                f"{weight_label(self.in_force)} is {plan.width:.4f} wide (judges' weight "
                f"{plan.lam:.2f}). " + _needed(plan, f"a width of {self.target_width:.4f}"))
        if self.gain is not None:
            plan = self.gain
            parts.append(
                f"The gain of {weight_label(self.candidate)} (the judges' best other grid "
                f"point) over {weight_label(self.in_force)}: its {level} PPI interval is "
                f"{plan.width:.4f} wide now, {_power_now(plan, self.target_gain, self.alpha):.0%} "
                f"power to detect {self.target_gain:+.4f}. "
                + _needed(plan, f"detecting a gain of {self.target_gain:+.4f} with "
                                f"{self.power:.0%} power at alpha {self.alpha:g}"))
        parts.append(f"(The plan holds the judges' current error variance fixed and assumes "
                     f"uniform sampling; {self.sampled_queries} queries are drawn so far, and "
                     "`review sample FILE.csv --n N` with a larger N extends the sample.)")
        return " ".join(parts)


def _needed(plan: LabelPlan, what: str) -> str:
    if plan.needed is not None and plan.more == 0:
        return (f"{_sentence_start(what)} needs {plan.needed} human-labelled queries: the "
                f"{plan.n_human} labelled already reach it.")
    if plan.needed is not None:
        return (f"{_sentence_start(what)} needs {plan.needed} human-labelled queries: "
                f"{plan.more} more.")
    if plan.reason == "judged_term":
        return (f"No number of human labels reaches {what}: the judges' own spread over the "
                f"{plan.n_judged} judged queries already takes that much; judge more queries.")
    return (f"{_sentence_start(what)} would take more human labels than the {plan.n_judged} judged "
            f"queries; labelling all of them gives a width of "
            f"{plan.width_with_all_labelled:.4f}.")


def _sentence_start(text: str) -> str:
    return text[:1].upper() + text[1:]


def _power_now(plan: LabelPlan, gain: float, alpha: float) -> float:
    if plan.standard_error == 0.0:
        return 1.0
    shift = abs(gain) / plan.standard_error
    z = float(norm.ppf(1 - alpha / 2))
    return float(norm.cdf(shift - z) + norm.cdf(-shift - z))


def plan_human_labels(conn: psycopg.Connection, settings: Settings, dataset: str, *,
                      target_width: float | None = None, gain: float | None = None,
                      power: float = 0.8, alpha: float = 0.05) -> HumanLabelPlan:
    """The plan for ``dataset`` (module docstring); reads the store only. Raises ``ValueError``
    (one sentence) when neither ``target_width`` nor ``gain`` is given, and what
    :func:`~eval_harness.calibration.run.calibrate_with_settings` raises on judge labels."""
    _check_options(target_width, gain, power, alpha)
    with conn.transaction():
        human = human_sample_verdicts(conn, dataset)
        frame = sample_frame(conn, dataset)
    in_force = settings.weights_for(dataset).semantic
    base = dict(dataset=dataset, alpha=alpha, in_force=in_force, sampled_queries=len(human))
    if not any(human.values()):
        return HumanLabelPlan(**base, first_sample=True)
    result = calibrate_with_settings(conn, settings, dataset, labels="judges")
    if not np.isclose(result.sweep.semantic_weights, in_force, atol=1e-9).any():
        in_force = result.default.semantic_weight  # not on the grid: the default is
        base["in_force"] = in_force
    figures = query_figures(result.candidates, result.sweep, in_force, human, frame)
    complete = [q for q in figures.judge if q in figures.human]
    if len(complete) < 2:
        return HumanLabelPlan(**base, too_few=True)
    plan = dict(base, target_width=target_width, target_gain=gain, power=power)
    if target_width is not None:
        plan["width"] = plan_for_width(
            y_labeled=[figures.human[q] for q in complete],
            yhat_labeled=[figures.judge[q] for q in complete],
            yhat_unlabeled=list(figures.judge.values()), target_width=target_width, alpha=alpha)
    if gain is not None:
        candidate = _best_other_point(result, in_force)
        y, yhat, yhat_all, _ = paired_differences(result.candidates, result.sweep, candidate,
                                                  in_force, human, frame)
        if y.size < 2:
            return HumanLabelPlan(**base, too_few=True)
        plan["candidate"] = candidate
        plan["gain"] = plan_for_power(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                                      gain=gain, alpha=alpha, power=power)
    return HumanLabelPlan(**plan)


def _check_options(target_width, gain, power, alpha) -> None:
    if target_width is None and gain is None:
        raise ValueError("--plan needs --target-width W (the wanted P@5 interval width) or "
                         "--gain G (the gain to detect); give one or both.")
    if target_width is not None and not 0.0 < target_width <= 2.0:
        raise ValueError(f"--target-width must be a width of P@5 in (0, 2], got {target_width}.")
    if gain is not None and not (0.0 < abs(gain) <= 1.0):
        raise ValueError(f"--gain must be a non-zero gain in P@5 between -1 and 1, got {gain}.")
    if not 0.0 < power < 1.0:
        raise ValueError(f"--power must lie in (0, 1), got {power}.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"--alpha must lie in (0, 1), got {alpha}.")


def _best_other_point(result: CalibrationResult, in_force: float) -> float:
    others = [p for p in result.grid if not math.isclose(p.semantic_weight, in_force,
                                                         abs_tol=1e-9)]
    if not others:
        raise ValueError(f"the calibration grid of '{result.dataset}' holds only the weights in "
                         "force, so there is no gain to plan for; widen calibration.grid.")
    return max(others, key=lambda p: p.p_at_5).semantic_weight

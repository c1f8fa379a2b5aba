"""Where P@5 is only a lower bound: grid weights whose top 5 holds unlabelled documents.

P@5 counts a document without a label as not relevant. Judged@5 (the share of a weight's
top 5, per query, averaged over queries, that the labels cover at all, any grade;
:func:`eval_harness.metrics.ranking.judged_at_k`) says how much of it is measured: below
``calibration.min_judged``, P@5 at that weight is a lower bound, and a comparison of two
weights may reward the one whose documents happen to be labelled (Buckley & Voorhees 2004).
Human qrels list mostly the relevant documents, so this is common on BEIR data; the judges'
labels cover every grid weight's top 5 (calibration refuses them otherwise), so Judged@5 is
1 there.

Every calibration output (``eval-harness calibrate`` text and ``--json``, the calibration
report, the run report's section) states it in the same sentences, built here from plain
grid rows, so the CLI (a :class:`~.result.CalibrationResult`) and the run report (a history
frame) cannot word it differently: one sentence per named weight (the best, the weights in
force) below the threshold, and one line counting the other grid weights below it. The cure
is to label the rest: ``eval-harness judge --grid-pool`` has the judges label every grid
weight's top 5 (:func:`eval_harness.judges.dual.plan.plan_queries`), and
``eval-harness calibrate --labels judges`` then calibrates with nothing unlabelled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eval_harness.calibration.grid import weight_label


@dataclass(frozen=True)
class LowerBound:
    """A grid weight whose P@5 is a lower bound: Judged@5 below ``min_judged``."""

    semantic_weight: float
    keyword_weight: float
    judged_at_5: float
    roles: tuple[str, ...]  # "best", "in force": why this weight is named; () for the others

    def to_dict(self) -> dict:
        return {"semantic_weight": self.semantic_weight, "keyword_weight": self.keyword_weight,
                "judged_at_5": self.judged_at_5, "roles": list(self.roles)}


@dataclass(frozen=True)
class JudgedSummary:
    """Judged@5 against ``calibration.min_judged`` over one calibration grid."""

    dataset: str
    min_judged: float
    named: tuple[LowerBound, ...]   # the named weights below min_judged, best first
    others: tuple[LowerBound, ...]  # the other grid weights below it, ascending weight
    lowest: float | None            # the lowest Judged@5 on the grid (None: not recorded)

    @property
    def is_lower_bound(self) -> bool:
        """Whether some grid weight's P@5 is a lower bound."""
        return bool(self.named or self.others)

    def lines(self) -> list[str]:
        """One sentence per named weight below ``min_judged``, one for the others; [] when
        every weight is judged enough (or Judged@5 was not recorded)."""
        lines = [lower_bound_sentence(point, self.min_judged, self.dataset)
                 for point in self.named]
        if self.others:
            worst = min(self.others, key=lambda p: (p.judged_at_5, p.semantic_weight))
            more = " more" if self.named else ""
            weights = "weight" if len(self.others) == 1 else "weights"
            lines.append(f"Judged@5 is below calibration.min_judged {self.min_judged:g} at "
                         f"{len(self.others)}{more} grid {weights} (lowest "
                         f"{share_text(worst.judged_at_5, self.min_judged)} at "
                         f"{_weights(worst)}): their P@5 is a lower bound "
                         + ("too" if self.named else
                            f"(`eval-harness judge --dataset {self.dataset} --grid-pool` "
                            f"labels the rest)"))
        return lines

    def to_dict(self) -> dict:
        return {"min_judged": self.min_judged, "lowest_judged_at_5": self.lowest,
                "lower_bound": self.is_lower_bound,
                "named": [p.to_dict() for p in self.named],
                "others": [p.to_dict() for p in self.others], "sentences": self.lines()}


def judged_summary(dataset: str, points: Iterable[tuple[float, float, float]], *,
                   min_judged: float, named: Mapping[str, float]) -> JudgedSummary:
    """Which grid weights fall below ``min_judged``. ``points`` are (semantic weight, keyword
    weight, Judged@5) per grid weight, Judged@5 NaN where it was not recorded (a history
    written before it: never a lower bound then); ``named`` maps a role ("best",
    "in force") to its semantic weight (a weight not on the grid is not named)."""
    points = [(float(s), float(k), float(j)) for s, k, j in points]
    recorded = [j for _, _, j in points if not math.isnan(j)]
    low, others = [], []
    for semantic, keyword, judged in points:
        if math.isnan(judged) or judged >= min_judged:
            continue
        roles = tuple(role for role, weight in named.items() if _same(weight, semantic))
        (low if roles else others).append(LowerBound(semantic, keyword, judged, roles))
    order = list(named)
    low.sort(key=lambda p: order.index(p.roles[0]))
    return JudgedSummary(dataset, float(min_judged), tuple(low), tuple(others),
                         min(recorded) if recorded else None)


def lower_bound_sentence(point: LowerBound, min_judged: float, dataset: str) -> str:
    """"P@5 at 0.60 / 0.40 (best) is a lower bound: only 74% of its top-5 documents are
    judged ...", with what to run to label the rest."""
    roles = f" ({', '.join(point.roles)})" if point.roles else ""
    return (f"P@5 at {_weights(point)}{roles} is a lower bound: only "
            f"{share_text(point.judged_at_5, min_judged)} of its top-5 documents are judged (calibration.min_judged {min_judged:g}); run "
            f"`eval-harness judge --dataset {dataset} --grid-pool` to judge the rest, then "
            f"`eval-harness calibrate --dataset {dataset} --labels judges` to calibrate on "
            f"labels that cover every top 5")


def share_text(share: float, below: float) -> str:
    """``share`` as a percentage with as few decimals as keep it visibly below ``below``
    (0.895 against 0.9 is "89.5%", not "90%")."""
    for decimals in range(4):
        text = f"{share:.{decimals}%}"
        if float(text[:-1]) / 100 < below:
            return text
    return text


def _weights(point: LowerBound) -> str:
    return f"{weight_label(point.semantic_weight)} / {weight_label(point.keyword_weight)}"


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.0, abs_tol=1e-9)

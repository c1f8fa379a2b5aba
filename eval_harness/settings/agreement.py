"""The ``agreement:`` section of ``config.yaml``: the judge-agreement gate, the review queue
and the label of a pair the judges disagree on (:class:`AgreementSettings`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict
from pydantic.dataclasses import dataclass

from eval_harness.settings.values import SECTION, Count

DISAGREEMENT_RULES = ("exclude", "judge1", "mean")


@dataclass(frozen=True, config=SECTION)
class AgreementSettings:
    """The ``agreement:`` section: the judge-agreement gate and the review queue."""

    # the gate: lower bound of pooled kappa must reach it
    kappa_floor: Annotated[float, Strict(), Field(ge=-1.0, le=1.0)] = 0.70
    # |score1 - score2| above it goes to human review
    disagreement_threshold: Annotated[float, Strict(), Field(ge=0.0, lt=1.0)] = 0.4
    # a score strictly above it is "relevant"
    relevance_threshold: Annotated[float, Strict(), Field(ge=0.0, lt=1.0)] = 0.5
    bootstrap_resamples: Count = 2000     # resamples of the query bootstrap interval
    confidence: Annotated[float, Strict(), Field(gt=0.0, lt=1.0)] = 0.95  # of that interval
    # When the labels come from local stand-ins for configured API judges (their keys are
    # unset), a failed gate warns ("warn") instead of blocking ("block"): agreement of the
    # stand-ins says nothing about the judges that were configured.
    stand_in_judges: Literal["warn", "block"] = "warn"
    # The label of a pair one judge calls relevant and the other not, until a person decides
    # it in the review queue: "exclude" (no label), "judge1" (judge 1's), "mean" (mean of
    # both scores > relevance_threshold). See eval_harness.agreement.labels.
    disagreement_rule: Literal["exclude", "judge1", "mean"] = "exclude"

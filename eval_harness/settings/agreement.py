"""The ``agreement:`` section of ``config.yaml``: the judge-agreement gate, the review queue
and the label of a pair the judges disagree on (:class:`AgreementSettings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval_harness.settings.errors import ConfigError
from eval_harness.settings.values import mapping_of, number_of

DISAGREEMENT_RULES = ("exclude", "judge1", "mean")


@dataclass(frozen=True)
class AgreementSettings:
    """The ``agreement:`` section: the judge-agreement gate and the review queue."""

    kappa_floor: float = 0.70             # the gate: lower bound of pooled kappa must reach it
    disagreement_threshold: float = 0.4   # |score1 - score2| above it goes to human review
    relevance_threshold: float = 0.5      # a score strictly above it is "relevant"
    bootstrap_resamples: int = 2000       # resamples of the query bootstrap interval
    confidence: float = 0.95              # level of that interval
    # When the labels come from local stand-ins for configured API judges (their keys are
    # unset), a failed gate warns ("warn") instead of blocking ("block"): agreement of the
    # stand-ins says nothing about the judges that were configured.
    stand_in_judges: str = "warn"
    # The label of a pair one judge calls relevant and the other not, until a person decides
    # it in the review queue: "exclude" (no label), "judge1" (judge 1's), "mean" (mean of
    # both scores > relevance_threshold). See eval_harness.agreement.labels.
    disagreement_rule: str = "exclude"


def parse_agreement(raw: Mapping[str, Any]) -> AgreementSettings:
    section = mapping_of(raw, "agreement", tuple(AgreementSettings.__dataclass_fields__))
    defaults = AgreementSettings()
    floor = number_of(section, "kappa_floor", defaults.kappa_floor, "agreement")
    disagreement = number_of(section, "disagreement_threshold", defaults.disagreement_threshold,
                             "agreement")
    relevance = number_of(section, "relevance_threshold", defaults.relevance_threshold,
                          "agreement")
    confidence = number_of(section, "confidence", defaults.confidence, "agreement")
    resamples = section.get("bootstrap_resamples", defaults.bootstrap_resamples)
    if not -1.0 <= floor <= 1.0:
        raise ConfigError("'agreement.kappa_floor' must lie in [-1, 1].")
    if not 0.0 <= disagreement < 1.0:
        raise ConfigError("'agreement.disagreement_threshold' must lie in [0, 1).")
    if not 0.0 <= relevance < 1.0:
        raise ConfigError("'agreement.relevance_threshold' must lie in [0, 1).")
    if not 0.0 < confidence < 1.0:
        raise ConfigError("'agreement.confidence' must lie strictly between 0 and 1.")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ConfigError(
            "'agreement.bootstrap_resamples' must be a positive integer.")
    stand_in = section.get("stand_in_judges", defaults.stand_in_judges)
    if stand_in not in ("warn", "block"):
        raise ConfigError("'agreement.stand_in_judges' must be warn or block.")
    rule = section.get("disagreement_rule", defaults.disagreement_rule)
    if rule not in DISAGREEMENT_RULES:
        raise ConfigError("'agreement.disagreement_rule' must be exclude, judge1 or mean, "
                          f"got {rule!r}.")
    return AgreementSettings(floor, disagreement, relevance, resamples, confidence, stand_in,
                             rule)

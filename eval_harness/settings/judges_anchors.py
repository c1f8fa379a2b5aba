"""``judges.anchors`` and ``judges.drift``: the anchor set and when the drift check fails
(see :mod:`eval_harness.judges.dual.anchors`). Parsed as part of the ``judges:`` section by
:mod:`eval_harness.settings.judges`, whose validation helpers these parsers use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AnchorSettings:
    """``judges.anchors``: a seeded sample of ``pairs`` judged pairs of the dataset, frozen
    with each judge's score and label the first time, and re-judged past the cache by every
    later run to measure drift (see :mod:`eval_harness.judges.dual.anchors`). Off when the
    section is absent."""

    enabled: bool = False
    pairs: int = 100             # anchors of the dataset (all judged pairs when fewer)
    seed: int = 0                # which pairs are chosen
    # its own budget line per run, apart from judges.budget_usd; None = no limit (the set's
    # size bounds it: judge --dry-run prices it)
    budget_usd: float | None = None


@dataclass(frozen=True)
class DriftSettings:
    """``judges.drift``: when the ``judge_drift`` check fails. It fails when the lower
    confidence bound of a judge's label flip rate on the anchors exceeds ``max_flip_rate``,
    or its agreement with the human verdicts on anchors falls below
    ``min_human_agreement`` (only when some anchor has a human verdict); ``blocking: false``
    makes a failure a warning."""

    max_flip_rate: float = 0.05
    min_human_agreement: float = 0.7
    blocking: bool = True
    confidence: float = 0.95     # of the flip rate's Wilson interval and the shift's t interval



def parse_anchors(section: Mapping[str, Any]) -> AnchorSettings:
    """``judges.anchors`` of the ``judges:`` section."""
    from eval_harness.settings.judges import _budget, _error, _integer, _mapping, _reject_unknown

    given = section.get("anchors")
    if given is None or isinstance(given, bool):  # `anchors: true` keeps the other defaults
        return AnchorSettings(enabled=bool(given))
    given = _mapping(section, "anchors", "judges")
    d = AnchorSettings()
    _reject_unknown(given, "judges.anchors", tuple(AnchorSettings.__dataclass_fields__))
    enabled = given.get("enabled", True)  # a section given is meant to be used
    if not isinstance(enabled, bool):
        raise _error("'judges.anchors.enabled' must be true or false.")
    return AnchorSettings(
        enabled, _integer(given.get("pairs", d.pairs), "judges.anchors.pairs", low=2),
        _integer(given.get("seed", d.seed), "judges.anchors.seed", low=0),
        _budget(given.get("budget_usd", d.budget_usd), "judges.anchors.budget_usd"))


def parse_drift(section: Mapping[str, Any]) -> DriftSettings:
    """``judges.drift`` of the ``judges:`` section."""
    from eval_harness.settings.judges import _error, _mapping, _number, _reject_unknown

    given = _mapping(section, "drift", "judges")
    d = DriftSettings()
    _reject_unknown(given, "judges.drift", tuple(DriftSettings.__dataclass_fields__))
    blocking = given.get("blocking", d.blocking)
    if not isinstance(blocking, bool):
        raise _error(f"'judges.drift.blocking' must be true or false, got {blocking!r}.")
    return DriftSettings(
        _number(given.get("max_flip_rate", d.max_flip_rate), "judges.drift.max_flip_rate",
                high=1.0),
        _number(given.get("min_human_agreement", d.min_human_agreement),
                "judges.drift.min_human_agreement", high=1.0),
        blocking,
        _number(given.get("confidence", d.confidence), "judges.drift.confidence", low=0.5,
                high=0.999))

"""The ``ci:`` section of ``config.yaml``: how ``eval-harness compare`` decides that a candidate
record is worse than its baseline (:class:`CompareSettings`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, Strict
from pydantic.dataclasses import dataclass

from eval_harness.settings.values import SECTION, Count, Natural, NonNegative, OrEmpty

Alpha = Annotated[float, Strict(), Field(gt=0.0, lt=1.0)]


@dataclass(frozen=True, config=SECTION)
class CompareSettings:
    """``ci.compare``: the paired comparison of two records."""

    # a difference smaller than this (on the metric's own scale) is never "worse" or "better"
    margin: NonNegative = 0.01
    # family-wise error rate: Holm's correction holds it over every row compared together
    alpha: Alpha = 0.05
    # fewer queries (answers) shared by both records: not comparable, nothing is compared
    min_shared: Count = 30
    # resamples of the paired bootstrap interval and of the randomisation test
    resamples: Count = 10_000
    # the seed of both: the same two records always give the same figures
    seed: Natural = 0
    # the record a Dagster run compares its own with (the comparison's asset check)
    baseline: str = "main"
    # rows whose "worse" does not fail the comparison (exit 0, a warning): metric or gate names
    non_blocking: tuple[str, ...] = ()


@dataclass(frozen=True, config=SECTION)
class CiSettings:
    """``ci:``: the merge gate against a recorded baseline."""

    # eval-harness compare BASE CANDIDATE
    compare: Annotated[CompareSettings, OrEmpty] = CompareSettings()

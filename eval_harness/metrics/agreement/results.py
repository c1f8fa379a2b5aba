"""Result types of the agreement statistics, and their strict-JSON form.

Coefficients that can be undefined come back with ``value=None`` and a ``reason``;
``to_dict`` (and :func:`to_jsonable` for results built on top of these) turns every
non-finite float into ``None``, so a report never contains NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, is_dataclass
from datetime import date, datetime
from typing import Any

import numpy as np


class JsonResult:
    """Results serialise to strict JSON: undefined values are None, never NaN."""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(self)


@dataclass(frozen=True)
class KappaResult(JsonResult):
    """A chance-corrected agreement ``(P_o - P_e) / (1 - P_e)``: Cohen's kappa, weighted
    kappa or Gwet's AC1.

    ``value`` is ``None`` when the coefficient is undefined; ``degenerate`` is True when the
    input was a special case (no variation, nothing scored) and ``reason`` says which.
    """

    value: float | None
    degenerate: bool
    reason: str | None
    observed_agreement: float | None
    expected_agreement: float | None
    n_items: int


@dataclass(frozen=True)
class AlphaResult(JsonResult):
    """Krippendorff's alpha ``1 - D_o / D_e`` with its observed and expected disagreement."""

    value: float | None
    degenerate: bool
    reason: str | None
    observed_disagreement: float | None
    expected_disagreement: float | None
    n_units: int


@dataclass(frozen=True)
class BinaryTable(JsonResult):
    """The 2x2 table of two binary raters (1 = relevant); "first" is judge 1 (or the judge
    in judge-vs-human), "second" is judge 2 (or the human).

    Examples
    --------
    >>> table = BinaryTable(both=20, first_only=5, second_only=10, neither=15)
    >>> table.n, table.as_matrix()
    (50, [[15, 10], [5, 20]])
    """

    both: int
    first_only: int
    second_only: int
    neither: int

    @property
    def n(self) -> int:
        return self.both + self.first_only + self.second_only + self.neither

    def as_matrix(self) -> list[list[int]]:
        """Rows: first rater 0, 1; columns: second rater 0, 1 (sklearn's confusion_matrix)."""
        return [[self.neither, self.second_only], [self.first_only, self.both]]


@dataclass(frozen=True)
class BootstrapInterval(JsonResult):
    """Percentile interval of a statistic from a cluster bootstrap over queries."""

    low: float | None
    high: float | None
    confidence: float
    n_resamples: int
    n_queries: int
    seed: int
    reason: str | None = None
    method: str = "percentile, queries resampled with replacement"


@dataclass(frozen=True)
class RankCorrelation(JsonResult):
    """Spearman's rho between the two judges' raw scores."""

    rho: float | None
    p_value: float | None
    n: int
    reason: str | None = None


@dataclass(frozen=True)
class OffsetTest(JsonResult):
    """Wilcoxon signed-rank test of ``judge1 - judge2``: does one judge score higher?"""

    mean_difference: float
    statistic: float | None
    p_value: float | None
    n_pairs: int
    n_nonzero: int
    reason: str | None = None


@dataclass(frozen=True)
class QueryKappa:
    query_id: Any  # hashable, as given
    n_pairs: int
    n_scored: int
    kappa: KappaResult


@dataclass(frozen=True)
class _PooledKappaReport(JsonResult):
    """What both reports lead with: Cohen's kappa over the pooled scored pairs."""

    n_pairs: int
    n_scored: int
    n_unscored: int
    threshold: float
    kappa: KappaResult
    interpretation: str
    kappa_interval: BootstrapInterval


@dataclass(frozen=True)
class AgreementReport(_PooledKappaReport):
    """Everything :func:`agreement_report` computes; ``to_dict`` is strict JSON (no NaN)."""

    per_query: tuple[QueryKappa, ...]
    gwet_ac1: KappaResult
    krippendorff_alpha: AlphaResult
    weighted_kappa: KappaResult
    weighted_kappa_anchors: tuple[float, ...]
    weighted_kappa_weights: str
    spearman: RankCorrelation
    confusion: BinaryTable
    offset: OffsetTest


@dataclass(frozen=True)
class JudgeHumanReport(_PooledKappaReport):
    """One judge against human labels; ``precision``/``recall`` treat the human as truth."""

    precision: float | None
    recall: float | None
    confusion: BinaryTable


def to_jsonable(value: Any) -> Any:
    """A result (dataclass, mapping, sequence, number) as plain JSON types, NaN as ``None``.

    For results built on top of this module, so that they too never show NaN.

    Examples
    --------
    >>> to_jsonable({"kappa": float("nan"), "n": np.int64(3), "interval": (0.1, 0.2)})
    {'kappa': None, 'n': 3, 'interval': [0.1, 0.2]}
    >>> from datetime import timezone
    >>> to_jsonable({"recorded_at": datetime(2026, 11, 26, 1, 2, 3, tzinfo=timezone.utc)})
    {'recorded_at': '2026-11-26T01:02:03+00:00'}
    """
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    """Plain JSON types; a non-finite float becomes None so a report never shows NaN."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return finite_or_none(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def finite_or_none(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None

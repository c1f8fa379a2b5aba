"""How check results and metadata reach people: blocking failures and rounded figures.

A blocking check that fails stops the run. Left to Dagster, the check step then fails with
``DagsterAssetCheckFailedError: 1 blocking asset check failed with ERROR severity`` and a
framework stack trace, which reads like a crash. :func:`check_outcome` reports the result
first (so the evaluation is recorded like any other) and then fails the step with
:class:`BlockingCheckFailed`, a :class:`dagster.Failure` whose description is the verdict
with its figure and threshold, e.g. "Blocking check p_at_5_verdict failed: P@5 0.170 < 0.70
(FAILURE)". Dagster shows a ``Failure`` as the step's (and the run's) error message, with the
figures as metadata; downstream of the check does not run, as with Dagster's own error.

:func:`readable` rounds the floats of asset and check metadata to a few significant digits:
metadata is for people (the UI, the run's log); machine-read values (the gate summary JSON)
are kept exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg

SIGNIFICANT_DIGITS = 4


class BlockingCheckFailed(dg.Failure):
    """A blocking asset check failed with ERROR severity; the description is its verdict."""


def check_outcome(result: dg.AssetCheckResult, *, name: str, blocking: bool, figure: str,
                  figures: Mapping[str, Any] | None = None) -> Iterator[dg.AssetCheckResult]:
    """Yield ``result``; then, when it is a failure that blocks, stop the step with the verdict.

    ``figure`` is the failure in a few words with its threshold (e.g. "P@5 0.170 < 0.70
    (FAILURE)"); ``figures`` (value, threshold, ...) become the failure's metadata. A check
    declared non-blocking, a pass, or a failure with WARN severity only yields the result.
    """
    yield result
    if blocking and not result.passed and result.severity == dg.AssetCheckSeverity.ERROR:
        raise BlockingCheckFailed(
            description=f"Blocking check {name} failed: {figure}",
            metadata=readable({key: value for key, value in dict(figures or {}, check=name)
                               .items() if value is not None}),
            allow_retries=False)  # a verdict, not a transient error: a retry changes nothing


def below(value: float, threshold: float, *, name: str = "", digits: int = 3) -> str:
    """"value < [name ]threshold" with as many decimals as it takes to show the difference
    (0.6999 against 0.70 reads "0.6999 < 0.70", not "0.700 < 0.70")."""
    shown = f"{threshold:.2f}" if round(threshold, 2) == threshold else f"{threshold:g}"
    while digits < 8 and float(f"{value:.{digits}f}") >= threshold:
        digits += 1
    return f"{value:.{digits}f} < {name + ' ' if name else ''}{shown}"


def rounded(value: float | None, digits: int = SIGNIFICANT_DIGITS) -> float | None:
    """``value`` to ``digits`` significant digits (0.226315 -> 0.2263); None, NaN and
    infinities are returned as they are."""
    if value is None or not math.isfinite(value) or value == 0:
        return value
    return float(f"{value:.{digits}g}")


def readable(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with every float (plain or ``MetadataValue.float``) rounded by
    :func:`rounded`; ints, flags, text, JSON and Markdown are left as they are."""
    return {key: _readable_value(value) for key, value in metadata.items()}


def _readable_value(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return rounded(value)
    if isinstance(value, dg.FloatMetadataValue) and value.value is not None:
        return dg.MetadataValue.float(rounded(value.value))
    return value

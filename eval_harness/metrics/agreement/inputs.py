"""What the agreement statistics accept, and how judge scores become labels.

A score is in [0, 1]; ``None`` or NaN means the pair was not scored and is never guessed.
A score is *relevant* when it is strictly greater than the threshold. Every check here ends
in an :class:`AgreementInputError` that names the input and what to do.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

DEFAULT_THRESHOLD = 0.5
# The five anchors of the judge prompt: irrelevant, marginal, moderate, high, perfect.
DEFAULT_ANCHORS: tuple[float, ...] = (0.0, 0.3, 0.5, 0.7, 1.0)


class AgreementInputError(ValueError):
    """Scores or labels cannot be compared; the message names the input and what to do."""


def binarize_scores(scores: Sequence[float | None] | np.ndarray, *,
                    threshold: float = DEFAULT_THRESHOLD) -> list[int | None]:
    """Relevance labels from judge scores: 1 if ``score > threshold`` else 0.

    The comparison is strict (story 1.11: "Score > 0.5 = Relevant, Score <= 0.5 = Not
    Relevant"), so a score of exactly ``threshold`` is not relevant. ``None`` or NaN
    (unscored) stays ``None``; it is never turned into a label. A score outside [0, 1]
    raises :class:`AgreementInputError`.

    Examples
    --------
    >>> binarize_scores([0.2, 0.5, 0.51, None])
    [0, 0, 1, None]
    >>> binarize_scores([0.7, 0.71], threshold=0.7)
    [0, 1]
    """
    check_threshold(threshold)
    values = score_array(scores, "scores")
    return [None if math.isnan(v) else int(v > threshold) for v in values.tolist()]


def bin_scores(scores: Sequence[float | None] | np.ndarray, *,
               anchors: Sequence[float] = DEFAULT_ANCHORS) -> list[int | None]:
    """Index of the nearest anchor for each score (``None`` stays ``None``).

    A score exactly halfway between two anchors goes to the lower one, in the spirit of
    the threshold rule (0.5 is not yet relevant). ``anchors`` must be at least two strictly
    increasing values.

    Examples
    --------
    Anchors 0, 0.3, 0.5, 0.7, 1 have midpoints 0.15, 0.4, 0.6, 0.85; 0.15 and 0.6 lie
    exactly halfway and go down:

    >>> bin_scores([0.1, 0.15, 0.2, 0.6, 0.9, None])
    [0, 0, 1, 2, 4, None]
    >>> bin_scores([0.2, 0.8], anchors=(0.0, 1.0))
    [0, 1]
    """
    edges = anchor_edges(anchors)
    values = score_array(scores, "scores")
    return [None if math.isnan(v) else int(np.searchsorted(edges, v, side="left"))
            for v in values.tolist()]


def index_queries(query_ids: Sequence[Hashable], n: int) -> tuple[np.ndarray, list[Hashable]]:
    """Position of each pair's query in first-seen order, and the queries in that order."""
    if len(query_ids) != n:
        raise AgreementInputError(
            f"query_ids has {len(query_ids)} entries but there are {n} pairs; "
            "give one query id per pair.")
    positions: dict[Hashable, int] = {}
    index = np.fromiter((positions.setdefault(q, len(positions)) for q in query_ids),
                        dtype=np.intp, count=n)
    return index, list(positions)


def score_array(scores: Sequence[float | None] | np.ndarray, name: str) -> np.ndarray:
    """Scores as float64 with NaN for unscored; rejects non-numbers and values outside [0, 1]."""
    try:
        values = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise AgreementInputError(
            f"{name} must hold numbers in [0, 1] or None for unscored ({error}).") from None
    outside = ~np.isnan(values) & ((values < 0.0) | (values > 1.0))
    if outside.any():
        position = int(np.flatnonzero(outside)[0])
        raise AgreementInputError(
            f"{name}[{position}] is {float(values[position])!r}, outside [0, 1]; record an "
            "unparseable judge reply as None, not as an out-of-range score.")
    return values


def label_array(labels: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(labels)
    if values.size and not np.isin(values, (0, 1)).all():
        bad = _plain(values[~np.isin(values, (0, 1))][0])
        raise AgreementInputError(
            f"{name} must hold binary labels 0 or 1; found {bad!r} (binarize scores first).")
    return values.astype(np.int8).ravel()


def human_label_array(labels: Sequence[int | None] | np.ndarray) -> np.ndarray:
    """Human labels as float64 0.0/1.0 with NaN for unlabelled."""
    try:
        values = np.array([np.nan if x is None else x for x in labels], dtype=np.float64)
    except (TypeError, ValueError):
        raise AgreementInputError(
            "human_labels must hold 0, 1 or None for unlabelled pairs.") from None
    labelled = ~np.isnan(values)
    if not np.isin(values[labelled], (0.0, 1.0)).all():
        bad = float(values[labelled][~np.isin(values[labelled], (0.0, 1.0))][0])
        raise AgreementInputError(f"human_labels must hold 0, 1 or None; found {bad!r}.")
    return values


def category_array(categories: Sequence[int] | np.ndarray, name: str,
                    n_categories: int) -> np.ndarray:
    values = np.asarray(categories)
    if values.size == 0:
        raise AgreementInputError(f"{name} is empty: at least one rated item is needed.")
    if not np.issubdtype(values.dtype, np.integer) or values.min() < 0 \
            or values.max() >= n_categories:
        raise AgreementInputError(
            f"{name} must hold category indices 0..{n_categories - 1} (see bin_scores).")
    return values.astype(np.intp).ravel()


def anchor_edges(anchors: Sequence[float]) -> np.ndarray:
    points = np.asarray(anchors, dtype=np.float64)
    if points.size < 2 or not np.all(np.diff(points) > 0):
        raise AgreementInputError(
            f"anchors must be at least two strictly increasing scores, got {list(anchors)}.")
    return (points[:-1] + points[1:]) / 2.0


def check_pairs(first: np.ndarray, second: np.ndarray, name1: str, name2: str) -> None:
    """Both sides describe the same, non-empty list of pairs."""
    check_same_length(first, second, name1, name2)
    if first.size == 0:
        raise AgreementInputError(f"{name1} is empty: agreement needs at least one judged pair.")


def check_threshold(threshold: float) -> None:
    if not 0.0 <= threshold < 1.0:
        raise AgreementInputError(
            f"threshold must be in [0, 1) so that some score can be relevant, got {threshold}.")


def check_same_length(first: np.ndarray, second: np.ndarray, name1: str, name2: str) -> None:
    if first.shape[0] != second.shape[0]:
        raise AgreementInputError(
            f"{name1} has {first.shape[0]} entries but {name2} has {second.shape[0]}; "
            "they must describe the same pairs.")


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value, so error messages read ``2`` not ``np.int64(2)``."""
    return value.item() if isinstance(value, np.generic) else value

"""``compare BASE CANDIDATE``: is the candidate record worse than the base?

For each kind both names were recorded as (a dataset's retrieval metrics, the gates' scores),
the two newest records are paired unit by unit (a ground-truth query by its own id; an answer by
its normalised query). Before anything is compared, they must measure the same thing: the same
corpus version and ground-truth version (retrieval), and at least ``ci.compare.min_shared``
shared units; otherwise the comparison says why it is not comparable and compares nothing
(exit 2). Then every row (a metric, a gate) gets the mean paired difference (candidate - base),
its paired bootstrap interval, and a paired randomisation test; the p-values of all rows are
Holm-adjusted together, so the chance of any false "worse" over the whole comparison stays at
``ci.compare.alpha``; a row is "worse" (or "better") only when its adjusted p-value is below
alpha **and** the difference is beyond ``ci.compare.margin`` (:mod:`eval_harness.metrics.paired`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from eval_harness.comparison import sql
from eval_harness.comparison.records import GATES, METRIC_ROWS, RETRIEVAL
from eval_harness.errors import InvalidInput
from eval_harness.metrics.paired import holm_adjusted, paired_comparison, paired_verdict
from eval_harness.settings import Settings

WORSE, BETTER, NO_EVIDENCE = "worse", "better", "no evidence"
MOST_WORSE = 5  # units listed per worse (or dropping) row in the summary


@dataclass(frozen=True)
class RecordInfo:
    record_id: int
    name: str
    kind: str
    dataset: str
    recorded_at: str
    code_version: str
    configuration: dict[str, Any]
    corpus_version: str | None
    ground_truth_version: str | None
    units: int


@dataclass(frozen=True)
class Row:
    """One metric or gate compared."""

    kind: str                 # retrieval | gates
    name: str                 # precision_at_5 ... | a gate's name
    base_mean: float
    candidate_mean: float
    difference: float         # candidate - base, mean over the shared units
    interval: tuple[float, float]
    p_value: float
    p_adjusted: float
    verdict: str
    units: int
    blocking: bool
    # the units that dropped most: (unit, base value, candidate value), worst first
    most_worse: tuple[tuple[str, float, float], ...] = ()


@dataclass(frozen=True)
class Comparison:
    base: str
    candidate: str
    dataset: str
    comparable: bool
    reasons: tuple[str, ...]
    rows: tuple[Row, ...] = ()
    records: dict[str, RecordInfo] = field(default_factory=dict)
    margin: float = 0.01
    alpha: float = 0.05

    @property
    def worse(self) -> list[Row]:
        return [row for row in self.rows if row.verdict == WORSE]

    @property
    def failed(self) -> bool:
        """A blocking row is worse."""
        return any(row.blocking for row in self.worse)


def _info(row: tuple) -> RecordInfo:
    record_id, name, kind, dataset, recorded_at, code, configuration, corpus, truth, units = row
    return RecordInfo(int(record_id), name, kind, dataset, recorded_at.isoformat(), code,
                      dict(configuration), corpus, truth, int(units))


def _newest(conn: psycopg.Connection, name: str, kind: str, dataset: str) -> RecordInfo | None:
    found = sql.newest_record(conn, name, kind, dataset)
    return None if found is None else _info(found)


def _not_comparable(base: RecordInfo, candidate: RecordInfo, shared: int,
                    min_shared: int) -> list[str]:
    what = f"{base.kind} records"
    reasons = []
    if base.kind == RETRIEVAL and base.corpus_version != candidate.corpus_version:
        reasons.append(f"the {what} measured other corpora ('{base.name}': "
                       f"{base.corpus_version}, '{candidate.name}': {candidate.corpus_version}: "
                       "a document was added, removed or changed)")
    if base.kind == RETRIEVAL and base.ground_truth_version != candidate.ground_truth_version:
        reasons.append(f"the {what} measured other ground truth ('{base.name}': "
                       f"{base.ground_truth_version}, '{candidate.name}': "
                       f"{candidate.ground_truth_version})")
    if shared < min_shared:
        unit = "queries" if base.kind == RETRIEVAL else "answered queries"
        reasons.append(f"the {what} share {shared} {unit}, fewer than ci.compare.min_shared "
                       f"({min_shared})")
    return reasons


def _blocking(settings: Settings, kind: str, name: str) -> bool:
    if name in settings.ci.compare.non_blocking:
        return False
    if kind == GATES:
        gate = settings.quality_gates.gates.get(name)
        return gate is None or gate.blocking
    return True


@dataclass(frozen=True)
class _Measured:
    """One row of both records, over the units both measured."""

    kind: str
    name: str
    units: list[str]
    base: list[float]
    candidate: list[float]


def _paired_records(conn: psycopg.Connection, base: str, candidate: str,
                    dataset: str) -> tuple[list[tuple[RecordInfo, RecordInfo]], list[str]]:
    """The newest records of both names, per kind both have; and what one name lacks."""
    pairs: list[tuple[RecordInfo, RecordInfo]] = []
    missing = []
    for kind, of in ((RETRIEVAL, dataset), (GATES, "")):
        found = (_newest(conn, base, kind, of), _newest(conn, candidate, kind, of))
        if found[0] is not None and found[1] is not None:
            pairs.append((found[0], found[1]))
        elif found != (None, None):
            missing += [f"'{name}' has no {kind} record" + (f" of dataset '{of}'" if of else "")
                        for name, info in zip((base, candidate), found, strict=True)
                        if info is None]
    if not pairs:
        recorded = sql.recorded_names(conn)
        known = ", ".join(sorted({f"{n} ({k}{' ' + d if d else ''})" for n, k, d, _ in recorded}))
        raise InvalidInput(f"nothing to compare: '{base}' and '{candidate}' share no record "
                           f"(retrieval of dataset '{dataset}', or gates); recorded: "
                           f"{known or 'none'}; record them with `eval-harness report "
                           "--record NAME` or `eval-harness gate ... --record NAME`.")
    return pairs, missing


def _measured(conn: psycopg.Connection, base: RecordInfo,
              candidate: RecordInfo) -> tuple[list[_Measured], int]:
    """Every row both records hold, over their shared units; and how many units they share."""
    base_values = sql.record_values(conn, base.record_id)
    candidate_values = sql.record_values(conn, candidate.record_id)
    rows = ([row for row in METRIC_ROWS.values() if row in base_values]
            if base.kind == RETRIEVAL else sorted(base_values))
    measured, shared = [], set()
    for row in rows:
        if row not in candidate_values:
            continue
        before, after = base_values[row], candidate_values[row]
        units = sorted(before.keys() & after.keys())
        if not units:
            continue
        shared |= set(units)
        measured.append(_Measured(base.kind, row, units, [before[u] for u in units],
                                  [after[u] for u in units]))
    return measured, len(shared)


def compare_records(conn: psycopg.Connection, settings: Settings, base: str, candidate: str, *,
                    dataset: str) -> Comparison:
    """Compare the newest records ``base`` and ``candidate`` (retrieval of ``dataset``, and the
    gates); raises :class:`InvalidInput` when the names share no kind of record."""
    options = settings.ci.compare
    pairs, reasons = _paired_records(conn, base, candidate, dataset)
    records = {}
    measured: list[_Measured] = []
    for base_info, candidate_info in pairs:
        records[f"base_{base_info.kind}"] = base_info
        records[f"candidate_{base_info.kind}"] = candidate_info
        rows, shared = _measured(conn, base_info, candidate_info)
        measured += rows
        reasons += _not_comparable(base_info, candidate_info, shared, options.min_shared)
    if reasons:
        return Comparison(base, candidate, dataset, False, tuple(reasons), records=records,
                          margin=options.margin, alpha=options.alpha)
    results = [paired_comparison(m.base, m.candidate, confidence=1 - options.alpha,
                                 resamples=options.resamples, seed=options.seed)
               for m in measured]
    adjusted = holm_adjusted([result.p_value for result in results])
    compared = []
    for m, result, p_adjusted in zip(measured, results, adjusted, strict=True):
        drops = sorted((after - before, unit, before, after)
                       for unit, before, after in zip(m.units, m.base, m.candidate, strict=True)
                       if after < before)[:MOST_WORSE]
        compared.append(Row(
            m.kind, m.name, sum(m.base) / len(m.base), sum(m.candidate) / len(m.candidate),
            result.difference, result.interval, result.p_value, p_adjusted,
            paired_verdict(result.difference, p_adjusted, margin=options.margin,
                           alpha=options.alpha),
            result.n, _blocking(settings, m.kind, m.name),
            tuple((unit, before, after) for _, unit, before, after in drops)))
    return Comparison(base, candidate, dataset, True, (), tuple(compared), records,
                      options.margin, options.alpha)

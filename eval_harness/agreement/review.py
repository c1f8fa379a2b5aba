"""Human review of judge disagreements: queue, CSV export, CSV import, adjudicated labels.

A pair is *disagreeing* when both judges scored it and ``|score1 - score2| >
disagreement_threshold`` (the difference rounded to 12 decimals first, so 0.9 vs 0.5 is
exactly 0.4 and does not count at the default 0.4). Disagreeing pairs are queued in
``judge_review`` (migration 0003) with the scores and models of the moment.

Re-queuing is idempotent. A queued pair whose scores and models are unchanged is left
alone, adjudicated or not. A pair the judges re-scored gets the new scores, a higher
``score_revision`` and goes back to pending (the old verdict judged other scores). Rows of
pairs that no longer disagree are removed, except an adjudicated row whose scores are
unchanged (only the threshold moved): a human verdict on the same scores stays valid.

The CSV file has :data:`CSV_COLUMNS`; a person fills in ``verdict`` ("relevant" or "not
relevant"), optionally ``reviewer`` and ``note``. Import checks every row before writing
anything and refuses the whole file if any row is wrong; row numbers are those a
spreadsheet shows (the header is row 1). A file holds one dataset, named in its
``dataset`` column; import takes it from there unless told otherwise.

Reading, checking and refusing a file, and the formula-injection escaping of its cells, are
:mod:`eval_harness.agreement.review_file`'s.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psycopg

from eval_harness.agreement.review_file import (
    CSV_COLUMNS,
    VERDICTS,
    ReviewFileError,
    check_row,
    echo,
    escape_formula,
    file_dataset,
    one_line,
    read_review_file,
    snippet,
    wrong_rows,
)
from eval_harness.datasets import ground_truth, judge_review
from eval_harness.datasets.beir import DatasetError
from eval_harness.datasets.ingest import validate_dataset_name
from eval_harness.errors import InvalidInput
from eval_harness.files import write_report
from eval_harness.retrieval.hybrid import UnknownDataset, dataset_info, known_datasets

# Spreadsheet editors may rewrite 0.1 + 0.2 as 0.3: scores match within this tolerance.
SCORE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class QueueCounts:
    new: int
    requeued: int  # re-scored since queued: back to pending with the new scores
    unchanged: int
    removed: int
    pending: int
    adjudicated: int

    def __str__(self) -> str:
        return (f"{self.new} new, {self.requeued} re-queued, {self.unchanged} unchanged, "
                f"{self.removed} removed; {self.pending} pending, "
                f"{self.adjudicated} adjudicated")


@dataclass(frozen=True)
class ExportCounts:
    path: Path
    rows: int
    pending: int
    adjudicated: int


@dataclass(frozen=True)
class ImportCounts:
    adjudicated: int  # rows whose verdict, reviewer or note was stored now
    unchanged: int    # rows with a verdict identical to the stored one
    blank: int        # rows left without a verdict (they stay as they are)
    dataset: str | None = None  # the queue written to; None: the file had no rows
    notes_left: int = 0  # blank rows carrying a note: not stored (a note goes with a verdict)

    def __str__(self) -> str:
        notes = (f" ({self.notes_left} of them with a note, not stored: a note is stored "
                 "with a verdict)" if self.notes_left else "")
        return (f"{self.adjudicated} verdict(s) stored, {self.unchanged} unchanged, "
                f"{self.blank} row(s) without a verdict left as they are{notes}")

    @classmethod
    def of(cls, changed: int, updates: list, blank: list[bool], dataset: str) -> ImportCounts:
        """From the rows stored (``changed`` of ``updates``) and the blank rows (True:
        carrying a note)."""
        return cls(changed, len(updates) - changed, len(blank), dataset, sum(blank))


def queue_disagreements(conn: psycopg.Connection, dataset: str, *,
                        threshold: float) -> QueueCounts:
    """Bring ``judge_review`` of ``dataset`` in line with the current judge scores.

    One transaction under a per-dataset advisory lock; see the module docstring for what
    happens to existing rows.
    """
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"disagreement threshold must be in [0, 1), got {threshold}.")
    with conn.transaction():
        corpus = dataset_info(conn, dataset, with_counts=False).corpus
        judge_review.lock_review_queue(conn, dataset)
        _check_no_repeated_documents(conn, dataset)
        disagreeing = judge_review.stage_scored_pairs(conn, corpus, threshold)
        upserted = judge_review.upsert_disagreeing_pairs(conn)
        removed = judge_review.delete_settled_pairs(conn, dataset)
        pending, adjudicated = judge_review.review_status_counts(conn, dataset)
    new = sum(1 for is_new in upserted if is_new)
    requeued = len(upserted) - new
    return QueueCounts(new, requeued, disagreeing - new - requeued, removed, pending,
                       adjudicated)


def refresh_and_export(conn: psycopg.Connection, dataset: str, path: Path | str, *,
                       threshold: float) -> tuple[QueueCounts | None, ExportCounts]:
    """Refresh the review queue of ``dataset`` (:func:`queue_disagreements`), then export it
    (:func:`export_review_csv`); what ``review export`` does.

    Exporting is reading, so a role that may only SELECT the harness schema can export too:
    when the refresh may not write (no privilege on ``judge_review`` or on temporary tables,
    or a read-only transaction), its transaction is rolled back and the queue is exported as
    it is. The returned counts are then None, so the caller can say it was not refreshed.
    """
    try:
        queued = queue_disagreements(conn, dataset, threshold=threshold)
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        queued = None
    return queued, export_review_csv(conn, dataset, path)


def review_counts(conn: psycopg.Connection, dataset: str) -> tuple[int, int]:
    """(pending, adjudicated) rows of the review queue of ``dataset``."""
    with conn.transaction():
        return judge_review.review_status_counts(conn, dataset)


def adjudicated_labels(conn: psycopg.Connection, dataset: str) -> dict[tuple[int, int], int]:
    """Human verdicts of ``dataset``: {(ground_truth id, doc id): 1 relevant / 0 not}.

    Only verdicts whose pair still has the scores the reviewer saw count (a re-scored pair
    is re-queued and loses its verdict the next time the queue is refreshed; until then its
    verdict is ignored here, so a stale verdict never overrides new judge scores).
    """
    with conn.transaction():
        rows = judge_review.current_verdicts(
            conn, dataset_info(conn, dataset, with_counts=False).corpus)
    return {(qid, doc): VERDICTS[verdict] for qid, doc, verdict in rows}


def export_review_csv(conn: psycopg.Connection, dataset: str,
                      path: Path | str) -> ExportCounts:
    """Write the review queue of ``dataset`` (pending and adjudicated rows) to ``path``.

    Columns are :data:`CSV_COLUMNS`; ``verdict`` is blank for pending rows. Rows are
    ordered by query then document external id. Query text and snippet are on one line.
    Every cell that a spreadsheet would run as a formula gets a leading apostrophe, which
    import removes again (see the module docstring). The file is written atomically (UTF-8).
    """
    rows = queue_rows(conn, dataset)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        cells = queue_row_cells(row)
        writer.writerow([escape_formula(cells[column]) for column in CSV_COLUMNS])
    target = Path(path)
    try:
        write_report(target.parent.resolve(), target.name, buffer.getvalue())
    except OSError as exc:
        raise ReviewFileError(f"{target}: cannot write the review file "
                              f"({exc.strerror or exc}); choose another path.") from None
    pending = sum(1 for row in rows if row[13] == "pending")
    return ExportCounts(target, len(rows), pending, len(rows) - pending)


def queue_rows(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """The review queue of ``dataset`` (pending and adjudicated rows) by query then document
    external id, as ``judge_review.review_export_rows`` gives them (full query and document
    texts); :func:`queue_row_cells` makes one a review file's row."""
    with conn.transaction():
        return judge_review.review_export_rows(
            conn, dataset_info(conn, dataset, with_counts=False).corpus)


def import_review_csv(conn: psycopg.Connection, dataset: str | None,
                      path: Path | str) -> ImportCounts:
    """Store the verdicts of a review file; all or nothing.

    The dataset is the one the file's ``dataset`` column names; ``dataset``, when given,
    must be that one. A file naming another dataset than ``dataset``, or several datasets,
    is refused as a whole (export writes one dataset per file, so a mixed file was merged
    or edited by hand, and one transaction should not write into several queues). A file
    without rows imports nothing.

    Every row is checked first (header, dataset, ids known to the queue of the dataset,
    verdict values, duplicates, and staleness of rows that carry a verdict: the file's
    ``score_revision`` and scores must still be the queue's, and the judges must not have
    re-scored the pair since it was queued). Any problem raises :class:`ReviewFileError`
    listing the rows, and nothing is written. Otherwise one transaction stores the
    verdicts; rows with a blank verdict are left as they are.
    """
    records = read_review_file(Path(path))
    if not records and dataset is None:
        return ImportCounts(0, 0, 0)
    return store_queue_rows(conn, file_dataset(path, records, dataset), records, source=path)


def store_queue_rows(conn: psycopg.Connection, dataset: str,
                     records: list[tuple[int, dict[str, str]]], *,
                     source: Path | str) -> ImportCounts:
    """Check review-file rows ``records`` ((row number, cells)) against the review queue of
    ``dataset`` and store their verdicts; all or nothing, in one transaction.

    What :func:`import_review_csv` does once it has read the file, and what the review page
    (:mod:`eval_harness.agreement.review_page`) does with the one row of a verdict: the same
    checks, the same refusal (:class:`ReviewFileError` naming ``source`` and listing the
    problems), the same columns written.
    """
    with conn.transaction():
        corpus = imported_corpus(conn, source, dataset)
        judge_review.lock_review_queue(conn, dataset)
        queue = _queue_state(conn, corpus)
        updates, problems, blank = _check_records(records, dataset, queue)
        if problems:
            raise wrong_rows(source, problems)
        changed = 0
        for key, verdict, reviewer, note in updates:
            changed += judge_review.store_verdict(conn, *key, verdict=verdict,
                                                  reviewer=reviewer, note=note)
    return ImportCounts.of(changed, updates, blank, dataset)


def queue_row_cells(row: tuple) -> dict[str, str]:
    """{column: text} of one row of the queue's export (``judge_review.review_export_rows``)
    as the review file holds it, before the formula escaping: what export writes and what
    import reads back."""
    (name, qid, q_ext, query, doc_id, d_ext, content, m1, s1, m2, s2, diff, revision,
     status, verdict, reviewer, note) = row
    cells = [name, qid, q_ext, one_line(query), doc_id, d_ext, snippet(content),
             m1 or "", repr(s1), m2 or "", repr(s2), f"{diff:.6g}", revision, status,
             verdict or "", reviewer or "", note or ""]
    return dict(zip(CSV_COLUMNS, map(str, cells)))


def imported_corpus(conn: psycopg.Connection, path: Path | str, dataset: str):
    """The corpus of the dataset a review file names. A name that could be a dataset's
    but is not in the store keeps :class:`UnknownDataset` (the CLI says what to attach or
    ingest); anything else is the file's problem, said as such, the name cut."""
    try:
        return dataset_info(conn, dataset, with_counts=False).corpus
    except UnknownDataset:
        if _is_dataset_name(dataset):
            raise
        known = known_datasets(conn)
        raise ReviewFileError(
            f"{path}: nothing was imported because its dataset column names "
            f"'{echo(dataset)}', which is not a dataset in the store (known: {known}); fix "
            "the column, or pass --dataset NAME.") from None


# ---------------------------------------------------------------------------------------
# Internals


def _is_dataset_name(name: str) -> bool:
    try:
        validate_dataset_name(name)
    except DatasetError:
        return False
    return True


@dataclass(frozen=True)
class _QueuedPair:
    revision: int
    scores: tuple[float, float]
    rescored: bool  # the judges' current scores or models differ from the queued ones


def _check_no_repeated_documents(conn: psycopg.Connection, dataset: str) -> None:
    external_id = ground_truth.first_query_repeating_a_document(conn, dataset)
    if external_id is not None:
        raise InvalidInput(f"ground_truth query '{external_id}' of dataset '{dataset}' lists a "
                           "document twice in judged_docs; re-run the judges for this query.")


def _queue_state(conn: psycopg.Connection, corpus) -> dict[tuple[int, int], _QueuedPair]:
    return {(qid, doc): _QueuedPair(revision, (s1, s2), rescored)
            for qid, doc, revision, s1, s2, rescored
            in judge_review.queued_pairs_for_update(conn, corpus)}


def _check_records(records: list[tuple[int, dict[str, str]]], dataset: str,
                   queue: Mapping[tuple[int, int], _QueuedPair]):
    """(updates, problems, blank rows: True where one has a note): every problem of every
    row, nothing written."""
    updates, problems, blank = [], [], []
    seen: dict[tuple[int, int], int] = {}
    for number, cells in records:
        if "__error__" in cells:
            problems.append((number, cells["__error__"]))
            continue
        key, verdict_text, row_problems = check_row(cells, dataset, number, seen, queue,
                                                    "the review queue")
        if key in queue and verdict_text:
            row_problems += _staleness(cells, queue[key])
        if row_problems:
            problems += [(number, text) for text in row_problems]
        elif not verdict_text:
            blank.append(bool(cells["note"].strip()))
        else:
            updates.append((key, verdict_text, cells["reviewer"].strip() or None,
                            cells["note"].strip() or None))
    return updates, problems, blank


def _staleness(cells: Mapping[str, str], queued: _QueuedPair) -> list[str]:
    stale = ("the row is stale: the judges re-scored this pair after the file was "
             "exported (or its score columns were edited)")
    try:
        revision = int(cells["score_revision"].strip())
        scores = (float(cells["judge1_score"]), float(cells["judge2_score"]))
    except ValueError:
        return ["score_revision, judge1_score or judge2_score was changed and is not a "
                "number; these columns must stay as exported"]
    if queued.rescored or revision != queued.revision or not all(
            math.isclose(a, b, rel_tol=0.0, abs_tol=SCORE_TOLERANCE)
            for a, b in zip(scores, queued.scores)):
        return [stale]
    return []



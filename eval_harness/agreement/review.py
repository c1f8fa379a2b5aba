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

Spreadsheet formula injection (OWASP "CSV Injection"): a cell that starts with = + - @, a
tab or a carriage return is run as a formula by spreadsheet programs. Export prefixes such
cells with one apostrophe, as OWASP recommends. So that a text which really starts with
apostrophes followed by one of those characters (``'=x``) also comes back unchanged, the
rule is: a text matching ``'*[=+\-@\t\r].*`` is written with one more leading apostrophe,
and import removes one apostrophe from every cell matching ``'+[=+\-@\t\r].*``. Export
then import gives back every text byte for byte.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psycopg

from eval_harness.agreement import queries
from eval_harness.files import write_report
from eval_harness.retrieval.hybrid import dataset_info

VERDICTS = {"relevant": 1, "not relevant": 0}
CSV_COLUMNS = ("dataset", "query_id", "query_external_id", "query", "doc_id",
               "doc_external_id", "doc_snippet", "judge1_model", "judge1_score",
               "judge2_model", "judge2_score", "score_diff", "score_revision", "status",
               "verdict", "reviewer", "note")
SNIPPET_CHARS = 400
# OWASP's list of characters that make a spreadsheet read a cell as a formula.
_FORMULA_START = re.compile(r"'*[=+\-@\t\r]")
# Spreadsheet editors may rewrite 0.1 + 0.2 as 0.3: scores match within this tolerance.
SCORE_TOLERANCE = 1e-9
_MAX_PROBLEMS_SHOWN = 20


class ReviewFileError(ValueError):
    """A review file cannot be read, written or imported; an import wrote nothing.

    ``problems`` holds (row number, what is wrong) for each wrong row of an import.
    """

    def __init__(self, message: str, problems: tuple[tuple[int, str], ...] = ()):
        super().__init__(message)
        self.problems = problems

    @property
    def rows(self) -> list[int]:
        return sorted({row for row, _ in self.problems})


def _wrong_rows(path: Path | str, problems: list[tuple[int, str]], *,
                fix: str = "export a fresh file with `eval-harness review export`"
                ) -> ReviewFileError:
    """The one-sentence error of an import refused for ``problems``; it ends with ``fix``."""
    rows = sorted({row for row, _ in problems})
    shown = "; ".join(f"row {row}: {text}" for row, text in problems[:_MAX_PROBLEMS_SHOWN])
    more = len(problems) - _MAX_PROBLEMS_SHOWN
    return ReviewFileError(
        f"{path}: nothing was imported because {len(rows)} row(s) are wrong "
        f"(rows {', '.join(map(str, rows))}): {shown}"
        + (f"; and {more} more problem(s)" if more > 0 else "")
        + f"; fix them, or {fix}.",
        tuple(problems))


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

    def __str__(self) -> str:
        return (f"{self.adjudicated} verdict(s) stored, {self.unchanged} unchanged, "
                f"{self.blank} row(s) without a verdict left as they are")


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
        queries.lock_review_queue(conn, dataset)
        _check_no_repeated_documents(conn, dataset)
        disagreeing = queries.stage_scored_pairs(conn, corpus, threshold)
        upserted = queries.upsert_disagreeing_pairs(conn)
        removed = queries.delete_settled_pairs(conn, dataset)
        pending, adjudicated = queries.review_status_counts(conn, dataset)
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
        return queries.review_status_counts(conn, dataset)


def adjudicated_labels(conn: psycopg.Connection, dataset: str) -> dict[tuple[int, int], int]:
    """Human verdicts of ``dataset``: {(ground_truth id, doc id): 1 relevant / 0 not}.

    Only verdicts whose pair still has the scores the reviewer saw count (a re-scored pair
    is re-queued and loses its verdict the next time the queue is refreshed; until then its
    verdict is ignored here, so a stale verdict never overrides new judge scores).
    """
    with conn.transaction():
        rows = queries.current_verdicts(conn, dataset_info(conn, dataset,
                                                           with_counts=False).corpus)
    return {(qid, doc): VERDICTS[verdict] for qid, doc, verdict in rows}


def export_review_csv(conn: psycopg.Connection, dataset: str,
                      path: Path | str) -> ExportCounts:
    """Write the review queue of ``dataset`` (pending and adjudicated rows) to ``path``.

    Columns are :data:`CSV_COLUMNS`; ``verdict`` is blank for pending rows. Rows are
    ordered by query then document external id. Query text and snippet are on one line.
    Every cell that a spreadsheet would run as a formula gets a leading apostrophe, which
    import removes again (see the module docstring). The file is written atomically (UTF-8).
    """
    with conn.transaction():
        rows = queries.review_export_rows(conn, dataset_info(conn, dataset,
                                                             with_counts=False).corpus)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        (name, qid, q_ext, query, doc_id, d_ext, content, m1, s1, m2, s2, diff, revision,
         status, verdict, reviewer, note) = row
        cells = [name, qid, q_ext, _one_line(query), doc_id, d_ext, _snippet(content),
                 m1 or "", repr(s1), m2 or "", repr(s2), f"{diff:.6g}", revision, status,
                 verdict or "", reviewer or "", note or ""]
        writer.writerow([_escape_formula(str(cell)) for cell in cells])
    target = Path(path)
    try:
        write_report(target.parent.resolve(), target.name, buffer.getvalue())
    except OSError as exc:
        raise ReviewFileError(f"{target}: cannot write the review file "
                              f"({exc.strerror or exc}); choose another path.") from None
    pending = sum(1 for row in rows if row[13] == "pending")
    return ExportCounts(target, len(rows), pending, len(rows) - pending)


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
    records = _read_review_file(Path(path))
    if not records and dataset is None:
        return ImportCounts(0, 0, 0)
    dataset = _file_dataset(path, records, dataset)
    with conn.transaction():
        corpus = dataset_info(conn, dataset, with_counts=False).corpus
        queries.lock_review_queue(conn, dataset)
        queue = _queue_state(conn, corpus)
        updates, problems, blank = _check_records(records, dataset, queue)
        if problems:
            raise _wrong_rows(path, problems)
        changed = 0
        for key, verdict, reviewer, note in updates:
            changed += queries.store_verdict(conn, *key, verdict=verdict, reviewer=reviewer,
                                             note=note)
    return ImportCounts(changed, len(updates) - changed, blank, dataset)


# ---------------------------------------------------------------------------------------
# Internals


@dataclass(frozen=True)
class _QueuedPair:
    revision: int
    scores: tuple[float, float]
    rescored: bool  # the judges' current scores or models differ from the queued ones


def _check_no_repeated_documents(conn: psycopg.Connection, dataset: str) -> None:
    external_id = queries.first_query_repeating_a_document(conn, dataset)
    if external_id is not None:
        raise ValueError(f"ground_truth query '{external_id}' of dataset '{dataset}' lists a "
                         "document twice in judged_docs; re-run the judges for this query.")


def _queue_state(conn: psycopg.Connection, corpus) -> dict[tuple[int, int], _QueuedPair]:
    return {(qid, doc): _QueuedPair(revision, (s1, s2), rescored)
            for qid, doc, revision, s1, s2, rescored
            in queries.queued_pairs_for_update(conn, corpus)}


def _read_review_file(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(spreadsheet row number, cells) of every non-empty data row; checks the header."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet may add a BOM
    except FileNotFoundError:
        raise ReviewFileError(f"{path}: no such file; nothing was imported.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReviewFileError(f"{path}: cannot read the file as UTF-8 text ({exc}); "
                              "nothing was imported.") from None
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ReviewFileError(f"{path}: not a readable CSV file ({exc}); nothing was "
                              "imported.") from None
    if not rows:
        raise _wrong_rows(path, [(1, "the file is empty, the header row is missing")])
    header = [cell.strip() for cell in rows[0]]
    missing = [c for c in CSV_COLUMNS if c not in header]
    unexpected = [c for c in header if c not in CSV_COLUMNS]
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if missing or unexpected or duplicated:
        parts = ([f"missing column(s) {', '.join(missing)}"] if missing else []) \
            + ([f"unexpected column(s) {', '.join(unexpected)}"] if unexpected else []) \
            + ([f"repeated column(s) {', '.join(duplicated)}"] if duplicated else [])
        raise _wrong_rows(path, [(1, "wrong header: " + ", ".join(parts))])
    records = []
    for number, cells in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in cells):
            continue  # spreadsheets leave empty trailing rows
        if len(cells) != len(header):
            records.append((number, {"__error__": f"has {len(cells)} cells, the header has "
                                                  f"{len(header)}"}))
            continue
        records.append((number, dict(zip(header, map(_unescape_formula, cells)))))
    return records


def _file_dataset(path: Path | str, records: list[tuple[int, dict[str, str]]],
                  requested: str | None) -> str:
    """The one dataset the file's rows name; refuses a mixed file or one at odds with
    ``requested``.

    When ``requested`` is among the datasets named, rows of other datasets (and rows with
    a blank dataset) are left to the per-row checks, which refuse the file naming each such
    row and both datasets.
    """
    rows_of: dict[str, list[int]] = {}
    for number, cells in records:
        name = cells.get("dataset", "").strip()
        if name:
            rows_of.setdefault(name, []).append(number)
    if requested is not None and requested in rows_of:
        return requested
    if len(rows_of) > 1:
        named = ", ".join(f"'{name}' ({_row_list(rows)})" for name, rows in rows_of.items())
        raise ReviewFileError(
            f"{path}: nothing was imported because the file mixes datasets {named}; a "
            "review file holds one dataset: keep the rows of one, or export a fresh file "
            "per dataset with `eval-harness review export --dataset NAME`.")
    if not rows_of:
        if requested is None:
            raise ReviewFileError(
                f"{path}: nothing was imported because no row names a dataset in the "
                "dataset column; fill it in, or pass --dataset NAME.")
        return requested
    (named,) = rows_of
    if requested is not None and requested != named:
        raise ReviewFileError(
            f"{path}: nothing was imported because the file's dataset column says "
            f"'{named}' but the import was asked for dataset '{requested}' (--dataset); "
            f"drop --dataset to import into '{named}', or export a fresh file of "
            f"'{requested}'.")
    return named


def _row_list(rows: list[int]) -> str:
    return ("row " if len(rows) == 1 else "rows ") + ", ".join(map(str, rows))


def check_row(cells: Mapping[str, str], dataset: str, number: int,
              seen: dict[tuple[int, int], int], known: Mapping, where: str
              ) -> tuple[tuple[int, int] | None, str, list[str]]:
    """The checks every row of a review file gets (the queue's and the human sample's): its
    dataset, ids, verdict value, repetition, and whether the pair is in ``known`` (``where``
    names that set). Returns the pair, the normalised verdict ('' when blank) and the
    problems; the caller adds its own (staleness)."""
    problems: list[str] = []
    if cells["dataset"].strip() != dataset:
        problems.append(f"dataset is '{cells['dataset']}', not '{dataset}'")
    key = _pair_key(cells, problems)
    verdict = " ".join(cells["verdict"].lower().split())
    if verdict and verdict not in VERDICTS:
        problems.append(f"verdict '{cells['verdict']}' is not 'relevant' or "
                        "'not relevant' (leave it blank to skip the row)")
    if key is not None:
        if key in seen:
            problems.append(f"pair (query_id {key[0]}, doc_id {key[1]}) is repeated "
                            f"from row {seen[key]}")
        seen.setdefault(key, number)
        if key not in known:
            problems.append(f"pair (query_id {key[0]}, doc_id {key[1]}) is not in "
                            f"{where} of dataset '{dataset}'")
    return key, verdict, problems


def _check_records(records: list[tuple[int, dict[str, str]]], dataset: str,
                   queue: Mapping[tuple[int, int], _QueuedPair]):
    """(updates, problems, blank count): every problem of every row, nothing written."""
    updates, problems, blank = [], [], 0
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
            blank += 1
        else:
            updates.append((key, verdict_text, cells["reviewer"].strip() or None,
                            cells["note"].strip() or None))
    return updates, problems, blank


def _pair_key(cells: Mapping[str, str], problems: list[str]) -> tuple[int, int] | None:
    ids = []
    for column in ("query_id", "doc_id"):
        try:
            ids.append(int(cells[column].strip()))
        except ValueError:
            problems.append(f"{column} '{cells[column]}' is not a whole number")
    return (ids[0], ids[1]) if len(ids) == 2 else None


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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _snippet(content: str) -> str:
    text = _one_line(content)
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 1].rstrip() + "…"


def _escape_formula(text: str) -> str:
    # One more apostrophe also on texts that already start with apostrophes before a
    # formula character, so that import can always remove exactly one.
    return "'" + text if _FORMULA_START.match(text) else text


def _unescape_formula(cell: str) -> str:
    return cell[1:] if cell[:1] == "'" and _FORMULA_START.match(cell) else cell

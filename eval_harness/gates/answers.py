"""The answers relation: import answers from JSONL, and stream the answers of a time window.

The contract (migration 0001; docs/your-store/postgres.md, "The answers contract"): ``id text``,
``query text``, ``answer text`` (Markdown), ``sources jsonb`` (an ordered JSON list of ``{"id",
"text"}`` objects; citation ``[1]`` is the first) and ``created_at timestamptz``. The relation
is the table ``answers`` by default, or any table or view with these columns
(``quality_gates.answers_relation``), or the RAG system's own answers table read in place
through ``quality_gates.answers`` (:mod:`eval_harness.gates.answers_mapping`; never imported
into).

Answers file (JSONL, UTF-8, one JSON object per line; blank lines are skipped)::

    {"id": "a-1", "query": "...", "answer": "Markdown [1].",
     "sources": [{"id": "4983", "text": "..."}], "created_at": "2025-03-03T09:15:00Z"}

- ``id``: a non-empty string (an integer is accepted and stored as its decimal string);
- ``query``: a non-empty string; ``answer``: a string (an empty answer is a bad answer, not a
  bad line: the gates fail it);
- ``sources``: a list of objects, each with ``id`` (string or integer) and ``text`` (string);
  other keys of a source (title, score, ...) are kept;
- ``created_at``: optional, an ISO-8601 timestamp with a timezone (``Z`` or ``+01:00``), not
  more than a day (:data:`FUTURE_TOLERANCE`) after the import's clock: a later date is a bug
  in the exporting system, and it would put the answer in a partition the gates refuse; not
  before 1970 (:mod:`eval_harness.gates.answer_checks` has every such limit). When
  it is missing, a new answer gets the time of the import and an answer already stored keeps
  its stored time, so importing the same file twice changes nothing;
- other keys of a line are ignored (answer logs often carry a model name or a latency).

The whole file is validated before the store is touched: the first bad line stops the import
with ``file:line: what is wrong`` and nothing is written (bytes that are not UTF-8 are named
with their line, as in a BEIR file). Then one transaction merges it by id:
new answers are inserted, changed ones updated, identical ones left untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import psycopg

from eval_harness.datasets.beir import DatasetError, utf8_lines
from eval_harness.errors import InvalidInput
from eval_harness.gates import sql
from eval_harness.gates.answer_checks import (
    FUTURE_TOLERANCE,
    AnswersFileError,
    check_created_at,
    check_text,
    checked_id,
    parse_json,
)
from eval_harness.gates.window import Answer, TimeWindow
from eval_harness.settings import Settings
from eval_harness.store.catalog import privilege_refusal
from eval_harness.store.migrate import harness_schema

DEFAULT_RELATION = "answers"
STREAM_BATCH_SIZE = 2000
_IMPORT_LOCK = "eval_harness.answers_import:"

class AnswersRelationError(InvalidInput):
    """The answers relation cannot be read or written; the message says what to do."""


@dataclass(frozen=True)
class ImportReport:
    path: Path
    relation: str
    inserted: int
    updated: int
    unchanged: int
    days: tuple[date, ...] = ()  # the UTC days (answers partitions) the file's answers are in

    @property
    def total(self) -> int:
        return self.inserted + self.updated + self.unchanged

    def __str__(self) -> str:
        return f"{self.inserted} new, {self.updated} updated, {self.unchanged} unchanged"


# --- reading a file ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Record:
    id: str
    query: str
    answer: str
    sources: list[dict[str, Any]]
    created_at: datetime | None


def _parse_line(text: str, where: str, latest: datetime) -> _Record:
    obj = parse_json(text, where)
    if not isinstance(obj, dict):
        raise AnswersFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for key in ("id", "query", "answer", "sources"):
        if key not in obj:
            raise AnswersFileError(f"{where}: missing field '{key}'")
    answer_id = checked_id(obj["id"], where)
    query, answer = obj["query"], obj["answer"]
    if not isinstance(query, str) or not query.strip():
        raise AnswersFileError(f"{where}: 'query' must be a non-empty string")
    if not isinstance(answer, str):
        raise AnswersFileError(f"{where}: 'answer' must be a string (Markdown)")
    sources = obj["sources"]
    if not isinstance(sources, list):
        raise AnswersFileError(f"{where}: 'sources' must be a list of {{\"id\", \"text\"}} objects")
    for number, source in enumerate(sources, start=1):
        if not isinstance(source, dict) or "id" not in source or "text" not in source:
            raise AnswersFileError(f"{where}: source {number} must be an object with 'id' and "
                                   "'text'")
        source_id = source["id"]
        if isinstance(source_id, bool) or not isinstance(source_id, (str, int)):
            raise AnswersFileError(f"{where}: source {number}: 'id' must be a string or an integer")
        if not isinstance(source["text"], str):
            raise AnswersFileError(f"{where}: source {number}: 'text' must be a string")
    if "\\u" in text:  # only a JSON escape can spell a NUL or an unpaired surrogate
        check_text(obj, where)
    return _Record(answer_id, query, answer, sources, _created_at(obj.get("created_at"), where,
                                                                 latest))


def _created_at(value: Any, where: str, latest: datetime) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise AnswersFileError(f"{where}: 'created_at' must be an ISO-8601 timestamp string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise AnswersFileError(f"{where}: 'created_at' {value!r} is not an ISO-8601 timestamp "
                               "(e.g. 2025-03-03T09:15:00Z)") from None
    if parsed.tzinfo is None:
        raise AnswersFileError(f"{where}: 'created_at' {value!r} has no timezone; add one "
                               "(e.g. 2025-03-03T09:15:00Z)")
    check_created_at(parsed, where, "'created_at'", latest, shown=repr(value))
    return parsed


def read_answers_file(path: Path | str) -> Iterator[_Record]:
    """Validated records of an answers file, in file order; raises on the first bad line."""
    path = Path(path)
    if not path.is_file():
        raise AnswersFileError(f"{path}: file not found")
    seen: dict[str, int] = {}
    latest = datetime.now(UTC) + FUTURE_TOLERANCE
    # bytes that are not UTF-8 are named with their own line, as for a BEIR file
    with closing(utf8_lines(path)) as lines:
        while True:
            try:
                line_no, line = next(lines)
            except StopIteration:
                break
            except DatasetError as exc:
                raise AnswersFileError(str(exc)) from None
            if not line.strip():
                continue
            record = _parse_line(line, f"{path}:{line_no}", latest)
            first = seen.setdefault(record.id, line_no)
            if first != line_no:
                raise AnswersFileError(f"{path}:{line_no}: duplicate id '{record.id}' "
                                       f"(first on line {first})")
            yield record
    if not seen:
        raise AnswersFileError(f"{path}: no answers in the file")


# --- importing -----------------------------------------------------------------------------

def import_answers(conn: psycopg.Connection, path: Path | str, *,
                   relation: str = DEFAULT_RELATION,
                   records: Iterable[Any] | None = None,
                   traced: bool | None = None) -> ImportReport:
    """Merge the answers of ``path`` into ``relation`` by id, in one transaction.

    The file is validated completely first (see the module docstring); a bad line raises
    :class:`AnswersFileError` naming ``file:line`` and nothing is written. ``records``, when
    given, are the file's answers read and validated by another format's reader
    (:mod:`eval_harness.gates.answer_formats`): objects with ``id, query, answer, sources,
    created_at`` and, from traces (``traced``; found out from a sequence when None),
    ``trace_id, span_id`` (stored too, migration 0019). They may be a stream that raises
    :class:`AnswersFileError` part way: the transaction is rolled back, nothing is written.
    """
    if not isinstance(relation, str):  # a quality_gates.answers mapping: the RAG system's
        raise AnswersRelationError(f"Cannot import answers into {relation}: "  # table
                                   "quality_gates.answers maps it, and the harness only reads "
                                   "it (the gates read its answers in place).")
    path = Path(path)
    if records is None:
        for _ in read_answers_file(path):  # validate everything before touching the store
            pass
    if traced is None:
        records = list(records) if records is not None else None
        traced = records is not None and any(getattr(r, "trace_id", None) for r in records)
    rows = (((r.id, r.query, r.answer, r.sources, r.created_at)
             # traced: records were given, and they carry trace ids
             + ((r.trace_id, r.span_id) if traced else ()))  # type: ignore[union-attr]
            for r in (records if records is not None else read_answers_file(path)))
    try:
        with conn.transaction():
            sql.lock_answers_import(conn, _IMPORT_LOCK + relation)
            total, updated, inserted, days = sql.merge_answers(conn, relation, rows,
                                                               traced=traced)
    except psycopg.errors.InsufficientPrivilege as exc:  # not a schema problem: no migrate
        raise AnswersRelationError(f"Cannot write answers into '{relation}': "
                                   f"{_refusal(conn, exc)}") from None
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn,
            psycopg.errors.ObjectNotInPrerequisiteState, psycopg.errors.FeatureNotSupported,
            psycopg.errors.WrongObjectType) as exc:
        raise AnswersRelationError(
            f"Cannot write answers into '{relation}' ({_first_line(exc)}); import needs a table "
            "(or an updatable view) with the answers columns (answers from traces also "
            "trace_id and span_id): run `eval-harness migrate` or check "
            "quality_gates.answers_relation.") from None
    return ImportReport(path, relation, inserted, updated, total - inserted - updated, days)


def import_configured_answers(conn: psycopg.Connection,
                              settings: Settings) -> ImportReport | None:
    """Import ``quality_gates.answers_file`` (the bundled sample by default), if one is set.

    Meant for the main job: idempotent, so running it on every run changes nothing after the
    first. Returns None when no file is configured.
    """
    gates = settings.quality_gates
    if gates.answers_file is None:
        return None
    return import_answers(conn, gates.answers_file, relation=gates.answers_relation)


# --- streaming a window ---------------------------------------------------------------------

def readable_rows(rows: Iterator[tuple], relation: sql.AnswersRelation) -> Iterator[tuple]:
    """``rows`` read from ``relation``; a relation without the answers columns raises
    :class:`AnswersRelationError`. A role that may not read it gets the store's "permission
    denied", which the CLI turns into the GRANT it lacks (migrating would not help)."""
    try:
        yield from rows
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn) as exc:
        raise AnswersRelationError(
            f"Cannot read answers from '{relation}' ({_first_line(exc)}); it needs the columns "
            "id, query, answer, sources, created_at (see docs/your-store/postgres.md, 'The "
            "answers contract'): run "
            "`eval-harness migrate` or check quality_gates.answers_relation.") from None


def stream_answers(conn: psycopg.Connection, window: TimeWindow, *,
                   relation: sql.AnswersRelation = DEFAULT_RELATION,
                   batch_size: int = STREAM_BATCH_SIZE) -> Iterator[Answer]:
    """Every answer of ``window``, in no particular order, with its content hash.

    Rows come through a server-side cursor ``batch_size`` at a time, in a transaction of
    their own (a savepoint when one is open): ``conn`` must not be used for anything else
    while the iterator is being consumed.
    """
    rows = sql.window_answer_rows(conn, relation, window, batch_size=batch_size)
    for row in readable_rows(rows, relation):
        yield Answer(*row)


def _refusal(conn: psycopg.Connection, exc: psycopg.Error) -> str:
    """The role, the relation and the GRANT a "permission denied" lacks (one clause)."""
    try:
        found = privilege_refusal(conn, str(exc), harness_schema(conn))
    except psycopg.Error:
        found = None
    return (found or f"{_first_line(exc)}; grant this role INSERT and UPDATE on it.").rstrip(".") \
        + "."


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


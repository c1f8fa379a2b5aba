"""Review files: the CSV a person edits, read and checked row by row, and the one-sentence
refusal of a wrong file. Shared by the review queue (:mod:`eval_harness.agreement.review`) and
the human sample (:mod:`eval_harness.agreement.sample`), whose files have the same columns.

Row numbers are those a spreadsheet shows (the header is row 1). A refusal lists every
problem, the same problem on many rows once with their ranges (``rows 2-51: ...``), and
quotes a cell of the file at most :data:`ECHO_CHARS` characters long: a file is anybody's
input, and a message is no place for ten megabytes of it.

Spreadsheet formula injection (OWASP "CSV Injection"): a cell that starts with = + - @, a
tab or a carriage return is run as a formula by spreadsheet programs. Export prefixes such
cells with one apostrophe, as OWASP recommends. So that a text which really starts with
apostrophes followed by one of those characters (``'=x``) also comes back unchanged, the
rule is: a text matching ``'*[=+\\-@\t\r].*`` is written with one more leading apostrophe,
and import removes one apostrophe from every cell matching ``'+[=+\\-@\t\r].*``. Export
then import gives back every text byte for byte.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from pathlib import Path

from eval_harness.errors import InvalidInput

VERDICTS = {"relevant": 1, "not relevant": 0}
CSV_COLUMNS = ("dataset", "query_id", "query_external_id", "query", "doc_id",
               "doc_external_id", "doc_snippet", "judge1_model", "judge1_score",
               "judge2_model", "judge2_score", "score_diff", "score_revision", "status",
               "verdict", "reviewer", "note")
SNIPPET_CHARS = 400
# OWASP's list of characters that make a spreadsheet read a cell as a formula.
_FORMULA_START = re.compile(r"'*[=+\-@\t\r]")
_MAX_PROBLEMS_SHOWN = 20  # distinct problems a refusal spells out
_MAX_RANGES_SHOWN = 20     # row ranges a list spells out
ECHO_CHARS = 80            # the longest text of the file a message quotes


class ReviewFileError(InvalidInput):
    """A review file cannot be read, written or imported; an import wrote nothing.

    ``problems`` holds (row number, what is wrong) for each wrong row of an import.
    """

    def __init__(self, message: str, problems: tuple[tuple[int, str], ...] = ()):
        super().__init__(message)
        self.problems = problems

    @property
    def rows(self) -> list[int]:
        return sorted({row for row, _ in self.problems})


def wrong_rows(path: Path | str, problems: list[tuple[int, str]], *,
               fix: str = "export a fresh file with `eval-harness review export`"
               ) -> ReviewFileError:
    """The one-sentence error of an import refused for ``problems``; it ends with ``fix``.
    The same problem on several rows is said once, with the rows as ranges."""
    rows = sorted({row for row, _ in problems})
    grouped: dict[str, list[int]] = {}
    for row, text in problems:
        grouped.setdefault(text, []).append(row)
    shown = "; ".join(f"{row_list(sorted(set(rows_of)))}: {text}"
                      for text, rows_of in list(grouped.items())[:_MAX_PROBLEMS_SHOWN])
    more = sum(len(rows_of) for rows_of in list(grouped.values())[_MAX_PROBLEMS_SHOWN:])
    return ReviewFileError(
        f"{path}: nothing was imported because {len(rows)} row(s) are wrong "
        f"({row_list(rows)}): {shown}"
        + (f"; and {more} more problem(s)" if more > 0 else "")
        + f"; fix them, or {fix}.",
        tuple(problems))


def echo(text: str) -> str:
    """A text of the file as a message quotes it: on one line, at most :data:`ECHO_CHARS`
    characters (cut with "…")."""
    text = one_line(text)
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS - 1] + "…"


def read_review_file(path: Path) -> list[tuple[int, dict[str, str]]]:
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
        raise wrong_rows(path, [(1, "the file is empty, the header row is missing")])
    header = [cell.strip() for cell in rows[0]]
    missing = [c for c in CSV_COLUMNS if c not in header]
    unexpected = [c for c in header if c not in CSV_COLUMNS]
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if missing or unexpected or duplicated:
        parts = ([f"missing column(s) {', '.join(missing)}"] if missing else []) \
            + ([f"unexpected column(s) {echo(', '.join(unexpected))}"] if unexpected else []) \
            + ([f"repeated column(s) {echo(', '.join(duplicated))}"] if duplicated else [])
        raise wrong_rows(path, [(1, "wrong header: " + ", ".join(parts))])
    records = []
    for number, cells in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in cells):
            continue  # spreadsheets leave empty trailing rows
        if len(cells) != len(header):
            records.append((number, {"__error__": f"has {len(cells)} cells, the header has "
                                                  f"{len(header)}"}))
            continue
        records.append((number, dict(zip(header, map(unescape_formula, cells)))))
    return records


def file_dataset(path: Path | str, records: list[tuple[int, dict[str, str]]],
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
        named = ", ".join(f"'{echo(name)}' ({row_list(rows)})"
                          for name, rows in list(rows_of.items())[:_MAX_RANGES_SHOWN]) + (
            ", ..." if len(rows_of) > _MAX_RANGES_SHOWN else "")
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
            f"'{echo(named)}' but the import was asked for dataset '{echo(requested)}' "
            f"(--dataset); drop --dataset to import into that one, or export a fresh file of "
            f"'{echo(requested)}'.")
    return named


def row_list(rows: list[int]) -> str:
    """``row 7`` or ``rows 2-51, 60`` (consecutive rows as ranges) of sorted ``rows``."""
    ranges: list[str] = []
    start = previous = rows[0]
    for row in [*rows[1:], None]:
        if row is not None and row == previous + 1:
            previous = row
            continue
        ranges.append(str(start) if start == previous else f"{start}-{previous}")
        if row is not None:
            start = previous = row
    shown = ", ".join(ranges[:_MAX_RANGES_SHOWN]) + (", ..." if len(ranges) >
                                                     _MAX_RANGES_SHOWN else "")
    return ("row " if len(rows) == 1 else "rows ") + shown


def check_row(cells: Mapping[str, str], dataset: str, number: int,
              seen: dict[tuple[int, int], int], known: Mapping, where: str
              ) -> tuple[tuple[int, int] | None, str, list[str]]:
    """The checks every row of a review file gets (the queue's and the human sample's): its
    dataset, ids, verdict value, repetition, and whether the pair is in ``known`` (``where``
    names that set). Returns the pair, the normalised verdict ('' when blank) and the
    problems; the caller adds its own (staleness)."""
    problems: list[str] = []
    if cells["dataset"].strip() != dataset:
        problems.append(f"dataset is '{echo(cells['dataset'])}', not '{echo(dataset)}'")
    key = pair_key(cells, problems)
    verdict = " ".join(cells["verdict"].lower().split())
    if verdict and verdict not in VERDICTS:
        problems.append(f"verdict '{echo(cells['verdict'])}' is not 'relevant' or "
                        "'not relevant' (leave it blank to skip the row)")
    if key is not None:
        if key in seen:
            problems.append(f"pair (query_id {key[0]}, doc_id {key[1]}) is repeated "
                            f"from row {seen[key]}")
        seen.setdefault(key, number)
        if key not in known:
            problems.append(f"pair (query_id {key[0]}, doc_id {key[1]}) is not in "
                            f"{where} of dataset '{echo(dataset)}'")
    return key, verdict, problems


def pair_key(cells: Mapping[str, str], problems: list[str]) -> tuple[int, int] | None:
    ids = []
    for column in ("query_id", "doc_id"):
        try:
            ids.append(int(cells[column].strip()))
        except ValueError:
            problems.append(f"{column} '{echo(cells[column])}' is not a whole number")
    return (ids[0], ids[1]) if len(ids) == 2 else None


def one_line(text: str) -> str:
    return " ".join(text.split())


def snippet(content: str) -> str:
    text = one_line(content)
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS - 1].rstrip() + "…"


def escape_formula(text: str) -> str:
    # One more apostrophe also on texts that already start with apostrophes before a
    # formula character, so that import can always remove exactly one.
    return "'" + text if _FORMULA_START.match(text) else text


def unescape_formula(cell: str) -> str:
    return cell[1:] if cell[:1] == "'" and _FORMULA_START.match(cell) else cell

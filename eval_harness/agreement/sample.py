"""A seeded uniform sample of judged queries for people to label: the human side of PPI.

Prediction-powered inference (:mod:`eval_harness.metrics.ppi`) corrects the judges' P@5 with
human labels, and is valid only when the labelled units are a uniform random sample of the
units the judges labelled. The unit here is the **query**, as everywhere in the harness's
statistics: P@5 is a per-query figure, and a human P@5 needs a person's verdict on every
document of the query's top 5. So ``review sample`` draws queries, not pairs, uniformly from
the dataset's judged queries (those with at least one pair both judges scored), and exports
**every** scored pair of each drawn query. The judges' pool holds the top 5 of every weight
evaluated, so a query whose pairs are all labelled has a human P@5 at each of those weights.
(A uniform sample of pairs would not do: a query's top 5 would be labelled only by chance, and
the queries where it is would not be a uniform sample of queries.)

The draw: each judged query gets the key ``sha256("<seed>:<query external id>")`` and the n
queries with the smallest keys are the sample. For a fixed seed the key order is a
pseudo-random permutation, so the first n are a uniform sample of n queries; the same seed
and n give the same queries; a larger n keeps the queries already drawn and adds the next
ones (the sample extends, labels already given stay); a query judged later enters only where
its key falls. A dataset has one seed: sampling with another seed is refused (two samples'
union would have to be re-weighted).

The drawn pairs are recorded in ``human_sample`` (migration 0009), apart from the
disagreement queue (``judge_review``). The file has the review file's columns
(:data:`eval_harness.agreement.review_file.CSV_COLUMNS`), ``status`` is ``sample`` on every row
(how ``review import`` tells a sample file from a queue file), and the judges' models and
scores are left blank on purpose: a person who sees the judges' score is anchored by it, and
PPI needs labels independent of the judges.

Import checks every row before writing, like the queue import: a row must be a pair of the
dataset's sample (unknown: refused), its ``query_external_id`` and ``doc_external_id`` must
still be the store's ids of that pair and its document still in the corpus (stale: refused),
verdicts must be ``relevant`` / ``not relevant`` or blank (blank: left as it is). A row's
``reviewer`` and ``note`` are stored with its verdict (migration 0010 keeps the note). A verdict
does not go stale when the judges re-score the pair: it is a person's relevance label, not a
verdict on the judges' scores.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psycopg

from eval_harness.agreement import sql
from eval_harness.agreement.review import ImportCounts, imported_corpus
from eval_harness.agreement.review_file import (
    CSV_COLUMNS,
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
from eval_harness.datasets import ground_truth
from eval_harness.errors import InvalidInput
from eval_harness.files import write_report
from eval_harness.retrieval.hybrid import dataset_info

SAMPLE_STATUS = "sample"  # the status column of every row of a sample file
DEFAULT_SEED = 0


@dataclass(frozen=True)
class SampleExport:
    path: Path
    dataset: str
    seed: int
    queries: int          # queries in the file
    judged_queries: int   # queries the sample is drawn from
    pairs: int            # rows in the file
    added: int            # pairs recorded in human_sample now (new queries or new pairs)
    labelled: int         # rows of the file that already carry a verdict


def sample_order(seed: int, external_ids: list[str]) -> list[str]:
    """``external_ids`` in the sample's draw order for ``seed`` (module docstring)."""
    return sorted(external_ids,
                  key=lambda ext: (hashlib.sha256(f"{seed}:{ext}".encode()).hexdigest(), ext))


def export_sample_csv(conn: psycopg.Connection, dataset: str, path: Path | str, *, n: int,
                      seed: int | None = None) -> SampleExport:
    """Draw (or extend) the human sample of ``dataset`` to ``n`` queries and write the pairs
    of those n queries to ``path``.

    ``seed`` None: the dataset's existing seed, else :data:`DEFAULT_SEED`. Raises
    ``ValueError`` (one sentence) for n < 1, a dataset without judged queries, or a seed
    other than the one the dataset's sample was drawn with. ``n`` above the number of judged
    queries takes them all. One transaction; the file is written atomically after it.
    """
    if n < 1:
        raise InvalidInput(f"--n must be at least 1 query, got {n}.")
    with conn.transaction():
        corpus = dataset_info(conn, dataset, with_counts=False).corpus
        sql.lock_human_sample(conn, dataset)
        seed = _sample_seed(conn, dataset, seed)
        judged = ground_truth.scored_query_external_ids(conn, corpus)
        if not judged:
            raise InvalidInput(f"dataset '{dataset}' has no pair scored by both judges to sample "
                               "from; run `eval-harness judge` first.")
        id_of = {ext: qid for qid, ext in judged}
        drawn = [id_of[ext] for ext in sample_order(seed, list(id_of))[:n]]
        added = sql.add_to_human_sample(conn, corpus, drawn, seed)
        rows = sql.human_sample_export_rows(conn, corpus, drawn)
    target = Path(path)
    _write_sample_file(target, rows)
    return SampleExport(target, dataset, seed, len(drawn), len(judged), len(rows), added,
                        sum(1 for row in rows if row[7] is not None))


def is_sample_file(path: Path | str) -> bool:
    """Whether ``path`` is a sample file (a row with status ``sample``). A file that cannot be
    read as a review file is not one: the queue import then says what is wrong with it."""
    try:
        records = read_review_file(Path(path))
    except ReviewFileError:
        return False
    return any(cells.get("status", "").strip() == SAMPLE_STATUS for _, cells in records)


def import_sample_csv(conn: psycopg.Connection, dataset: str | None,
                      path: Path | str) -> ImportCounts:
    """Store the verdicts of a sample file in ``human_sample``; all rows or none.

    The dataset comes from the file's ``dataset`` column (``dataset``, when given, must be
    it), as for queue files. Any wrong row (not a sample row, unknown or stale pair, bad
    verdict, repeated pair) raises :class:`ReviewFileError` naming the rows, and nothing is
    written.
    """
    records = read_review_file(Path(path))
    return store_sample_rows(conn, file_dataset(path, records, dataset), records, source=path)


def store_sample_rows(conn: psycopg.Connection, dataset: str,
                      records: list[tuple[int, dict[str, str]]], *,
                      source: Path | str) -> ImportCounts:
    """Check sample-file rows ``records`` ((row number, cells)) against the human sample of
    ``dataset`` and store their verdicts in ``human_sample``; all or nothing, in one
    transaction.

    What :func:`import_sample_csv` does once it has read the file, and what the review page
    (:mod:`eval_harness.agreement.review_page`) does with the one row of a verdict: the same
    checks and the same refusal (:class:`ReviewFileError` naming ``source``).
    """
    with conn.transaction():
        corpus = imported_corpus(conn, source, dataset)
        sql.lock_human_sample(conn, dataset)
        sampled = {(qid, doc): (q_ext, d_ext) for qid, doc, q_ext, d_ext
                   in sql.human_sample_pairs_for_update(conn, corpus)}
        updates, problems, blank = _check_sample_records(records, dataset, sampled)
        if problems:
            raise _wrong_sample_rows(source, problems)
        changed = sum(sql.store_sample_verdict(conn, *key, verdict=verdict,
                                                   reviewer=reviewer, note=note)
                      for key, verdict, reviewer, note in updates)
    return ImportCounts.of(changed, updates, blank, dataset)


def sample_rows(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """Every pair of the human sample of ``dataset`` whose document is still in the corpus, by
    query then document external id: ``(dataset, query id, query external id, query, doc id,
    doc external id, doc content, verdict, reviewer, note)`` (full texts);
    :func:`sample_row_cells` makes one a sample file's row."""
    with conn.transaction():
        corpus = dataset_info(conn, dataset, with_counts=False).corpus
        query_ids = sorted({qid for qid, _, _ in sql.human_sample_labels(conn, dataset)})
        return sql.human_sample_export_rows(conn, corpus, query_ids) if query_ids else []


def sample_row_cells(row: tuple) -> dict[str, str]:
    """{column: text} of one sampled pair (a row of :func:`sample_rows`) as the sample file
    holds it, before the formula escaping: the judges' columns blank (module docstring)."""
    name, qid, q_ext, query, doc_id, d_ext, content, verdict, reviewer, note = row
    cells = {"dataset": name, "query_id": qid, "query_external_id": q_ext,
             "query": one_line(query), "doc_id": doc_id, "doc_external_id": d_ext,
             "doc_snippet": snippet(content), "status": SAMPLE_STATUS,
             "verdict": verdict or "", "reviewer": reviewer or "", "note": note or ""}
    return {column: str(cells.get(column, "")) for column in CSV_COLUMNS}


# ---------------------------------------------------------------------------------------
# Internals


def _sample_seed(conn: psycopg.Connection, dataset: str, seed: int | None) -> int:
    seeds = sql.human_sample_seeds(conn, dataset)
    if not seeds:
        return DEFAULT_SEED if seed is None else seed
    if seed is not None and seed != seeds[0]:
        raise InvalidInput(f"the human sample of dataset '{dataset}' was drawn with seed "
                           f"{seeds[0]}, not {seed}; sample again with --seed {seeds[0]} (a "
                           "larger --n extends the sample).")
    return seeds[0]


def _write_sample_file(target: Path, rows: list[tuple]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        cells = sample_row_cells(row)
        writer.writerow([escape_formula(cells[column]) for column in CSV_COLUMNS])
    try:
        write_report(target.parent.resolve(), target.name, buffer.getvalue())
    except OSError as exc:
        raise ReviewFileError(f"{target}: cannot write the sample file "
                              f"({exc.strerror or exc}); choose another path.") from None


def _check_sample_records(records: list[tuple[int, dict[str, str]]], dataset: str,
                          sampled: Mapping[tuple[int, int], tuple[str, str | None]]):
    """(updates, problems, blank rows: True where one has a note): every problem of every
    row, nothing written."""
    updates, problems, blank = [], [], []
    seen: dict[tuple[int, int], int] = {}
    for number, cells in records:
        if "__error__" in cells:
            problems.append((number, cells["__error__"]))
            continue
        row: list[str] = []
        if cells["status"].strip() != SAMPLE_STATUS:
            row.append(f"status is '{echo(cells['status'])}', not '{SAMPLE_STATUS}': a sample "
                       "file holds sample rows only (import review-queue rows from their own "
                       "file)")
        key, verdict, problems_of_row = check_row(cells, dataset, number, seen, sampled,
                                                  "the human sample")
        row += problems_of_row
        if key in sampled:
            row += _staleness(cells, *sampled[key])
        if row:
            problems += [(number, text) for text in row]
        elif not verdict:
            blank.append(bool(cells["note"].strip()))
        else:
            updates.append((key, verdict, cells["reviewer"].strip() or None,
                            cells["note"].strip() or None))
    return updates, problems, blank


def _staleness(cells: Mapping[str, str], query_ext: str, doc_ext: str | None) -> list[str]:
    if doc_ext is None:
        return ["the row is stale: its document is no longer in the dataset's corpus"]
    if (cells["query_external_id"].strip(), cells["doc_external_id"].strip()) != (query_ext,
                                                                                  doc_ext):
        return [f"the row is stale: the store's ids of this pair are query '{query_ext}', "
                f"document '{doc_ext}' (re-ingested since the file was written, or the id "
                "columns were edited)"]
    return []


def _wrong_sample_rows(path: Path | str, problems: list[tuple[int, str]]) -> ReviewFileError:
    return wrong_rows(path, problems,
                       fix="write a fresh file with `eval-harness review sample`")

"""Read a dataset folder in the BEIR layout, strictly and with line numbers.

A BEIR folder holds ``corpus.jsonl`` (``{"_id", "title", "text", "metadata"}`` per line),
``queries.jsonl`` (``{"_id", "text", "metadata"}``) and ``qrels/<split>.tsv`` (a header line,
then ``query-id<TAB>corpus-id<TAB>score``). Optionally ``embeddings.npz`` holds precomputed
embeddings (see :mod:`eval_harness.datasets.embeddings`).

Everything is parsed and validated before the store is touched, so a malformed line stops the
ingest with ``file:line: what is wrong`` and nothing is written. That includes bytes that are
not UTF-8 (a file saved as Latin-1, say) and JSON escapes of unpaired surrogates, which are
not text either; a UTF-8 byte order mark at the start of a file is allowed.

Qrels grades: ``>= 1`` relevant (the grade is the gain), ``0`` judged not relevant. A negative
grade is accepted and means judged not relevant too, as trec_eval reads it: TREC collections
use it on purpose (the TREC Web track's ``-2`` marks spam pages), so refusing it would refuse
real qrels. Nothing is stored for it, as for ``0``, and the reader says how many there were.
A qrels file whose first line is data, not the ``query-id corpus-id score`` header, loses
nothing (that line is read as data) and gets a one-line notice. Notices are logged as
warnings (:data:`log`; the command line shows them on stderr) and kept in
:attr:`BeirDataset.notices`.

A document with neither title nor text (``"text": ""``, missing or null) is kept: real
collections have a few (Cranfield has two, one of them in the qrels) and the ground truth may
point at them. It is an *empty document* (:attr:`Document.is_empty`): stored and findable by
id, but it gets no embedding and matches no keyword, so search never returns it. A title
without text is not empty.

A folder without any qrels file (no ``qrels/*.tsv``) is a dataset without labels: every query
of ``queries.jsonl`` is kept with no relevant document, and the judges label them
(``eval-harness judge``, then ``calibrate --labels judges``). When ``qrels/`` holds other
splits but not the one asked for, that is a mistake of the split, not a dataset without
labels, and it is refused.

A folder without ``queries.jsonl`` (and without qrels) is a corpus without ground truth: its
documents are ingested, and ``eval-harness ground-truth generate`` or ``from-answers`` writes
the queries (:mod:`eval_harness.query_sources`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from eval_harness.errors import InvalidInput

log = logging.getLogger("eval_harness.datasets.beir")

# Bytes that are not UTF-8 come out of the "surrogateescape" decoder as U+DC80..U+DCFF, which
# valid UTF-8 never decodes to; JSON escapes of unpaired surrogates ("\ud800") as any of
# U+D800..U+DFFF, which no UTF-8 text (hence no Postgres text) can hold.
_UNDECODABLE = re.compile("[\udc80-\udcff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
QRELS_HEADER = ["query-id", "corpus-id"]


class DatasetError(InvalidInput):
    """A dataset file is missing or malformed; the message names the file and line."""


@dataclass(frozen=True)
class Document:
    external_id: str
    title: str
    text: str
    metadata: dict
    line: int = field(default=0, compare=False)  # its line in corpus.jsonl (0: unknown)

    @property
    def content(self) -> str:
        return document_content(self.title, self.text)

    @property
    def is_empty(self) -> bool:
        """No title and no text: nothing to embed or to match (module docstring)."""
        return not self.content


@dataclass(frozen=True)
class Query:
    external_id: str
    text: str
    relevance: dict[str, int] = field(default_factory=dict)  # doc external id -> grade

    @property
    def relevant_docs(self) -> list[str]:
        """Documents judged relevant (grade >= 1), in file order."""
        return [doc for doc, grade in self.relevance.items() if grade >= 1]


@dataclass(frozen=True)
class BeirDataset:
    path: Path
    documents: list[Document]
    queries: list[Query]  # only queries of the split that have at least one relevant doc
    skipped_queries: int  # queries in the split without any relevant document
    notices: tuple[str, ...] = ()  # what the reader accepted but the user should know
    labelled: bool = True  # False: no qrels file, every query kept without labels

    @property
    def empty_documents(self) -> list[str]:
        """Ids of the documents with no title and no text, in file order."""
        return [d.external_id for d in self.documents if d.is_empty]


def document_content(title: str, text: str) -> str:
    """The text stored as ``l2_insights.content`` and the text that gets embedded.

    One rule for both so that precomputed embeddings match what is in the store.
    """
    title = title.strip()
    text = text.strip()
    return f"{title}\n{text}" if title else text


def utf8_lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """``(line number, text)`` of a UTF-8 file; a line that is not UTF-8 stops with
    ``file:line``, naming the first bad byte and where it is in the line."""
    with path.open(encoding="utf-8", errors="surrogateescape") as handle:
        for line_no, line in enumerate(handle, start=1):
            if line_no == 1:
                line = line.removeprefix("\ufeff")  # a byte order mark is no content
            bad = _UNDECODABLE.search(line)
            if bad:
                column = len(line[:bad.start()].encode("utf-8", "surrogateescape")) + 1
                raise DatasetError(
                    f"{path}:{line_no}: not valid UTF-8 (byte 0x{ord(bad.group()) - 0xDC00:02x} "
                    f"at byte {column} of the line); save the file as UTF-8 (from Latin-1: "
                    f"iconv -f latin1 -t utf-8).")
            yield line_no, line


def _check_text(path: Path, line_no: int, *texts: str) -> None:
    """NUL characters and unpaired surrogates: JSON can spell them, Postgres text cannot."""
    for text in texts:
        if "\x00" in text:
            raise DatasetError(f"{path}:{line_no}: text contains a NUL character")
        bad = _SURROGATE.search(text)
        if bad:
            raise DatasetError(f"{path}:{line_no}: text contains an unpaired surrogate "
                               f"(\\u{ord(bad.group()):04x}), which is not valid Unicode; "
                               "fix the JSON escape or the tool that wrote it.")


def _strings(value) -> Iterator[str]:
    """Every key and string inside a JSON value (metadata is stored as jsonb)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _read_jsonl(path: Path, required: tuple[str, ...]):
    if not path.is_file():
        raise DatasetError(f"{path}: file not found (a BEIR folder needs corpus.jsonl, "
                           "queries.jsonl and qrels/<split>.tsv)")
    for line_no, line in utf8_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{line_no}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{path}:{line_no}: expected a JSON object")
        for key in required:
            if key not in record:
                raise DatasetError(f"{path}:{line_no}: missing field '{key}'")
        yield line_no, record


def _as_id(value, path: Path, line_no: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise DatasetError(f"{path}:{line_no}: '_id' must be a non-empty string or integer")
    return str(value)


def read_corpus(path: Path) -> list[Document]:
    documents: list[Document] = []
    seen: dict[str, int] = {}
    for line_no, record in _read_jsonl(path, ("_id",)):
        doc_id = _as_id(record["_id"], path, line_no)
        _check_text(path, line_no, doc_id)
        if doc_id in seen:
            raise DatasetError(f"{path}:{line_no}: duplicate document id '{doc_id}' "
                               f"(first seen on line {seen[doc_id]})")
        seen[doc_id] = line_no
        title = record.get("title") or ""
        text = record.get("text")
        if text is None:  # missing or null, like "": an empty document unless it has a title
            text = ""
        metadata = record.get("metadata") or {}
        if not isinstance(text, str) or not isinstance(title, str):
            raise DatasetError(f"{path}:{line_no}: 'title' and 'text' must be strings")
        if not isinstance(metadata, dict):
            raise DatasetError(f"{path}:{line_no}: 'metadata' must be a JSON object")
        _check_text(path, line_no, title, text, *_strings(metadata))
        documents.append(Document(doc_id, title, text, metadata, line_no))
    if not documents:
        raise DatasetError(f"{path}: the corpus is empty")
    return documents


def read_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for line_no, record in _read_jsonl(path, ("_id", "text")):
        query_id = _as_id(record["_id"], path, line_no)
        text = record["text"]
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{path}:{line_no}: query '{query_id}' has no text")
        _check_text(path, line_no, query_id, text)
        if query_id in queries:
            raise DatasetError(f"{path}:{line_no}: duplicate query id '{query_id}'")
        queries[query_id] = text
    return queries


def read_qrels(path: Path, query_ids: set[str], doc_ids: set[str], *,
               notices: list[str] | None = None) -> dict[str, dict[str, int]]:
    """Relevance grades per query; every id must exist in queries and corpus.

    A missing header and negative grades are accepted (module docstring); a line about each
    is appended to ``notices`` when given.
    """
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    qrels: dict[str, dict[str, int]] = {}
    header = False
    negative: list[int] = []  # line numbers
    first_line = None
    for line_no, line in utf8_lines(path):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")
        if first_line is None:
            first_line = line_no
            header = [f.strip() for f in fields[:2]] == QRELS_HEADER
            if header:
                continue
        if len(fields) != 3:
            raise DatasetError(f"{path}:{line_no}: expected 3 tab-separated fields "
                               f"(query-id, corpus-id, score), found {len(fields)}")
        query_id, doc_id, score = (f.strip() for f in fields)
        try:
            grade = int(score)
        except ValueError:
            raise DatasetError(f"{path}:{line_no}: score '{score}' is not an integer") from None
        if query_id not in query_ids:
            raise DatasetError(f"{path}:{line_no}: unknown query id '{query_id}' "
                               "(not in queries.jsonl)")
        if doc_id not in doc_ids:
            raise DatasetError(f"{path}:{line_no}: unknown document id '{doc_id}' "
                               "(not in corpus.jsonl)")
        if grade < 0:
            negative.append(line_no)
        qrels.setdefault(query_id, {})[doc_id] = grade
    if notices is not None:
        if first_line is not None and not header:
            notices.append(f"{path}: no header line (query-id, corpus-id, score); line "
                           f"{first_line} was read as data")
        if negative:
            shown = ", ".join(map(str, negative[:5])) + (", ..." if len(negative) > 5 else "")
            subject = ("1 judgement has" if len(negative) == 1
                       else f"{len(negative)} judgements have")
            notices.append(f"{path}: {subject} a negative grade (lines {shown}); read as "
                           "judged not relevant, like 0, and not stored")
    return qrels


def read_beir(path: Path | str, *, split: str = "test") -> BeirDataset:
    """Read and validate a BEIR folder; raises :class:`DatasetError` naming file:line."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder (expected a BEIR dataset folder)")
    documents = read_corpus(root / "corpus.jsonl")
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not (root / "queries.jsonl").exists():
        return _corpus_only(root, documents, split)
    query_texts = read_queries(root / "queries.jsonl")
    notices: list[str] = []
    if not qrels_path.is_file():
        return _unlabelled(root, documents, query_texts, split)
    qrels = read_qrels(qrels_path, set(query_texts),
                       {d.external_id for d in documents}, notices=notices)
    for notice in notices:
        log.warning(notice)
    queries = []
    skipped = 0
    for query_id, grades in qrels.items():
        query = Query(query_id, query_texts[query_id], grades)
        if query.relevant_docs:
            queries.append(query)
        else:
            skipped += 1
    return BeirDataset(root, documents, queries, skipped, tuple(notices))


def _corpus_only(root: Path, documents: list[Document], split: str) -> BeirDataset:
    """A folder with a corpus and no queries file (module docstring): its documents, no
    queries; qrels without the queries they name are refused."""
    qrels = sorted(p.name for p in (root / "qrels").glob("*.tsv"))
    if qrels:
        raise DatasetError(f"{root / 'queries.jsonl'}: file not found, but qrels/ has "
                           f"{', '.join(qrels)}, whose query ids it would define; add the "
                           "queries file, or remove qrels/ to ingest the corpus alone.")
    notice = (f"{root}: no queries.jsonl, so the corpus is ingested without ground truth; "
              "write some with `eval-harness ground-truth generate` (from the documents) or "
              "`eval-harness ground-truth from-answers` (from your users' questions)")
    log.warning(notice)
    return BeirDataset(root, documents, [], 0, (notice,), labelled=False)


def _unlabelled(root: Path, documents: list[Document], query_texts: dict[str, str],
                split: str) -> BeirDataset:
    """Every query of ``queries.jsonl`` without labels (module docstring), or the split
    mistake refused."""
    others = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
    if others:
        raise DatasetError(f"{root / 'qrels' / f'{split}.tsv'}: file not found (the qrels "
                           f"folder has the splits {', '.join(others)}); choose one of them "
                           "with --split.")
    notice = (f"{root}: no qrels file, so its {len(query_texts)} queries have no labels; "
              "run `eval-harness judge` to label them")
    log.warning(notice)
    return BeirDataset(root, documents, [Query(q, text) for q, text in query_texts.items()],
                       0, (notice,), labelled=False)

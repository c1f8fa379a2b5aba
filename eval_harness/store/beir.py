"""Read a dataset folder in the BEIR layout, strictly and with line numbers.

A BEIR folder holds ``corpus.jsonl`` (``{"_id", "title", "text", "metadata"}`` per line),
``queries.jsonl`` (``{"_id", "text", "metadata"}``) and ``qrels/<split>.tsv`` (a header line,
then ``query-id<TAB>corpus-id<TAB>score``). Optionally ``embeddings.npz`` holds precomputed
embeddings (see :mod:`eval_harness.store.embeddings`).

Everything is parsed and validated before the store is touched, so a malformed line stops the
ingest with ``file:line: what is wrong`` and nothing is written.

A document with neither title nor text (``"text": ""``, missing or null) is kept: real
collections have a few (Cranfield has two, one of them in the qrels) and the ground truth may
point at them. It is an *empty document* (:attr:`Document.is_empty`): stored and findable by
id, but it gets no embedding and matches no keyword, so search never returns it. A title
without text is not empty.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


class DatasetError(ValueError):
    """A dataset file is missing or malformed; the message names the file and line."""


@dataclass(frozen=True)
class Document:
    external_id: str
    title: str
    text: str
    metadata: dict

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


def _read_jsonl(path: Path, required: tuple[str, ...]):
    if not path.is_file():
        raise DatasetError(f"{path}: file not found (a BEIR folder needs corpus.jsonl, "
                           "queries.jsonl and qrels/<split>.tsv)")
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
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
        if "\x00" in text or "\x00" in title:
            raise DatasetError(f"{path}:{line_no}: text contains a NUL character")
        documents.append(Document(doc_id, title, text, metadata))
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
        if "\x00" in text:
            raise DatasetError(f"{path}:{line_no}: text contains a NUL character")
        if query_id in queries:
            raise DatasetError(f"{path}:{line_no}: duplicate query id '{query_id}'")
        queries[query_id] = text
    return queries


def read_qrels(path: Path, query_ids: set[str], doc_ids: set[str]) -> dict[str, dict[str, int]]:
    """Relevance grades per query; every id must exist in queries and corpus."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if line_no == 1 and fields[:2] == ["query-id", "corpus-id"]:
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
            qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def read_beir(path: Path | str, *, split: str = "test") -> BeirDataset:
    """Read and validate a BEIR folder; raises :class:`DatasetError` naming file:line."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder (expected a BEIR dataset folder)")
    documents = read_corpus(root / "corpus.jsonl")
    query_texts = read_queries(root / "queries.jsonl")
    qrels = read_qrels(root / "qrels" / f"{split}.tsv", set(query_texts),
                       {d.external_id for d in documents})
    queries = []
    skipped = 0
    for query_id, grades in qrels.items():
        query = Query(query_id, query_texts[query_id], grades)
        if query.relevant_docs:
            queries.append(query)
        else:
            skipped += 1
    return BeirDataset(root, documents, queries, skipped)

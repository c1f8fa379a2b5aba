"""Stores made by the RAG libraries themselves: LangChain's PGVector (langchain-postgres) and
LlamaIndex's PGVectorStore (llama-index-vector-stores-postgres), each through the library's
own API, never by hand-written tables.

The documents are a small slice of the bundled SciFact (``datasets/scifact``): the first
:data:`QUERIES` test queries that have relevance labels, every document they expect, and
other abstracts up to :data:`DOCUMENTS`, each with its bundled all-MiniLM-L6-v2 vector (384
dimensions), so the harness's ``local:all-MiniLM-L6-v2`` embedder and its query-embedding
cache line up with the store and nothing is embedded (no model, no network). The ids are the
libraries' kind: LangChain's ``langchain_pg_embedding.id`` holds UUID strings (uuid5 of the
SciFact id), LlamaIndex's ``node_id`` text ids (``scifact-<id>``). Beside each store, a
ground-truth table as a team keeps one (``public.eval_queries``: integer id, query,
``expected_docs`` varchar[] of the store's own ids) and, for the gates, answers citing the
store's ids (:func:`answers_lines`).

LangChain's store gets a second collection (8-dimensional vectors from
``DeterministicFakeEmbedding``) so the preset's collection filter is needed: every statement
that read the whole table would mix its rows and dimensions in.

Nothing here reaches the network: the vectors are precomputed or fake, and LlamaIndex is
used below its tokenizer and NLTK paths (nodes carry their embeddings; ``TIKTOKEN_CACHE_DIR``
and ``NLTK_DATA`` point into the test's folder, which :func:`offline_downloads` checks stays
empty).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

REPO = Path(__file__).resolve().parents[2]
SCIFACT = REPO / "datasets" / "scifact"
QUERIES = 20
DOCUMENTS = 150
DIM = 384
MODEL = "all-MiniLM-L6-v2"
LANGCHAIN_COLLECTION = "scifact"
OTHER_COLLECTION = "notes"        # the second LangChain collection, 8 dimensions
LLAMAINDEX_TABLE = "scifact"      # PGVectorStore(table_name=...) -> public.data_scifact
GROUND_TRUTH = "eval_queries"


@dataclass(frozen=True)
class SciFactSlice:
    doc_ids: list[str]                 # SciFact ids
    texts: list[str]
    doc_vectors: np.ndarray
    query_ids: list[str]
    query_texts: list[str]
    query_vectors: np.ndarray
    qrels: dict[str, dict[str, int]]   # SciFact query id -> SciFact doc id -> grade


@dataclass(frozen=True)
class LibraryStore:
    """A store one library made, and what a test needs to evaluate it."""

    library: str                       # langchain | llamaindex
    url: str
    corpus_line: str                   # the config line that maps it (README's)
    relations: tuple[str, ...]         # every RAG relation (for the checksum)
    own_id: dict[str, str]             # SciFact doc id -> the store's own id
    data: SciFactSlice
    location: Any = None               # the StoreLocation (the fixtures set it)

    def connection(self):
        """A harness connection to the store's database (its search path)."""
        return self.location.connection()

    def qrels(self) -> dict[str, dict[str, int]]:
        """The relevance labels in the store's own ids, keyed by the ground truth's ids."""
        return {str(n): {self.own_id[d]: g for d, g in self.data.qrels[q].items()}
                for n, q in enumerate(self.data.query_ids, start=1)}


def scifact_slice(queries: int = QUERIES, documents: int = DOCUMENTS) -> SciFactSlice:
    """The first ``queries`` labelled test queries, their documents, and others up to
    ``documents`` (in corpus order), with their bundled vectors."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, grade = line.split("\t")
        qrels.setdefault(q, {})[d] = int(grade)
    chosen = list(qrels)[:queries]
    wanted = {d for q in chosen for d in qrels[q]}
    corpus = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8")]
    docs = [r for r in corpus if r["_id"] in wanted]
    docs += [r for r in corpus if r["_id"] not in wanted][:documents - len(docs)]
    texts = {r["_id"]: (r.get("title", "") + " " + r["text"]).strip() for r in docs}
    query_texts = {}
    for line in (SCIFACT / "queries.jsonl").open(encoding="utf-8"):
        r = json.loads(line)
        if r["_id"] in chosen:
            query_texts[r["_id"]] = r["text"]
    with np.load(SCIFACT / "embeddings.npz") as npz:
        doc_row = {d: i for i, d in enumerate(npz["doc_ids"].tolist())}
        query_row = {q: i for i, q in enumerate(npz["query_ids"].tolist())}
        doc_vectors = npz["docs"][[doc_row[r["_id"]] for r in docs]]
        query_vectors = npz["queries"][[query_row[q] for q in chosen]]
    return SciFactSlice([r["_id"] for r in docs], [texts[r["_id"]] for r in docs],
                        doc_vectors, chosen, [query_texts[q] for q in chosen], query_vectors,
                        {q: qrels[q] for q in chosen})


def sqlalchemy_url(url: str, driver: str) -> str:
    """The libpq ``url`` as SQLAlchemy's ``postgresql+<driver>://`` URL (a socket folder as
    host goes into the query string, as both drivers read it)."""
    from sqlalchemy.engine import URL

    info = psycopg.conninfo.conninfo_to_dict(url)
    host = str(info.get("host", "localhost"))
    on_socket = host.startswith("/")
    return URL.create(f"postgresql+{driver}", username=info.get("user"),
                      password=info.get("password"), host=None if on_socket else host,
                      port=int(info["port"]) if info.get("port") else None,
                      database=info.get("dbname"),
                      query={"host": host} if on_socket else {}).render_as_string(
        hide_password=False)


def offline_downloads(folder: Path) -> None:
    """Point the libraries' download caches into ``folder`` (tiktoken, NLTK): a test then
    checks it stays empty, i.e. nothing was fetched."""
    for variable, name in (("TIKTOKEN_CACHE_DIR", "tiktoken"), ("NLTK_DATA", "nltk_data")):
        (folder / name).mkdir(parents=True, exist_ok=True)
        os.environ[variable] = str(folder / name)


def _ground_truth(url: str, store_ids: dict[str, str], data: SciFactSlice) -> None:
    """``public.eval_queries`` (id, query, expected_docs varchar[]) in the store's own ids."""
    with psycopg.connect(url) as conn:
        conn.execute(f"CREATE TABLE public.{GROUND_TRUTH} (id integer PRIMARY KEY, "
                     "query text NOT NULL, expected_docs varchar[] NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO public.{GROUND_TRUTH} VALUES (%s, %s, %s)", [
                (n, text, [store_ids[d] for d in data.qrels[q]])
                for n, (q, text) in enumerate(zip(data.query_ids, data.query_texts), start=1)])


def langchain_id(scifact_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"scifact:{scifact_id}"))


def build_langchain_store(url: str, data: SciFactSlice | None = None) -> LibraryStore:
    """A langchain-postgres PGVector store in ``url``'s database: collection
    :data:`LANGCHAIN_COLLECTION` with the SciFact slice (``add_embeddings``, its vectors),
    and collection :data:`OTHER_COLLECTION` of other texts by ``DeterministicFakeEmbedding``."""
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_postgres import PGVector

    data = data or scifact_slice()
    connection = sqlalchemy_url(url, "psycopg")
    store = PGVector(embeddings=DeterministicFakeEmbedding(size=DIM),
                     collection_name=LANGCHAIN_COLLECTION, connection=connection,
                     use_jsonb=True)
    ids = [langchain_id(d) for d in data.doc_ids]
    store.add_embeddings(texts=data.texts, embeddings=data.doc_vectors.tolist(),
                         metadatas=[{"source": "scifact", "doc": d} for d in data.doc_ids],
                         ids=ids)
    # another collection in the same table, another model's dimensions
    other = PGVector(embeddings=DeterministicFakeEmbedding(size=8),
                     collection_name=OTHER_COLLECTION, connection=connection, use_jsonb=True)
    other.add_texts([f"meeting note {i}: aspirin and sleep" for i in range(12)],
                    metadatas=[{"source": "notes"} for _ in range(12)])
    store._engine.dispose()
    other._engine.dispose()
    own = dict(zip(data.doc_ids, ids))
    _ground_truth(url, own, data)
    return LibraryStore("langchain", url,
                        f"{{preset: langchain, collection: {LANGCHAIN_COLLECTION}}}",
                        ("public.langchain_pg_collection", "public.langchain_pg_embedding",
                         f"public.{GROUND_TRUTH}"), own, data)


def build_llamaindex_store(url: str, data: SciFactSlice | None = None, *,
                           hybrid_search: bool = True, table: str = LLAMAINDEX_TABLE,
                           text_search_config: str = "english") -> LibraryStore:
    """A llama-index PGVectorStore in ``url``'s database (``public.data_<table>``), the
    SciFact slice added as nodes carrying their own vectors; ``hybrid_search`` makes the
    library's generated ``text_search_tsv`` column and its GIN index."""
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.postgres import PGVectorStore

    data = data or scifact_slice()
    store = PGVectorStore(
        connection_string=sqlalchemy_url(url, "psycopg2"),
        async_connection_string=sqlalchemy_url(url, "asyncpg"), table_name=table,
        schema_name="public", embed_dim=DIM, hybrid_search=hybrid_search,
        text_search_config=text_search_config, perform_setup=True)
    ids = [f"scifact-{d}" for d in data.doc_ids]
    store.add([TextNode(id_=node_id, text=text, embedding=vector.tolist(),
                        metadata={"source": "scifact"})
               for node_id, text, vector in zip(ids, data.texts, data.doc_vectors)])
    asyncio.run(store.close())  # its engines (close is a coroutine in 0.9)
    own = dict(zip(data.doc_ids, ids))
    _ground_truth(url, own, data)
    return LibraryStore("llamaindex", url, f"{{preset: llamaindex, table: public.data_{table}}}",
                        (f"public.data_{table}", f"public.{GROUND_TRUTH}"), own, data)


def cache_query_vectors(conn: psycopg.Connection, data: SciFactSlice) -> None:
    """The slice's query vectors in the harness's query-embedding cache under the configured
    model, as after a first attach with the local embedder (its extra is not installed in the
    test venv)."""
    from eval_harness.datasets.query_embeddings import cache_query_embeddings

    cache_query_embeddings(conn, MODEL, dict(zip(data.query_texts, data.query_vectors)))
    conn.commit()


def rag_checksum(conn: psycopg.Connection, relations: tuple[str, ...]) -> str:
    """md5 of every row of each RAG relation, in a fixed order: the store did not change by
    a byte when two checksums agree."""
    parts = []
    for relation in relations:
        parts.append(conn.execute(
            f"SELECT count(*)::text || ':' || md5(coalesce(string_agg(t::text, '|' "
            f"ORDER BY t::text), '')) FROM {relation} t").fetchone()[0])
    return " ".join(parts)


def answers_lines(store: LibraryStore) -> list[str]:
    """Answers the RAG served, citing the store's own ids (answers contract JSONL): one per
    query, citing its first expected document, and one that cites a document it contradicts."""
    data = store.data
    text = dict(zip(data.doc_ids, data.texts))
    lines = []
    for n, (q, query) in enumerate(zip(data.query_ids[:6], data.query_texts), start=1):
        doc = next(iter(data.qrels[q]))
        lines.append(json.dumps({
            "id": f"{store.library}-a{n}", "query": query,
            "answer": f"{text[doc][:160]} [1]",
            "sources": [{"id": store.own_id[doc], "text": text[doc]}]}))
    return lines


# ------------------------------------------------------------------------------ fixtures
# (a plugin of the root conftest: one store per test module, in a database of its own)

@pytest.fixture(scope="session")
def library_downloads(tmp_path_factory) -> Path:
    """Where tiktoken and NLTK would download to during the session: must stay empty."""
    folder = tmp_path_factory.mktemp("library-downloads")
    offline_downloads(folder)
    return folder


@pytest.fixture(scope="session")
def scifact_data() -> SciFactSlice:
    return scifact_slice()


def _store_fixture(build, prefix: str):
    @pytest.fixture(scope="module")
    def fixture(server_url, library_downloads, scifact_data):
        from eval_harness.store import migrate
        from scratch_databases import scratch_database

        with scratch_database(server_url, prefix) as location:
            made = build(location.url, scifact_data)
            with location.connection() as conn:
                migrate(conn)
                cache_query_vectors(conn, scifact_data)
            yield replace(made, location=location)
        assert not any(library_downloads.rglob("*.*")), "a library downloaded something"
    return fixture


langchain_store = _store_fixture(build_langchain_store, "eh_langchain")
llamaindex_store = _store_fixture(build_llamaindex_store, "eh_llamaindex")

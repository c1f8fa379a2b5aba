-- The candidate cache (issue #25): what the bulk candidate fetch returned for one ground-truth
-- query of a dataset at one candidate depth, with both raw scores, so a rerun on an unchanged
-- corpus reads it instead of searching again. An entry is used only while its search_key (the
-- candidate statement itself: language, corpus mapping, depth; ef_search; server and pgvector
-- versions) and its corpus_version (a fingerprint of the corpus's rows and indexes) are those of
-- the search now; query_key is a hash of the query's text and embedding, so a changed query
-- misses its own entry only. Owner: eval_harness/retrieval/candidate_cache.py.
CREATE TABLE candidate_cache (
    dataset         text NOT NULL,
    depth           integer NOT NULL,
    query_key       text NOT NULL,
    search_key      text NOT NULL,
    corpus_version  text NOT NULL,
    doc_ids         bigint[] NOT NULL,   -- ordered by id
    semantic        float8[] NOT NULL,   -- cosine similarity, per doc_ids
    keyword         float8[] NOT NULL,   -- ts_rank (0: no term matched), per doc_ids
    fetched_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (dataset, depth, query_key)
);

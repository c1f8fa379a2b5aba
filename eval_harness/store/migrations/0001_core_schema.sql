-- Core schema: datasets, corpus, ground truth, evaluation and API logs, episode memory,
-- answers. Column names follow the reference seeds (../shared/seeds).

CREATE EXTENSION IF NOT EXISTS vector;

-- One row per ingested dataset; several datasets live side by side.
CREATE TABLE datasets (
    name            text PRIMARY KEY,
    language        regconfig NOT NULL DEFAULT 'english',
    embedding_model text,
    embedding_dim   integer CHECK (embedding_dim > 0),
    source_path     text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- The corpus. `id` is the integer id that ground_truth.expected_docs refers to; the
-- dataset's own document id is `external_id`. The embedding column is untyped so datasets
-- of different dimensions can coexist; each dataset gets a partial HNSW index on
-- (embedding::vector(dim)) when it is ingested.
CREATE TABLE l2_insights (
    id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset     text NOT NULL REFERENCES datasets (name) ON DELETE CASCADE,
    external_id text NOT NULL,
    content     text NOT NULL,
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb,
    embedding   vector NOT NULL,
    language    regconfig NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector(language, content)) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (dataset, external_id)
);
-- Keyword ranking reads tsv for thousands of rows per query: keep it inline (MAIN) and move
-- the wide columns out of line, so most rows need no TOAST fetch to be ranked.
ALTER TABLE l2_insights
    ALTER COLUMN content SET STORAGE EXTERNAL,
    ALTER COLUMN embedding SET STORAGE EXTERNAL,
    ALTER COLUMN tsv SET STORAGE MAIN;
CREATE INDEX l2_insights_tsv_idx ON l2_insights USING gin (tsv);

-- Ground truth: one row per query. expected_docs are l2_insights ids judged relevant
-- (grade >= 1), relevance_grades the grades aligned with them (for graded nDCG).
-- judged_docs / judge1_score / judge2_score are aligned arrays written by the dual judges.
CREATE TABLE ground_truth (
    id               integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset          text NOT NULL REFERENCES datasets (name) ON DELETE CASCADE,
    external_id      text NOT NULL,
    query            text NOT NULL,
    query_embedding  vector,
    expected_docs    integer[] NOT NULL,
    relevance_grades integer[] NOT NULL,
    judged_docs      integer[],
    judge1_score     float8[],
    judge2_score     float8[],
    judge1_model     text,
    judge2_model     text,
    kappa            float8,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (dataset, external_id),
    CHECK (cardinality(expected_docs) = cardinality(relevance_grades))
);

-- Answer evaluations (seed story 2.5): reward -1..+1 with reasoning, tokens and cost.
CREATE TABLE evaluation_log (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at     timestamptz NOT NULL DEFAULT now(),
    run_id         text,
    answer_id      text,
    query          text NOT NULL,
    answer         text NOT NULL,
    reward         float8 CHECK (reward BETWEEN -1.0 AND 1.0),
    reasoning      text,
    criteria       jsonb,
    model          text,
    prompt_version text,
    input_tokens   integer,
    output_tokens  integer,
    cost           float8
);

-- One row per billed provider call (seed story 1.11 / 2.4).
CREATE TABLE api_cost_log (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at     timestamptz NOT NULL DEFAULT now(),
    run_id         text,
    api_name       text NOT NULL,
    model          text NOT NULL,
    operation      text NOT NULL,
    input_tokens   integer NOT NULL DEFAULT 0,
    output_tokens  integer NOT NULL DEFAULT 0,
    cached_tokens  integer NOT NULL DEFAULT 0,
    token_count    integer GENERATED ALWAYS AS (input_tokens + output_tokens) STORED,
    estimated_cost float8 NOT NULL DEFAULT 0,
    batch          boolean NOT NULL DEFAULT false,
    query_id       integer REFERENCES ground_truth (id) ON DELETE SET NULL
);
CREATE INDEX api_cost_log_run_idx ON api_cost_log (run_id);

-- One row per retry of a provider call.
CREATE TABLE api_retry_log (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at   timestamptz NOT NULL DEFAULT now(),
    run_id       text,
    api_name     text NOT NULL,
    model        text,
    operation    text,
    error_type   text NOT NULL,
    status_code  integer,
    retry_count  integer NOT NULL,
    wait_seconds float8,
    success      boolean NOT NULL DEFAULT false
);

-- Episode memory: verbal reflexions (problem + lesson) keyed by the query embedding.
CREATE TABLE episode_memory (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    answer_id       text,
    query           text NOT NULL,
    query_embedding vector,
    reward          float8,
    problem         text NOT NULL,
    lesson          text NOT NULL,
    model           text,
    prompt_version  text,
    UNIQUE (answer_id)
);

-- The answers the quality gates read. This is the contract: a user with their own schema
-- can replace this table by a view with the same columns (see README).
--   id text, query text, answer text (Markdown), sources jsonb (ordered list of
--   {"id": ..., "text": ...}; citation [1] is the first), created_at timestamptz.
CREATE TABLE answers (
    id         text PRIMARY KEY,
    query      text NOT NULL,
    answer     text NOT NULL,
    sources    jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(sources) = 'array'),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX answers_created_at_idx ON answers (created_at);

-- Keyword query for hybrid search: the OR of the query's lexemes under the dataset's
-- text-search configuration (plainto_tsquery would AND them, which matches almost nothing
-- for sentence-long queries). Built by casting quoted lexemes, so nothing is re-stemmed.
CREATE FUNCTION eh_or_tsquery(cfg regconfig, query text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT nullif(string_agg(
               '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | '), '')::tsquery
    FROM unnest(tsvector_to_array(to_tsvector(cfg, query))) AS lexeme
$$;

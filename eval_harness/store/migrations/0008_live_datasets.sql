-- Live datasets (issue #13): a dataset may be read in place from the RAG system's own
-- relations instead of being ingested as a copy.
--
-- `kind` says which; a live dataset's `corpus_mapping` / `ground_truth_mapping` record the
-- relations and columns it reads (as config.yaml maps them, checked against the store when
-- the dataset was last attached), so every command finds its corpus from this row alone.
-- A live dataset has no rows in l2_insights. Its ground truth is mirrored into
-- ground_truth at each attach (id -> external_id, expected_docs as they are), beside what the
-- harness keeps per query (query embedding, judge scores).
ALTER TABLE datasets
    ADD COLUMN kind text NOT NULL DEFAULT 'ingested' CHECK (kind IN ('ingested', 'live')),
    ADD COLUMN corpus_mapping jsonb,
    ADD COLUMN ground_truth_mapping jsonb,
    ADD CONSTRAINT datasets_live_has_mapping
        CHECK ((kind = 'live') = (corpus_mapping IS NOT NULL));

-- A reviewed document may live outside l2_insights (a live corpus): the review queue keeps
-- its id without a foreign key. Ingest deletes the review rows of documents it removes.
ALTER TABLE judge_review DROP CONSTRAINT IF EXISTS judge_review_doc_id_fkey;

-- Query embeddings computed by an embedder, keyed by model and text, so a rerun (or another
-- dataset with the same query) embeds nothing twice.
CREATE TABLE query_embeddings (
    model       text NOT NULL,
    text_sha256 text NOT NULL CHECK (text_sha256 ~ '^[0-9a-f]{64}$'),
    text        text NOT NULL,
    embedding   vector NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, text_sha256)
);

-- The weights each calibration chose, per dataset, for the RAG system to read: the newest
-- row of a dataset is its current weights.
CREATE TABLE calibrated_weights (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dataset         text NOT NULL,
    semantic_weight float8 NOT NULL CHECK (semantic_weight BETWEEN 0 AND 1),
    keyword_weight  float8 NOT NULL CHECK (keyword_weight BETWEEN 0 AND 1),
    p_at_5          float8,
    verdict         text,
    label_source    text NOT NULL DEFAULT 'human',
    run_id          text,
    calibrated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX calibrated_weights_dataset_idx ON calibrated_weights (dataset, calibrated_at DESC);

-- Human review of judge disagreements (issue #4).
--
-- One row per (ground-truth query, document) pair whose two judge scores differ by more
-- than the configured threshold. The scores and models are copied at the time of queuing:
-- they are what the reviewer saw. `score_revision` goes up each time the judges' scores or
-- models for the pair change; an exported file carries it, and an import whose revision
-- (or scores) no longer match is refused as stale. A verdict made on old scores is cleared
-- when the pair is re-queued with new ones. Deleting the query or the document deletes its
-- review rows.
CREATE TABLE judge_review (
    ground_truth_id integer NOT NULL REFERENCES ground_truth (id) ON DELETE CASCADE,
    doc_id          integer NOT NULL REFERENCES l2_insights (id) ON DELETE CASCADE,
    judge1_score    float8 NOT NULL CHECK (judge1_score BETWEEN 0.0 AND 1.0),
    judge2_score    float8 NOT NULL CHECK (judge2_score BETWEEN 0.0 AND 1.0),
    score_diff      float8 NOT NULL CHECK (score_diff BETWEEN 0.0 AND 1.0),
    judge1_model    text,
    judge2_model    text,
    score_revision  integer NOT NULL DEFAULT 1 CHECK (score_revision >= 1),
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'adjudicated')),
    verdict         text CHECK (verdict IN ('relevant', 'not relevant')),
    reviewer        text,
    note            text,
    queued_at       timestamptz NOT NULL DEFAULT now(),
    adjudicated_at  timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ground_truth_id, doc_id),
    -- A verdict exists exactly when the row is adjudicated.
    CHECK ((status = 'adjudicated') = (verdict IS NOT NULL)),
    CHECK ((status = 'adjudicated') = (adjudicated_at IS NOT NULL))
);
CREATE INDEX judge_review_doc_idx ON judge_review (doc_id);
CREATE INDEX judge_review_pending_idx ON judge_review (ground_truth_id) WHERE status = 'pending';

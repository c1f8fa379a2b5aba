-- The judges' record (issue #23): one row per judge per judge run of a dataset, the judge's
-- spec (provider:model, server, prompt version) and its measured reliability that run.
-- A figure is NULL when the run did not measure it (no retest, no anchors, no human verdict
-- on an anchor). A rerun with the same run id replaces its rows (UNIQUE (run_id, judge)).
CREATE TABLE judge_record (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    run_id              text NOT NULL,
    dataset             text NOT NULL,
    judge               smallint NOT NULL CHECK (judge IN (1, 2)),
    judge_spec          text NOT NULL,
    model               text NOT NULL,
    server              text,            -- base URL; NULL: the provider's default server
    prompt_version      text,
    retest_flip_rate    float8,          -- test-retest: share of retest labels that flipped
    retest_alpha        float8,          -- Krippendorff's alpha on the retest scores
    kappa_other         float8,          -- pooled Cohen's kappa with the other judge
    kappa_other_low     float8,
    kappa_other_high    float8,
    human_pairs         integer NOT NULL DEFAULT 0,
    human_agreement     float8,          -- share of anchors with a human verdict it matches
    anchor_flip_rate    float8,          -- flips against the frozen anchor labels
    anchor_flip_low     float8,          -- its Wilson lower bound
    UNIQUE (run_id, judge)
);
CREATE INDEX judge_record_dataset_idx ON judge_record (dataset, recorded_at);

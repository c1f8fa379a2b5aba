-- Human labels for corrected estimates (issue #14): a seeded uniform sample of a dataset's
-- judged queries, every scored (query, document) pair of each sampled query, and the verdict
-- a person gave it. Separate from judge_review (the disagreement queue): the sample must be
-- random, not the pairs the judges disagree on, for prediction-powered inference to be valid.
--
-- `seed` is the seed the pair was drawn with (one seed per dataset: sampling again with the
-- same seed and a larger n extends the sample). A verdict is the person's relevance label,
-- independent of the judges' scores, so re-judging a pair keeps it. No foreign key on doc_id:
-- the document may live in a live corpus (as judge_review since 0008).
CREATE TABLE human_sample (
    dataset         text NOT NULL,
    ground_truth_id integer NOT NULL REFERENCES ground_truth (id) ON DELETE CASCADE,
    doc_id          integer NOT NULL,
    seed            bigint NOT NULL,
    sampled_at      timestamptz NOT NULL DEFAULT now(),
    verdict         text CHECK (verdict IN ('relevant', 'not relevant')),
    reviewer        text,
    labelled_at     timestamptz,
    PRIMARY KEY (ground_truth_id, doc_id),
    CHECK ((verdict IS NULL) = (labelled_at IS NULL))
);
CREATE INDEX human_sample_dataset_idx ON human_sample (dataset);

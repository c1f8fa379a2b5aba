-- The judges' record with people (issue #23): each judge's Cohen's kappa against the human
-- verdicts the harness holds (the human sample's verdicts and the review queue's adjudicated
-- pairs), with a bootstrap-over-queries interval and its n, written by the agreement step
-- onto the newest row of each judge (eval_harness.agreement.people). NULL: not measured.
-- anchor_flip_high completes the anchor flip rate's Wilson interval for the report's trend.
ALTER TABLE judge_record
    ADD COLUMN people_kappa      float8,
    ADD COLUMN people_kappa_low  float8,
    ADD COLUMN people_kappa_high float8,
    ADD COLUMN people_pairs      integer NOT NULL DEFAULT 0,   -- pairs with a verdict it scored
    ADD COLUMN people_queries    integer NOT NULL DEFAULT 0,   -- their queries (bootstrap units)
    ADD COLUMN anchor_flip_high  float8;

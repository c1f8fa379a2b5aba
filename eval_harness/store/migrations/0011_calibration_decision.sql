-- Every calibration's decision on a dataset's weights (issue #22): whether the best grid point
-- replaced the weights in force ('changed') or they were kept ('kept'), with the evidence: the
-- weights in force before, the best point's P@5 gain over them, its interval and the
-- grid-adjusted p-value of the max-statistic permutation test at level alpha. The row's
-- semantic_weight / keyword_weight stay the weights in force after the decision, so the
-- newest row of a dataset is still its current weights. Rows from before hold NULL here.
ALTER TABLE calibrated_weights
    ADD COLUMN decision           text CHECK (decision IN ('changed', 'kept')),
    ADD COLUMN in_force_semantic  float8 CHECK (in_force_semantic BETWEEN 0 AND 1),
    ADD COLUMN in_force_keyword   float8 CHECK (in_force_keyword BETWEEN 0 AND 1),
    ADD COLUMN best_semantic      float8 CHECK (best_semantic BETWEEN 0 AND 1),
    ADD COLUMN best_keyword       float8 CHECK (best_keyword BETWEEN 0 AND 1),
    ADD COLUMN gain               float8,
    ADD COLUMN ci_low             float8,
    ADD COLUMN ci_high            float8,
    ADD COLUMN adjusted_p         float8 CHECK (adjusted_p > 0 AND adjusted_p <= 1),
    ADD COLUMN alpha              float8 CHECK (alpha > 0 AND alpha < 1);

"""Coverage of the PPI-corrected P@5 on real data.

SciFact (bundled) with its qrels hidden from the harness: the folder is ingested without its
qrels file, so the harness knows queries and documents only. Both judges are
``local:lexical``, a biased judge: it rates a document by the words it shares with the query,
so it over-rates abstracts that repeat a claim's words without supporting it. The judges label
each query's top 5 at the default weights; "people" label a uniform sample of 200 queries,
their verdicts filled from the hidden qrels. Over 200 seeded repetitions of that sampling:

* the uncorrected judge P@5 misses the qrels P@5 (it is far outside the spread of the data);
* the PPI 95% interval covers the qrels P@5 in at least 93% of the repetitions.

The target is the P@5 of these 300 queries (a finite population the sample is drawn from
without replacement), for which the with-replacement CLT interval is conservative.
"""

from __future__ import annotations

import numpy as np
import pytest

from eval_harness.metrics.ppi import prediction_powered_mean
from scifact_hidden_qrels import hidden_qrels_p_at_5

REPETITIONS, SAMPLE = 200, 200


@pytest.fixture(scope="module")
def per_query(store, tmp_path_factory):
    return hidden_qrels_p_at_5(store, tmp_path_factory.mktemp("scifact-hidden"))


@pytest.mark.slow
def test_the_ppi_interval_covers_the_qrels_p5_the_judges_miss(per_query):
    judge, human = per_query
    assert judge.size == 300
    truth = human.mean()
    spread = 2 * human.std(ddof=1) / np.sqrt(human.size)
    assert abs(judge.mean() - truth) > 2 * spread, (judge.mean(), truth)  # the bias is real
    covered, widths = 0, []
    for seed in range(REPETITIONS):
        sample = np.random.default_rng(seed).choice(judge.size, size=SAMPLE, replace=False)
        estimate = prediction_powered_mean(y_labeled=human[sample], yhat_labeled=judge[sample],
                                           yhat_unlabeled=judge)
        low, high = estimate.interval
        covered += low <= truth <= high
        widths.append(high - low)
    assert covered / REPETITIONS >= 0.93, covered
    # the uncorrected judge P@5 lies outside every corrected interval's reach
    assert abs(judge.mean() - truth) > np.median(widths) / 2

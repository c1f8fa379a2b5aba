"""Coverage of one PPI over paired per-query differences: the gain between two weights.

Simulated at the document level. Every query has seven documents: weight a
ranks slots 0..4 in its top 5, weight b slots 0, 1, 2, 5, 6 (they share three). The hidden
qrels (the truth) make b's own documents as likely relevant as a's. The judges are biased:
besides a 10% labelling error on every document, they call a non-relevant document of a's
own top (slots 3, 4) relevant with probability 0.6, so the judges' difference
P@5(a) - P@5(b) is far above the qrels difference: a biased judge that would move the
weights to a on its bias alone.

Over 200 seeded repetitions (a fresh set of 1,000 queries each, "people" label a uniform
sample of 150 of them from the hidden qrels), the 95% PPI interval on the mean difference,
Y = the qrels difference on the sampled queries, Yhat = the judges' difference on all, covers
the queries' qrels difference in >= 93% of repetitions; the judges-only interval (their mean
difference +- 1.96 standard errors over the 1,000 queries) almost never does.
"""

from __future__ import annotations

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate
from scipy.stats import norm

from eval_harness.metrics.ppi import prediction_powered_mean

pytestmark = pytest.mark.unit

REPETITIONS, N_QUERIES, SAMPLE = 200, 1000, 150
TOP_A, TOP_B = [0, 1, 2, 3, 4], [0, 1, 2, 5, 6]


def _differences(rng: np.random.Generator, size: tuple[int, ...]):
    """(qrels difference, judges' difference) per query, P@5(a) - P@5(b), shape ``size``."""
    propensity = rng.beta(2.0, 3.0, size=size)[..., None]
    relevant = rng.random(size + (7,)) < propensity
    judged = relevant ^ (rng.random(size + (7,)) < 0.10)
    over_rated = (~relevant) & (rng.random(size + (7,)) < 0.6)
    judged[..., 3:5] |= over_rated[..., 3:5]  # the bias: a's own top documents

    def diff(labels):
        return (labels[..., TOP_A].sum(-1) - labels[..., TOP_B].sum(-1)) / 5.0

    return diff(relevant), diff(judged)


@pytest.fixture(scope="module")
def simulation():
    rng = np.random.default_rng(2022)
    truth, judge = _differences(rng, (REPETITIONS, N_QUERIES))
    samples = np.argsort(rng.random((REPETITIONS, N_QUERIES)), axis=1)[:, :SAMPLE]
    return truth, judge, samples


def test_the_ppi_gain_interval_covers_the_qrels_gain_the_judges_miss(simulation):
    truth, judge, samples = simulation
    target = truth.mean(axis=1)                         # the qrels gain of each query set
    bias = judge.mean(axis=1) - target
    assert bias.mean() > 0.1                            # the judges favour a on their bias
    z = norm.ppf(0.975)
    covered = naive_covered = 0
    ppi_widths, human_widths = [], []
    for r in range(REPETITIONS):
        sample = samples[r]
        estimate = prediction_powered_mean(y_labeled=truth[r, sample],
                                           yhat_labeled=judge[r, sample],
                                           yhat_unlabeled=judge[r])
        low, high = estimate.interval
        covered += low <= target[r] <= high
        ppi_widths.append(high - low)
        half = z * judge[r].std() / np.sqrt(N_QUERIES)
        naive_covered += judge[r].mean() - half <= target[r] <= judge[r].mean() + half
        human_widths.append(2 * z * truth[r, sample].std() / np.sqrt(SAMPLE))
    assert covered / REPETITIONS >= 0.93, covered
    assert naive_covered / REPETITIONS <= 0.05, naive_covered  # measured: 0 of 200
    # the judges still help: the PPI interval is narrower than the human sample's alone
    assert np.median(ppi_widths) < np.median(human_widths)


@pytest.mark.parametrize("lam", [None, 1.0])
def test_the_gain_estimate_equals_ppi_python_on_the_differences(simulation, lam):
    truth, judge, samples = simulation
    y, yhat, yhat_all = truth[0, samples[0]], judge[0, samples[0]], judge[0]
    ours = prediction_powered_mean(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                                   lam=lam)
    low, high = ppi_mean_ci(y, yhat, yhat_all, alpha=0.05, lam=lam)
    point = ppi_mean_pointestimate(y, yhat, yhat_all, lam=lam)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert ours.interval == pytest.approx((float(np.ravel(low)[0]), float(np.ravel(high)[0])),
                                          abs=1e-9)

"""The label plan behind `review sample --plan`: n from the PPI variance formula."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from eval_harness.metrics.ppi import prediction_powered_mean
from eval_harness.metrics.ppi_plan import (
    human_labels_for_standard_error,
    plan_for_power,
    plan_for_width,
)

pytestmark = pytest.mark.unit

Z = norm.ppf(0.975)


def _width(n, rectifier, imputed, big_n):
    return 2 * Z * math.sqrt(rectifier / n + imputed / big_n)


@pytest.mark.parametrize("rectifier, imputed, big_n, target", [
    (0.04, 0.0, 5000, 0.05),     # hand-worked: n = 0.04 (2 z / 0.05)**2 = 245.86 -> 246
    (0.03, 0.02, 2000, 0.03),
    (0.10, 0.05, 800, 0.08),
])
def test_the_planned_n_is_the_smallest_integer_that_reaches_the_width(rectifier, imputed,
                                                                      big_n, target):
    n = human_labels_for_standard_error(rectifier_variance=rectifier, imputed_variance=imputed,
                                        n_judged=big_n, standard_error=target / (2 * Z))
    assert _width(n, rectifier, imputed, big_n) <= target + 1e-12
    assert _width(n - 1, rectifier, imputed, big_n) > target
    if imputed == 0.0:
        assert n == 246 == math.ceil(0.04 * (2 * Z / 0.05) ** 2)


def test_a_width_the_judged_term_already_fills_or_more_than_all_queries_is_not_planned():
    # the judged term alone: 2 z sqrt(0.5 / 100) = 0.277 > 0.2, whatever n
    assert human_labels_for_standard_error(rectifier_variance=0.01, imputed_variance=0.5,
                                           n_judged=100, standard_error=0.2 / (2 * Z)) is None
    # 2 z sqrt(0.25 / n) <= 0.05 needs n = 385 > the 300 judged queries
    assert human_labels_for_standard_error(rectifier_variance=0.25, imputed_variance=0.0,
                                           n_judged=300, standard_error=0.05 / (2 * Z)) is None
    # R = 0: the minimum PPI needs
    assert human_labels_for_standard_error(rectifier_variance=0.0, imputed_variance=0.0,
                                           n_judged=300, standard_error=0.01) == 2


def test_plan_for_width_reports_the_current_width_and_why_it_cannot_plan():
    rng = np.random.default_rng(5)
    y = rng.random(40).round(1)
    yhat = np.clip(y + rng.normal(0, 0.1, 40), 0, 1)
    yhat_all = np.concatenate([yhat, np.clip(rng.random(400), 0, 1)])
    now = prediction_powered_mean(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all)
    plan = plan_for_width(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                          target_width=0.06)
    assert plan.width == pytest.approx(now.interval[1] - now.interval[0], rel=1e-12)
    assert (plan.n_human, plan.n_judged, plan.lam) == (40, 440, now.lam)
    assert plan.needed > 40 and plan.more == plan.needed - 40 and plan.reason is None
    tiny = plan_for_width(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                          target_width=1e-4)
    assert tiny.needed is None and tiny.reason == "judged_term"
    assert tiny.width_with_all_labelled < plan.width
    # reachable only with more labels than the 440 judged queries
    assert plan_for_width(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                          target_width=0.056).reason == "too_few_judged"
    with pytest.raises(ValueError, match="target_width must be a positive number"):
        plan_for_width(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all,
                       target_width=0.0)


def test_at_the_planned_n_the_ppi_test_detects_the_gain_with_the_planned_power():
    """Simulated: per-query differences d = gain + noise, the judge sees d with error; the
    plan from a pilot sample of 100, then 400 seeded repetitions at the planned n: the PPI
    interval excludes 0 in about 80% of them."""
    rng = np.random.default_rng(22)
    gain, big_n = 0.04, 3000

    def population():
        truth = gain + rng.normal(0, 0.2, big_n)
        return truth, truth + rng.normal(0.05, 0.15, big_n)  # a biased, noisy judge

    truth, judge = population()
    pilot = rng.choice(big_n, 100, replace=False)
    plan = plan_for_power(y_labeled=truth[pilot], yhat_labeled=judge[pilot],
                          yhat_unlabeled=judge, gain=gain, lam=1.0)
    assert 2 < plan.needed < big_n
    detected = 0
    for _ in range(400):
        truth, judge = population()
        sample = rng.choice(big_n, plan.needed, replace=False)
        low, _high = prediction_powered_mean(y_labeled=truth[sample], yhat_labeled=judge[sample],
                                             yhat_unlabeled=judge, lam=1.0).interval
        detected += low > 0
    assert 0.70 <= detected / 400 <= 0.90, (plan.needed, detected)

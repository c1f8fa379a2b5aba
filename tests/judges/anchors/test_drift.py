"""The drift check on its own: one judge's comparison with its frozen self (flips, paired
shift, agreement with people on anchors) and the check's verdict on a run's comparisons."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eval_harness.judges.anchors.drift import compare_judge, drift_check, drift_reasons
from eval_harness.settings.judges import DriftSettings


def _stable_and_flipping(flips: int, anchors: int = 100):
    frozen = [(0.8, None)] * anchors
    return [compare_judge(judge, frozen, [0.2 if i < n else 0.8 for i in range(anchors)],
                          spec="openai:gpt-4o", prompt_version="v1",
                          frozen_spec="openai:gpt-4o", frozen_prompt_version="v1",
                          threshold=0.5)
            for judge, n in ((1, 0), (2, flips))]


def test_compare_judge_counts_flips_shift_and_human_agreement():
    frozen = [(0.8, True), (0.2, False), (0.9, None), (0.1, None), (None, True)]
    now = [0.7, 0.6, 0.9, None, 0.9]
    c = compare_judge(1, frozen, now, spec="openai:a", prompt_version="v1",
                      frozen_spec="openai:a", frozen_prompt_version="v1", threshold=0.5)
    # scored both times: the first three; one flip (0.2 -> 0.6); shifts -0.1, +0.4, 0
    assert (c.pairs, c.flips, c.flip_rate) == (3, 1, pytest.approx(1 / 3))
    assert c.score_shift == pytest.approx(0.1)
    # human verdicts on the first two: relevant/0.7 agrees, not relevant/0.6 does not
    assert (c.human_pairs, c.human_agreement) == (2, 0.5)
    assert not c.changed and replace(c, prompt_version="v2").changed
    reasons = drift_reasons(c, DriftSettings(max_flip_rate=0.0, min_human_agreement=0.7))
    assert len(reasons) == 2 and "min_human_agreement" in reasons[1]


def test_the_check_fails_on_the_judge_whose_flip_rate_bound_clears_the_ceiling():
    # 15 of 100 flipped: Wilson lower bound 0.0931 > the default ceiling 0.05
    check = drift_check(_stable_and_flipping(15), DriftSettings(), dataset="d")
    assert not check.passed and check.blocking
    assert len(check.reasons) == 1 and check.reasons[0].startswith("judge 2 (openai:gpt-4o) "
                                                                   "flips 15 of 100")
    assert check.figures["flip_rate"] == 0.15
    assert round(check.figures["flip_lower_bound"], 4) == 0.0931
    assert check.per_judge["judge1_flip_rate"] == 0.0 and check.per_judge["judge2_changed"] is False


def test_the_check_passes_with_each_judge_s_line_or_without_comparisons():
    stable = drift_check(_stable_and_flipping(2), DriftSettings(blocking=False), dataset="d")
    assert stable.passed and not stable.blocking and stable.reasons == ()
    assert stable.description.count("on the anchors: flips") == 2
    nothing = drift_check([], DriftSettings(), dataset="d")
    assert nothing.passed and nothing.figures["flip_rate"] is None and nothing.per_judge == {}
    assert nothing.description.startswith("no anchor comparison stored for dataset 'd'")

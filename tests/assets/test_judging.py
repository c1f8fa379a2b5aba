"""The judging domain's ``judge_drift`` check: its verdict on anchor comparisons (blocking
as configured, WARN when ``judges.drift.blocking: false``) and its place in nightly_job."""

from __future__ import annotations

from dataclasses import replace

import dagster as dg
import pytest

from eval_harness.judges.anchors.drift import compare_judge
from eval_harness.settings.judges import DriftSettings
from eval_harness_pipelines.assets.judging import drift_result, dual_judge_scores, judge_drift

pytestmark = pytest.mark.unit

THRESHOLD = 0.5


def _comparison(flips: int, *, anchors: int = 100, humans=None, judge: int = 1):
    frozen = [(0.8, None if humans is None else humans[i]) for i in range(anchors)]
    now = [0.2 if i < flips else 0.8 for i in range(anchors)]
    return compare_judge(judge, frozen, now, spec="openai:gpt-4o", prompt_version="v1",
                         frozen_spec="openai:gpt-4o", frozen_prompt_version="v1",
                         threshold=THRESHOLD)


def test_a_drifted_judge_fails_the_check_with_its_figures():
    # 15 of 100 flipped: Wilson lower bound 0.093 > 0.05
    result, reasons, figures = drift_result([_comparison(15), _comparison(0, judge=2)],
                                            DriftSettings(), dataset="d")
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    assert len(reasons) == 1 and "judges.drift.max_flip_rate 0.050" in reasons[0]
    assert figures["flip_rate"] == 0.15 and round(figures["flip_lower_bound"], 4) == 0.0931
    assert "re-freeze or roll the judge back" in result.description
    assert result.metadata["blocks_downstream"].value is True


def test_blocking_false_makes_the_failure_a_warning():
    result, _, _ = drift_result([_comparison(15)], DriftSettings(blocking=False), dataset="d")
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["blocks_downstream"].value is False


def test_a_stable_judge_and_no_anchors_pass():
    stable, _, _ = drift_result([_comparison(2)], DriftSettings(), dataset="d")
    assert stable.passed and "flips 2% [" in stable.description
    nothing, _, _ = drift_result([], DriftSettings(), dataset="d")
    assert nothing.passed and "no anchor comparison" in nothing.description


def test_human_agreement_below_its_floor_fails_only_when_verdicts_exist():
    # 10 anchors with a verdict "not relevant" that the (unflipped) judge calls relevant
    humans = [False] * 10 + [None] * 90
    result, reasons, _ = drift_result([_comparison(0, humans=humans)], DriftSettings(),
                                      dataset="d")
    assert not result.passed and "min_human_agreement" in reasons[0]
    lenient = replace(DriftSettings(), min_human_agreement=0.0)
    assert drift_result([_comparison(0, humans=humans)], lenient, dataset="d")[0].passed


def test_judge_drift_checks_the_asset_nightly_job_materializes():
    from eval_harness.settings import load_settings
    from eval_harness_pipelines.definitions import build_defs
    from paths import REPO

    assert judge_drift.check_keys == {dg.AssetCheckKey(dual_judge_scores.key, "judge_drift")}
    defs = build_defs(load_settings(REPO / "config.yaml", environ={}))
    for job in ("nightly_job", "judging_job"):
        checks = defs.resolve_job_def(job).asset_layer.asset_graph.asset_check_keys
        assert "judge_drift" in {key.name for key in checks}

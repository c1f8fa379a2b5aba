"""`eval-harness review sample --plan`: how many more queries people should label, from the
judges' agreement with the labelled human sample (eval_harness.calibration.label_plan)."""

from __future__ import annotations

import re

import pytest

from eval_harness.calibration.ppi_gain import paired_differences, query_figures, sample_frame
from eval_harness.calibration.ppi_p_at_5 import human_sample_verdicts
from eval_harness.calibration.run import calibrate_with_settings
from eval_harness.metrics.ppi_plan import plan_for_power, plan_for_width
from eval_harness.settings import load_settings
from judged_gain_corpus import N_QUERIES, gain_scenario, label_sample  # noqa: F401
from cli_runs import run_cli


def _vectors(db, scenario, store):
    settings = load_settings(scenario["config"], environ={"DATABASE_URL": store.url})
    result = calibrate_with_settings(db, settings, scenario["name"], labels="judges")
    human, frame = human_sample_verdicts(db, scenario["name"]), sample_frame(db, scenario["name"])
    figures = query_figures(result.candidates, result.sweep, 0.7, human, frame)
    complete = [q for q in figures.judge if q in figures.human]
    p_at_5 = dict(y_labeled=[figures.human[q] for q in complete],
                  yhat_labeled=[figures.judge[q] for q in complete],
                  yhat_unlabeled=list(figures.judge.values()))
    y, yhat, yhat_all, _ = paired_differences(result.candidates, result.sweep, 0.2, 0.7, human,
                                              frame)
    return p_at_5, dict(y_labeled=y, yhat_labeled=yhat, yhat_unlabeled=yhat_all)


def test_without_a_labelled_sample_the_plan_asks_for_a_first_one(gain_scenario, capsys):
    code, out, err = run_cli(capsys, "--config", gain_scenario["config"], "review", "sample",
                             "--plan", "--target-width", "0.1")
    assert code == 0, err
    assert "No query of the human sample" in out
    assert "draw and label a first sample of 30 queries" in out
    assert "--n 30" in out and out.count("\n") == 1  # one paragraph


def test_the_plan_says_the_current_width_and_how_many_more_queries(db, gain_scenario, store,
                                                                   capsys):
    label_sample(db, gain_scenario, n=20)
    p_at_5, gain = _vectors(db, gain_scenario, store)
    width = plan_for_width(**p_at_5, target_width=0.1)
    power = plan_for_power(**gain, gain=0.1, power=0.9)
    assert width.needed is not None and power.needed is not None

    code, out, err = run_cli(capsys, "--config", gain_scenario["config"], "review", "sample",
                             "--plan", "--target-width", "0.1", "--gain", "0.1", "--power",
                             "0.9")
    assert code == 0, err
    assert out.count("\n") == 1  # one paragraph
    assert (f"Now 20 of {N_QUERIES} judged queries of '{gain_scenario['name']}' are "
            "human-labelled") in out
    assert f"at the weights in force 0.70 is {width.width:.4f} wide" in out
    assert (f"A width of 0.1000 needs {width.needed} human-labelled queries: "
            f"{width.needed - 20} more.") in out
    assert "The gain of 0.20 (the judges' best other grid point) over 0.70" in out
    assert (f"Detecting a gain of +0.1000 with 90% power at alpha 0.05 needs {power.needed} "
            f"human-labelled queries: {power.more} more.") in out
    assert "20 queries are drawn so far" in out

    code, out, _ = run_cli(capsys, "--config", gain_scenario["config"], "review", "sample",
                           "--plan", "--target-width", "0.9")
    assert code == 0 and "the 20 labelled already reach it" in out


@pytest.mark.parametrize("argv, message", [
    (["--plan", "FILE.csv", "--target-width", "0.1"], "takes no FILE or --n"),
    (["FILE.csv", "--n", "5", "--target-width", "0.1"], "--target-width only plan a sample"),
    (["--plan"], "--plan needs --target-width W"),
    (["--plan", "--power"], "--power needs --gain G"),
    (["--plan", "--target-width", "0"], "--target-width must be a width of P@5"),
    (["FILE.csv"], "review sample needs FILE and --n N"),
])
def test_wrong_plan_options_end_in_one_sentence(gain_scenario, capsys, argv, message):
    code, out, err = run_cli(capsys, "--config", gain_scenario["config"], "review", "sample",
                             *argv)
    assert code == 2 and message in err and err.count("\n") == 1, err

"""``eval-harness calibrate`` (eval_harness.cli.calibrate) on qrels that leave most top-5
documents unlabelled: the Judged@5 column, and the lower-bound sentence in the text and the
JSON when Judged@5 falls below calibration.min_judged, none when it does not."""

from __future__ import annotations

import json

import pytest

from calibration_corpus import corpus, write_config  # noqa: F401 (fixture)
from eval_harness_pipelines import cli

pytestmark = pytest.mark.project(config=write_config)  # the corpus's config


def _calibrate(project, corpus, capsys, min_judged, *extra):
    text = write_config(project, corpus).read_text()
    assert "  cv_folds: 3\n" in text
    project.write_text(text.replace("  cv_folds: 3\n",
                                    f"  cv_folds: 3\n  min_judged: {min_judged}\n"))
    code = cli.main(["--config", str(project), "calibrate", "--no-write", *extra])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return out


def test_text_and_json_say_p_at_5_is_a_lower_bound_below_min_judged(project, corpus, capsys):
    data = json.loads(_calibrate(project, corpus, capsys, 1.0, "--json"))
    judged = data["judged"]
    assert judged["min_judged"] == 1.0 and judged["lower_bound"]
    assert judged["named"][0]["roles"][0] == "best"
    assert judged["named"][0]["judged_at_5"] == data["best"]["judged_at_5"] < 1.0
    assert judged["sentences"][0].startswith("P@5 at ")
    assert ("is a lower bound: only" in judged["sentences"][0]
            and f"`eval-harness judge --dataset {corpus['name']} --grid-pool`"
            in judged["sentences"][0])
    text = _calibrate(project, corpus, capsys, 1.0)
    assert "Judged@5" in text.splitlines()[3]  # the grid table's header
    assert judged["sentences"][0] in text


def test_no_sentence_when_every_weight_is_judged_enough(project, corpus, capsys):
    data = json.loads(_calibrate(project, corpus, capsys, 0.0, "--json"))
    assert data["judged"]["sentences"] == [] and not data["judged"]["lower_bound"]
    assert "lower bound" not in _calibrate(project, corpus, capsys, 0.0)

"""The ``agreement`` and ``review`` commands (eval_harness.cli.review) on the real store:
the review round trip and the exit codes."""

from __future__ import annotations

import json

import pytest

from cli_runs import run_cli
from review_store import (
    agreeing_scores,
    disagreeing_scores,
    read_csv,
    set_scores,
    write_agreement_config,
    write_csv,
)

pytestmark = pytest.mark.project(config=write_agreement_config)


def test_cli_review_round_trip_and_agreement_exit_codes(project, db, capsys, tmp_path):
    cfg = project
    set_scores(db, project.default_dataset, disagreeing_scores())
    code, out, err = run_cli(capsys, "--config", cfg, "agreement")
    assert code == 1 and "Gate: FAIL" in out  # ran, found the labels untrustworthy
    code, out, _ = run_cli(capsys, "--config", cfg, "agreement", "--json")
    parsed = json.loads(out)
    assert code == 1 and parsed["gate"]["passed"] is False and parsed["report"]["n_scored"] == 16

    file = tmp_path / "out" / "review.csv"
    code, out, err = run_cli(capsys, "--config", cfg, "review", "export", file)
    assert code == 0 and "exported 4 pair(s) (4 pending, 0 adjudicated)" in out, err
    rows = read_csv(file)
    rows[0]["verdict"] = "sort of"
    write_csv(file, rows)
    code, out, err = run_cli(capsys, "--config", cfg, "review", "import", file)
    assert code == 2 and err.count("\n") == 1 and "row 2: verdict 'sort of'" in err
    rows[0]["verdict"] = "not relevant"
    write_csv(file, rows)
    code, out, err = run_cli(capsys, "--config", cfg, "review", "import", file)
    assert code == 0 and "1 verdict(s) stored" in out, err

    set_scores(db, project.default_dataset, agreeing_scores())
    code, out, _ = run_cli(capsys, "--config", cfg, "agreement", "--dataset",
                           project.default_dataset)
    assert code == 0 and "Gate: PASS" in out
    code, _, err = run_cli(capsys, "--config", cfg, "review", "export", file, "--dataset", "nope")
    assert code == 2 and "Dataset 'nope' is not in the store" in err
    code, _, err = run_cli(capsys, "--config", cfg, "review", "import", tmp_path / "missing.csv")
    assert code == 2 and "no such file" in err

"""Concurrent writers of a dataset's weights in config.yaml
(eval_harness.calibration.config_writeback). The DuckDB history's: test_history_concurrency.py.

Real OS processes; the writer does not touch Postgres, so this test needs no database.
"""

from __future__ import annotations

import os
import time

from colliding_processes import REPO, finish, python


# ---------------------------------------------------------------------------------------
# config.yaml: rewritten through a temporary file and a rename, under a file lock

WRITE_WEIGHTS = """
    import sys, time
    from eval_harness.calibration.config_writeback import write_calibrated_weights
    start = float(sys.argv[2])
    while time.time() < start:  # all writers begin together
        time.sleep(0.001)
    for i in range(int(sys.argv[3])):
        write_calibrated_weights(sys.argv[1], "scifact", (0.5, 0.6, 0.7, 0.8)[i % 4])
"""


def test_concurrent_config_writes_all_succeed_and_keep_the_file_whole(tmp_path):
    import yaml

    config = tmp_path / "config.yaml"
    config.write_text("# calibrated by eval-harness\nhybrid_search:\n  semantic: 0.7  # weight\n"
                      "  keyword: 0.3\n  candidate_depth: 50\ndefault_dataset: scifact\n"
                      "datasets:\n  scifact:\n    path: datasets/scifact  # the folder\n")
    start = str(time.time() + 1.0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
    env["PYTHONPATH"] = str(REPO)
    writers = [python(WRITE_WEIGHTS, config, start, "20", env=env, cwd=tmp_path)
               for _ in range(4)]
    outcomes = [finish(writer) for writer in writers]
    assert [code for code, _, _ in outcomes] == [0] * 4, outcomes  # no "changed meanwhile"
    text = config.read_text()
    parsed = yaml.safe_load(text)
    weights = parsed["datasets"]["scifact"]["hybrid_search"]
    assert weights["semantic"] in (0.5, 0.6, 0.7, 0.8)
    assert weights["keyword"] == round(1 - weights["semantic"], 10)
    assert text.count("hybrid_search:") == 2  # one block inserted, never a second one
    assert parsed["hybrid_search"] == {"semantic": 0.7, "keyword": 0.3, "candidate_depth": 50}
    assert parsed["default_dataset"] == "scifact" and "# calibrated by eval-harness" in text
    assert "# weight" in text and "# the folder" in text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []

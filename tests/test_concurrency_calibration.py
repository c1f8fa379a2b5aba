"""Concurrent writers of what calibration keeps: a dataset's weights in config.yaml and the
DuckDB history.

Real OS processes; neither writer touches Postgres, so these tests need no database.
"""

from __future__ import annotations

import os
import signal
import time

from colliding_processes import REPO, finish, python

# ---------------------------------------------------------------------------------------
# config.yaml: rewritten through a temporary file and a rename, under a file lock

WRITE_WEIGHTS = """
    import sys, time
    from eval_harness.calibration.weights import write_calibrated_weights
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


# ---------------------------------------------------------------------------------------
# DuckDB calibration history: one writer at a time, each grid one transaction

APPEND_GRID = """
    import sys
    import pandas as pd
    from eval_harness.calibration.history import GRID_COLUMNS, append_grid_history
    for run in range(int(sys.argv[3])):
        frame = pd.DataFrame([{"run_at": pd.Timestamp.now(tz="UTC"), "dataset": sys.argv[2],
                               "semantic_weight": w / 10, "keyword_weight": 1 - w / 10,
                               "p_at_5": 0.1, "recall_at_5": 0.2, "ndcg_at_10": 0.3,
                               "mrr_at_10": 0.4, "p_at_5_ceiling": 0.5, "is_best": w == 7,
                               "is_default": w == 7, "n_queries": run, "candidate_depth": 50,
                               "verdict": "failure"} for w in range(5, 10)],
                             columns=list(GRID_COLUMNS))
        append_grid_history(sys.argv[1], frame.astype({"n_queries": "int32",
                                                       "candidate_depth": "int32"}))
"""

HALF_WRITTEN_GRID = """
    import os, sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO calibration_grid_history (dataset, semantic_weight) "
                "VALUES ('crashed', 0.5), ('crashed', 0.6)")
    print("inserted", flush=True)
    time.sleep(60)
"""


def test_history_writers_take_turns_and_a_killed_writer_leaves_no_partial_grid(tmp_path):
    from eval_harness.calibration.history import read_grid_history

    database = tmp_path / "history.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
    env["PYTHONPATH"] = str(REPO)
    writers = [python(APPEND_GRID, database, name, "4", env=env, cwd=tmp_path)
               for name in ("a", "b", "c")]
    outcomes = [finish(writer) for writer in writers]
    assert [code for code, _, _ in outcomes] == [0, 0, 0], outcomes
    history = read_grid_history(database)
    assert len(history) == 3 * 4 * 5
    assert history.groupby(["dataset", "n_queries"]).size().tolist() == [5] * 12

    victim = python(HALF_WRITTEN_GRID, database, env=env, cwd=tmp_path)
    assert victim.stdout.readline().strip() == "inserted"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    started = time.monotonic()
    assert finish(python(APPEND_GRID, database, "after", "1", env=env, cwd=tmp_path))[0] == 0
    assert time.monotonic() - started < 10  # the dead writer's lock went with it
    history = read_grid_history(database)
    assert "crashed" not in set(history["dataset"]) and len(history) == 3 * 4 * 5 + 5

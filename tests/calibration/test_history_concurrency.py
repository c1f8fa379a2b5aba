"""Concurrent writers of the calibration grids' DuckDB history
(eval_harness.calibration.history). config.yaml's: test_config_writeback_concurrency.py.

Real OS processes; the writer does not touch Postgres, so this test needs no database.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from colliding_processes import REPO, finish, python

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


@pytest.mark.slow
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

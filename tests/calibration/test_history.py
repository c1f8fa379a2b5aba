"""The calibration grids' DuckDB history (eval_harness.calibration.history): a writer waits
for another process holding the file, and the decision round-trips through the grid frame
and the history."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import pytest

from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.history import append_grid_history, grid_frame, read_grid_history
from eval_harness.calibration.run import calibrate_dataset


# -------------------------------------------------------------------------- DuckDB history
def test_history_writer_waits_for_another_process_holding_the_file(tmp_path, conn, corpus):
    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, **FAST)
    database = tmp_path / "history.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time, duckdb
        con = duckdb.connect({str(database)!r})
        print("locked", flush=True)
        time.sleep(1.5)
        con.close()
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(duckdb.IOException):  # the file really is locked right now
            duckdb.connect(str(database))
        assert append_grid_history(database, grid_frame(result)) == 5
    finally:
        holder.wait(timeout=30)
    history = read_grid_history(database)
    assert len(history) == 5 and set(history["dataset"]) == {corpus["name"]}
    assert history["verdict"].iloc[0] == result.verdict


def test_the_decision_travels_through_the_grid_and_the_history(tmp_path, conn, corpus):
    """What Dagster's publishing asset and the run report read back is the decision the
    calibration made."""
    from eval_harness.calibration.history import decision_from_grid
    from eval_harness.reporting.sections.calibration import calibration_section
    from eval_harness.settings import load_settings

    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, current_weight=0.9,
                               **FAST)
    frame = grid_frame(result)
    assert result.decision is not None and decision_from_grid(frame) == result.decision
    assert frame["is_in_force"].sum() == 1
    assert frame.loc[frame["is_in_force"], "semantic_weight"].item() == 0.9
    database = tmp_path / "history.duckdb"
    config = tmp_path / "config.yaml"
    config.write_text(f"history:\n  duckdb_path: {database}\n")
    settings = load_settings(config, environ={})
    append_grid_history(database, frame)
    history = read_grid_history(database)
    now = history[history["run_at"] == history["run_at"].max()]
    assert decision_from_grid(now) == result.decision
    section = calibration_section(settings, corpus["name"])
    text = " ".join(b.text for b in section.section.blocks if hasattr(b, "text"))
    assert f"Weights: {result.decision.sentence}" in text
    assert section.metrics["decision"] == result.decision.decision

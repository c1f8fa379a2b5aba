"""The calibration grids' DuckDB history (eval_harness.calibration.history): a writer waits
for another process holding the file, an old history takes new grids, and the decision
round-trips through the grid frame and the history."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import numpy as np
import pandas as pd
import pytest

from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.decision import WeightDecision, with_judged_gain
from eval_harness.calibration.history import (append_grid_history, decision_columns,
                                              decision_from_row, grid_frame,
                                              read_grid_history)
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


def test_a_history_from_before_the_verdict_figure_takes_new_grids(tmp_path, conn, corpus):
    """A history file written before the verdict_* columns gets them added on the next
    append; its old rows give their verdict on their own P@5, label source not recorded."""
    from eval_harness.calibration.history import figure_from_grid
    from eval_harness.calibration.sql import GRID_COLUMNS, HISTORY_TABLE
    from eval_harness.calibration.verdict import VerdictBands

    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, **FAST)
    frame = grid_frame(result)
    old = [c for c in GRID_COLUMNS if not c.startswith("verdict_")]
    database = tmp_path / "old-history.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute(f"CREATE TABLE {HISTORY_TABLE} ("
                    + ", ".join(f"{c} {GRID_COLUMNS[c]}" for c in old) + ")")
        con.register("rows", frame[old].assign(run_at=frame["run_at"] - pd.Timedelta("1D")))
        con.execute(f"INSERT INTO {HISTORY_TABLE} BY NAME SELECT * FROM rows")
    assert append_grid_history(database, frame) == len(frame)
    history = read_grid_history(database)
    before, now = (history[history["run_at"] == t] for t in sorted(set(history["run_at"])))
    bands = VerdictBands()
    figure = figure_from_grid(before, bands)
    assert (figure.p_at_5, figure.label_source) == (result.best.p_at_5, None)
    assert figure_from_grid(now, bands) == result.figure
    assert result.figure.label_source == "human" and result.figure.basis == "p_at_5"


@pytest.mark.parametrize("column", ["judged_at_5", "p_at_5_low", "p_at_5_high"])
def test_a_history_from_before_a_later_column_reads_it_as_not_recorded(tmp_path, conn, corpus,
                                                                         column):
    """Without a later column (never appended to since), the read adds it as NaN;
    the next append adds it to the table, NULL (NaN) on the old rows."""
    from eval_harness.calibration.sql import GRID_COLUMNS, HISTORY_TABLE

    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, **FAST)
    frame = grid_frame(result)
    old = [c for c in GRID_COLUMNS if c not in ("judged_at_5", "p_at_5_low", "p_at_5_high")]
    database = tmp_path / "old-history.duckdb"
    with duckdb.connect(str(database)) as con:
        con.execute(f"CREATE TABLE {HISTORY_TABLE} ("
                    + ", ".join(f"{c} {GRID_COLUMNS[c]}" for c in old) + ")")
        con.register("rows", frame[old].assign(run_at=frame["run_at"] - pd.Timedelta("1D")))
        con.execute(f"INSERT INTO {HISTORY_TABLE} BY NAME SELECT * FROM rows")
    history = read_grid_history(database)
    assert len(history) == len(frame) and history[column].isna().all()
    assert append_grid_history(database, frame) == len(frame)
    history = read_grid_history(database)
    assert history[column].isna().sum() == len(frame)
    assert history[column].dropna().tolist() == [getattr(p, column) for p in result.grid]


def test_the_decision_travels_through_the_grid_and_the_history(tmp_path, conn, corpus):
    """What Dagster's publishing asset and the run report read back is the decision the
    calibration made; a history from before the decision columns has none, and the run
    report's section says so."""
    from eval_harness.calibration.history import decision_from_grid
    from eval_harness.calibration.sql import GRID_COLUMNS, HISTORY_TABLE
    from eval_harness.reporting.sections.calibration import calibration_section
    from eval_harness.settings import load_settings

    result = calibrate_dataset(conn, corpus["name"], candidate_depth=10, current_weight=0.9,
                               **FAST)
    frame = grid_frame(result)
    assert result.decision is not None and decision_from_grid(frame) == result.decision
    assert frame["is_in_force"].sum() == 1
    assert frame.loc[frame["is_in_force"], "semantic_weight"].item() == 0.9
    database = tmp_path / "history.duckdb"
    old = [c for c in GRID_COLUMNS if c != "is_in_force" and not c.startswith(
        ("decision", "in_force_"))]
    with duckdb.connect(str(database)) as con:  # a history from before the decision
        con.execute(f"CREATE TABLE {HISTORY_TABLE} ("
                    + ", ".join(f"{c} {GRID_COLUMNS[c]}" for c in old) + ")")
        con.register("rows", frame[old].assign(run_at=frame["run_at"] - pd.Timedelta("1D")))
        con.execute(f"INSERT INTO {HISTORY_TABLE} BY NAME SELECT * FROM rows")
    config = tmp_path / "config.yaml"
    config.write_text(f"history:\n  duckdb_path: {database}\n")
    settings = load_settings(config, environ={})
    text = " ".join(b.text for b in calibration_section(settings, corpus["name"]).section.blocks
                    if hasattr(b, "text"))
    assert "Weights: no decision recorded" in text
    append_grid_history(database, frame)
    history = read_grid_history(database)
    now = history[history["run_at"] == history["run_at"].max()]
    assert decision_from_grid(now) == result.decision
    section = calibration_section(settings, corpus["name"])
    text = " ".join(b.text for b in section.section.blocks if hasattr(b, "text"))
    assert f"Weights: {result.decision.sentence}" in text
    assert section.metrics["decision"] == result.decision.decision


def test_a_decision_row_without_the_ppi_columns_still_reads():
    judges = WeightDecision(changed=True, in_force=(0.7, 0.3), best=(0.2, 0.8), gain=0.2,
                            low=0.1, high=0.3, adjusted_p=0.01, alpha=0.05, min_gain=0.0,
                            permutations=10_000, label_source="judges")
    row = pd.Series(dict(decision_columns(judges), semantic_weight=0.2, keyword_weight=0.8))
    assert np.isnan(row["decision_ppi_gain"]) and decision_from_row(row) == judges
    older = row.drop([c for c in row.index if c.startswith("decision_ppi")] + ["decision_n_human"])
    assert decision_from_row(older) == judges  # a history written before the PPI columns
    corrected = with_judged_gain(judges, estimate=0.1, low=0.02, high=0.18, n_human=30)
    row = pd.Series(dict(decision_columns(corrected), semantic_weight=0.2, keyword_weight=0.8))
    assert decision_from_row(row) == corrected

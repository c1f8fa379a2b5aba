"""The history I/O manager writes a wider frame into a table an older release created.

Dagster's DuckDB I/O manager keeps a non-partitioned asset's table and replaces its rows at
each materialization, inserting the frame by position: a table created by a release whose
frame had fewer columns (``calibration_grid`` before Judged@5 or the decision) refuses the
wider frame. The harness's manager grows the table first.
"""

from __future__ import annotations

import dagster as dg
import duckdb
import pandas as pd
from dagster_duckdb_pandas import DuckDBPandasIOManager

from eval_harness_pipelines.resources import duckdb_io_manager


def _materialize(manager, frame: pd.DataFrame) -> bool:
    @dg.asset(name="grid_history")
    def grid_history() -> pd.DataFrame:
        return frame

    return dg.materialize([grid_history], resources={"io_manager": manager},
                          raise_on_error=False).success


def _rows(database: str, columns: str) -> list[tuple]:
    with duckdb.connect(database, read_only=True) as con:
        return con.execute(f"SELECT {columns} FROM public.grid_history").fetchall()


def test_a_table_from_an_older_release_takes_the_wider_frame(tmp_path):
    older = pd.DataFrame({"dataset": ["a"], "p_at_5": [0.5]})  # what an older release wrote
    wider = pd.DataFrame({"dataset": ["b"], "judged_at_5": [0.9], "p_at_5": [0.6],
                          "decision": ["kept"]})
    plain = str(tmp_path / "plain.duckdb")  # Dagster's own manager refuses it
    assert _materialize(DuckDBPandasIOManager(database=plain), older)
    assert not _materialize(DuckDBPandasIOManager(database=plain), wider)
    database = str(tmp_path / "history.duckdb")
    assert _materialize(duckdb_io_manager(database), older)
    assert _materialize(duckdb_io_manager(database), wider)
    assert _rows(database, "dataset, p_at_5, judged_at_5, decision") == [("b", 0.6, 0.9, "kept")]


def test_a_frame_without_a_column_of_the_table_writes_null_there(tmp_path):
    database = str(tmp_path / "history.duckdb")
    assert _materialize(duckdb_io_manager(database),
                        pd.DataFrame({"dataset": ["a"], "p_at_5": [0.5], "note": ["x"]}))
    assert _materialize(duckdb_io_manager(database),
                        pd.DataFrame({"p_at_5": [0.7], "dataset": ["b"]}))
    assert _rows(database, "dataset, p_at_5, note") == [("b", 0.7, None)]

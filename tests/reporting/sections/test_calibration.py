"""The run report's calibration section (eval_harness.reporting.sections.calibration): the
Judged@5 column of its grid, and the lower-bound sentence when Judged@5 at the best weight
or the weights in force falls below calibration.min_judged (and its absence above it), also
on a history written before Judged@5 was recorded; each weight's P@5 interval ("n/a" in such
an old history)."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pytest

from calibration_corpus import FAST, corpus  # noqa: F401 (fixture)
from eval_harness.calibration.history import append_grid_history, grid_frame
from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.run import calibrate_dataset
from eval_harness.calibration.sql import GRID_COLUMNS, HISTORY_TABLE
from eval_harness.reporting.blocks import Paragraph, Table
from eval_harness.reporting.sections.calibration import calibration_section


@pytest.fixture(scope="module")
def calibration(store, corpus):
    with store.connection() as conn:
        return calibrate_dataset(conn, corpus["name"], candidate_depth=10, **FAST)


def _section(settings, tmp_path, dataset, min_judged):
    configured = replace(settings, history_duckdb_path=tmp_path / "history.duckdb",
                         calibration=replace(settings.calibration, min_judged=min_judged))
    built = calibration_section(configured, dataset).section
    paragraphs = [b.text for b in built.blocks if isinstance(b, Paragraph)]
    table = next(b for b in built.blocks if isinstance(b, Table))
    return paragraphs, table


def test_best_weight_below_min_judged_is_called_a_lower_bound(settings, tmp_path, calibration):
    append_grid_history(tmp_path / "history.duckdb", grid_frame(calibration))
    best = calibration.best
    paragraphs, table = _section(settings, tmp_path, calibration.dataset, 1.0)
    pair = f"{weight_label(best.semantic_weight)} / {weight_label(best.keyword_weight)}"
    lower = [p for p in paragraphs if "is a lower bound" in p]
    assert lower and lower[0].startswith(f"**P@5 at {pair} (best")
    assert f"calibration.min_judged 1); run `eval-harness judge --dataset " \
           f"{calibration.dataset} --grid-pool`" in lower[0]
    judged = table.columns.index("Judged@5")
    assert [row[judged] for row in table.rows] == [f"{p.judged_at_5:.4f}"
                                                   for p in calibration.grid]
    # at a threshold every weight meets, no sentence
    lowest = min(p.judged_at_5 for p in calibration.grid)
    paragraphs, _ = _section(settings, tmp_path, calibration.dataset, lowest)
    assert not any("lower bound" in p for p in paragraphs)


def test_each_weight_shows_its_p_at_5_interval(settings, tmp_path, calibration):
    append_grid_history(tmp_path / "history.duckdb", grid_frame(calibration))
    paragraphs, table = _section(settings, tmp_path, calibration.dataset, 0.0)
    column = table.columns.index("P@5 interval")
    assert column == table.columns.index("P@5") + 1
    assert [row[column] for row in table.rows] == [
        f"[{p.p_at_5_low:.4f}, {p.p_at_5_high:.4f}]" for p in calibration.grid]
    assert all(p.p_at_5_low <= p.p_at_5 <= p.p_at_5_high for p in calibration.grid)
    assert any("P@5 interval: 95% percentile bootstrap over the queries" in p
               for p in paragraphs)


def test_a_history_written_before_judged_at_5_still_reads(settings, tmp_path, calibration):
    old = [c for c in GRID_COLUMNS if c not in ("judged_at_5", "p_at_5_low", "p_at_5_high")]
    with duckdb.connect(str(tmp_path / "history.duckdb")) as con:
        con.execute(f"CREATE TABLE {HISTORY_TABLE} ("
                    + ", ".join(f"{c} {GRID_COLUMNS[c]}" for c in old) + ")")
        con.register("rows", grid_frame(calibration)[old])
        con.execute(f"INSERT INTO {HISTORY_TABLE} BY NAME SELECT * FROM rows")
    paragraphs, table = _section(settings, tmp_path, calibration.dataset, 1.0)
    for name in ("Judged@5", "P@5 interval"):
        column = table.columns.index(name)
        assert [row[column] for row in table.rows] == ["n/a"] * len(calibration.grid)
    assert not any("lower bound" in p for p in paragraphs)  # unknown is not "below"

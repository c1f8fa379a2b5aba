"""The run history in the embedded DuckDB file, and the trend plots drawn from it.

Every run report records its run's headline numbers in the table ``run_history`` (beside
``calibration_grid_history`` in ``history.duckdb_path``): one row per metric, in long form
``(run_id, recorded_at, dataset, metric, value)``, so a new metric needs no schema change.
Recording a run again replaces that run's rows (a re-rendered report never duplicates a
point). Only numbers are kept: a flag is stored as 0 or 1; text, None and NaN are left out.

The file is opened as :mod:`eval_harness.calibration.history` opens it (DuckDB allows one
writer at a time: lock retries with capped backoff and jitter, then
:class:`HistoryUnavailable`), and each write is one transaction.

The plots are PNG bytes drawn with matplotlib's Agg backend, one per trend: judge agreement
against its floor, P@5 against the verdict bands, gate pass rates against their minimum,
cost per run. A single run is drawn as a marker.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import pandas as pd

from eval_harness.calibration.history import HistoryUnavailable, open_history
from eval_harness.calibration.run import VerdictBands

RUN_HISTORY_TABLE = "run_history"
HISTORY_COLUMNS = {"run_id": "VARCHAR", "recorded_at": "TIMESTAMPTZ", "dataset": "VARCHAR",
                   "metric": "VARCHAR", "value": "DOUBLE"}

__all__ = ["RUN_HISTORY_TABLE", "HistoryUnavailable", "history_values", "record_run",
           "read_run_history", "runs_table", "new_figure", "figure_png", "plot_kappa_trend",
           "plot_p_at_5_trend", "plot_gate_trend", "plot_cost_trend"]


def history_values(metrics: Mapping[str, object]) -> dict[str, float]:
    """The metrics worth a trend point: finite numbers, flags as 0/1; the rest is dropped."""
    values = {}
    for name, value in metrics.items():
        if isinstance(value, bool):
            values[name] = float(value)
        elif isinstance(value, (int, float)) and math.isfinite(value):
            values[name] = float(value)
    return values


def record_run(path: Path | str, *, run_id: str, dataset: str, recorded_at: datetime,
               metrics: Mapping[str, object]) -> int:
    """Replace the rows of ``run_id`` in ``run_history`` by ``metrics``; rows written."""
    values = history_values(metrics)
    frame = pd.DataFrame({"run_id": run_id, "recorded_at": pd.Timestamp(recorded_at),
                          "dataset": dataset, "metric": list(values),
                          "value": list(values.values())}, columns=list(HISTORY_COLUMNS))
    columns = ", ".join(f"{name} {kind}" for name, kind in HISTORY_COLUMNS.items())
    with open_history(Path(path)) as con:
        con.execute("BEGIN TRANSACTION")
        con.execute(f"CREATE TABLE IF NOT EXISTS {RUN_HISTORY_TABLE} ({columns})")
        con.execute(f"DELETE FROM {RUN_HISTORY_TABLE} WHERE run_id = ?", [run_id])
        con.register("run_rows", frame)
        con.execute(f"INSERT INTO {RUN_HISTORY_TABLE} BY NAME SELECT * FROM run_rows")
        con.execute("COMMIT")
    return len(frame)


def read_run_history(path: Path | str, dataset: str | None = None) -> pd.DataFrame:
    """The recorded rows (long form), oldest first; empty when nothing was recorded."""
    path = Path(path)
    empty = pd.DataFrame(columns=list(HISTORY_COLUMNS))
    if not path.is_file():
        return empty
    with open_history(path) as con:
        tables = {row[0] for row in
                  con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if RUN_HISTORY_TABLE not in tables:
            return empty
        return con.execute(
            f"SELECT * FROM {RUN_HISTORY_TABLE} WHERE ? IS NULL OR dataset = ? "
            f"ORDER BY recorded_at, run_id, metric", [dataset, dataset]).df()


def runs_table(history: pd.DataFrame) -> pd.DataFrame:
    """One row per run (oldest first), one column per metric, indexed by ``recorded_at``."""
    if history.empty:
        return pd.DataFrame()
    wide = history.pivot_table(index=["recorded_at", "run_id"], columns="metric",
                               values="value", aggfunc="last")
    return wide.sort_index().reset_index(level="run_id")


# ------------------------------------------------------------------------------ plots

def new_figure(title: str):
    """A matplotlib figure and its axes on the Agg backend (no display, no pyplot state)."""
    import matplotlib

    matplotlib.use("Agg")  # no display; safe in Dagster workers and CI
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.subplots()
    axes.set_title(title)
    axes.grid(alpha=0.3)
    return figure, axes


def figure_png(figure) -> bytes:
    """The figure as PNG bytes (no software tag, so equal plots give equal bytes)."""
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _png(figure, axes, runs: pd.DataFrame) -> bytes:
    format_run_axis(axes, runs)
    # outside the axes, so the legend never covers a point
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                fontsize="x-small")
    return figure_png(figure)


MAX_RUN_TICKS = 8


def format_run_axis(axes, runs: pd.DataFrame) -> None:
    """The x axis counts runs (one step per run, oldest left), each tick labelled with the
    day and time the run was recorded (UTC). Runs minutes apart and runs days apart both
    read at a glance; a time axis shows bare seconds ("15", "30") for the former."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    labels = run_labels(runs)
    axes.set_xlim(-0.5, len(labels) - 0.5)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=MAX_RUN_TICKS, integer=True, min_n_ticks=1))
    axes.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: labels[int(round(x))] if 0 <= round(x) < len(labels)
        and abs(x - round(x)) < 1e-9 else ""))
    years = sorted({time.year for time in pd.to_datetime(runs.index, utc=True)})
    span = "-".join(str(year) for year in dict.fromkeys((years[0], years[-1]))) if years else ""
    axes.set_xlabel(f"run, recorded at (UTC, {span})" if span else "run")


def run_labels(runs: pd.DataFrame) -> list[str]:
    """One label per run: "MM-DD\\nHH:MM", with seconds when two runs share a minute."""
    times = pd.to_datetime(runs.index, utc=True)
    for layout in ("%m-%d\n%H:%M", "%m-%d\n%H:%M:%S"):
        labels = [time.strftime(layout) for time in times]
        if len(set(labels)) == len(labels):
            return labels
    return labels


def _series(runs: pd.DataFrame, metric: str) -> pd.Series:
    """``metric`` per run, indexed by the run's position (0 = oldest; see format_run_axis)."""
    if metric not in runs:
        return pd.Series(dtype=float)
    return runs[metric].reset_index(drop=True).dropna()


def _line(axes, series: pd.Series, label: str, **style) -> None:
    axes.plot(series.index, series.values, marker="o", label=label, **style)


def plot_kappa_trend(runs: pd.DataFrame, *, floor: float) -> bytes | None:
    """Pooled kappa and its lower confidence bound per run, against the floor."""
    kappa, low = _series(runs, "kappa"), _series(runs, "kappa_ci_low")
    if kappa.empty:
        return None
    figure, axes = new_figure("Judge agreement (Cohen's kappa)")
    _line(axes, kappa, "kappa")
    if not low.empty:
        _line(axes, low, "lower bound", linestyle="--")
    axes.axhline(floor, color="tab:red", linestyle=":", label=f"floor {floor:g}")
    axes.set_ylim(min(0.0, kappa.min(), low.min() if not low.empty else 0.0) - 0.05, 1.05)
    axes.set_ylabel("kappa")
    return _png(figure, axes, runs)


def plot_p_at_5_trend(runs: pd.DataFrame, *, bands: VerdictBands) -> bytes | None:
    """P@5 at the calibrated and at the default weights per run, over the verdict bands."""
    best, default = _series(runs, "p_at_5_best"), _series(runs, "p_at_5_default")
    if best.empty:
        return None
    figure, axes = new_figure("P@5 at the calibrated weights")
    axes.axhspan(0.0, bands.partial_success, color="tab:red", alpha=0.08, label="failure")
    axes.axhspan(bands.partial_success, bands.full_success, color="tab:orange", alpha=0.12,
                 label="partial success")
    axes.axhspan(bands.full_success, 1.0, color="tab:green", alpha=0.08, label="full success")
    _line(axes, best, "P@5 best")
    if not default.empty:
        _line(axes, default, "P@5 default", linestyle="--")
    ceiling = _series(runs, "p_at_5_ceiling")
    if not ceiling.empty:
        _line(axes, ceiling, "ceiling", color="grey", linestyle=":")
    axes.set_ylim(0.0, 1.0)
    axes.set_ylabel("mean P@5")
    return _png(figure, axes, runs)


def plot_gate_trend(runs: pd.DataFrame, *, min_pass_rates: Mapping[str, float]) -> bytes | None:
    """Each gate's pass rate per run (one line per gate), with its minimum pass rate."""
    lines = {gate: _series(runs, f"{gate}_pass_rate") for gate in min_pass_rates}
    lines = {gate: series for gate, series in lines.items() if not series.empty}
    if not lines:
        return None
    import matplotlib

    figure, axes = new_figure("Quality gate pass rates")
    colours = matplotlib.colormaps["tab10"].colors
    for colour, (gate, series) in zip(colours, lines.items()):
        _line(axes, series, gate, color=colour)
    minimums: dict[float, list[str]] = {}
    for gate in lines:  # gates sharing a minimum share its line
        minimums.setdefault(min_pass_rates[gate], []).append(gate)
    for minimum, gates in minimums.items():
        shared = len(gates) == len(lines)
        axes.axhline(minimum, color="grey" if shared else colours[list(lines).index(gates[0])],
                     linestyle=":", label=f"min pass rate {minimum:g}"
                     + ("" if shared else f" ({', '.join(gates)})"))
    axes.set_ylim(-0.02, 1.02)
    axes.set_ylabel("pass rate")
    return _png(figure, axes, runs)


def plot_cost_trend(runs: pd.DataFrame) -> bytes | None:
    """Provider cost (USD) per run, and what the reply cache saved."""
    cost = _series(runs, "cost_usd")
    if cost.empty:
        return None
    figure, axes = new_figure("Cost per run")
    _line(axes, cost, "cost USD")
    saved = _series(runs, "cache_saved_usd")
    if not saved.empty and (saved > 0).any():
        _line(axes, saved, "saved by the cache USD", linestyle="--")
    axes.set_ylim(bottom=0.0)
    axes.set_ylabel("USD")
    return _png(figure, axes, runs)

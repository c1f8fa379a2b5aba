"""Section 6: trends. The run's headline numbers are recorded in the DuckDB history
(:mod:`eval_harness.reporting.run_history`; a re-rendered run replaces its rows) and plotted
over the earlier runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from eval_harness.calibration.verdict import VerdictBands
from eval_harness.gates.registry import enabled_gate_names
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import (
    NO_DATA,
    SECTION_TITLES,
    Block,
    BuiltSection,
    Figure,
    Metric,
    Paragraph,
    Section,
    Table,
)
from eval_harness.reporting.plots import (
    plot_cost_trend,
    plot_gate_trend,
    plot_kappa_trend,
    plot_p_at_5_trend,
    pooled_days,
)
from eval_harness.reporting.run_history import read_run_history, record_run, runs_table
from eval_harness.settings import Settings

TREND_PLOTS = ("trend-kappa.png", "trend-p-at-5.png", "trend-gates.png", "trend-cost.png")
RECENT_RUNS_SHOWN = 10


def trends_section(settings: Settings, run_id: str | None, dataset: str, now: datetime,
                   metrics: Mapping[str, Metric]) -> BuiltSection:
    """Record ``metrics`` as run ``run_id``'s point (without a run id nothing is recorded),
    then plot every recorded run of ``dataset``."""
    title = SECTION_TITLES["trends"]
    path = settings.history_duckdb_path
    blocks: list[Block] = []
    if run_id is None:
        blocks.append(Paragraph("This report has no run id, so its numbers are not recorded "
                                "in the history."))
    else:
        record_run(path, run_id=run_id, dataset=dataset, recorded_at=now, metrics=metrics)
    runs = runs_table(read_run_history(path, dataset))
    if runs.empty:
        hint = (f"No run of dataset '{dataset}' is recorded in the history ({path}) yet: "
                "every run report with a run id adds one.")
        return BuiltSection(Section("trends", title, tuple(blocks), NO_DATA, hint), {})
    gates = {name: settings.quality_gates.gate(name).min_pass_rate
             for name in enabled_gate_names(settings.quality_gates)}
    bands = VerdictBands(settings.calibration.verdict.full_success,
                         settings.calibration.verdict.partial_success)
    plots = (
        (plot_kappa_trend(runs, floor=settings.agreement.kappa_floor),
         "Pooled kappa and its lower confidence bound per run, against the floor", "kappa"),
        (plot_p_at_5_trend(runs, bands=bands),
         "P@5 at the calibrated and the default weights per run, over the verdict bands",
         "P@5"),
        (plot_gate_trend(runs, min_pass_rates=gates),
         f"Each gate's pass rate per run, one panel per gate, pooled over {pooled_days(runs)} "
         "(passing answers / all answers of those days); dotted: its minimum pass rate",
         "gate pass rate"),
        (plot_cost_trend(runs), "Provider cost per run (USD)", "cost"))
    blocks.append(Paragraph(f"{len(runs)} run(s) of dataset `{dataset}` recorded in `{path}`, "
                            "one point each."))
    for name, (png, caption, what) in zip(TREND_PLOTS, plots):
        blocks.append(Figure(name, png, caption) if png is not None
                      else Paragraph(f"No {what} recorded in any run yet."))
    blocks.append(_recent_runs_table(runs, list(gates), pooled_days(runs)))
    return BuiltSection(Section("trends", title, tuple(blocks)), {})


def _recent_runs_table(runs, gates: Sequence[str], pooled: str) -> Table:
    columns = [("kappa", "kappa"), ("p_at_5_best", "P@5 best")]
    columns += [(f"{gate}_pass_rate", gate) for gate in gates]
    columns += [("cost_usd", "cost USD")]
    rows = []
    for recorded_at, row in runs.iloc[::-1].head(RECENT_RUNS_SHOWN).iterrows():
        values = [fmt.num(row.get(metric)) if metric != "cost_usd" else fmt.usd(row.get(metric))
                  for metric, _ in columns]
        rows.append((f"{fmt.utc(recorded_at):%Y-%m-%d %H:%M}", str(row["run_id"]), *values))
    return Table(("recorded (UTC)", "run", *(label for _, label in columns)), tuple(rows),
                 (False, False) + (True,) * len(columns),
                 caption=f"The last {min(len(runs), RECENT_RUNS_SHOWN)} run(s), newest first; "
                 f"gate pass rates pooled over {pooled}")

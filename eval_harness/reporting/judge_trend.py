"""The judges over time, for the run report: per judge spec and run date, the anchor flip
rate with its Wilson interval, the test-retest flip rate, and kappa with the other judge and
with people, from the judges' record (:mod:`eval_harness.judges.dual.record`).

A figure of two panels (flip rates; kappas), one series per judge spec, drawn like the other
trends (:mod:`eval_harness.reporting.plots`: the x axis counts runs, oldest left, labelled with
the date recorded), and a table of the same figures. Nothing recorded: no figure, no table.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from eval_harness.judges.dual.record import RecordRow
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import Figure, Table
from eval_harness.reporting.plots import MARKERS, figure_png, format_run_axis

PLOT_NAME = "judges-record.png"
HISTORY = 30  # runs per judge spec shown
COLUMNS = ("recorded (UTC)", "judge", "spec", "anchor flips", "self flips", "kappa other",
           "kappa people")


def _spec(row: RecordRow) -> str:
    version = "" if row.prompt_version is None else f" (prompt {row.prompt_version})"
    return f"{row.judge}: {row.judge_spec}{version}"


def _runs(rows: Sequence[RecordRow]) -> pd.DataFrame:
    """One row per run id, indexed by when it was first recorded, oldest first; ``position``
    is the run's place on the x axis."""
    first: dict[str, pd.Timestamp] = {}
    for row in rows:
        when = pd.Timestamp(row.recorded_at)
        first[row.run_id] = min(first.get(row.run_id, when), when)
    ordered = sorted(first.items(), key=lambda item: (item[1], item[0]))
    runs = pd.DataFrame({"run_id": [r for r, _ in ordered]},
                        index=pd.DatetimeIndex([w for _, w in ordered], name="recorded_at"))
    runs["position"] = range(len(runs))
    return runs


def judge_trend_figure(rows: Sequence[RecordRow]):
    """The figure, or None when no figure of the record has a value."""
    measured = [r for r in rows if any(v is not None for v in (
        r.anchor_flip_rate, r.retest_flip_rate, r.kappa_other, r.people_kappa))]
    if not measured:
        return None
    # matplotlib is imported when a figure is drawn, as in plots (a report without one, and
    # every other command, starts without it)
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.use("Agg")
    runs = _runs(measured)
    where = dict(zip(runs["run_id"], runs["position"]))
    figure = Figure(figsize=(9.6, 4.4), dpi=100)
    flips, kappas = figure.subplots(1, 2)
    specs = list(dict.fromkeys(_spec(r) for r in measured))
    for i, spec in enumerate(specs):
        mine = [r for r in measured if _spec(r) == spec]
        x = [where[r.run_id] + (i - (len(specs) - 1) / 2) * 0.08 for r in mine]
        marker = MARKERS[i % len(MARKERS)]
        anchor = [(p, r) for p, r in zip(x, mine) if r.anchor_flip_rate is not None]
        if anchor:
            low = [r.anchor_flip_rate - (r.anchor_flip_low if r.anchor_flip_low is not None
                                         else r.anchor_flip_rate) for _, r in anchor]
            high = [(r.anchor_flip_high if r.anchor_flip_high is not None
                     else r.anchor_flip_rate) - r.anchor_flip_rate for _, r in anchor]
            line = flips.errorbar([p for p, _ in anchor], [r.anchor_flip_rate for _, r in anchor],
                                  yerr=[low, high], marker=marker, capsize=3,
                                  label=f"{spec} anchors")
            color = line[0].get_color()
        else:
            color = None
        _points(flips, x, [r.retest_flip_rate for r in mine], marker, color,
                f"{spec} self", dashed=True)
        _points(kappas, x, [r.kappa_other for r in mine], marker, color, f"{spec} other judge")
        _points(kappas, x, [r.people_kappa for r in mine], marker, color, f"{spec} people",
                dashed=True)
    flips.set_title("Flip rates (anchors: Wilson interval)")
    flips.set_ylabel("share of labels flipped")
    flips.set_ylim(bottom=-0.01)  # a judge that never flips sits on 0, visible
    kappas.set_title("Cohen's kappa")
    kappas.set_ylabel("kappa")
    for axes in (flips, kappas):
        axes.grid(alpha=0.3)
        format_run_axis(axes, runs)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="upper left", bbox_to_anchor=(0.0, -0.42), fontsize="xx-small")
    return figure


def _points(axes, x, values, marker, color, label, *, dashed: bool = False) -> None:
    shown = [(p, v) for p, v in zip(x, values) if v is not None]
    if shown:
        axes.plot([p for p, _ in shown], [v for _, v in shown], marker=marker, color=color,
                  linestyle="--" if dashed else "-", markerfacecolor="white" if dashed else None,
                  label=label)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def plot_judge_trend(rows: Sequence[RecordRow]) -> bytes | None:
    """The figure as PNG bytes, or None (nothing measured yet)."""
    figure = judge_trend_figure(rows)
    return None if figure is None else figure_png(figure)


def judge_trend_table(rows: Sequence[RecordRow]) -> Table | None:
    """Per judge spec and run date, newest first within a spec; None without rows."""
    if not rows:
        return None
    cells = []
    for row in sorted(rows, key=lambda r: (_spec(r), -r.recorded_at.timestamp())):
        anchor = ("n/a" if row.anchor_flip_rate is None else
                  f"{_pct(row.anchor_flip_rate)} " + (
                      "" if row.anchor_flip_low is None or row.anchor_flip_high is None
                      else f"[{_pct(row.anchor_flip_low)}, {_pct(row.anchor_flip_high)}]")
                  ).strip()
        people = ("n/a" if row.people_kappa is None else
                  f"{fmt.num(row.people_kappa)} "
                  f"{fmt.interval(row.people_kappa_low, row.people_kappa_high)} "
                  f"(n {row.people_pairs})")
        other = ("n/a" if row.kappa_other is None else
                 f"{fmt.num(row.kappa_other)}" + ("" if row.kappa_other_low is None else
                 f" {fmt.interval(row.kappa_other_low, row.kappa_other_high)}"))
        cells.append((f"{fmt.utc(row.recorded_at):%Y-%m-%d %H:%M}", str(row.judge),
                      _spec(row).split(": ", 1)[1], anchor,
                      _pct(row.retest_flip_rate),
                      other, people))
    return Table(COLUMNS, tuple(cells), (False, False, False, True, True, True, True),
                 caption="Each judge spec by run date: anchor flip rate [Wilson interval], "
                 "test-retest flip rate, kappa with the other judge and with people "
                 "[bootstrap interval over queries] (n/a: not measured that run)")


def judge_trend_blocks(rows: Sequence[RecordRow]) -> list:
    """The figure (when anything was measured) and the table (when anything was recorded)."""
    blocks: list = []
    png = plot_judge_trend(rows)
    if png is not None:
        blocks.append(Figure(PLOT_NAME, png, "The judges by run: anchor and test-retest flip "
                             "rates (left), kappa with the other judge and with people "
                             "(right), one series per judge spec"))
    table = judge_trend_table(rows)
    if table is not None:
        blocks.append(table)
    return blocks

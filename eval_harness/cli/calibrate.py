"""``eval-harness calibrate``: grid search of the hybrid weights and the P@5 verdict.

Prints the grid table and the verdict (or one JSON object with ``--json``), then writes the
best weights into config.yaml (atomically, keeping every other key and comment), appends the
grid to the DuckDB history and writes reports/calibration-results.md with its plot.
``--no-write`` writes none of these. Exit code: 0 full or partial success, 1 failure,
2 it could not run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval_harness.cli.common import EXIT_FAILED, EXIT_OK, CliError
from eval_harness.settings import Settings



def add_calibrate_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="grid-search the hybrid weights on the ground truth, P@5 verdict")
    parser.add_argument("--dataset", help="dataset in the store (default: default_dataset)")
    parser.add_argument("--grid-step", type=float, metavar="STEP",
                        help="step of the semantic-weight grid, 0.01..1 (default: "
                             "calibration.grid.step in config.yaml, 0.1)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: grid, best, default, uplift, "
                             "cross-validated P@5, verdict")
    parser.add_argument("--trec-runs", metavar="DIR",
                        help="also write one TREC run file per weight (and qrels.trec) into DIR")
    parser.add_argument("--no-write", action="store_true",
                        help="dry run: leave config.yaml, the history and the report untouched")
    parser.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args, settings: Settings) -> int:
    from eval_harness.calibration.history import HistoryUnavailable
    from eval_harness.calibration.run import calibrate_with_settings, format_table
    from eval_harness.store import open_store
    from eval_harness.calibration.trec_runs import write_trec_runs

    location = open_store(settings)
    with location.connection() as conn:
        result = calibrate_with_settings(conn, settings, args.dataset, grid_step=args.grid_step)
        trec_paths = write_trec_runs(conn, result, Path(args.trec_runs)) if args.trec_runs else []
    written = {"config": None, "history": None, "report": None, "plot": None,
               "trec_runs": [str(p) for p in trec_paths]}
    notes = []
    if args.no_write:
        notes.append("dry run (--no-write): config.yaml, history and report left unchanged")
    else:
        try:
            notes += _write_outputs(result, settings, written)
        except HistoryUnavailable as exc:
            raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(dict(result.to_dict(), written=written), allow_nan=False))
    else:
        print(format_table(result))
        if trec_paths:
            notes.append(f"TREC runs: {len(trec_paths) - 1} files and qrels.trec in "
                         f"{args.trec_runs}")
        if notes:
            print("\n" + "\n".join(notes))
    return EXIT_FAILED if result.verdict == "failure" else EXIT_OK


def _write_outputs(result, settings: Settings, written: dict) -> list[str]:
    """config.yaml, DuckDB history, report; fills ``written`` and returns one note each."""
    from eval_harness.calibration.history import append_grid_history, grid_frame
    from eval_harness.calibration.report import write_calibration_report
    from eval_harness.calibration.weights import write_calibrated_weights

    notes = []
    if settings.config_path is None:
        notes.append("config.yaml: not written, no config file is in use (pass --config FILE "
                     "to have the calibrated weights written into it)")
    else:
        change = write_calibrated_weights(settings.config_path, result.best.semantic_weight)
        weights = f"hybrid_search semantic {change.semantic:g} / keyword {change.keyword:g}"
        written["config"] = {"path": str(change.path), "changed": change.changed,
                             "semantic": change.semantic, "keyword": change.keyword}
        if change.changed:
            notes.append(f"config.yaml: {weights} written to {change.path} (was "
                         f"{_weight(change.previous_semantic)} / "
                         f"{_weight(change.previous_keyword)})")
        else:
            notes.append(f"config.yaml: {change.path} already holds {weights}; unchanged")
    rows = append_grid_history(settings.history_duckdb_path, grid_frame(result))
    written["history"] = str(settings.history_duckdb_path)
    notes.append(f"history: {rows} rows appended to calibration_grid_history in "
                 f"{settings.history_duckdb_path}")
    report, plot = write_calibration_report(settings.root / "reports", result)
    written["report"], written["plot"] = str(report), str(plot)
    notes.append(f"report: {report} (plot {plot.name})")
    return notes


def _weight(value: float | None) -> str:
    return "unset" if value is None else f"{value:g}"

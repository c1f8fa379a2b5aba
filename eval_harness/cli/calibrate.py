"""``eval-harness calibrate``: grid search of the hybrid weights and the P@5 verdict.

Prints the grid table, the decision and the verdict at the weights in force after it (or one
JSON object with ``--json``), then publishes the decision for the dataset calibrated: a row of
the ``calibrated_weights`` table (what the RAG system reads) and, only when the weights
changed, ``datasets.<name>.hybrid_search`` in config.yaml (atomically,
keeping every other key and comment; the global ``hybrid_search`` is never rewritten),
appends the grid to the DuckDB history and writes the dataset's own report,
reports/calibration-results-<dataset>.md with its plot. ``--no-write`` writes none of these,
and nothing else either: a live dataset is not attached again (its mapping is checked and
the ground truth as last attached is calibrated on), so a role that may only SELECT can run
it.
Exit code: 0 full or partial success, 1 failure, 2 it could not run, 130 / 143 stopped by
SIGINT / SIGTERM: before the grid is done nothing is written; once the outputs are being
written they are all written first (:mod:`eval_harness.stopping`).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

from eval_harness import stopping
from eval_harness.cli.common import CliError
from eval_harness.errors import EXIT_FAILED, EXIT_OK
from eval_harness.escaping.terminal import say
from eval_harness.settings import Settings
from eval_harness.store import open_store
from eval_harness.datasets.prepare import check_attached_dataset, prepare_dataset


def add_calibrate_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="grid-search the hybrid weights on the ground truth, P@5 verdict")
    parser.add_argument("--dataset", help="dataset in the store (default: default_dataset)")
    parser.add_argument("--grid-step", type=float, metavar="STEP",
                        help="step of the semantic-weight grid, 0.01..1 (default: "
                             "calibration.grid.step in config.yaml, 0.1)")
    parser.add_argument("--labels", choices=("human", "judges"),
                        help="the labels to calibrate on: human (expected_docs) or judges "
                             "(eval-harness judge's; default: human when the dataset has "
                             "expected_docs, else judges)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: grid, best, default, uplift, "
                             "cross-validated P@5, verdict")
    parser.add_argument("--trec-runs", metavar="DIR",
                        help="also write one TREC run file per weight (and the qrels) into DIR, "
                             "named after the dataset")
    parser.add_argument("--no-write", action="store_true",
                        help="dry run: leave the calibrated_weights table, config.yaml, the "
                             "history and the report untouched")
    parser.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args, settings: Settings) -> int:
    # The calibration stack (pandas, DuckDB, matplotlib) costs every other command seconds
    # at start-up, and only this one needs it: imported when it runs.
    from eval_harness.calibration.history import (MAX_LOCK_WAIT_SECONDS,
                                                  HistoryUnavailable)
    from eval_harness.calibration.run import calibrate_with_settings
    from eval_harness.calibration.text import format_table
    from eval_harness.calibration.trec_runs import write_trec_runs
    from eval_harness.calibration.workflow import write_calibration

    dataset = args.dataset or settings.default_dataset
    location = open_store(settings, read_only=args.no_write)
    try:
        with location.connection() as conn:
            if args.no_write:  # writes nothing: a live dataset is read as last attached
                as_attached = check_attached_dataset(conn, settings, dataset)
                if as_attached:
                    say(as_attached, file=sys.stderr)
            else:
                prepare_dataset(conn, settings, dataset)
            result = calibrate_with_settings(conn, settings, args.dataset,
                                             grid_step=args.grid_step, labels=args.labels)
            if not args.no_write:
                conn.commit()  # the candidate cache's new entries (a rerun reads them)
            trec_paths = (write_trec_runs(conn, result, Path(args.trec_runs))
                          if args.trec_runs else [])
    except stopping.Interrupted as exc:
        exc.kept = ("nothing was written (calibration writes its weights, history and report "
                    "only once the grid is done)")
        raise
    written = {"weights": None, "config": None, "history": None, "report": None, "plot": None,
               "trec_runs": [str(p) for p in trec_paths]}
    notes = []
    if args.no_write:
        notes.append(f"dry run (--no-write): the calibrated_weights table, config.yaml, history "
                     f"and report of dataset '{result.dataset}' left unchanged")
    else:
        path = settings.history_duckdb_path
        try:
            with stopping.cooperative():  # a stop waits until every output is written
                published, recorded = write_calibration(
                    location, settings, result, run_id=uuid.uuid4().hex[:12],
                    on_wait=lambda: print(
                        f"eval-harness: the calibration history {path} is held by another "
                        f"process; waiting for it (at most {MAX_LOCK_WAIT_SECONDS:g} s) "
                        f"before writing anything", file=sys.stderr))
                notes += _written(result.dataset, published, recorded, written)
        except HistoryUnavailable as exc:
            raise CliError(str(exc)) from None
        except stopping.Interrupted as exc:
            if written["report"] is None:
                exc.kept = "nothing was written (the stop came before the outputs)"
                raise
            exc.kept = (f"the calibration of dataset '{result.dataset}' was finished first: "
                        "its weights, history and report are written")
            exc.next_step = "nothing is left to do"
            raise
    if trec_paths:
        notes.append(f"TREC runs of dataset '{result.dataset}': {len(trec_paths) - 1} files and "
                     f"{trec_paths[0].name} in {args.trec_runs}")
    if args.json:
        say(json.dumps(dict(result.to_dict(), written=written, notes=notes), allow_nan=False))
    else:
        say(format_table(result))
        if notes:
            say("\n" + "\n".join(notes))
    return EXIT_FAILED if result.verdict == "failure" else EXIT_OK


def _written(dataset: str, published, recorded, written: dict) -> list[str]:
    """Fill ``written`` with where the calibration of ``dataset`` went (a
    :class:`~eval_harness.calibration.publish.WeightsPublished` and a
    :class:`~eval_harness.calibration.workflow.CalibrationRecorded`); one note each."""
    written["weights"] = published.to_dict()
    weights = f"semantic {published.semantic:g} / keyword {published.keyword:g}"
    notes = [f"calibrated_weights: row {published.row_id} for dataset '{dataset}' ({weights}, "
             f"run {published.run_id}, labels {published.label_source})"]
    change = published.config
    if change is None:
        notes.append(f"config.yaml: not written: {published.config_note}")
    else:
        written["config"] = {"path": str(change.path), "key": change.key,
                             "changed": change.changed, "semantic": change.semantic,
                             "keyword": change.keyword}
        if change.changed:
            notes.append(f"config.yaml: {change.key} {weights} written to {change.path} (was "
                         f"{_previous(change)})")
        else:
            notes.append(f"config.yaml: {change.path} already holds {change.key} {weights}; "
                         f"unchanged")
    written["history"] = str(recorded.history_path)
    notes.append(f"history: {recorded.history_rows} rows of dataset '{dataset}' appended to "
                 f"calibration_grid_history in {recorded.history_path}")
    written["report"], written["plot"] = str(recorded.report), str(recorded.plot)
    notes.append(f"report of dataset '{dataset}': {recorded.report} (plot {recorded.plot.name})")
    return notes


def _previous(change) -> str:
    if change.previous_semantic is None and change.previous_keyword is None:
        return "unset: the global hybrid_search applied"
    return f"{_weight(change.previous_semantic)} / {_weight(change.previous_keyword)}"


def _weight(value: float | None) -> str:
    return "unset" if value is None else f"{value:g}"

"""``eval-harness review export|import`` and ``eval-harness agreement``.

Exit codes as in :mod:`eval_harness.cli`: ``agreement`` exits 1 when the kappa gate fails
(the work ran and found the labels untrustworthy); a bad file, dataset or store exits 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eval_harness.cli.common import EXIT_FAILED, EXIT_OK
from eval_harness.settings import Settings
from eval_harness.store import open_store



def cmd_review_export(args, settings: Settings) -> int:
    from eval_harness.agreement.review import refresh_and_export

    dataset = args.dataset or settings.default_dataset
    with open_store(settings, read_only=True).connection() as conn:
        # Refresh first, so the file shows the judges' current scores (unless this role
        # may only read: then the queue as it is).
        queued, exported = refresh_and_export(
            conn, dataset, Path(args.file), threshold=settings.agreement.disagreement_threshold)
    if queued is None:
        print(f"review queue of '{dataset}' not refreshed: this role may not write the "
              "harness schema, so the queue is exported as it was last refreshed")
    else:
        print(f"review queue of '{dataset}': {queued}")
    print(f"exported {exported.rows} pair(s) ({exported.pending} pending, "
          f"{exported.adjudicated} adjudicated) to {exported.path}; fill in the verdict "
          "column (relevant / not relevant) and run `eval-harness review import "
          f"{exported.path}`")
    return EXIT_OK


def cmd_review_import(args, settings: Settings) -> int:
    from eval_harness.agreement.review import import_review_csv

    # The file names its dataset; --dataset only confirms it (default_dataset plays no part).
    with open_store(settings).connection() as conn:
        imported = import_review_csv(conn, args.dataset, Path(args.file))
    if imported.dataset is None:
        print(f"{args.file} has no rows: nothing to import")
    else:
        print(f"imported {args.file} into the review queue of '{imported.dataset}': "
              f"{imported}")
    return EXIT_OK


def cmd_agreement(args, settings: Settings) -> int:
    from eval_harness.agreement.data import dataset_agreement
    from eval_harness.agreement.report import format_agreement_markdown

    dataset = args.dataset or settings.default_dataset
    with open_store(settings, read_only=True).connection() as conn:
        result = dataset_agreement(conn, dataset, settings.agreement)
    if args.json:
        print(json.dumps(result.to_dict(), allow_nan=False, ensure_ascii=False))
    else:
        print(format_agreement_markdown(result))
    return EXIT_OK if result.gate.passed else EXIT_FAILED


def add_review_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``review export``, ``review import`` and ``agreement`` on the main parser."""
    review = subparsers.add_parser("review", help="human review of pairs the judges disagree on")
    actions = review.add_subparsers(dest="review_command", required=True)
    export = actions.add_parser("export", help="queue disagreements and write them to a CSV file")
    export.add_argument("file", help="CSV file to write")
    export.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    export.set_defaults(func=cmd_review_export)
    imported = actions.add_parser("import", help="store the verdicts of an edited CSV file "
                                  "(all rows or none)")
    imported.add_argument("file", help="CSV file written by `review export`, with verdicts")
    imported.add_argument("--dataset", help="dataset the file must belong to (default: the "
                          "one its dataset column names)")
    imported.set_defaults(func=cmd_review_import)

    agreement = subparsers.add_parser(
        "agreement", help="judge agreement report (exit 1 when the kappa gate fails)")
    agreement.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    agreement.add_argument("--json", action="store_true")
    agreement.set_defaults(func=cmd_agreement)

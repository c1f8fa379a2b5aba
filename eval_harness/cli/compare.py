"""``eval-harness compare BASE CANDIDATE``: is the candidate record worse than the base?

Exit codes: 0 no blocking row is worse (a non-blocking one is a warning), 1 a blocking row is
worse beyond ``ci.compare.margin``, 2 the records could not be compared (a name not recorded,
records that measured another corpus or ground truth, too few shared queries) or another error.
``--junit-xml`` and ``--summary`` are written on exits 0, 1 and 2 alike, so CI shows why.
The records are made by ``report --record NAME`` and ``gate ... --record NAME``
(:mod:`eval_harness.comparison.records`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from time import perf_counter

from eval_harness.cli.common import CliError
from eval_harness.comparison.compare import Comparison, compare_records
from eval_harness.comparison.output import format_table, junit_xml, markdown, to_json
from eval_harness.errors import EXIT_ERROR, EXIT_FAILED, EXIT_OK, UserError
from eval_harness.escaping.terminal import say
from eval_harness.files import write_report
from eval_harness.settings import Settings
from eval_harness.store import open_store


def cmd_compare(args, settings: Settings) -> int:
    started = perf_counter()
    dataset = args.dataset or settings.default_dataset
    try:
        location = open_store(settings, read_only=True)
        with location.connection() as conn:
            comparison = compare_records(conn, settings, args.base, args.candidate,
                                         dataset=dataset)
    except UserError as exc:  # CI gets the reason in both files too
        failed = Comparison(args.base, args.candidate, dataset, False, (str(exc).rstrip("."),),
                            margin=settings.ci.compare.margin, alpha=settings.ci.compare.alpha)
        _write_outputs(args, failed, perf_counter() - started)
        raise
    _write_outputs(args, comparison, perf_counter() - started)
    say(to_json(comparison) if args.json else format_table(comparison))
    if not comparison.comparable:
        return EXIT_ERROR
    return EXIT_FAILED if comparison.failed else EXIT_OK


def _write_outputs(args, comparison: Comparison, seconds: float) -> None:
    for path, text in ((args.junit_xml, lambda: junit_xml(comparison, seconds=seconds)),
                       (args.summary, lambda: markdown(comparison))):
        if path:
            target = Path(path).resolve()
            try:
                write_report(target.parent, target.name, text())
            except OSError as exc:
                raise CliError(f"could not write {path}: {exc.strerror or exc}.") from None


def add_compare_command(subparsers: argparse._SubParsersAction) -> None:
    compare = subparsers.add_parser(
        "compare", help="is the CANDIDATE record worse than BASE? exit 0 no, 1 a blocking row "
                        "is worse, 2 not comparable or error")
    compare.add_argument("base", metavar="BASE", help="the baseline record's name (e.g. main)")
    compare.add_argument("candidate", metavar="CANDIDATE",
                         help="the candidate record's name (e.g. pr-123)")
    compare.add_argument("--dataset", help="the dataset of the retrieval records (default: "
                         "default_dataset)")
    compare.add_argument("--json", action="store_true",
                         help="print one JSON object: metrics, gates, comparable")
    compare.add_argument("--junit-xml", metavar="FILE",
                         help="also write JUnit XML: one test case per row, a blocking worse row "
                              "fails")
    compare.add_argument("--summary", metavar="FILE",
                         help="also write the Markdown pull-request comment (e.g. "
                              "$GITHUB_STEP_SUMMARY)")
    compare.set_defaults(func=cmd_compare)

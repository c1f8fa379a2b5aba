"""``eval-harness review export|sample|import|serve`` and ``eval-harness agreement``.

Exit codes as in :mod:`eval_harness.cli`: ``agreement`` exits 1 when the kappa gate fails
(the work ran and found the labels untrustworthy); a bad file, dataset or store exits 2.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path

from eval_harness.agreement.review import (
    import_review_csv,
    queue_disagreements,
    refresh_and_export,
)
from eval_harness.agreement.review_page import (
    DEFAULT_PORT,
    QUEUE,
    SAMPLE,
    ReviewServer,
    ReviewSession,
    serve_until_stopped,
)
from eval_harness.agreement.sample import export_sample_csv, import_sample_csv, is_sample_file
from eval_harness.cli.common import CliError
from eval_harness.errors import EXIT_FAILED, EXIT_OK
from eval_harness.escaping.terminal import say
from eval_harness.escaping.visible import visible
from eval_harness.settings import Settings
from eval_harness.store import open_store

# The label plan and the agreement report import scipy.stats: seconds at start-up that only
# `review sample --plan` and `agreement` need, so they are imported where those run.

def cmd_review_export(args, settings: Settings) -> int:
    dataset = args.dataset or settings.default_dataset
    with open_store(settings, read_only=True).connection() as conn:
        # Refresh first, so the file shows the judges' current scores (unless this role
        # may only read: then the queue as it is).
        queued, exported = refresh_and_export(
            conn, dataset, Path(args.file), threshold=settings.agreement.disagreement_threshold)
    if queued is None:
        say(f"review queue of '{dataset}' not refreshed: this role may not write the "
            "harness schema, so the queue is exported as it was last refreshed")
    else:
        say(f"review queue of '{dataset}': {queued}")
    say(f"exported {exported.rows} pair(s) ({exported.pending} pending, "
        f"{exported.adjudicated} adjudicated) to {visible(exported.path)}; fill in the "
        "verdict column (relevant / not relevant) and run `eval-harness review import "
        f"{visible(exported.path)}`")
    return EXIT_OK


def cmd_review_sample(args, settings: Settings) -> int:
    dataset = args.dataset or settings.default_dataset
    if args.plan:
        return _plan_sample(args, settings, dataset)
    if _plan_options(args):
        raise CliError(f"{', '.join(_plan_options(args))} only plan a sample; add --plan (it "
                       "draws nothing), or leave them out to draw one.")
    if args.file is None or args.n is None:
        raise CliError("review sample needs FILE and --n N to draw a sample (or --plan with "
                       "--target-width W and/or --gain G to plan one); give them.")
    with open_store(settings).connection() as conn:  # records the drawn pairs
        exported = export_sample_csv(conn, dataset, Path(args.file), n=args.n, seed=args.seed)
    say(f"human sample of '{dataset}' (seed {exported.seed}): {exported.queries} of "
        f"{exported.judged_queries} judged queries, {exported.pairs} pair(s) "
        f"({exported.added} newly recorded, {exported.labelled} already labelled) written to "
        f"{exported.path}; label every row (relevant / not relevant: a query counts only "
        f"when all its pairs are labelled) and run `eval-harness review import "
        f"{exported.path}`")
    return EXIT_OK


def _plan_options(args) -> list[str]:
    return [name for name, value in (("--target-width", args.target_width),
                                     ("--gain", args.gain), ("--power", args.power))
            if value is not None]


def _plan_sample(args, settings: Settings, dataset: str) -> int:
    from eval_harness.calibration.label_plan import plan_human_labels  # heavy: see the top

    if args.file is not None or args.n is not None:
        raise CliError("review sample --plan draws nothing, so it takes no FILE or --n; run "
                       "it without them, then draw with `review sample FILE --n N`.")
    if args.power is not None and args.gain is None:
        raise CliError("--power needs --gain G, the gain to detect; give it.")
    with open_store(settings, read_only=True).connection() as conn:
        plan = plan_human_labels(conn, settings, dataset, target_width=args.target_width,
                                 gain=args.gain, alpha=args.alpha,
                                 power=0.8 if args.power is None else args.power)
    say(plan.paragraph())
    return EXIT_OK


def cmd_review_import(args, settings: Settings) -> int:
    # The file names its dataset; --dataset only confirms it (default_dataset plays no part).
    sample = is_sample_file(Path(args.file))
    importer = import_sample_csv if sample else import_review_csv
    with open_store(settings).connection() as conn:
        imported = importer(conn, args.dataset, Path(args.file))
    if imported.dataset is None:
        say(f"{visible(args.file)} has no rows: nothing to import")
    else:
        target = "human sample" if sample else "review queue"
        say(f"imported {visible(args.file)} into the {target} of "
            f"'{visible(imported.dataset)}': {imported}")
    return EXIT_OK


def cmd_review_serve(args, settings: Settings) -> int:
    dataset = args.dataset or settings.default_dataset
    lists = (SAMPLE,) if args.sample_only else (QUEUE,) if args.queue_only else (SAMPLE, QUEUE)
    reviewer = args.reviewer if args.reviewer is not None else _os_user()
    # autocommit: every verdict is its own transaction, committed before the page's reply
    with open_store(settings).connection(autocommit=True) as conn:
        if QUEUE in lists:  # the queue as `review export` would write it: refreshed first
            queue_disagreements(conn, dataset,
                                threshold=settings.agreement.disagreement_threshold)
        session = ReviewSession(conn, dataset, reviewer=reviewer, lists=lists)
        with ReviewServer(session, port=args.port) as server:
            say(f"review page of '{visible(dataset)}' at {server.url}: {session.summary()}; "
                "keys r relevant, n not relevant, s skip; each verdict is stored at once; "
                "Ctrl-C stops it", flush=True)
            serve_until_stopped(server)  # raises Interrupted when the user stops it
    return EXIT_OK


def _os_user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name this process can find: the column stays blank
        return None


def cmd_agreement(args, settings: Settings) -> int:
    # heavy: see the top
    from eval_harness.agreement.dataset_agreement import dataset_agreement
    from eval_harness.agreement.people import recorded_agreement
    from eval_harness.agreement.report import format_agreement_markdown

    dataset = args.dataset or settings.default_dataset
    with open_store(settings, read_only=True).connection() as conn:
        result = dataset_agreement(conn, dataset, settings.agreement, configured_judges=(
            settings.judges.judge1, settings.judges.judge2))
        # the judges' record and the anchors get the people figures: the only writes
        result, recorded = recorded_agreement(conn, result)
    if not recorded.written:
        say(f"judges' record of '{dataset}' not updated: this role may not write the "
            "harness schema, so it shows the figures of the last update", file=sys.stderr)
    if args.json:
        say(json.dumps(result.to_dict(), allow_nan=False, ensure_ascii=False))
    else:
        say(format_agreement_markdown(result))
    # WARN (stand-ins' labels) is reported, not a failure: it says nothing about the judges
    return EXIT_FAILED if result.verdict.blocks else EXIT_OK


def add_review_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``review export``, ``review sample``, ``review import``, ``review serve`` and
    ``agreement`` on the main parser."""
    review = subparsers.add_parser("review", help="human review of pairs the judges disagree on")
    actions = review.add_subparsers(dest="review_command", required=True)
    export = actions.add_parser("export", help="queue disagreements and write them to a CSV file")
    export.add_argument("file", help="CSV file to write")
    export.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    export.set_defaults(func=cmd_review_export)
    sample = actions.add_parser(
        "sample", help="draw a seeded uniform sample of judged queries and write all their "
        "judged pairs to a CSV file for people to label (corrects calibrate's P@5)")
    sample.add_argument("file", nargs="?", help="CSV file to write (not with --plan)")
    sample.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    sample.add_argument("--n", type=int, metavar="N",
                        help="queries in the sample (a larger N with the same seed extends it)")
    sample.add_argument("--seed", type=int, help="seed of the draw (default: the dataset's "
                        "existing sample's seed, else 0)")
    sample.add_argument("--plan", action="store_true", help="draw nothing: say how many more "
                        "queries to label for --target-width and/or --gain, from the judges' "
                        "agreement with the labelled sample (PPI variance formula)")
    sample.add_argument("--target-width", type=float, metavar="W", help="with --plan: the "
                        "wanted width of the PPI interval on P@5 at the weights in force")
    sample.add_argument("--gain", type=float, metavar="G", help="with --plan: a gain in P@5 "
                        "over the weights in force the PPI test should detect")
    sample.add_argument("--power", type=float, nargs="?", const=0.8, metavar="P",
                        help="with --plan --gain: the wanted power (default 0.8)")
    sample.add_argument("--alpha", type=float, default=0.05, metavar="A",
                        help="with --plan: the test's level / 1 - the interval's (default 0.05)")
    sample.set_defaults(func=cmd_review_sample)
    imported = actions.add_parser("import", help="store the verdicts of an edited CSV file "
                                  "(all rows or none)")
    imported.add_argument("file", help="CSV file written by `review export` or `review "
                          "sample`, with verdicts")
    imported.add_argument("--dataset", help="dataset the file must belong to (default: the "
                          "one its dataset column names)")
    imported.set_defaults(func=cmd_review_import)
    serve = actions.add_parser(
        "serve", help="label the human sample and the review queue in a local web page, one "
        "pair at a time (keys r / n / s), each verdict stored at once with import's checks; "
        "Ctrl-C stops it")
    serve.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="N",
                       help=f"port on 127.0.0.1, the only address served (default "
                       f"{DEFAULT_PORT}; 0 picks a free one)")
    serve.add_argument("--reviewer", metavar="NAME", help="stored in the reviewer column of "
                       "each verdict (default: the operating system's user name)")
    only = serve.add_mutually_exclusive_group()
    only.add_argument("--sample-only", action="store_true",
                      help="only the human sample's unlabelled pairs")
    only.add_argument("--queue-only", action="store_true",
                      help="only the review queue's pending pairs")
    serve.set_defaults(func=cmd_review_serve)

    agreement = subparsers.add_parser(
        "agreement", help="judge agreement report (exit 1 when the kappa gate fails; a "
        "failure on local stand-ins' labels only warns)")
    agreement.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    agreement.add_argument("--json", action="store_true")
    agreement.set_defaults(func=cmd_agreement)

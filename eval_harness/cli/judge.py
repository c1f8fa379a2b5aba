"""``eval-harness judge``: dual-judge relevance scores for a dataset's ground truth.

Prints a progress bar (on stderr, in a terminal only) and a summary: pairs, scored, unscored,
failed, provider calls, cache hits, retries, requests the provider refused (rate limit) and
time spent waiting, a server's request to wait longer than calls wait, tokens, cost and
pooled kappa (or one JSON object with ``--json``). Exit code: 0 when every planned query was
written and every judgement has a score, 1 when the run stopped early (budget, no quota,
rejected key) or a judgement is unscored or failed (what was done is kept; running again
costs nothing for it; an unscored judgement's replies are cached, so ``--retry-unscored``
re-asks those), 2 when it could not run or the store went away under it (one sentence: what
was kept, the server's log), 130 / 143 when SIGINT / SIGTERM stopped it (one line: the
judgements kept; see :mod:`eval_harness.stopping`).

``--shard I/N`` judges only the queries of shard I (:func:`eval_harness.judges.dual.shards.shard_of`);
runs of different shards go side by side, each paying only for its own pairs.

``--grid-pool`` (or ``judges.grid_pool: true``) adds, for a dataset with human labels, every
calibration grid weight's top 5 to the pairs (:mod:`eval_harness.judges.dual.plan`): the
documents that leave P@5 a lower bound (Judged@5, :mod:`eval_harness.calibration.judged_at_5`).

``--retest`` (or ``judges.retest``) has each judge re-score a seeded sample of queries past
the reply cache after the run (:mod:`eval_harness.judges.retest`): the summary says how
often each judge flips its own labels; those requests are paid, logged as retests.

``--refreeze-anchors`` (with ``judges.anchors`` on) replaces the dataset's frozen anchor set:
it says what it drops, judges as usual without re-judging the old set, then drops it and
freezes a new one from the current judges in one transaction, re-scored past the cache
(:mod:`eval_harness.judges.anchors.refreeze`). It refuses with one sentence when anchors
are off.

``--dry-run`` plans the same pairs (of the same shard with ``--shard``) and builds the same
requests, looks them up in the reply cache and prints, per judge, the pairs, how many are
cached, how many would be paid for, the estimated tokens and cost (see
:mod:`eval_harness.judges.dual.dry_run`; with ``judges.staged``, judge 2's figures are a range:
at least its first sample, at most every query); it sends nothing and writes nothing: a live
dataset is not attached again (its mapping is checked and the ground truth as last attached is
planned; :func:`eval_harness.datasets.prepare.check_attached_dataset`), so a role that may only
SELECT can run it. Exit code 0, or 2 when the run could not start either.

The judge pipeline (scipy and some 600 modules, about a second) is imported inside the
functions that run this command, so ``eval-harness --help`` and every other command start
without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from eval_harness.cli.common import CliError
from eval_harness.errors import EXIT_FAILED, EXIT_OK
from eval_harness.escaping.terminal import say
from eval_harness.judges.client.pricing import MissingPrice
from eval_harness.progress import progress_bar
from eval_harness.settings import Settings
from eval_harness.store import open_store


def add_judge_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "judge", help="score ground-truth (query, document) pairs with both relevance judges")
    parser.add_argument("--dataset", help="dataset in the store (default: default_dataset)")
    parser.add_argument("--limit", type=_positive, metavar="N",
                        help="judge only the first N ground-truth queries (by id)")
    parser.add_argument("--batch", action="store_true",
                        help="use the providers' batch APIs (cheaper, can take hours)")
    parser.add_argument("--retry-unscored", action="store_true",
                        help="re-ask the judgements that earlier replies left unscored, past "
                             "the cache (a new paid call each)")
    parser.add_argument("--retest", action="store_true",
                        help="test-retest for this run: each judge re-scores a seeded sample "
                             "of queries judges.retest.repeats times past the cache "
                             "(judges.retest, default 20 queries x 3 repeats; paid)")
    parser.add_argument("--refreeze-anchors", action="store_true",
                        help="drop the dataset's frozen anchor set (judges.anchors) and freeze "
                             "a new one from the current judges in this run, re-scored past "
                             "the cache (paid as anchors); says what it drops first")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the pairs, estimated tokens and cost per judge and send "
                             "nothing (the store is only read)")
    parser.add_argument("--shard", type=_shard, metavar="I/N",
                        help="judge only the queries of shard I of N (0 <= I < N; a query's "
                             "shard is a stable hash of its id): processes judging different "
                             "shards run side by side")
    parser.add_argument("--grid-pool", action="store_true",
                        help="a dataset with human labels: also judge every calibration grid "
                             "weight's top 5 (the documents Judged@5 finds unlabelled); "
                             "judges.grid_pool in config.yaml does it on every run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=cmd_judge)


def _shard(text: str) -> tuple[int, int]:
    # the judge pipeline, imported when the command runs (module docstring)
    from eval_harness.judges.dual.shards import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def cmd_judge(args, settings: Settings) -> int:
    # the judge pipeline, imported when the command runs (module docstring)
    from eval_harness.judges.client.session import JudgeUnavailable
    from eval_harness.datasets.prepare import check_attached_dataset, prepare_dataset
    from eval_harness.judges.dual.run import judge_dataset

    dataset = args.dataset or settings.default_dataset
    if args.grid_pool:  # one run's override of judges.grid_pool
        settings = replace(settings, judges=replace(settings.judges, grid_pool=True))
    if args.retest:  # one run's override of judges.retest.enabled
        settings = replace(settings, judges=replace(
            settings.judges, retest=replace(settings.judges.retest, enabled=True)))
    if args.refreeze_anchors:
        _check_refreeze(args, settings)
    if args.dry_run:  # writes nothing: never migrates, never attaches
        location = open_store(settings, read_only=True)
        say(f"store: {location.description}", file=sys.stderr)
        with location.connection() as conn:
            as_attached = check_attached_dataset(conn, settings, dataset)
            if args.refreeze_anchors:
                say(_refreeze_notice(conn, settings, dataset, dry_run=True), file=sys.stderr)
        if as_attached:
            say(as_attached, file=sys.stderr)
        return _dry_run(args, settings, location, dataset)
    location = open_store(settings)
    say(f"store: {location.description}", file=sys.stderr)
    with location.connection() as conn:  # a live dataset: its current ground truth
        attached = prepare_dataset(conn, settings, dataset).attach
    if attached is not None:
        say(attached, file=sys.stderr)
    if settings.judges.anchors.enabled:
        with location.connection() as conn:
            _give_anchors_verdicts(conn, dataset)
            if args.refreeze_anchors:
                say(_refreeze_notice(conn, settings, dataset, dry_run=False),
                    file=sys.stderr)
    with location.connection() as conn, progress_bar("judging", unit="pair") as progress:
        try:
            summary = judge_dataset(conn, settings, dataset, limit=args.limit, batch=args.batch,
                                    progress=progress, retry_unscored=args.retry_unscored,
                                    shard=args.shard, refreeze_anchors=args.refreeze_anchors)
        except (JudgeUnavailable, MissingPrice) as exc:
            raise CliError(str(exc.args[0] if exc.args else exc)) from None
    if args.json:
        say(json.dumps(summary.to_dict(), allow_nan=False))
    else:
        say(summary.format())
    return EXIT_OK if summary.complete else EXIT_FAILED


def _give_anchors_verdicts(conn, dataset: str) -> None:
    """The human verdicts given since onto the anchors, so this run's drift check sees them."""
    # the judge pipeline, imported when the command runs (module docstring)
    from eval_harness.agreement.people import give_anchors_verdicts

    give_anchors_verdicts(conn, dataset)
    conn.commit()


def _check_refreeze(args, settings: Settings) -> None:
    if not settings.judges.anchors.enabled:
        raise CliError("--refreeze-anchors needs the anchor set switched on: add "
                       "`anchors: {pairs: 100, seed: 0}` under judges in config.yaml.")
    if args.shard is not None:
        raise CliError("--refreeze-anchors freezes the set from the whole dataset's pairs; run "
                       "it without --shard.")


def _refreeze_notice(conn, settings: Settings, dataset: str, *, dry_run: bool) -> str:
    """What ``--refreeze-anchors`` drops and what it freezes instead, said before the run."""
    # the judge pipeline, imported when the command runs (module docstring)
    from eval_harness.judges.anchors.refreeze import describe_frozen, frozen_judges

    judges = ", ".join(f"judge {slot} {spec}" for slot, spec in
                       ((1, settings.judges.judge1), (2, settings.judges.judge2)))
    verb = "would drop" if dry_run else "drops"
    return (f"--refreeze-anchors: this run {verb} the anchor set of '{dataset}' "
            f"({describe_frozen(frozen_judges(conn, dataset))}) after judging, and freezes "
            f"{settings.judges.anchors.pairs} pairs anew from {judges}, re-scored past the "
            "cache (one request per anchor and LLM judge, logged as anchors)")


def _dry_run(args, settings: Settings, location, dataset: str) -> int:
    # the judge pipeline, imported when the command runs (module docstring)
    from eval_harness.judges.client.session import JudgeUnavailable
    from eval_harness.judges.dual.dry_run import estimate_judge_run

    if args.retry_unscored:
        raise CliError("--dry-run does not estimate --retry-unscored re-asks; run the dry run "
                       "without --retry-unscored.")
    with location.connection() as conn:
        try:
            report = estimate_judge_run(conn, settings, dataset, limit=args.limit,
                                        batch=args.batch, shard=args.shard)
        except (JudgeUnavailable, MissingPrice) as exc:
            raise CliError(str(exc.args[0] if exc.args else exc)) from None
        finally:
            conn.rollback()  # a dry run keeps nothing, whatever it read through
    say(json.dumps(report.to_dict(), allow_nan=False) if args.json else report.format())
    return EXIT_OK

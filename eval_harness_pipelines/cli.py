"""The ``eval-harness`` console command: the library's commands plus the Dagster-backed ones.

``run`` materializes the whole graph (:mod:`eval_harness_pipelines.run`) and ``gate
--partition DAY`` runs ``quality_gate_job`` (:mod:`eval_harness_pipelines.gate`), so both land
in the Dagster run history. Everything else is :mod:`eval_harness.cli` unchanged, which also
runs alone (``python -m eval_harness.cli``) where Dagster is not wanted.

Exit 1 means "the work ran and found a failure" (``gate``: a blocking gate failed), and CI
acts on it; so an exception nobody expected (a bug, a library failing inside) is exit 2 with
one sentence, like any other "could not run", and its traceback goes to a file the sentence
names instead of the terminal.
"""

from __future__ import annotations

import sys
import tempfile
import traceback

from eval_harness.cli import build_parser as library_parser
from eval_harness.cli import main as library_main
from eval_harness.cli.common import EXIT_ERROR
from eval_harness.store.connection import redact_conninfo
from eval_harness_pipelines.gate import run_gate_job
from eval_harness_pipelines.run import add_run_command


def build_parser():
    return library_parser(extend=add_run_command, partition_runner=run_gate_job)


def main(argv: list[str] | None = None) -> int:
    try:
        return library_main(argv, parser=build_parser())
    except Exception as exc:  # not KeyboardInterrupt / SystemExit: those keep their codes
        print(f"eval-harness: error: {internal_error(exc)}", file=sys.stderr)
        return EXIT_ERROR


def internal_error(exc: Exception) -> str:
    """One sentence for an unexpected exception; its traceback is written to a temporary file.
    Both are redacted (:func:`redact_conninfo`): an exception may quote a connection string."""
    lines = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", prefix="eval-harness-error-",
                                         suffix=".txt", delete=False) as out:
            out.write(redact_conninfo("".join(traceback.format_exception(exc))))
        where = f"; traceback: {out.name}"
    except OSError:
        where = ""
    return redact_conninfo(f"internal error ({what}); the command could not run, no check "
                           f"failed{where}; please report it.")


if __name__ == "__main__":
    sys.exit(main())

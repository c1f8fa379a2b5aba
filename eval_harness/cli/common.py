"""What every ``eval-harness`` subcommand module shares: exit codes and the user-facing error.

Kept apart from :mod:`eval_harness.cli`, which imports the subcommand modules, so they can
import this at the top instead of reaching back into ``cli`` at call time.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2  # success / ran and found a failure / could not run


class CliError(Exception):
    """A user-facing error: printed as one sentence, exit code 2."""


def root_cause(error) -> str:
    """The innermost cause of a Dagster step failure (SerializableErrorInfo), as one line."""
    while error.cause is not None:
        error = error.cause
    lines = error.message.strip().splitlines()
    text = lines[0] if lines else error.cls_name or "unknown error"
    return text.split(": ", 1)[1] if text.startswith(f"{error.cls_name}: ") else text

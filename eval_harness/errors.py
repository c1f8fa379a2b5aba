"""What every entry point reports the same way: exit codes and the errors a user can cause.

The library's command line (:mod:`eval_harness.cli`) and the Dagster-backed commands above it
(``eval_harness_pipelines``) both end in these codes, so they live below both.

A :class:`UserError` is one the user can fix: a bad file or option, a dataset whose rows the
work cannot use, a name or id that is not there, a missing key, a store that cannot be reached.
The commands print it as its one sentence and exit 2. Any other exception that reaches a
command is a bug, and is reported as one (an "internal error" line naming the exception and a
file with its traceback, exit 2 as well: exit 1 means the work ran and found a failure). So
code raises a user error only where the user can cause it, and a plain ``ValueError`` where
only code can.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2  # success / ran and found a failure / could not run


class UserError(Exception):
    """A user-facing error: printed as one sentence, exit code 2 (the command line calls it
    ``CliError``)."""


class InvalidInput(UserError, ValueError):
    """A value the user gave that the work cannot use: an option, a file, a line of it, the
    rows of a dataset (a ``ValueError`` too, for callers of the library)."""


class UnknownName(UserError, LookupError):
    """A name or id the user gave that the configuration or the store does not have (a
    ``LookupError`` too); its message is the sentence, never quoted like a ``KeyError``'s."""

"""What every entry point reports the same way: exit codes and the one-sentence user error.

The library's command line (:mod:`eval_harness.cli`) and the Dagster-backed commands above it
(``eval_harness_pipelines``) both end in these codes, so they live below both.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2  # success / ran and found a failure / could not run


class UserError(Exception):
    """A user-facing error: printed as one sentence, exit code 2 (the command line calls it
    ``CliError``)."""

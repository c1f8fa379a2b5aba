"""The ``eval-harness`` console command: the library's commands plus the Dagster-backed ones.

``run`` materializes the whole graph (:mod:`eval_harness_pipelines.run`) and ``gate
--partition DAY`` runs ``quality_gate_job`` (:mod:`eval_harness_pipelines.gate`), so both land
in the Dagster run history. Everything else is :mod:`eval_harness.cli` unchanged, which also
runs alone (``python -m eval_harness.cli``) where Dagster is not wanted.

An exception nobody expected is exit 2 with one sentence in both (see
:func:`eval_harness.cli.common.internal_error`).
"""

from __future__ import annotations

import sys

from eval_harness.cli import build_parser as library_parser
from eval_harness.cli import main as library_main
from eval_harness_pipelines.gate import run_gate_job
from eval_harness_pipelines.run import add_run_command


def build_parser():
    return library_parser(extend=add_run_command, partition_runner=run_gate_job)


def main(argv: list[str] | None = None) -> int:
    return library_main(argv, parser=build_parser())


if __name__ == "__main__":
    sys.exit(main())

"""`python -m eval_harness.cli`: the library's command line (without the Dagster-backed
commands)."""

import sys

from eval_harness.cli import main

sys.exit(main())

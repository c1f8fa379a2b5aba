#!/usr/bin/env python
"""Check the Dagster UI of this project in headless Chromium; one line per check.

    .venv/bin/python -m tools.ui_check [--config config.yaml] [--screenshots DIR]

Starts ``dagster dev`` with a throwaway DAGSTER_HOME, store and config copy (nothing in the
checkout changes), then checks the asset graph, the asset checks, schedules, sensors and jobs,
launches main_job with the UI's "Materialize all" button and finds the run in the history.
Needs the Debian packages chromium and chromium-driver (driven with Selenium, from the test
extra). Exit code 0 when every check passes, 1 when one fails, 2 when the checks could not
run. The checks are tools/ui_check/check.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.ui_check.environment import ROOT, UICheckUnavailable  # noqa: E402

SELENIUM_HINT = ("selenium is not installed (it comes with the test extra): run "
                 "`.venv/bin/python -m pip install -c requirements.lock -e '.[test]'`.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml",
                        help="config file to copy for the run (default: the project's)")
    parser.add_argument("--screenshots", type=Path, default=Path("/tmp/eval-harness-ui"),
                        help="folder for the screenshots and logs (default: %(default)s)")
    parser.add_argument("--page-timeout", type=float, default=30.0,
                        help="seconds to wait for a page to show what it must (default: 30)")
    parser.add_argument("--run-timeout", type=float, default=300.0,
                        help="seconds to wait for the launched run to finish (default: 300)")
    args = parser.parse_args(argv)
    try:
        from tools.ui_check.check import run_ui_checks
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "selenium":
            raise
        print(f"error: {SELENIUM_HINT}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        results = run_ui_checks(config=args.config, screenshots=args.screenshots,
                                page_timeout=args.page_timeout, run_timeout=args.run_timeout,
                                report=lambda line: print(line, flush=True))
    except UICheckUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = [result for result in results if not result.passed]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed in "
          f"{time.monotonic() - started:.0f} s; screenshots in {args.screenshots}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

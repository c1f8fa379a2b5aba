"""The adaptive judge rate limiter under a provider limit that changes mid-run
(3,000 -> 1,000 -> 3,000 requests/min): a shortcut to the ``changing`` scenarios of
benchmarks/judge_throughput.py, which measures them in its one run with the others.

    .venv/bin/python benchmarks/judge_adaptive.py [--phase-seconds 25] [--apis anthropic openai]
        [--no-headers] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import judge_throughput  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase-seconds", default="25")
    parser.add_argument("--apis", nargs="+", default=["anthropic", "openai"])
    parser.add_argument("--concurrency", default="16")
    parser.add_argument("--no-headers", action="store_true",
                        help="the server sends no rate-limit headers: 429s alone")
    args = parser.parse_args()
    scenario = "changing-no-headers" if args.no_headers else "changing"
    sys.argv = [sys.argv[0], "--scenarios", scenario, "--phase-seconds", args.phase_seconds,
                "--concurrency", args.concurrency, "--apis", *args.apis]
    return judge_throughput.main()


if __name__ == "__main__":
    sys.exit(main())

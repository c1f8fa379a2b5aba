#!/usr/bin/env bash
# Set up (first time) and run the test suite against a real embedded PostgreSQL.
# Tests run in EVAL_HARNESS_TEST_WORKERS processes (pytest-xdist, default 2; 0 runs them in
# this process), each test file in one process: a worker starts its own embedded server, and
# most of the suite waits on subprocesses and servers rather than the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_bootstrap.sh
bootstrap "[test]"
workers="${EVAL_HARNESS_TEST_WORKERS:-2}"
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile "$@"

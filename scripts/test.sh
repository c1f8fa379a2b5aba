#!/usr/bin/env bash
# Set up (first time), lint and type-check (scripts/lint.sh: ruff, mypy; a finding fails the
# run before any test starts), and run the test suite against a real embedded PostgreSQL.
# Tests run in EVAL_HARNESS_TEST_WORKERS processes (pytest-xdist, default 2; 0 runs them in
# this process), each test file in one process: a worker starts its own embedded server, and
# most of the suite waits on subprocesses and servers rather than the CPU.
# The run's temporary files (embedded servers' data included) live in a folder of its own,
# not in pytest's shared /tmp/pytest-of-$USER, where another pytest run on the machine prunes
# old sessions and could delete a running server's data; it is removed after a passing run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_bootstrap.sh
bootstrap test,docs  # docs: tests/test_docs.py builds the manual with mkdocs --strict
scripts/lint.sh
workers="${EVAL_HARNESS_TEST_WORKERS:-2}"
basetemp="$(mktemp -d "${TMPDIR:-/tmp}/eval-harness-tests.XXXXXX")"
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile \
  --basetemp="$basetemp" "$@" || status=$?
if [ "$status" -eq 0 ]; then rm -rf "$basetemp"; else echo "test files kept in $basetemp" >&2; fi
exit "$status"

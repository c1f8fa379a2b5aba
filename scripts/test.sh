#!/usr/bin/env bash
# Set up (first time) and run the test suite against a real embedded PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_bootstrap.sh
bootstrap "[test]"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"

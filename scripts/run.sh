#!/usr/bin/env bash
# Set up (first time) and run the main job on the embedded defaults: no server, no API key.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_bootstrap.sh
bootstrap ""
exec .venv/bin/eval-harness run "$@"

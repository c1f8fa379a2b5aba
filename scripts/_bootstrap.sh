# Shared by run.sh and test.sh: create .venv and install the locked dependencies when the
# lock file or pyproject.toml changed since the last install. Usage: bootstrap EXTRAS
set -euo pipefail

bootstrap() {
  local extras="$1"
  local py="${PYTHON:-python3}"
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "eval-harness needs Python >= 3.11 (found: $("$py" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
    exit 2
  fi
  if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
  fi
  local stamp=".venv/.eval-harness-installed"
  local want
  want="$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1) ${extras}"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "Installing dependencies into .venv (first run takes a few minutes)..." >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
      -c requirements.lock -e ".${extras}"
    echo "$want" > "$stamp"
  fi
}

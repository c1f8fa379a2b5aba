# Shared by run.sh and test.sh: create .venv and install the locked dependencies when the
# lock file or pyproject.toml changed since the last install, or when an extra is asked for
# that the last install did not include. One venv serves both scripts: the stamp records the
# extras installed, and an install keeps those the last one had (run.sh after test.sh reuses
# the test venv as it is). Usage: bootstrap EXTRAS   (EXTRAS: "", "test" or a comma list such as
# "test,docs")
set -euo pipefail

bootstrap() {
  local wanted="${1//,/ }"
  local py="${PYTHON:-python3}"
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "eval-harness needs Python >= 3.11 (found: $("$py" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
    exit 2
  fi
  if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
  fi
  local stamp=".venv/.eval-harness-installed"
  local locked had="" extras
  locked="$(cat requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ]; then
    read -r had_lock had < "$stamp" || true
    had="${had//[\[\]]/}"  # stamps written before one venv served both said "[test]"
    if [ "${had_lock:-}" = "$locked" ]; then
      local name missing=""
      for name in $wanted; do
        [[ ",$had," == *",$name,"* ]] || missing=1
      done
      [ -n "$missing" ] || return 0
    fi
  fi
  extras="$(printf '%s\n' ${had//,/ } $wanted | sort -u | paste -sd, -)"
  echo "Installing dependencies into .venv (first run takes a few minutes)..." >&2
  # -qq: pip says errors only; its warnings here are about this machine's own pip settings
  # (find-links folders that hold no copy of a package), not about the install
  .venv/bin/python -m pip install -qq --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -qq --disable-pip-version-check \
    -c requirements.lock -e ".${extras:+[$extras]}"
  if [[ ",$extras," == *",test,"* ]]; then
    # ranx, the tests' reference for ranking metrics, compiles its numba kernels on first use
    # (about a minute on two cores) and caches them in the venv: compile them here, once per
    # install, rather than inside the first test run of every fresh venv
    .venv/bin/python -W ignore -c 'from ranx import Qrels, Run, evaluate
evaluate(Qrels({"q": {"d": 1}}), Run({"q": {"d": 1.0, "e": 0.5}}),
         ["precision@5", "recall@5", "ndcg@10", "mrr@10"])' >/dev/null 2>&1 || true
  fi
  echo "$locked $extras" > "$stamp"
}

"""The Dagster instance folder (DAGSTER_HOME) that eval-harness runs use.

``dagster.yaml`` is written by us (recognised by its first line) and rewritten when the
settings change; a file someone wrote by hand is left alone. With ``DAGSTER_POSTGRES_URL``
set, Dagster's own run, event and schedule storage goes to that Postgres (dagster-postgres),
so several machines share one run history. The file names the environment variable, never
the URL, so no password is written to disk.
"""

from __future__ import annotations

import os
from pathlib import Path

from eval_harness.settings import Settings

# The marker keeps its first wording (files written by earlier versions are still ours).
MARKER = "# Written by eval-harness (eval_harness/dagster_home.py); edit config.yaml instead."


def instance_yaml(settings: Settings) -> str:
    lines = [MARKER, "telemetry:", "  enabled: false"]
    if settings.dagster_postgres_url:
        lines += ["storage:", "  postgres:", "    postgres_url:",
                  "      env: DAGSTER_POSTGRES_URL"]
    return "\n".join(lines) + "\n"


def prepare_dagster_home(settings: Settings) -> Path:
    """Point DAGSTER_HOME at the project folder (unless set) and keep its dagster.yaml current."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(settings.dagster_home)))
    home.mkdir(parents=True, exist_ok=True)
    path = home / "dagster.yaml"
    wanted = instance_yaml(settings)
    if not path.exists() or (path.read_text(encoding="utf-8").startswith(MARKER)
                             and path.read_text(encoding="utf-8") != wanted):
        path.write_text(wanted, encoding="utf-8")
    return home

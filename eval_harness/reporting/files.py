"""Writing generated reports atomically into the reports folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_report(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``folder/name`` via a temporary file and rename (never half-written)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

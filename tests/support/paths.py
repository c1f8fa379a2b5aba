"""Where the repository and its data are, for tests wherever they sit."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

"""Which config file a command reads, and reading it: the file half of
:mod:`eval_harness.settings` (which turns its contents into typed settings).

The file is the one given (``--config``, a caller's path), else ``EVAL_HARNESS_CONFIG``, else
``config.yaml`` in the working directory; with none of these, defaults apply. Where it came
from is kept (:data:`ConfigOrigin`), so a command can say in one line which file it read, or that
it read none: a command run in the wrong folder must not quietly start a new embedded store
there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from eval_harness.settings.errors import ConfigError

DEFAULT_CONFIG_NAME = "config.yaml"
CONFIG_VARIABLE = "EVAL_HARNESS_CONFIG"
# where the config file came from: given by the caller (--config), the environment variable,
# found as ./config.yaml, or none at all (defaults apply)
ConfigOrigin = Literal["option", "environment", "working directory", "none"]


def locate_config(config_path: Path | str | None,
                  env: Mapping[str, str]) -> tuple[Path, ConfigOrigin]:
    """The config file to read and its origin (a :data:`ConfigOrigin`). A file that was asked
    for and is missing is a :class:`ConfigError`; a missing ./config.yaml is origin "none"."""
    origin: ConfigOrigin
    if config_path:
        path, origin = Path(config_path), "option"
    elif env.get(CONFIG_VARIABLE):
        path, origin = Path(env[CONFIG_VARIABLE]), "environment"
    else:
        path = Path(DEFAULT_CONFIG_NAME)
        return path, "working directory" if path.is_file() else "none"
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found.")
    return path, origin


def read_config(path: Path) -> Mapping[str, Any]:
    """The parsed file; a read or YAML error is one sentence naming ``path:line:column``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot be read ({reason}).") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, exc)) from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping of keys.")
    return raw


def _yaml_error(path: Path, error: yaml.YAMLError) -> str:
    """``path:line:column: not valid YAML: <problem>.`` (1-based, as editors count)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or (str(error).strip().splitlines() or ["?"])[0]
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return f"{where}: not valid YAML: {problem.rstrip('.')}."

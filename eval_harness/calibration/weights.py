"""Writing the calibrated hybrid weights back into ``config.yaml``.

The file is edited as a round trip (ruamel.yaml): only ``hybrid_search.semantic`` and
``hybrid_search.keyword`` change; every other key, the order, the comments and the
formatting stay as they were. The new text goes to a temporary file in the same folder,
which is flushed to disk and then renamed over the original (``os.replace`` is atomic on
POSIX and Windows), so a reader or a crash sees either the old file or the new one, never a
half-written one (:func:`eval_harness.files.write_file_atomically`). A crash between
write and rename leaves the original untouched and at most a hidden
``.config.yaml.*.tmp`` file, which the next write does not depend on.

Writers take turns: the read-modify-rename runs under an exclusive ``flock`` on the config
file (POSIX), so two calibrations finishing at once both succeed, the later one re-reading
what the earlier one wrote. Anyone else changing the file meanwhile (an editor takes no lock)
is still caught by comparing the file before and after, and nothing is written then.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from eval_harness.files import write_file_atomically

WEIGHT_DECIMALS = 10  # keyword = round(1 - semantic, 10): YAML shows 0.2, not 0.19999999999999996


class ConfigWriteError(ValueError):
    """config.yaml could not be updated; the message names the file and what to do."""


@dataclass(frozen=True)
class WeightsWritten:
    path: Path
    semantic: float
    keyword: float
    previous_semantic: float | None
    previous_keyword: float | None
    changed: bool  # False: the file already held these weights and was not rewritten


def keyword_weight_for(semantic_weight: float) -> float:
    """The keyword weight paired with a semantic weight: ``1 - semantic``, rounded to 10
    decimals so that it is the double the YAML file shows (and hybrid search then uses)."""
    return round(1.0 - float(semantic_weight), WEIGHT_DECIMALS)


def write_calibrated_weights(config_path: Path | str, semantic_weight: float) -> WeightsWritten:
    """Set ``hybrid_search.semantic`` / ``.keyword`` in ``config_path``, keeping the rest.

    The ``hybrid_search`` section is created at the end of the file when it is missing; a
    file that already holds these weights is left alone (not even its modification time).
    Raises :class:`ConfigWriteError` when the file is missing, is not a YAML mapping, or was
    changed by someone else while it was being rewritten (then nothing is written).
    """
    if not 0.0 <= semantic_weight <= 1.0:
        raise ConfigWriteError(f"semantic weight must lie in [0, 1], got {semantic_weight}.")
    path = Path(config_path)
    with _writers_take_turns(path):
        return _write_weights(path, semantic_weight)


@contextmanager
def _writers_take_turns(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (no lock where flock does not exist, or when the
    file cannot be opened: reading it then fails with the proper message)."""
    try:
        import fcntl
    except ImportError:  # Windows: the before/after comparison alone guards the file
        yield
        return
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(path).st_ino
            except FileNotFoundError:
                current = None
            # The writer we waited for renamed a new file into place; the lock we hold is on
            # the old one, which nobody else locks any more: lock the new one instead.
            if current == os.fstat(fd).st_ino:
                yield
                return
        finally:
            os.close(fd)  # releases the lock


def _write_weights(path: Path, semantic_weight: float) -> WeightsWritten:
    try:
        before = path.stat()
        original = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigWriteError(f"{path}: cannot read the config file ({exc.strerror}); "
                               f"check the path given with --config.") from None
    round_trip = YAML(typ="rt")
    round_trip.preserve_quotes = True
    round_trip.width = 4096  # never re-wrap long lines or comments
    try:
        document = round_trip.load(original)
    except YAMLError as exc:
        raise ConfigWriteError(
            f"{path}: not valid YAML ({exc}); fix it before calibrating.") from None
    if document is None:
        document = round_trip.load("{}")
    if not hasattr(document, "get"):
        raise ConfigWriteError(f"{path}: the top level must be a mapping of keys.")
    section = document.get("hybrid_search")
    if section is None:
        document["hybrid_search"] = section = round_trip.load("{}")
    elif not hasattr(section, "get"):
        raise ConfigWriteError(f"{path}: 'hybrid_search' must be a mapping.")
    previous = (_as_float(section.get("semantic")), _as_float(section.get("keyword")))
    semantic, keyword = round(float(semantic_weight), WEIGHT_DECIMALS), keyword_weight_for(
        semantic_weight)
    if previous == (semantic, keyword):
        return WeightsWritten(path, semantic, keyword, *previous, changed=False)
    section["semantic"] = semantic
    section["keyword"] = keyword
    buffer = io.StringIO()
    round_trip.dump(document, buffer)
    text = buffer.getvalue()
    _check_written_weights(path, text, semantic, keyword)
    if _changed_since(path, before):
        raise ConfigWriteError(f"{path} changed while the calibrated weights were being "
                               f"written; nothing was written, run the calibration again.")
    write_file_atomically(path, text.encode("utf-8"))
    return WeightsWritten(path, semantic, keyword, *previous, changed=True)


def _check_written_weights(path: Path, text: str, semantic: float, keyword: float) -> None:
    """Parse the new text as the settings loader will, before it replaces the file."""
    parsed = yaml.safe_load(text)
    written = (parsed or {}).get("hybrid_search") or {}
    if written.get("semantic") != semantic or written.get("keyword") != keyword:
        raise ConfigWriteError(f"{path}: the rewritten file would not hold the calibrated "
                               f"weights (an unusual YAML construct?); nothing was written.")


def _changed_since(path: Path, before: os.stat_result) -> bool:
    try:
        now = path.stat()
    except FileNotFoundError:
        return True
    return (now.st_mtime_ns, now.st_size, now.st_ino) != (before.st_mtime_ns, before.st_size,
                                                           before.st_ino)


def _as_float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

"""Atomic file writes: a reader or a crash sees the old file or the new one, never half of one.

The data goes to a temporary file in the target's folder, is flushed to disk (``fsync``) and
then renamed over the target (``os.replace`` is atomic on POSIX and Windows); the folder is
flushed after the rename, so the new name survives a power loss too. A crash between write
and rename leaves the original untouched and at most a hidden ``.<name>.*.tmp`` file, which
no later write depends on.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["write_file_atomically", "write_report"]


def write_file_atomically(path: Path | str, data: bytes) -> Path:
    """Replace ``path`` with ``data`` through a flushed temporary file in the same folder.

    The folder is created when missing. The file keeps its permission bits (a new file gets
    0666 less the umask, as ``open`` would give it). On any error the temporary file is
    removed and the original is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _target_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # the bytes are on disk before the rename publishes them
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)
    return path


def write_report(folder: Path | str, name: str, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``folder/name`` atomically; see :func:`write_file_atomically`."""
    return write_file_atomically(Path(folder) / name, text.encode("utf-8"))


def _target_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder: Path) -> None:
    """Flush the folder entry the rename changed (POSIX; Windows cannot open a folder)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:  # a file system without folder fsync: the rename itself is done
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)

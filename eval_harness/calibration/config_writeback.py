"""Writing a dataset's calibrated hybrid weights back into ``config.yaml``.

The weights go under the dataset they were calibrated on, ``datasets.<name>.hybrid_search:
{semantic, keyword}`` (read back by :meth:`eval_harness.settings.Settings.weights_for`); the
global ``hybrid_search`` stays the default for datasets never calibrated and is never
rewritten here, so calibrating one dataset cannot change another's weights.

ruamel.yaml's round-trip mode does the edit: it loads the file with its comments, quoting and
flow or block styles, the two weights are set (a new ``hybrid_search`` takes the entry's own
style: an indented block under a block entry, ``{semantic: ..., keyword: ...}`` inside a flow
one or in place of ``null``), and the document is rendered again. ruamel keeps the blank lines
and comments that follow an entry on its last item, so they are carried to the item appended
after it, and a comment after a one-line flow collection keeps its distance from it. ruamel
does not record every layout (a flow collection spread over several lines comes back on one
line, ``null`` as an empty value), so the rendering of the file before the edit and the one
after it are compared line by line, and only the lines the edit changed replace the file's
own: every other byte (comments, blank lines, quoting, indentation, line endings, the other
datasets) stays as it was. Only when a changed line has no counterpart in the file (ruamel
rendered its neighbours differently) is ruamel's whole rendering written. Before anything is
written, the old and new text are both parsed as the settings loader parses them (PyYAML),
and the new text must differ from the old only in this dataset's two weights (an anchor
shared with another entry, say, is refused instead of silently changing both).

The new text goes to a temporary file in the same folder, which is flushed to disk and then
renamed over the original (``os.replace`` is atomic on POSIX and Windows), so a reader or a
crash sees either the old file or the new one, never a half-written one
(:func:`eval_harness.files.write_file_atomically`). A crash between write and rename leaves
the original untouched and at most a hidden ``.config.yaml.*.tmp`` file, which the next write
does not depend on.

Writers take turns: the read-modify-rename runs under an exclusive ``flock`` on the config
file (POSIX), so two calibrations finishing at once both succeed, the later one re-reading
what the earlier one wrote. Anyone else changing the file meanwhile (an editor takes no lock)
is still caught by comparing the file before and after, and nothing is written then.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml import YAMLError as RoundTripError
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString
from ruamel.yaml.tokens import CommentToken

from eval_harness import stopping
from eval_harness.errors import InvalidInput
from eval_harness.files import write_file_atomically
from eval_harness.retrieval.weights import WEIGHT_DECIMALS, keyword_weight_for

WEIGHTS_KEY = "hybrid_search"


class ConfigWriteError(InvalidInput):
    """config.yaml could not be updated; the message names the file and what to do."""


class DatasetNotInConfig(ConfigWriteError):
    """The config file has no ``datasets.<name>`` entry to hold the weights (an entry needs a
    ``path`` or a ``live`` mapping, which only the user can give, so none is made up)."""


@dataclass(frozen=True)
class WeightsWritten:
    path: Path
    dataset: str
    semantic: float
    keyword: float
    previous_semantic: float | None  # None: the dataset had no weights of its own
    previous_keyword: float | None
    changed: bool  # False: the file already held these weights and was not rewritten

    @property
    def key(self) -> str:
        """The dotted key the weights are under."""
        return f"datasets.{self.dataset}.{WEIGHTS_KEY}"


def write_calibrated_weights(config_path: Path | str, dataset: str,
                             semantic_weight: float) -> WeightsWritten:
    """Set ``datasets.<dataset>.hybrid_search`` to ``{semantic, keyword}`` in ``config_path``.

    The block is inserted when the entry has none and its two values replaced when it has
    one; nothing else in the file changes. A file that already holds these weights is left
    alone (not even its modification time). Raises :class:`DatasetNotInConfig` when the file
    has no entry for ``dataset``, and :class:`ConfigWriteError` when the file is missing, is
    not YAML, holds the entry in a shape that cannot take the weights, or was changed by
    someone else while it was being rewritten; nothing is written then.
    """
    if not 0.0 <= semantic_weight <= 1.0:
        raise ConfigWriteError(f"semantic weight must lie in [0, 1], got {semantic_weight}.")
    path = Path(config_path)
    with _writers_take_turns(path):
        return _write_weights(path, str(dataset), semantic_weight)


def format_weight(value: float) -> str:
    """A weight as YAML reads it back exactly: 0.8, 0.0, 1.0, 0.125 (never 1e-05, which
    YAML 1.1 reads as a string)."""
    text = f"{value:.{WEIGHT_DECIMALS}f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@contextmanager
def _writers_take_turns(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (no lock where flock does not exist, or when the
    file cannot be opened: reading it then fails with the proper message)."""
    try:
        import fcntl  # POSIX only
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
            _lock_unless_stopped(fd, fcntl)
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


def _lock_unless_stopped(fd: int, fcntl) -> None:
    """Take the exclusive flock on ``fd``, polling: a blocking flock would sit out a stop
    signal (it is retried after the handler), and the writer holding it may be slow."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            stopping.sleep(0.02)


def _write_weights(path: Path, dataset: str, semantic_weight: float) -> WeightsWritten:
    try:
        before = path.stat()
        original = path.read_bytes().decode("utf-8")  # bytes: CRLF line ends stay as they are
    except OSError as exc:
        raise ConfigWriteError(f"{path}: cannot read the config file ({exc.strerror}); "
                               f"check the path given with --config.") from None
    except UnicodeDecodeError:
        raise ConfigWriteError(f"{path}: not UTF-8 text; save it as UTF-8 before "
                               f"calibrating.") from None
    try:
        loaded = yaml.safe_load(original)  # what the settings loader reads
    except yaml.YAMLError as exc:
        raise ConfigWriteError(
            f"{path}: not valid YAML ({' '.join(str(exc).split())}); fix it before "
            f"calibrating.") from None
    _refuse_a_dataset_listed_twice(original, dataset, path)
    where = f"datasets.{dataset}.{WEIGHTS_KEY}"
    previous = _previous_weights(_dataset_entry(loaded, path, dataset), path, where)
    semantic = round(float(semantic_weight), WEIGHT_DECIMALS)
    keyword = keyword_weight_for(semantic_weight)
    if previous == (semantic, keyword):
        return WeightsWritten(path, dataset, semantic, keyword, *previous, changed=False)
    weights = {"semantic": semantic, "keyword": keyword}
    text = _with_weights(original, dataset, weights, path)
    _check_only_these_weights_changed(path, loaded, text, dataset, weights)
    if _changed_since(path, before):
        raise ConfigWriteError(f"{path} changed while the calibrated weights were being "
                               f"written; nothing was written, run the calibration again.")
    write_file_atomically(path, text.encode("utf-8"))
    return WeightsWritten(path, dataset, semantic, keyword, *previous, changed=True)


# ------------------------------------------------------------- the entry, as the loader reads it

def _refuse_a_dataset_listed_twice(original: str, dataset: str, path: Path) -> None:
    """One sentence when ``datasets:`` names ``dataset`` more than once: the loader reads the
    last entry, and which one the weights belong in is the user's call."""
    root = yaml.compose(original)
    if not isinstance(root, yaml.MappingNode):
        return
    datasets = next((value for key, value in root.value
                     if isinstance(key, yaml.ScalarNode) and key.value == "datasets"), None)
    if not isinstance(datasets, yaml.MappingNode):
        return
    lines = [key.start_mark.line + 1 for key, _ in datasets.value
             if isinstance(key, yaml.ScalarNode) and key.value == dataset]
    if len(lines) > 1:
        raise ConfigWriteError(
            f"{path}: 'datasets.{dataset}' is listed {len(lines)} times (lines "
            f"{', '.join(map(str, lines))}; the settings read the last); keep one before "
            f"calibrating.")


def _dataset_entry(root: Any, path: Path, dataset: str) -> dict:
    """``datasets.<dataset>`` as the settings loader reads it; one sentence when there is none
    or it cannot hold the weights."""
    missing = DatasetNotInConfig(
        f"{path}: dataset '{dataset}' has no entry under 'datasets', so its calibrated weights "
        f"have nowhere to go; add datasets.{dataset} (its path or live mapping) and calibrate "
        f"again.")
    if root is None:
        raise missing
    if not isinstance(root, dict):
        raise ConfigWriteError(f"{path}: the top level must be a mapping of keys.")
    datasets = root.get("datasets")
    if datasets is None:
        raise missing
    if not isinstance(datasets, dict):
        raise ConfigWriteError(f"{path}: 'datasets' must be a mapping of dataset names.")
    names = [name for name in datasets if str(name) == dataset]
    if not names:
        raise missing
    entry = datasets[names[-1]]
    if not isinstance(entry, dict):
        raise ConfigWriteError(f"{path}: 'datasets.{dataset}' must be a mapping (path or live, "
                               f"language, ...); fix it before calibrating.")
    return entry


def _previous_weights(entry: dict, path: Path,
                      where: str) -> tuple[float | None, float | None]:
    """The dataset's weights as the loader reads them (None: absent or not a number);
    one sentence when the section or a weight cannot take a number."""
    section = entry.get(WEIGHTS_KEY)
    if section is None:  # absent, or "hybrid_search:" / "hybrid_search: null"
        return None, None
    if not isinstance(section, dict):
        raise ConfigWriteError(f"{path}: '{where}' must be a mapping with semantic and "
                               f"keyword; fix it before calibrating.")
    values = []
    for key in ("semantic", "keyword"):
        value = section.get(key)
        if key in section and (value is None or isinstance(value, (dict, list))):
            raise ConfigWriteError(f"{path}: '{where}.{key}' is not a plain number; set it "
                                   f"to a number (or remove it) before calibrating.")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        values.append(float(value) if number else None)
    return values[0], values[1]


# ----------------------------------------------------------------------- the round trip

class _Weight(float):
    """A weight to be written: rendered by :func:`format_weight`."""


class _Representer(RoundTripRepresenter):
    """ruamel's round-trip representer, with weights written as :func:`format_weight` does
    (its own float format would write 1e-05)."""


_Representer.add_representer(
    _Weight, lambda representer, value: representer.represent_scalar(
        "tag:yaml.org,2002:float", format_weight(value)))


def _with_weights(original: str, dataset: str, weights: Mapping[str, float],
                  path: Path) -> str:
    """``original`` with the dataset's weights set (module docstring)."""
    yaml_rt = YAML(typ="rt")
    yaml_rt.Representer = _Representer
    yaml_rt.preserve_quotes = True
    yaml_rt.allow_duplicate_keys = True  # as the loader does; their lines stay as they are
    yaml_rt.width = sys.maxsize  # a long line stays one line
    try:
        document = yaml_rt.load(original)
    except RoundTripError as exc:
        raise ConfigWriteError(
            f"{path}: not valid YAML ({' '.join(str(exc).split())}); fix it before "
            f"calibrating.") from None
    datasets = document["datasets"]
    name = next(key for key in datasets if str(key) == dataset)  # ruamel keeps the first
    entry = datasets[name]
    if not entry:  # "{}": the only way to write an empty mapping
        entry.fa.set_flow_style()
    step = _indentation(datasets, name)
    yaml_rt.indent(mapping=step, sequence=step, offset=0)
    before = _rendered(yaml_rt, document)
    _set_weights(datasets, name, weights, original.splitlines())
    return _changed_lines_only(original, before, _rendered(yaml_rt, document))


def _indentation(datasets: CommentedMap, name: Any) -> int:
    """The file's indentation step, as the entry (else ``datasets``) shows it; 2 when both are
    written in flow style."""
    entry = datasets[name]
    if entry and not entry.fa.flow_style():
        return max(2, entry.lc.col - datasets.lc.key(name)[1])
    if not datasets.fa.flow_style():
        return max(2, datasets.lc.col)
    return 2


def _rendered(yaml_rt: YAML, document: Any) -> str:
    out = io.StringIO()
    yaml_rt.dump(document, out)
    return out.getvalue()


def _set_weights(datasets: CommentedMap, name: Any, weights: Mapping[str, float],
                 lines: list[str]) -> None:
    """Give ``datasets[name]`` the weights: new values, a new key in its section, a section
    in place of ``null``, or a new section."""
    entry = datasets[name]
    section = entry.get(WEIGHTS_KEY)
    flow = "{" + ", ".join(f"{key}: {format_weight(v)}" for key, v in weights.items()) + "}"
    if isinstance(section, CommentedMap):
        growth = 0  # how much longer a one-line flow section gets
        for key, value in weights.items():
            if _position(section, key) is None:  # absent (or only merged in with <<)
                growth += len(f", {key}: {format_weight(value)}")
                _append(section, key, _Weight(value))
            else:
                growth += len(format_weight(value)) - len(_value_text(lines, section, key))
                section[key] = _Weight(value)
        if section.fa.flow_style():
            _keep_comment_distance(section.lc.line, growth, [
                section.ca.comment, entry.ca.items.get(WEIGHTS_KEY)])
        return
    new = CommentedMap((key, _Weight(value)) for key, value in weights.items())
    if WEIGHTS_KEY in entry:  # "hybrid_search:" or "hybrid_search: null": a flow section
        old = _value_text(lines, entry, WEIGHTS_KEY)
        new.fa.set_flow_style()
        entry[WEIGHTS_KEY] = new
        _keep_comment_distance(entry.lc.key(WEIGHTS_KEY)[0], len(flow) - len(old) + (not old),
                               [entry.ca.items.get(WEIGHTS_KEY)])
    elif entry.fa.flow_style():  # inside the entry's braces
        new.fa.set_flow_style()
        growth = len(f"{', ' if entry else ''}{WEIGHTS_KEY}: {flow}")
        _append(entry, WEIGHTS_KEY, new)
        _keep_comment_distance(entry.lc.line, growth, [
            entry.ca.comment, datasets.ca.items.get(name)])
    else:
        _append(entry, WEIGHTS_KEY, new)


def _position(mapping: CommentedMap, key: str) -> tuple[int, int] | None:
    """(line, column) of ``key`` in the file; None when the mapping does not hold it itself."""
    data = mapping.lc.data
    return None if not data or key not in data else tuple(data[key][:2])


def _value_text(lines: list[str], mapping: CommentedMap, key: str) -> str:
    """The text of ``key``'s plain value as the file has it ("" for an empty value, or for
    a key the mapping does not hold itself)."""
    position = _position(mapping, key)
    if position is None:
        return ""
    line, column = position
    after_key = lines[line][column:].split(":", 1)[1]
    return re.match(r"[^,}#]*", after_key).group().strip()


def _append(mapping: CommentedMap, key: str, value: Any) -> None:
    """Add ``key: value`` as the last item of ``mapping``, the blank lines and comments that
    followed its last item now following the new one."""
    trailing = "" if mapping.fa.flow_style() else _detach_trailing_lines(mapping)
    mapping[key] = value
    if trailing:
        holder, last = mapping, key
        while isinstance(holder[last], CommentedMap) and not holder[last].fa.flow_style():
            holder, last = holder[last], list(holder[last])[-1]
        holder.ca.items[last] = [None, None, CommentToken("\n" + trailing, CommentMark(0)),
                                 None]


def _detach_trailing_lines(collection: CommentedMap | CommentedSeq) -> str:
    """Take the blank lines and comment lines after the last item of a block collection off
    that item (ruamel keeps them on the deepest last item: whatever is appended would come
    after them); "" when there are none."""
    while True:
        last = len(collection) - 1 if isinstance(collection, CommentedSeq) else list(collection)[-1]
        value = collection[last]
        if not (isinstance(value, (CommentedMap, CommentedSeq)) and value
                and not value.fa.flow_style()):
            break
        collection = value
    slot = 0 if isinstance(collection, CommentedSeq) else 2
    comments = collection.ca.items.get(last)
    token = comments[slot] if comments else None
    if token is None:
        return ""
    if isinstance(value, (LiteralScalarString, FoldedScalarString)) \
            and not token.value.startswith("#"):
        own, trailing = "", token.value  # a block scalar ends its own line
    else:
        own, _, trailing = token.value.partition("\n")  # the item's own comment, if any
        own += "\n"
    comments[slot] = None if not own.strip() else token
    token.value = own
    return trailing


def _keep_comment_distance(line: int, growth: int, holders: list) -> None:
    """Move the comment at the end of ``line`` (a one-line flow collection's) by ``growth``
    columns, so that it keeps its distance from the collection (ruamel would keep its
    column). ``holders``: the comment lists ruamel may keep it in."""
    tokens = [token for holder in holders if holder for token in holder
              if isinstance(token, CommentToken)]
    marks = {id(token.start_mark): token.start_mark for token in tokens
             if token.start_mark.line == line}
    for mark in marks.values():  # a comment ruamel keeps in two places shares its mark
        mark.column += growth


def _changed_lines_only(original: str, before: str, after: str) -> str:
    """``original`` with only the lines that differ between ``before`` and ``after`` (ruamel's
    renderings of it before and after the edit) replaced, indented as the file indents their
    neighbours; ``after`` itself (with the file's line ends) when such a line has no
    counterpart in ``original``."""
    lines = original.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in original else "\n"
    whole = after.replace("\n", newline)
    plain = [line.rstrip("\r\n") for line in lines]
    old, new = before.splitlines(), after.splitlines()
    at: dict[int, int] = {}  # line of ``before`` -> the same line of ``original``
    for block in SequenceMatcher(None, [line.strip() for line in plain],
                                 [line.strip() for line in old],
                                 autojunk=False).get_matching_blocks():
        at.update((block.b + k, block.a + k) for k in range(block.size))

    def shift(i: int) -> int:  # how much deeper the file indents line ``i`` of ``before``
        return _indent(plain[at[i]]) - _indent(old[i])

    edits = []
    for kind, i1, i2, j1, j2 in SequenceMatcher(None, old, new,
                                                autojunk=False).get_opcodes():
        if kind == "equal":
            continue
        if i1 < i2:  # lines replaced or removed: each must be one of the file's, in a row
            if any(i not in at for i in range(i1, i2)) or at[i2 - 1] - at[i1] != i2 - i1 - 1:
                return whole
            start, end, by = at[i1], at[i2 - 1] + 1, shift(i1)
        elif i1 - 1 in at:  # inserted after the line before
            start = end = at[i1 - 1] + 1
            by = shift(i1 - 1)
        elif i1 in at:  # ... or before the line after
            start = end = at[i1]
            by = shift(i1)
        elif i1 == len(old) and any(i < i1 for i in at):  # ... or at the end of the file
            start = end = len(lines)
            by = shift(max(i for i in at if i < i1))
        else:
            return whole
        edits.append((start, end, [_indented(line, by) + newline for line in new[j1:j2]]))
    for start, end, replacement in reversed(edits):
        if end == len(lines) and lines and not lines[-1].endswith("\n"):
            if start == end:  # appended after an unterminated last line: it ends now
                lines[-1] += newline
            if replacement:  # the file ended without a line break, and still does
                replacement[-1] = replacement[-1].rstrip("\r\n")
        lines[start:end] = replacement
    return "".join(lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _indented(line: str, by: int) -> str:
    return " " * by + line if by >= 0 else line[min(-by, _indent(line)):]


# ------------------------------------------------------------------------------ the check

def _check_only_these_weights_changed(path: Path, old: Any, new_text: str, dataset: str,
                                      weights: Mapping[str, float]) -> None:
    """Parse the new text as the settings loader will: it must equal the old one (``old``,
    as loaded) with only ``datasets.<dataset>.hybrid_search``'s two weights set."""
    refused = ConfigWriteError(
        f"{path}: writing datasets.{dataset}.{WEIGHTS_KEY} would change more than its two "
        f"weights (an anchor or alias shared with another key?); nothing was written, set "
        f"them by hand: semantic {format_weight(weights['semantic'])}, keyword "
        f"{format_weight(weights['keyword'])}.")
    try:
        new = yaml.safe_load(new_text)
    except yaml.YAMLError:
        raise refused from None
    expected = dict(old)
    expected["datasets"] = dict(old["datasets"])
    name = next(k for k in reversed(list(old["datasets"])) if str(k) == dataset)
    entry = dict(old["datasets"][name])
    entry[WEIGHTS_KEY] = dict(entry.get(WEIGHTS_KEY) or {}, **weights)  # a fresh dict: a
    expected["datasets"][name] = entry  # merged (<<) section may be shared with others
    if new != expected:
        raise refused


def _changed_since(path: Path, before: os.stat_result) -> bool:
    try:
        now = path.stat()
    except FileNotFoundError:
        return True
    return (now.st_mtime_ns, now.st_size, now.st_ino) != (before.st_mtime_ns, before.st_size,
                                                           before.st_ino)

"""Writing a dataset's calibrated hybrid weights into ``config.yaml``.

The weights go under the dataset they were calibrated on, ``datasets.<name>.hybrid_search:
{semantic, keyword}`` (read back by :meth:`eval_harness.settings.Settings.weights_for`); the
global ``hybrid_search`` stays the default for datasets never calibrated and is never
rewritten here, so calibrating one dataset cannot change another's weights.

The file is edited as text, not re-serialised: the YAML is composed once for the positions of
the nodes (PyYAML marks), and only the characters of the weight values change, or the lines of
a new ``hybrid_search`` block are inserted after the entry's last line (in flow style
``{path: ..., hybrid_search: {...}}`` when the entry is written that way). Every other byte
(comments, blank lines, quoting, indentation, line endings, the other datasets) stays as it
was. Before anything is written, the old and new text are both parsed as the settings loader
parses them, and the new text must differ from the old only in this dataset's two weights
(an anchor shared with another entry, say, is refused instead of silently changing both).

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

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

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
        root = yaml.compose(original, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigWriteError(
            f"{path}: not valid YAML ({' '.join(str(exc).split())}); fix it before "
            f"calibrating.") from None
    name_column, entry = _dataset_entry(root, path, dataset)
    section = _value_of(entry, WEIGHTS_KEY)
    where = f"datasets.{dataset}.{WEIGHTS_KEY}"
    previous = _previous_weights(section)
    semantic = round(float(semantic_weight), WEIGHT_DECIMALS)
    keyword = keyword_weight_for(semantic_weight)
    if previous == (semantic, keyword):
        return WeightsWritten(path, dataset, semantic, keyword, *previous, changed=False)
    weights = {"semantic": semantic, "keyword": keyword}
    edits = _weight_edits(original, entry, section, weights, path, where, name_column)
    text = _apply(original, edits)
    _check_only_these_weights_changed(path, original, text, dataset, weights)
    if _changed_since(path, before):
        raise ConfigWriteError(f"{path} changed while the calibrated weights were being "
                               f"written; nothing was written, run the calibration again.")
    write_file_atomically(path, text.encode("utf-8"))
    return WeightsWritten(path, dataset, semantic, keyword, *previous, changed=True)


# ----------------------------------------------------------------------- finding the entry

def _dataset_entry(root, path: Path, dataset: str) -> tuple[int, yaml.MappingNode]:
    """The column of the key ``<dataset>`` and the mapping node of ``datasets.<dataset>``;
    one sentence when there is none."""
    missing = DatasetNotInConfig(
        f"{path}: dataset '{dataset}' has no entry under 'datasets', so its calibrated weights "
        f"have nowhere to go; add datasets.{dataset} (its path or live mapping) and calibrate "
        f"again.")
    if root is None:
        raise missing
    if not isinstance(root, yaml.MappingNode):
        raise ConfigWriteError(f"{path}: the top level must be a mapping of keys.")
    datasets = _value_of(root, "datasets")
    if datasets is None or _is_null(datasets):
        raise missing
    if not isinstance(datasets, yaml.MappingNode):
        raise ConfigWriteError(f"{path}: 'datasets' must be a mapping of dataset names.")
    pairs = [(k, v) for k, v in datasets.value
             if isinstance(k, yaml.ScalarNode) and k.value == dataset]
    if not pairs:
        raise missing
    key, entry = pairs[-1]  # the last one, as the loader keeps
    if not isinstance(entry, yaml.MappingNode):
        raise ConfigWriteError(f"{path}: 'datasets.{dataset}' must be a mapping (path or live, "
                               f"language, ...); fix it before calibrating.")
    return key.start_mark.column, entry


def _value_of(mapping: yaml.MappingNode, key: str):
    """The value node of ``key`` (the last one, as the loader keeps), or None."""
    found = None
    for key_node, value_node in mapping.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            found = value_node
    return found


def _is_null(node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


_NUMBER_TAGS = ("tag:yaml.org,2002:float", "tag:yaml.org,2002:int")


def _previous_weights(section) -> tuple[float | None, float | None]:
    """The dataset's weights as the loader reads them (None: absent or not a number)."""
    if not isinstance(section, yaml.MappingNode):
        return None, None
    values = []
    for key in ("semantic", "keyword"):
        node = _value_of(section, key)
        number = isinstance(node, yaml.ScalarNode) and node.tag in _NUMBER_TAGS
        values.append(float(yaml.safe_load(node.value)) if number else None)
    return values[0], values[1]


# --------------------------------------------------------------------------- the edits

Edit = tuple[int, int, str]  # replace text[start:end] by the string


def _weight_edits(text: str, entry: yaml.MappingNode, section, weights: Mapping[str, float],
                  path: Path, where: str, name_column: int) -> list[Edit]:
    """The text edits that give ``entry`` the weights: a new block, or new values.
    ``name_column``: where the dataset's name starts (the file's indentation step is the
    distance to the entry's keys)."""
    if section is None:
        return [_append_key(text, entry, WEIGHTS_KEY, weights, parent_column=name_column)]
    if _is_null(section):  # "hybrid_search:" with no value, or "hybrid_search: null"
        return [_replace_null(text, entry, section, weights)]
    if not isinstance(section, yaml.MappingNode):
        raise ConfigWriteError(f"{path}: '{where}' must be a mapping with semantic and "
                               f"keyword; fix it before calibrating.")
    edits = []
    for key, value in weights.items():
        node = _value_of(section, key)
        if node is None:
            edits.append(_append_key(text, section, key, value))
        elif isinstance(node, yaml.ScalarNode) and node.start_mark.index < node.end_mark.index:
            edits.append(_replace_scalar(text, node, format_weight(value)))
        else:
            raise ConfigWriteError(f"{path}: '{where}.{key}' is not a plain number; set it "
                                   f"to a number (or remove it) before calibrating.")
    return edits


def format_weight(value: float) -> str:
    """A weight as YAML reads it back exactly: 0.8, 0.0, 1.0, 0.125 (never 1e-05, which
    YAML 1.1 reads as a string)."""
    text = f"{value:.{WEIGHT_DECIMALS}f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


def _replace_scalar(text: str, node: yaml.ScalarNode, new: str) -> Edit:
    """Replace a value; a comment after it keeps its column when the padding allows."""
    start, end = node.start_mark.index, node.end_mark.index
    spaces = len(text[end:]) - len(text[end:].lstrip(" "))
    if spaces and text[end + spaces:end + spaces + 1] == "#":
        padding = max(1, spaces - (len(new) - (end - start)))
        return start, end + spaces, new + " " * padding
    return start, end, new


def _replace_null(text: str, entry: yaml.MappingNode, section: yaml.ScalarNode,
                  weights: Mapping[str, float]) -> Edit:
    flow = _render_flow(weights)
    if section.start_mark.index < section.end_mark.index:  # "null" or "~" in the text
        return section.start_mark.index, section.end_mark.index, flow
    key = next(k for k, v in entry.value if v is section)
    colon = text.index(":", key.end_mark.index)
    return colon + 1, colon + 1, " " + flow


def _append_key(text: str, mapping: yaml.MappingNode, key: str, value, *,
                parent_column: int = 0) -> Edit:
    """Insert ``key: value`` as the last item of ``mapping``, in the mapping's own style."""
    if mapping.flow_style or not mapping.value:
        if not mapping.value:  # "{}": right after the brace
            at = mapping.start_mark.index + 1
            return at, at, f"{key}: {_render_flow(value)}"
        at = _content_end(text, mapping.value[-1])
        return at, at, f", {key}: {_render_flow(value)}"
    newline = "\r\n" if "\r\n" in text else "\n"
    indent = mapping.value[0][0].start_mark.column
    line_end = text.find("\n", _content_end(text, mapping.value[-1]) - 1)
    line_end = len(text) if line_end < 0 else line_end
    if text[line_end - 1:line_end] == "\r":
        line_end -= 1
    if isinstance(value, Mapping):
        step = " " * max(2, indent - parent_column)
        lines = [f"{key}:", *(f"{step}{name}: {format_weight(number)}"
                              for name, number in value.items())]
    else:
        lines = [f"{key}: {format_weight(value)}"]
    return line_end, line_end, "".join(newline + " " * indent + line for line in lines)


def _content_end(text: str, pair: tuple) -> int:
    """Where the last character of a key/value pair's content ends (not its trailing
    comments or blank lines, which the end of a block collection includes)."""
    key, value = pair
    if isinstance(value, yaml.ScalarNode):
        if value.start_mark.index == value.end_mark.index:  # "key:" with nothing after it
            return (key or value).end_mark.index
        span = text[value.start_mark.index:value.end_mark.index]
        return value.start_mark.index + len(span.rstrip())  # a block scalar's blank lines
    if value.flow_style or not value.value:
        return value.end_mark.index
    last = value.value[-1]
    return _content_end(text, last if isinstance(value, yaml.MappingNode) else (None, last))


def _render_flow(value) -> str:
    if isinstance(value, Mapping):
        items = ", ".join(f"{name}: {format_weight(number)}" for name, number in value.items())
        return "{" + items + "}"
    return format_weight(value)


def _apply(text: str, edits: list[Edit]) -> str:
    for start, end, new in sorted(edits, reverse=True):  # from the end: positions stay valid
        text = text[:start] + new + text[end:]
    return text


# ------------------------------------------------------------------------------ the check

def _check_only_these_weights_changed(path: Path, old_text: str, new_text: str, dataset: str,
                                      weights: Mapping[str, float]) -> None:
    """Parse both texts as the settings loader will: the new one must equal the old one
    with only ``datasets.<dataset>.hybrid_search``'s two weights set."""
    refused = ConfigWriteError(
        f"{path}: writing datasets.{dataset}.{WEIGHTS_KEY} would change more than its two "
        f"weights (an anchor or alias shared with another key?); nothing was written, set "
        f"them by hand: semantic {format_weight(weights['semantic'])}, keyword "
        f"{format_weight(weights['keyword'])}.")
    try:
        old, new = yaml.safe_load(old_text), yaml.safe_load(new_text)
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

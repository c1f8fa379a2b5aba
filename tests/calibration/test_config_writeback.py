"""Writing a dataset's calibrated weights into config.yaml
(eval_harness.calibration.config_writeback): everything else kept, and a crash before the rename
leaves the original; the writer edits only the dataset's own lines (block or flow style)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from calibration_corpus import corpus, write_config  # noqa: F401 (fixture)
from eval_harness.calibration.config_writeback import (
    ConfigWriteError,
    DatasetNotInConfig,
    write_calibrated_weights,
)
from eval_harness.settings import load_settings
from paths import REPO


# ---------------------------------------------------------------------- the config write
def test_config_write_keeps_everything_else_and_the_file_mode(tmp_path, corpus):
    name = corpus["name"]
    path = write_config(tmp_path / "config.yaml", corpus)
    os.chmod(path, 0o640)
    original = path.read_text()
    change = write_calibrated_weights(path, name, 0.8)
    assert change.changed and (change.previous_semantic, change.previous_keyword) == (None, None)
    assert change.key == f"datasets.{name}.hybrid_search"
    text = path.read_text()
    block = "    hybrid_search:\n      semantic: 0.8\n      keyword: 0.2\n"  # not 0.1999..
    assert text == original.replace("    language: english\n",
                                    "    language: english\n" + block)
    assert path.stat().st_mode & 0o777 == 0o640
    mtime = path.stat().st_mtime_ns
    assert not write_calibrated_weights(path, name, 0.8).changed  # same weights: untouched
    assert path.stat().st_mtime_ns == mtime
    change = write_calibrated_weights(path, name, 0.65)  # the block exists: values replaced
    assert (change.previous_semantic, change.previous_keyword) == (0.8, 0.2)
    assert path.read_text() == original.replace(
        "    language: english\n",
        "    language: english\n    hybrid_search:\n      semantic: 0.65\n      keyword: 0.35\n")
    with pytest.raises(ConfigWriteError, match="cannot read"):
        write_calibrated_weights(tmp_path / "missing.yaml", name, 0.6)


def test_crash_between_write_and_rename_leaves_the_original(tmp_path, corpus, monkeypatch):
    path = write_config(tmp_path / "config.yaml", corpus)
    original = path.read_bytes()

    def crash(*_):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_calibrated_weights(path, corpus["name"], 0.9)
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # no temp file left


def test_process_killed_between_write_and_rename_leaves_the_original(tmp_path, corpus):
    """A real crash: the process dies (os._exit) after the temp file is written, before the
    rename. The original stays complete; the next calibration writes normally."""
    path = write_config(tmp_path / "config.yaml", corpus)
    original = path.read_bytes()
    script = textwrap.dedent(f"""
        import os
        from eval_harness.calibration.config_writeback import write_calibrated_weights
        os.replace = lambda *args: os._exit(9)
        write_calibrated_weights({str(path)!r}, {corpus['name']!r}, 0.9)
    """)
    completed = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert completed.returncode == 9
    assert path.read_bytes() == original
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "config.yaml"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".config.yaml.")
    assert write_calibrated_weights(path, corpus["name"], 0.9).changed
    assert load_settings(path, environ={}).weights_for(corpus["name"]).semantic == 0.9


# --------------------------------------------------------------- the config writer alone

LAYOUT = """\
# comment at the top
datasets:
    first:                    # four-space indentation
        path: data/first
        live_note: |
            a block scalar

    # heading comment of the second dataset
    second:
        path: data/second
        hybrid_search: {semantic: 0.5, keyword: 0.5}   # flow block, replaced in place
    third: {path: data/third}
hybrid_search: {semantic: 0.7, keyword: 0.3}
"""


def _write(path, dataset, weight):
    change = write_calibrated_weights(path, dataset, weight)
    assert change.dataset == dataset and change.changed
    return path.read_text()


@pytest.mark.unit
def test_writer_touches_only_the_datasets_own_lines(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(LAYOUT)
    text = _write(path, "first", 0.9)
    assert text == LAYOUT.replace(
        "            a block scalar\n",
        "            a block scalar\n        hybrid_search:\n            semantic: 0.9\n"
        "            keyword: 0.1\n")  # before the blank line and the next heading comment
    text = _write(path, "second", 0.55)
    assert "hybrid_search: {semantic: 0.55, keyword: 0.45}   # flow block" in text
    text = _write(path, "third", 0.0)
    assert "    third: {path: data/third, hybrid_search: {semantic: 0.0, keyword: 1.0}}\n" in text
    parsed = yaml.safe_load(text)
    assert parsed["hybrid_search"] == {"semantic": 0.7, "keyword": 0.3}
    assert parsed["datasets"]["first"]["live_note"] == "a block scalar\n"
    assert [parsed["datasets"][d]["hybrid_search"]["semantic"]
            for d in ("first", "second", "third")] == [0.9, 0.55, 0.0]
    assert text.startswith("# comment at the top\n") and "# heading comment" in text


def test_writer_keeps_the_shipped_configs_layout(tmp_path):
    """The shipped config.yaml spreads flow mappings over two lines, which ruamel.yaml would
    render on one: the file keeps them, and gains only the dataset's three lines."""
    path = tmp_path / "config.yaml"
    shipped = (REPO / "config.yaml").read_text(encoding="utf-8")
    path.write_text(shipped, encoding="utf-8")
    write_calibrated_weights(path, "scifact", 0.6)
    last = "                     expected_docs: expected_docs}\n"
    assert shipped.count(last) == 1
    assert path.read_text(encoding="utf-8") == shipped.replace(
        last, last + "    hybrid_search:\n      semantic: 0.6\n      keyword: 0.4\n")
    write_calibrated_weights(path, "scifact", 0.65)
    assert path.read_text(encoding="utf-8") == shipped.replace(
        last, last + "    hybrid_search:\n      semantic: 0.65\n      keyword: 0.35\n")


@pytest.mark.parametrize("end", ["", "\n"])
def test_writer_appends_after_a_flow_mapping_over_two_lines_at_the_end(tmp_path, end):
    """The README's own-store config ends with its entry's two-line flow mapping: the block
    goes after it, the file's last line break (or its absence) kept."""
    path = tmp_path / "config.yaml"
    text = ("datasets:\n  prod:\n    live:\n      ground_truth: {relation: public.ground_truth, "
            "id: id, query: query,\n                     expected_docs: expected_docs}" + end)
    path.write_text(text)
    write_calibrated_weights(path, "prod", 0.6)
    assert path.read_text() == (text.removesuffix(end) + "\n    hybrid_search:\n      semantic: "
                                "0.6\n      keyword: 0.4" + end)


@pytest.mark.unit
def test_writer_keeps_crlf_line_ends_and_flow_datasets(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"datasets:\r\n  a:\r\n    path: x  # here\r\n  b:\r\n    path: y\r\n")
    write_calibrated_weights(path, "a", 0.6)
    assert path.read_bytes() == (b"datasets:\r\n  a:\r\n    path: x  # here\r\n"
                                 b"    hybrid_search:\r\n      semantic: 0.6\r\n"
                                 b"      keyword: 0.4\r\n  b:\r\n    path: y\r\n")
    path.write_text("datasets: {a: {path: x}, b: {path: y}}\n")
    write_calibrated_weights(path, "b", 0.8)
    assert path.read_text() == ("datasets: {a: {path: x}, b: {path: y, hybrid_search: "
                                "{semantic: 0.8, keyword: 0.2}}}\n")


@pytest.mark.unit
@pytest.mark.parametrize("text, error, message", [
    ("default_dataset: x\n", DatasetNotInConfig, "dataset 'a' has no entry under 'datasets'"),
    ("datasets:\n  b: {path: y}\n", DatasetNotInConfig, "add datasets.a (its path or live"),
    ("datasets:\n  a: some/folder\n", ConfigWriteError, "'datasets.a' must be a mapping"),
    ("datasets:\n  a:\n    path: x\n    hybrid_search: 0.5\n", ConfigWriteError,
     "'datasets.a.hybrid_search' must be a mapping"),
    ("datasets: [a\n", ConfigWriteError, "not valid YAML"),
    ("datasets:\n  a:\n    path: x\n    hybrid_search: {semantic: null, keyword: 0.3}\n",
     ConfigWriteError, "'datasets.a.hybrid_search.semantic' is not a plain number"),
    ("datasets:\n  a: {path: x}\n  b: {path: y}\n  a: {path: z}\n", ConfigWriteError,
     "'datasets.a' is listed 2 times (lines 2, 4; the settings read the last)"),
])
def test_writer_refuses_with_one_sentence_and_writes_nothing(tmp_path, text, error, message):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(error, match=re.escape(message)) as raised:
        write_calibrated_weights(path, "a", 0.6)
    assert str(path) in str(raised.value) and "\n" not in str(raised.value)
    assert path.read_text() == text


@pytest.mark.unit
def test_writer_gives_a_merged_entry_weights_of_its_own(tmp_path):
    """An entry built from another by a YAML merge key (``<<: *base``) gets its own weights;
    the entry it was merged from keeps none, and the file loads with both."""
    path = tmp_path / "config.yaml"
    path.write_text("datasets:\n  a: &base\n    path: x\n  b:\n    <<: *base\n"
                    "    language: german\n")
    write_calibrated_weights(path, "b", 0.6)
    settings = load_settings(path, environ={})
    assert settings.datasets["a"].weights is None
    b = settings.datasets["b"]
    assert (b.weights.semantic, b.weights.keyword, b.language) == (0.6, 0.4, "german")
    assert b.path == tmp_path / "x"
    assert "    <<: *base\n" in path.read_text()

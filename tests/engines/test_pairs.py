"""``engines.pairs.resolve_pairs`` against the MinHash layer's own stream on the same documents."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.contract import NEAR_MISS_JACCARD_MIN
from dedup_tasks.engines.pairs import resolve_pairs
from dedup_tasks.fingerprint.candidates import stream_minhash, verify_pairs
from dedup_tasks.fingerprint.minhash import MINHASH_SEED, MinHasher, estimated_jaccard
from dedup_tasks.layers.minhash import VERIFY_FLOOR, verifier_of
from dedup_tasks.layers.near import UPDATE_JACCARD


def _documents(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Shingle sequences: originals, and copies of earlier ones with edits (truncation, additions,
    scattered changes), in chains and clusters, so every branch of the verifier is taken."""
    docs: list[np.ndarray] = []
    for d in range(n):
        if d and rng.random() < 0.6:
            src = docs[rng.integers(max(0, d - 12), d)]
            kind = rng.integers(4)
            if kind == 0:  # truncated
                cut = rng.integers(len(src) // 3, len(src))
                doc = src[:cut].copy()
            elif kind == 1:  # a passage added
                doc = np.concatenate([src, rng.integers(0, 2**32, rng.integers(5, 80), dtype=np.uint32)])
            elif kind == 2:  # scattered edits
                doc = src.copy()
                hit = rng.random(len(doc)) < rng.uniform(0.02, 0.4)
                doc[hit] = rng.integers(0, 2**32, hit.sum(), dtype=np.uint32)
            else:
                doc = src.copy()
        else:
            doc = rng.integers(0, 2**32, rng.integers(40, 300), dtype=np.uint32)
        docs.append(doc)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    return np.concatenate(docs), offsets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_resolved_pairs_equal_the_stream(seed):
    rng = np.random.default_rng(seed)
    cfg = DedupConfig()
    n = 400
    hashes, offsets = _documents(rng, n)
    hasher = MinHasher(cfg.minhash_num_perm, MINHASH_SEED, cfg.minhash_bands, cfg.minhash_rows)
    sig = hasher.signatures(hashes.astype(np.uint64), offsets)
    keys = hasher.band_keys(sig)
    active = rng.random(n) < 0.9  # rows an earlier layer or the registry already dropped
    strict = np.where(rng.random(n) < 0.15, UPDATE_JACCARD, np.nan)
    verifier = verifier_of(cfg)
    want = stream_minhash(
        keys, sig, active, cfg.minhash_threshold, NEAR_MISS_JACCARD_MIN, (hashes, offsets),
        exact_floor=VERIFY_FLOOR, verifier=verifier, strict=strict,
    )  # fmt: skip

    # Every band-sharing pair once, with its first shared band (what the engine's joins give).
    d, c = np.triu_indices(n, 1)
    newer, earlier = c, d
    shared = keys[newer] == keys[earlier]
    has = shared.any(axis=1)
    newer, earlier, band = newer[has], earlier[has], shared[has].argmax(axis=1)
    est = estimated_jaccard(sig[newer], sig[earlier])
    ok, jac, cn, ce = verify_pairs(hashes, offsets, newer, earlier, verifier, np.full(len(newer), np.nan))
    st = strict[newer]
    verified = est >= VERIFY_FLOOR
    ok = np.where(verified, np.where(np.isnan(st), ok, verifier.accepts(jac, cn, ce, st)), est >= cfg.minhash_threshold)
    got = resolve_pairs(
        n, newer, earlier, band, np.where(verified, jac, est), ok, np.where(verified, cn, np.nan),
        np.where(verified, ce, np.nan), active, NEAR_MISS_JACCARD_MIN,
    )  # fmt: skip
    assert (want.matched >= 0).sum() > 50 and (want.suspect >= 0).sum() > 5  # the comparison means something
    for field in ("matched", "score", "suspect", "suspect_score", "covers_newer", "covers_earlier"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)

"""Issue #14, schema 9: b-bit registered signatures and K registry bands (docs/registry.md).

The registry stores the low b bits of each signature value (`_sigpack.pack_bits`) and only the first K
band keys; MemoryRegistry holds exactly the same, and both return each row's bits.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from dedup_tasks.fingerprint.minhash import estimated_jaccard, truncate_signatures
from dedup_tasks.registry import _sigpack
from dedup_tasks.registry.base import MemoryRegistry
from tests.registry.synth import BANDS, NUM_PERM, Pool, canonical

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]


def _with_bits(fp, bits: int, bands: int = BANDS):
    return dataclasses.replace(fp, minhash_bits=bits, minhash_bands=np.ascontiguousarray(fp.minhash_bands[:, :bands]))


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 16])
def test_bbit_pack_round_trip_and_lengths(bits):
    rng = np.random.default_rng(bits)
    for num_perm in (16, 32, 128):
        sig = rng.integers(0, 2**32, (50, num_perm), dtype=np.uint64).astype(np.uint32)
        packed = _sigpack.pack_bits(sig, bits)
        lengths = np.diff(np.frombuffer(packed.buffers()[1], np.int64))
        # Even, never the raw length: told from lossless (odd) and raw rows by the length alone.
        assert (lengths == num_perm * bits // 8).all() and (lengths % 2 == 0).all() and (lengths != 4 * num_perm).all()
        # Mixed with lossless rows in one column, each row reads back in its own layout.
        mixed = _sigpack.pack(sig[:10])
        column = pa.concat_arrays([packed.cast(pa.large_binary()), mixed.cast(pa.large_binary())])
        values, got_bits = _sigpack.unpack_bits(column, num_perm)
        assert (values[:50] == truncate_signatures(sig, bits)).all()
        assert (values[50:] == sig[:10]).all()
        assert (got_bits[:50] == bits).all() and (got_bits[50:] == 32).all()


def test_bbit_size_refuses_unrecognisable_lengths():
    assert _sigpack.bbit_size(128, 8) == 128 and _sigpack.bbit_size(128, 4) == 64
    with pytest.raises(ValueError):
        _sigpack.bbit_size(24, 1)  # 3 bytes: odd, would read as a lossless row
    with pytest.raises(ValueError):
        _sigpack.bbit_size(128, 32)


@pytest.mark.parametrize("bits", [4, 8])
def test_bbit_estimate_is_corrected_for_chance_agreement(bits):
    rng = np.random.default_rng(0)
    n = 400
    for jaccard in (0.0, 0.5, 0.8):
        a = rng.integers(0, 2**32, (n, 128), dtype=np.uint64).astype(np.uint32)
        b = rng.integers(0, 2**32, (n, 128), dtype=np.uint64).astype(np.uint32)
        same = rng.random((n, 128)) < jaccard  # each value equal with probability J, as MinHash's
        b[same] = a[same]
        full = estimated_jaccard(a, b)
        est = estimated_jaccard(truncate_signatures(a, bits), truncate_signatures(b, bits), bits)
        raw_share = (truncate_signatures(a, bits) == truncate_signatures(b, bits)).mean(axis=1)
        # Unbiased: the mean estimate is the true J; the raw share of equal b-bit values is not.
        assert abs(est.mean() - jaccard) < 0.01 + (0.01 if jaccard == 0 else 0)
        assert raw_share.mean() - jaccard == pytest.approx((1 - jaccard) * 2.0**-bits, abs=0.006)
        # ... and close to the 32-bit estimate pair by pair (extra variance of the chance agreements).
        assert np.abs(est - full).mean() < (0.04 if bits == 4 else 0.015)
    # Per-row bits: a lossless row (32) compares every bit, and gets no correction.
    a = rng.integers(0, 2**32, (2, 128), dtype=np.uint64).astype(np.uint32)
    got = estimated_jaccard(a, a ^ np.uint32(1 << 20), np.array([32, 8]))
    assert got[0] == 0.0 and got[1] == 1.0


@pytest.mark.parametrize("bits", [1, 2, 32])
def test_estimate_sd_and_the_text_floor_of_bbit_candidates(bits):
    from dedup_tasks.fingerprint.minhash import estimate_sd
    from dedup_tasks.layers.minhash import LOWEST_COPY_JACCARD, VERIFY_FLOOR, bbit_text_floor

    # The spread of the estimate at the lowest Jaccard a copy can have, simulated as MinHash values.
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**32, (4000, 128), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, (4000, 128), dtype=np.uint64).astype(np.uint32)
    same = rng.random((4000, 128)) < LOWEST_COPY_JACCARD
    b[same] = a[same]
    est = estimated_jaccard(truncate_signatures(a, bits), truncate_signatures(b, bits), bits)
    assert est.std() == pytest.approx(float(estimate_sd(LOWEST_COPY_JACCARD, bits, 128)), rel=0.08)
    floor = float(bbit_text_floor(bits, 128))
    if bits < 32:
        # Under VERIFY_FLOOR by the noise: at most ~0.13% of such copies fall under it (0.4 lost ~25% on 1 bit).
        assert floor < VERIFY_FLOOR and (est < floor).mean() < 0.005
        assert (est < VERIFY_FLOOR).mean() > (0.2 if bits == 1 else 0.1)


@pytest.mark.parametrize("bits,bands", [(8, BANDS), (4, 5), (32, 5)])
def test_bbit_rows_and_k_bands_equal_memory_registry(make_registry, admin, schema, bits, bands):
    pool = Pool(np.random.default_rng(11), size=200)
    pg = make_registry()
    mem = MemoryRegistry()
    for batch in BATCHES[:2]:
        fp = _with_bits(pool.batch(600, batch), bits, bands)
        pg.begin(batch)
        assert pg.commit(batch, fp).registered == 600
        mem.commit(batch, fp)
    # Stored: K band keys per document with a signature, b-bit rows of num_perm * b / 8 bytes.
    with admin.cursor() as cur:
        cur.execute(f'SELECT count(*) FROM "{schema}".minhash_bands')
        keys = cur.fetchone()[0]
        cur.execute(f'SELECT count(*), min(length(signature)), max(length(signature)) FROM "{schema}".documents WHERE signature IS NOT NULL')
        docs, shortest, longest = cur.fetchone()
    assert keys == docs * bands
    if bits < 32:
        assert shortest == longest == NUM_PERM * bits // 8
    else:
        assert shortest % 2 == 1 and longest % 2 == 1
    q = _with_bits(pool.batch(500, "query"), bits, bands)
    for ask in (BATCHES[1], "9999"):
        got, want = pg.minhash_candidates(ask, q.minhash_bands), mem.minhash_candidates(ask, q.minhash_bands)
        assert len(got) > 0
        assert canonical(got, "minhash") == canonical(want, "minhash")
        assert canonical(got, "minhash_bits") == canonical(want, "minhash_bits")
        assert (got.payload["minhash_bits"] == bits).all()
        if bits < 32:
            assert int(got.payload["minhash"].max()) < 2**bits
    # After a compaction (the main tier's blocks, which compare keys on their stored bits only, so a
    # collision there may add a candidate): every exact match with its stored signature and bits.
    pg.compact(min_docs=0)
    got, want = pg.minhash_candidates("9999", q.minhash_bands), mem.minhash_candidates("9999", q.minhash_bands)
    assert set(canonical(want, "minhash")) <= set(canonical(got, "minhash"))
    assert len(got) - len(want) <= 2
    assert (got.payload["minhash_bits"] == bits).all()


def test_commit_recheck_estimates_on_the_stored_bits(make_registry):
    # A concurrent batch registered an exact copy (same signature) after our snapshot: on 8 stored
    # bits the re-check still estimates J = 1 and turns our row into a conflict.
    pool = Pool(np.random.default_rng(3), size=50)
    fp = _with_bits(pool.batch(40, "a"), 8)
    first, second = make_registry(), make_registry()
    second.begin(BATCHES[1])
    first.begin(BATCHES[0])
    first.commit(BATCHES[0], fp)
    copy = dataclasses.replace(fp, doc_id=np.array([f"copy-{i}" for i in range(len(fp))], dtype=object),
                               url_key=fp.url_key ^ np.uint64(1), content_hash=fp.content_hash ^ np.uint64(1),
                               simhash=~fp.simhash)  # fmt: skip
    result = second.commit(BATCHES[1], copy)
    has = np.flatnonzero(fp.has_minhash)
    assert set(has) <= set(result.conflicts.query.tolist())

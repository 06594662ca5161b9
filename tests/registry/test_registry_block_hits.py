"""What the main tier's block probe sends back: one entry for a block's only match, the block otherwise.

The server finds a probe's stored key bits with position() over the block's bytes, which also matches
across entry boundaries and inside the seq offsets. These blocks are built so that every case occurs:
the answer must equal a brute-force comparison of the stored keys, whatever the server sent.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from dedup_tasks.registry import _bandblocks
from dedup_tasks.registry.postgres import _HIT_ENTRIES_SQL

BITS = 8


def _key(bucket: int, rem: int, rem_bytes: int) -> np.uint64:
    """A 64-bit band key whose top BITS bits are `bucket` and next 8 * rem_bytes bits `rem`."""
    return np.uint64((bucket << (64 - BITS)) | (rem << (64 - BITS - 8 * rem_bytes)))


def _brute_force(keys: np.ndarray, seqs: np.ndarray, probes: np.ndarray, rem_bytes: int) -> set[tuple[int, int]]:
    stored = _bandblocks.truncated(keys, BITS, rem_bytes)
    wanted = _bandblocks.truncated(probes, BITS, rem_bytes)
    return {(u, int(s)) for u, w in enumerate(wanted.tolist()) for s in seqs[stored == w]}


@pytest.mark.parametrize("rem_bytes", [2, 4])
def test_block_probe_is_exact_whatever_the_server_sends(make_registry, rem_bytes):
    rng = np.random.default_rng(7)
    base = 10**9
    pattern = 0x1234 if rem_bytes == 2 else 0x12345678
    keys, seqs = [], []
    # Bucket 3: a key held by one document (the single-entry answer), and filler.
    keys += [_key(3, 0x0100, rem_bytes)]
    seqs += [base + 1]
    # Bucket 5: a key held by three documents (a second match after the first: the whole block).
    keys += [_key(5, 0x0200, rem_bytes)] * 3
    seqs += [base + 10, base + 11, base + 12]
    # Bucket 7: an earlier entry whose seq offset holds the later key's stored bits (a misaligned first
    # match before the true one), and a key whose bits occur only inside an offset (no true entry).
    # (Bucket 7's smallest seq is base + 5, its seq_base.)
    keys += [_key(7, 0x0001, rem_bytes), _key(7, pattern, rem_bytes)]
    seqs += [base + 5 + pattern, base + 5]
    # Random keys in the same buckets and elsewhere, so blocks hold more than the planted entries.
    filler = rng.integers(0, 2**64, 2000, dtype=np.uint64)
    keys += filler.tolist()
    seqs += (base + 10**6 + np.arange(2000)).tolist()
    keys_a = np.array(keys, np.uint64)
    seqs_a = np.array(seqs, np.int64)
    probes = np.concatenate([
        np.array([_key(3, 0x0100, rem_bytes), _key(5, 0x0200, rem_bytes), _key(7, pattern, rem_bytes)], np.uint64),
        # bits that occur in bucket 7 only across the first entry's key and offset bytes
        np.array([_key(7, 0x0012 if rem_bytes == 2 else 0x00011234, rem_bytes)], np.uint64),
        filler[:300],
        rng.integers(0, 2**64, 300, dtype=np.uint64),
    ])
    registry = make_registry()
    with registry._transaction() as cur:
        registry._write_run(cur, keys_a, seqs_a, BITS, rem_bytes)
        u, seq = registry._main_band_candidates(cur, probes, np.arange(len(probes), dtype=np.int64), 0)
        got = set(zip(u.tolist(), seq.tolist(), strict=True))
        assert got == _brute_force(keys_a, seqs_a, probes, rem_bytes)
        # The planted cases themselves: one document, three documents, the true entry after a misaligned match.
        assert {s for q, s in got if q == 0} == {base + 1}
        assert {s for q, s in got if q == 1} == {base + 10, base + 11, base + 12}
        assert {s for q, s in got if q == 2} == {base + 5}
        assert not {s for q, s in got if q == 3}
        # And the server sent single entries where it could: the one-document key's answer is one entry.
        sent = _sent_entry_counts(cur, probes[:3], rem_bytes)
        assert sent[0] == 1 and sent[1] > 1 and sent[2] > 1


def _sent_entry_counts(cur, probes: np.ndarray, rem_bytes: int) -> list[int]:
    """Entries sent back per probe (by probe order) for a one-run main tier."""
    cur.execute("SELECT run FROM minhash_band_runs")
    (run,) = cur.fetchone()
    bucket, rem = _bandblocks.split_key(probes, BITS, rem_bytes)
    cur.execute(
        "CREATE TEMP TABLE _probe_sent (u int8, k int8, shard int2, run int8, bucket int8, rem bytea) ON COMMIT DROP"
    )
    for u, (b, r) in enumerate(zip(bucket.tolist(), rem.tolist(), strict=True)):
        cur.execute(
            "INSERT INTO _probe_sent VALUES (%s, 0, %s, %s, %s, %s)",
            (u, b >> (BITS - _bandblocks.SHARD_BITS), run, b, int(r).to_bytes(rem_bytes, "big")),
        )
    out = io.BytesIO()
    cur.copy_expert(f"COPY ({_HIT_ENTRIES_SQL.format(probe='_probe_sent')}) TO STDOUT (FORMAT binary)", out)
    e = _bandblocks.decode_copy(out.getbuffer(), with_width=True)
    return np.bincount(e["tag"], minlength=len(probes)).tolist()

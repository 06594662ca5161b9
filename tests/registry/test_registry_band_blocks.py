"""The main tier's band blocks: encoding, run merging, dead entries of reruns."""

from __future__ import annotations

import numpy as np

from dedup_tasks.registry import _bandblocks
from dedup_tasks.registry._pgio import encode_binary_copy
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.postgres import MAX_MAIN_RUNS
from tests.registry.synth import Pool, canonical

ASK = "2026-12-02T00"


def test_blocks_round_trip_and_split_crowded_buckets():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2**64, 5000, dtype=np.uint64)
    keys[:600] = keys[0]  # one band key registered by 600 documents: three rows of one bucket
    seqs = rng.permutation(10**6)[:5000].astype(np.int64) + 10**9
    bits = 10
    blocks = _bandblocks.build_blocks(keys, seqs, bits)
    assert blocks["n"].max() <= _bandblocks.MAX_PER_BLOCK and blocks["n"].sum() == 5000
    assert (blocks["shard"] == (blocks["bucket"] >> (bits - 8))).all()
    # What the server sends back for `SELECT run, bucket, seq_base, entries`.
    nblocks = len(blocks["n"])
    tags = np.arange(nblocks, dtype=np.int64) * 3
    raw = encode_binary_copy(
        [("int8", tags), ("int8", tags + 1), ("int8", np.full(nblocks, 7)), ("int8", blocks["bucket"]),
         ("int8", blocks["seq_base"]), ("varbytea", blocks["entries"])]
    )  # fmt: skip
    e = _bandblocks.decode_copy(raw)
    assert (e["run"] == 7).all() and (e["tag"] == np.repeat(tags, blocks["n"])).all()
    assert (e["key"] == e["tag"] + 1).all()
    got = sorted(zip(e["tkey"].tolist(), e["seq"].tolist(), strict=True))
    want = sorted(zip(_bandblocks.truncated(keys, bits).tolist(), seqs.tolist(), strict=True))
    assert got == want


def test_run_bits():
    assert _bandblocks.run_bits(0) == _bandblocks.MIN_BITS
    assert _bandblocks.run_bits(128 * 2**20) == 20
    assert _bandblocks.run_bits(10**15) == _bandblocks.MAX_BITS


def test_compactions_merge_runs_and_drop_dead_entries(make_registry, admin, schema):
    pool = Pool(np.random.default_rng(3), size=150)
    pg, mem = make_registry(), MemoryRegistry()
    query = pool.batch(200, "q")
    batches = [f"2026-12-01T{h:02d}" for h in range(MAX_MAIN_RUNS + 2)]
    for batch in batches:
        fp = pool.batch(150, batch)
        pg.begin(batch)
        pg.commit(batch, fp)
        mem.commit(batch, fp)
        # The latest batch rerun after its compaction: its block entries die (no signature row).
        rerun = pool.batch(40, batch)
        pg.compact()
        pg.begin(batch)
        pg.commit(batch, rerun)
        mem.commit(batch, rerun)
        got = canonical(pg.minhash_candidates(ASK, query.minhash_bands), "minhash")
        assert got == canonical(mem.minhash_candidates(ASK, query.minhash_bands), "minhash")
    with admin.cursor() as cur:
        cur.execute(f'SELECT count(*), sum(entries) FROM "{schema}".minhash_band_runs')
        runs, entries = cur.fetchone()
        cur.execute(f'SELECT count(*) FROM "{schema}".documents_main WHERE signature IS NOT NULL')
        main_docs = cur.fetchone()[0]
    assert 1 <= runs <= MAX_MAIN_RUNS
    pg.compact()  # moves the last rerun; merges when over the limit
    with admin.cursor() as cur:
        cur.execute(f'SELECT count(*), sum(entries) FROM "{schema}".minhash_band_runs')
        runs, entries = cur.fetchone()
        cur.execute(f'SELECT count(*) FROM "{schema}".documents_main WHERE signature IS NOT NULL')
        main_docs = cur.fetchone()[0]
    assert runs <= MAX_MAIN_RUNS
    # Merges dropped dead entries: at most one run's worth of them is left (the unmerged runs').
    assert entries <= 8 * main_docs + 8 * 190 * runs
    got = canonical(pg.minhash_candidates(ASK, query.minhash_bands), "minhash")
    assert got == canonical(mem.minhash_candidates(ASK, query.minhash_bands), "minhash")

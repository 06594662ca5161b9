"""Main-tier runs sized by their own keys, and small runs read whole instead of probed (branch reg18b)."""

from __future__ import annotations

import numpy as np

from dedup_tasks.registry import _bandblocks, _pg_lookups, postgres
from dedup_tasks.registry._pgio import encode_binary_copy
from dedup_tasks.registry.base import MemoryRegistry
from tests.registry.synth import Pool, canonical

ASK = "2026-12-02T00"


def test_join_blocks_copy_equals_brute_force_on_stored_bits():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 2**64, 6000, dtype=np.uint64)
    keys[:500] = keys[0]  # one key of 500 documents: several blocks of one bucket
    seqs = rng.permutation(10**6)[:6000].astype(np.int64) + 10**9
    # Probe keys: some registered, some equal to a registered key on its top 40 bits only, some random.
    probe = np.concatenate([keys[::7], keys[1::11] ^ np.uint64(1), rng.integers(0, 2**64, 900, dtype=np.uint64)])
    probe_query = np.arange(len(probe), dtype=np.int64) // 3
    probes = _bandblocks.SortedProbes(probe, probe_query)
    for bits, rem_bytes in ((8, 2), (12, 4), (24, 2), (9, 4)):
        blocks = _bandblocks.build_blocks(keys, seqs, bits, rem_bytes=rem_bytes)
        raw = encode_binary_copy([("int8", blocks["bucket"]), ("int8", blocks["seq_base"]), ("varbytea", blocks["entries"])])
        q, s = probes.join_blocks_copy(raw, bits, rem_bytes)
        got = sorted(zip(q.tolist(), s.tolist(), strict=True))
        tk, tp = _bandblocks.truncated(keys, bits, rem_bytes), _bandblocks.truncated(probe, bits, rem_bytes)
        want = sorted((int(probe_query[i]), int(seqs[j])) for i in range(len(probe)) for j in np.flatnonzero(tk == tp[i]))
        assert got == want
        # Every registered probe key finds its documents: no miss.
        assert {(int(probe_query[i]), int(seqs[0])) for i in range(0, 72)} <= set(got)


def test_run_shapes_keep_the_bits_a_merge_needs():
    # An hourly compaction beside a big run: its own bucket bits, 4 key bytes (blocks as full as the big run's).
    assert _bandblocks.new_run_shape(39_900_000, [(22, 2)]) == (19, 4)
    assert _bandblocks.new_run_shape(39_900_000, []) == (19, 2)
    assert _bandblocks.new_run_shape(600_000_000, [(22, 2)]) == (23, 2)
    for entries in (0, 10**3, 10**5, 10**6, 4 * 10**7, 10**9, 10**11):
        for finest in (0, 8, 16, 22, 24, 28, 32):
            runs = [(finest, 2)] if finest else []
            bits, rem_bytes = _bandblocks.new_run_shape(entries, runs)
            assert _bandblocks.MIN_BITS <= bits <= _bandblocks.MAX_BITS and rem_bytes in (2, 4)
            assert bits + 8 * rem_bytes >= finest + 16  # a merge into the finest bits loses nothing
            shape = _bandblocks.merged_shape(entries + 10**6, [*runs, (bits, rem_bytes)])
            assert shape[0] + 8 * shape[1] <= min(b + 8 * r for b, r in [*runs, (bits, rem_bytes)])
            if finest:
                assert shape[0] >= min(finest, _bandblocks.run_bits(entries + 10**6))


def test_runs_read_whole_and_probed_give_the_same_candidates(make_registry, admin, schema, monkeypatch):
    """Runs of different bits and key bytes: the same candidates whether each run is probed or read whole."""
    monkeypatch.setattr(_bandblocks, "TARGET_PER_BLOCK", 1)  # bucket bits that differ between small runs
    pool = Pool(np.random.default_rng(8), size=150)
    pg, mem = make_registry(), MemoryRegistry()
    query = pool.batch(200, "q")

    def commit_and_compact(hours: range, size) -> list[tuple[int, int]]:
        """Commit one batch an hour to both registries, compacting after each; the runs' (bits, rem_bytes)."""
        for h in hours:
            batch = f"2026-12-01T{h:02d}"
            fp = pool.batch(size(h), batch)
            pg.begin(batch)
            pg.commit(batch, fp)
            mem.commit(batch, fp)
            pg.compact()
        with admin.cursor() as cur:
            cur.execute(f'SELECT bits, rem_bytes FROM "{schema}".minhash_band_runs ORDER BY run')
            return cur.fetchall()

    def candidates(factors: tuple[int, ...]) -> tuple[set, list]:
        """MemoryRegistry's candidates, and the registry's with each WHOLE_RUN_ENTRIES_PER_PROBE."""
        want = set(canonical(mem.minhash_candidates(ASK, query.minhash_bands), "minhash"))
        got = []
        for factor in factors:
            monkeypatch.setattr(_pg_lookups, "WHOLE_RUN_ENTRIES_PER_PROBE", factor)
            got.append(canonical(pg.minhash_candidates(ASK, query.minhash_bands), "minhash"))
        return want, got

    shapes = commit_and_compact(range(4), lambda h: (300, 12, 60, 3)[h])
    assert len({b for b, _ in shapes}) >= 3, shapes  # runs sized by their own keys
    # Keys are compared on a run's stored bits (bits + 32 here): a collision on those (synth's band hash
    # has weak top bits) is an extra, verified candidate on both paths; a registered key is never missed.
    want, got = candidates((0, postgres.WHOLE_RUN_ENTRIES_PER_PROBE, 10**9))  # all probed, the default, all read whole
    assert got[0] == got[1] == got[2] and want <= set(got[0]) and len(got[0]) - len(want) <= 3
    # 2-byte runs of different bits (a large compaction, merged): still no miss, and both paths agree.
    monkeypatch.setattr(_bandblocks, "SHORT_REM_MIN_ENTRIES", 2000)
    shapes = commit_and_compact(range(4, 4 + postgres.MAX_MAIN_RUNS), lambda h: 60 if h % 2 else 150)
    assert 2 in {r for _, r in shapes} and 4 in {r for _, r in shapes}, shapes
    want, got = candidates((0, 10**9))
    assert got[0] == got[1] and want <= set(got[0])

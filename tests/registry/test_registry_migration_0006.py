"""Schema 6 (16-bit stored band keys, packed signatures) and its migration from a filled schema-5 registry."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dedup_tasks.registry import _bandblocks, _sigpack
from dedup_tasks.registry._pgio import copy_in, encode_binary_copy
from dedup_tasks.registry.base import Fingerprints, MemoryRegistry
from dedup_tasks.registry.postgres import PostgresRegistry
from tests.registry import v7_postgres as v7
from tests.registry.conftest import migrate_to_current, schema_at_version
from tests.registry.old_recent import read_recent_rows_v6, write_recent_rows_v6
from tests.registry.synth import NUM_PERM, Pool, band_keys, canonical
from tests.registry.synth import all_lookups as synth_lookups

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]
ASK = "2026-12-01T09"


def minima_like(fp: Fingerprints, rng: np.random.Generator) -> Fingerprints:
    """The batch with signature values as narrow as real minima (2^32 / shingles), per document."""
    shift = rng.integers(0, 24, (len(fp), 1)).astype(np.uint32)
    sig = np.asarray(fp.minhash, np.uint32) >> shift
    fp.minhash = sig
    # synth.band_keys leaves narrow values' differences in the low bits; the registry compares a
    # key's top bits, which real band keys (a full hash) fill: finish with splitmix64's mixer.
    with np.errstate(over="ignore"):
        k = band_keys(sig)
        k = (k ^ (k >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        k = (k ^ (k >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        fp.minhash_bands = k ^ (k >> np.uint64(31))
    return fp


def raw_pack(sig: np.ndarray) -> pa.Array:
    """Schema 5's signature bytes: little-endian uint32 values."""
    raw = np.ascontiguousarray(sig, "<u4").view(np.uint8).reshape(len(sig), -1)
    return pa.array([row.tobytes() for row in raw], pa.large_binary())


def write_run_v5(self, cur, keys, seqs, bits=None, rem_bytes=None):
    """Schema 5's _write_run: 8-byte entries, no rem_bytes column."""
    cur.execute("SELECT coalesce(max(run), 0) + 1, coalesce(max(bits), 0) FROM minhash_band_runs")
    run_id, main_bits = (int(v) for v in cur.fetchone())
    bits = max(_bandblocks.run_bits(len(keys)), main_bits) if bits is None else bits
    blocks = _bandblocks.build_blocks(keys, seqs, bits)
    n = len(blocks["n"])
    copy_in(
        cur,
        "minhash_bands_main",
        ["shard", "run", "bucket", "seq_base", "n", "entries"],
        [("int2", blocks["shard"]), ("int8", np.full(n, run_id, np.int64)), ("int8", blocks["bucket"]),
         ("int8", blocks["seq_base"]), ("int4", blocks["n"]), ("varbytea", blocks["entries"])],
    )  # fmt: skip
    cur.execute(
        "INSERT INTO minhash_band_runs (run, bits, entries, blocks) VALUES (%s, %s, %s, %s)",
        (run_id, bits, len(keys), n),
    )
    return run_id


@pytest.fixture
def v5_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 5) as name:
        yield name


def shared_on_run_bits(mem: MemoryRegistry, query: Fingerprints, row: tuple, prefix_bits: int) -> bool:
    """Whether (query, doc) of a lookup row share a band key on its top `prefix_bits` bits."""
    q, doc_id, batch_id, _ = row
    fp = mem._batches[batch_id]
    i = int(np.flatnonzero(np.asarray(fp.doc_id, dtype=object) == doc_id)[0])
    shift = np.uint64(64 - prefix_bits)
    theirs = np.asarray(fp.minhash_bands[i], np.uint64) >> shift
    return bool(np.isin(np.asarray(query.minhash_bands[q], np.uint64) >> shift, theirs).any())


def check_minhash(registry, mem, query, prefix_bits: int) -> int:
    """Registry candidates = the exact matches plus only keys equal on the stored bits; returns extras."""
    want = canonical(mem.minhash_candidates(ASK, query.minhash_bands), "minhash")
    got = canonical(registry.minhash_candidates(ASK, query.minhash_bands), "minhash")
    assert set(want) <= set(got)  # a registered key is never missed
    extra = sorted(set(got) - set(want))
    assert all(shared_on_run_bits(mem, query, row, prefix_bits) for row in extra)
    return len(extra)


def test_sigpack_round_trip_and_schema5_rows():
    rng = np.random.default_rng(2)
    for num_perm in (1, 4, 8, 32, 128):
        sig = rng.integers(0, 2**32, (300, num_perm), dtype=np.uint64).astype(np.uint32)
        sig >>= rng.integers(0, 33, (300, 1)).clip(0, 31).astype(np.uint32)
        sig[0] = 0
        sig[1] = 2**32 - 1
        packed = _sigpack.pack(sig)
        lengths = np.array([len(v.as_py()) for v in packed])
        assert (lengths % 2 == 1).all()  # never the even length of a raw row
        assert (_sigpack.unpack(packed, num_perm) == sig).all()
        assert (_sigpack.unpack(raw_pack(sig), num_perm) == sig).all()
        mixed = pa.concat_arrays([packed.slice(0, 150), raw_pack(sig[150:])])
        assert (_sigpack.unpack(mixed, num_perm) == sig).all()
    # Minima of ~3,000 shingles need ~23 bits: 369 bytes instead of 512.
    narrow = (rng.exponential(1 / 3000, (100, 128)) * 2**32).astype(np.uint32)
    assert max(len(v.as_py()) for v in _sigpack.pack(narrow)) <= 1 + 16 * 25
    with pytest.raises(ValueError):
        _sigpack.unpack(pa.array([b"\x21" + b"\x00" * 10], pa.large_binary()), 128)


def test_short_keys_collide_only_on_stored_bits_and_never_miss():
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 2**64, 4000, dtype=np.uint64)
    bits = 8
    # Keys equal on bits + 16 but not below: a 2-byte run cannot tell them apart, a 4-byte run can.
    keys[1::2] = keys[0::2] ^ np.uint64(1 << 30)  # bit 33 from the top
    seqs = np.arange(4000, dtype=np.int64) + 10**9
    for rem_bytes, width in ((2, 6), (4, 8)):
        blocks = _bandblocks.build_blocks(keys, seqs, bits, rem_bytes=rem_bytes)
        assert sum(len(v) for v in blocks["entries"].to_pylist()) == width * 4000
        n = len(blocks["n"])
        raw = encode_binary_copy(
            [("int8", np.zeros(n, np.int64)), ("int8", np.zeros(n, np.int64)), ("int8", np.ones(n, np.int64)),
             ("int8", blocks["bucket"]), ("int8", blocks["seq_base"]), ("int8", np.full(n, rem_bytes)),
             ("varbytea", blocks["entries"])]
        )  # fmt: skip
        e = _bandblocks.decode_copy(raw, with_width=True)
        got = sorted(zip(e["tkey"].tolist(), e["seq"].tolist(), strict=True))
        assert got == sorted(zip(_bandblocks.truncated(keys, bits, rem_bytes).tolist(), seqs.tolist(), strict=True))
        t = _bandblocks.truncated(keys, bits, rem_bytes)
        assert ((t[0::2] == t[1::2]).all()) == (rem_bytes == 2)
    assert _bandblocks.run_rem_bytes(_bandblocks.SHORT_REM_MIN_ENTRIES) == 2
    assert _bandblocks.run_rem_bytes(_bandblocks.SHORT_REM_MIN_ENTRIES - 1) == 4


def test_migration_0006_on_a_filled_v5_registry(pg_dsn, v5_schema, admin, monkeypatch):
    rng = np.random.default_rng(6)
    pool = Pool(rng, size=200)
    mem = MemoryRegistry()
    # Schema 5's commit and compaction: raw signatures, 8-byte block entries, no rem_bytes column.
    monkeypatch.setattr(v7, "check_version", lambda *a, **k: 5)
    monkeypatch.setattr(v7._sigpack, "pack", raw_pack)
    monkeypatch.setattr(v7.PostgresRegistry, "_write_run", write_run_v5)
    monkeypatch.setattr(v7, "write_recent_run", write_recent_rows_v6)  # schema 5..6's recent rows
    monkeypatch.setattr(v7, "_read_recent", read_recent_rows_v6)
    old = v7.PostgresRegistry(pg_dsn, schema=v5_schema, num_perm=NUM_PERM)
    for i, batch in enumerate(BATCHES):
        fp = minima_like(pool.batch(400, batch), rng)
        old.begin(batch)
        old.commit(batch, fp)
        mem.commit(batch, fp)
        if i < 2:
            old.compact()  # two runs in the main tier, one batch in the recent tier
    old.close()
    monkeypatch.undo()

    migrate_to_current(pg_dsn, v5_schema, 5)
    with admin.cursor() as cur:
        cur.execute(f'SELECT run, rem_bytes FROM "{v5_schema}".minhash_band_runs ORDER BY run')
        assert cur.fetchall() == [(1, 4), (2, 4)]
        cur.execute(f'SELECT DISTINCT length(signature) FROM "{v5_schema}".minhash_signatures')
        assert [r for (r,) in cur.fetchall()] == [4 * NUM_PERM]

    query = minima_like(pool.batch(300, "q"), rng)
    registry = PostgresRegistry(pg_dsn, schema=v5_schema, num_perm=NUM_PERM)
    try:
        # Schema-5 rows read as they are: every lookup equal to the in-memory registry.
        assert synth_lookups(registry, query, ASK) == synth_lookups(mem, query, ASK)
        # New rows are packed; a compaction of >= SHORT_REM_MIN_ENTRIES keys writes 2-byte keys.
        new = minima_like(pool.batch(300, "2026-12-01T03"), rng)
        registry.begin("2026-12-01T03")
        registry.commit("2026-12-01T03", new)
        mem.commit("2026-12-01T03", new)
        with admin.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{v5_schema}".minhash_signatures WHERE length(signature) % 2 = 1')
            assert cur.fetchone()[0] == int(new.has_minhash.sum())
        assert synth_lookups(registry, query, ASK) == synth_lookups(mem, query, ASK)
        monkeypatch.setattr(_bandblocks, "SHORT_REM_MIN_ENTRIES", 0)
        registry.compact()
        with admin.cursor() as cur:
            cur.execute(f'SELECT run, bits, rem_bytes FROM "{v5_schema}".minhash_band_runs ORDER BY run')
            runs = cur.fetchall()
        assert [r[2] for r in runs] == [4, 4, 2]
        extras = check_minhash(registry, mem, query, runs[-1][1] + 16)
        # A rerun of the newest batch leaves dead entries; two more compactions merge the runs
        # (MAX_MAIN_RUNS) into one of 2-byte keys, dropping them.
        rerun = minima_like(pool.batch(80, "2026-12-01T03"), rng)
        registry.begin("2026-12-01T03")
        registry.commit("2026-12-01T03", rerun)
        mem.commit("2026-12-01T03", rerun)
        for h in (4, 5):
            more = minima_like(pool.batch(100, f"2026-12-01T0{h}"), rng)
            registry.begin(f"2026-12-01T0{h}")
            registry.commit(f"2026-12-01T0{h}", more)
            mem.commit(f"2026-12-01T0{h}", more)
            registry.compact()
        with admin.cursor() as cur:
            cur.execute(f'SELECT run, bits, rem_bytes, entries FROM "{v5_schema}".minhash_band_runs')
            runs = cur.fetchall()
            cur.execute(f'SELECT count(*) FROM "{v5_schema}".minhash_signatures WHERE tier = 0')
            live = cur.fetchone()[0]
        assert len(runs) == 1 and runs[0][2] == 2 and runs[0][3] <= 8 * live
        extras = check_minhash(registry, mem, query, runs[0][1] + 16)
        assert extras <= 20  # ~37 keys a bucket: ~5e-4 false matches per probe, 2,400 probes
        other = {k: v for k, v in synth_lookups(registry, query, ASK).items() if k != "minhash"}
        assert other == {k: v for k, v in synth_lookups(mem, query, ASK).items() if k != "minhash"}
    finally:
        registry.close()


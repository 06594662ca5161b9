"""Migration 0007 on a registry filled under schema 6: the recent tier's band rows become one run per batch."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.registry import _bandblocks
from dedup_tasks.registry import postgres as pg_mod
from dedup_tasks.registry.base import Fingerprints, MemoryRegistry
from dedup_tasks.registry.postgres import PostgresRegistry
from tests.registry import v7_postgres as v7
from tests.registry.conftest import migrate_to_current, schema_at_version
from tests.registry.old_recent import read_recent_rows_v6, write_recent_rows_v6
from tests.registry.synth import BANDS, Pool, commit_both, count_rows, fill_both, mix_band_keys
from tests.registry.synth import all_lookups as synth_lookups

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02", "2026-12-01T03"]
ASK = "2026-12-01T09"


def lookups(registry, query) -> dict[str, object]:
    return synth_lookups(registry, query, ASK)


def mixed_batch(pool: Pool, n: int, tag: str) -> Fingerprints:
    """pool.batch with well-mixed band keys (``synth.mix_band_keys``)."""
    return mix_band_keys(pool.batch(n, tag))


@pytest.fixture
def v6_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 6) as name:
        yield name


def recent_keys(admin, schema: str) -> dict[str, list[tuple[int, int]]]:
    """The recent tier's (key, seq) pairs per batch, read back from schema 7's rows."""
    with admin.cursor() as cur:
        cur.execute(f'SELECT DISTINCT batch_id FROM "{schema}".minhash_bands_recent ORDER BY 1')
        batches = [b for (b,) in cur.fetchall()]
    out = {}
    for batch in batches:
        with admin.cursor() as cur:
            cur.execute(f'SET search_path TO "{schema}"')
            keys, seqs = pg_mod._read_recent(cur, "batch_id = %(b)s", {"b": batch})
            cur.execute("RESET search_path")
        out[batch] = sorted(zip(keys.tolist(), seqs.tolist(), strict=True))
    return out


def test_migration_0007_moves_recent_band_rows_into_runs(pg_dsn, v6_schema, admin, monkeypatch):
    pool = Pool(np.random.default_rng(7), size=200)
    mem = MemoryRegistry()
    # Schema 6's commit and compaction are this code's with schema 6's recent band rows (one per
    # document and band): the old registry is filled through them with the version check bypassed.
    monkeypatch.setattr(v7, "check_version", lambda *a, **k: 6)
    monkeypatch.setattr(v7, "write_recent_run", write_recent_rows_v6)
    monkeypatch.setattr(v7, "_read_recent", read_recent_rows_v6)
    old = v7.PostgresRegistry(pg_dsn, schema=v6_schema, num_perm=32)
    fill_both(old, mem, BATCHES, lambda batch_id: mixed_batch(pool, 400, batch_id))
    old.close()
    monkeypatch.undo()
    with admin.cursor() as cur:
        cur.execute(
            f'SELECT s.batch_id, b.bucket, b.seq FROM "{v6_schema}".minhash_bands_recent b'
            f' JOIN "{v6_schema}".minhash_signatures s ON s.seq = b.seq'
        )
        v6 = {}
        for batch, bucket, seq in cur.fetchall():
            v6.setdefault(batch, []).append((bucket % 2**64, seq))
    v6 = {b: sorted(rows) for b, rows in v6.items()}
    assert sorted(v6) == BATCHES[1:]
    before = count_rows(admin, v6_schema)

    migrate_to_current(pg_dsn, v6_schema, 6)
    # Every recent key moved, whole, into its batch's run; the view counts them as rows.
    assert recent_keys(admin, v6_schema) == v6
    assert count_rows(admin, v6_schema) == before
    with admin.cursor() as cur:
        cur.execute(f"SELECT to_regclass('\"{v6_schema}\".minhash_bands_recent_v6')")
        assert cur.fetchone()[0] is None
        cur.execute(f'SELECT bucket, seq FROM "{v6_schema}".minhash_bands ORDER BY seq, bucket LIMIT 3')
        view = cur.fetchall()
    first = sorted((s, k - 2**64 if k >= 2**63 else k) for k, s in v6[BATCHES[1]])[:3]
    assert view == [(k, s) for s, k in first]

    registry = PostgresRegistry(pg_dsn, schema=v6_schema, num_perm=32)
    try:
        query = mixed_batch(pool, 300, "q")
        want = lookups(mem, query)
        assert len(want["minhash"]) > 0
        assert lookups(registry, query) == want
        total = sum(int(mem._batches[b].has_minhash.sum()) * BANDS for b in BATCHES)
        assert registry.table_stats()["minhash_bands"]["rows"] == total
        # A rerun of a migrated recent batch replaces its run. Being earlier than BATCHES[3], it also
        # retracts BATCHES[3]'s copies of what it keeps (issue #16 row 2): BATCHES[3]'s run is rewritten
        # without their keys (MemoryRegistry does not model retraction: its batch loses them by hand).
        with admin.cursor() as cur:
            cur.execute(
                f'SELECT doc_id, seq FROM "{v6_schema}".minhash_signatures WHERE batch_id = %s', (BATCHES[3],)
            )
            seq_of = dict(cur.fetchall())
        rerun = mixed_batch(pool, 50, BATCHES[2])
        stale = commit_both(registry, mem, BATCHES[2], rerun).stale
        assert stale.get(BATCHES[3], 0) > 0
        with admin.cursor() as cur:
            cur.execute(f'SELECT doc_id FROM "{v6_schema}".registry_stale WHERE batch_id = %s', (BATCHES[3],))
            retracted = {d for (d,) in cur.fetchall()}
        dead = {seq_of[d] for d in retracted if d in seq_of}
        assert dead
        fp3 = mem._batches[BATCHES[3]]
        mem._batches[BATCHES[3]] = fp3.take(np.flatnonzero(~np.isin(fp3.doc_id.astype(str), list(retracted))))
        keys = recent_keys(admin, v6_schema)
        assert len(keys[BATCHES[2]]) == int(rerun.has_minhash.sum()) * BANDS
        assert keys[BATCHES[1]] == v6[BATCHES[1]]
        assert keys[BATCHES[3]] == [(k, q) for k, q in v6[BATCHES[3]] if q not in dead]
        assert lookups(registry, query) == lookups(mem, query)
        new = mixed_batch(pool, 60, "2026-12-01T04")
        commit_both(registry, mem, "2026-12-01T04", new)
        want = lookups(mem, query)
        assert lookups(registry, query) == want
        # Compaction turns the recent runs into one main run of blocks: the same answers again.
        done = registry.compact()
        assert done["moved"]["minhash_bands"] == sum(len(v) for v in keys.values()) + int(new.has_minhash.sum()) * BANDS
        with admin.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{v6_schema}".minhash_bands_recent')
            assert cur.fetchone()[0] == 0
            cur.execute(f'SELECT count(*) FROM "{v6_schema}".minhash_band_runs')
            assert cur.fetchone()[0] == 2
        assert lookups(registry, query) == want
    finally:
        registry.close()


def test_recent_rows_round_trip_split_and_join():
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 2**64, 50_000, dtype=np.uint64)
    keys[:20_000] = (keys[:20_000] & np.uint64(2**56 - 1)) | np.uint64(7 << 56)  # one crowded shard
    keys[20_000:20_010] = keys[0]  # one key of many documents
    seqs = rng.permutation(50_000).astype(np.int64) + 10**9
    rows = _bandblocks.recent_rows(keys, seqs)
    assert int(np.asarray(rows["n"]).max()) <= _bandblocks.RECENT_MAX_PER_ROW
    assert int(np.asarray(rows["n"]).sum()) == len(keys)
    n = len(rows["n"])
    # A binary COPY of (seq_base, entries) rows, as the registry reads them.
    from dedup_tasks.registry._pgio import encode_binary_copy

    raw = encode_binary_copy([("int8", rows["seq_base"]), ("varbytea", rows["entries"])])
    got_keys, got_seqs = _bandblocks.decode_recent(raw)
    assert len(rows["shard"]) == n
    assert sorted(zip(got_keys.tolist(), got_seqs.tolist(), strict=True)) == sorted(
        zip(keys.tolist(), seqs.tolist(), strict=True)
    )
    # The in-memory join: exact on all 64 bits, every (query, registered) pair once per shared key.
    queries = np.concatenate([keys[::97], keys[::97] ^ np.uint64(1), rng.integers(0, 2**64, 500, dtype=np.uint64)])
    probes = _bandblocks.SortedProbes(queries, np.arange(len(queries)))
    q, s = probes.join(got_keys, got_seqs)
    want = sorted((int(i), int(seq)) for i in range(len(queries)) for seq in seqs[keys == queries[i]])
    assert sorted(zip(q.tolist(), s.tolist(), strict=True)) == want
    q, s = probes.join_copy(raw)  # the same join straight from the COPY bytes (what a lookup runs)
    assert sorted(zip(q.tolist(), s.tolist(), strict=True)) == want
    assert any(len(seqs[keys == queries[i]]) > 1 for i in range(len(queries)))

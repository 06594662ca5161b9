"""Migration 0008 on a registry filled under schema 7: four fingerprint tables become one documents row."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.registry._pgio import copy_in
from dedup_tasks.registry.base import Fingerprints, MemoryRegistry
from dedup_tasks.registry.postgres import PostgresRegistry
from tests.registry import v7_postgres as v7
from tests.registry.conftest import migrate_to_current, schema_at_version
from tests.registry.synth import Pool, commit_both, count_rows, fill_both, mix_band_keys
from tests.registry.synth import all_lookups as synth_lookups

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02", "2026-12-01T03"]
ASK = "2026-12-01T09"
# Schema 7's rows of a registered document, per table (what migration 0008 must carry over).
OLD_ROWS = {
    "url_keys": "seq, url_key, content_hi, content_lo, tier, batch_id, doc_id",
    "content_hashes": "seq, content_hi, content_lo, tier, batch_id, doc_id",
    "simhashes": "seq, simhash, tier, batch_id, doc_id",
    "minhash_signatures": "seq, tier, batch_id, doc_id, signature",
}


def lookups(registry, query) -> dict[str, object]:
    return synth_lookups(registry, query, ASK)


def mixed_batch(pool: Pool, n: int, tag: str) -> Fingerprints:
    """pool.batch with well-mixed band keys (``synth.mix_band_keys``) and a few empty documents (no
    content: never registered nor matched by content, but URL-registered)."""
    fp = mix_band_keys(pool.batch(n, tag))
    fp.has_content = np.arange(n) % 17 != 3
    return fp


def old_rows(admin, schema: str) -> dict[str, list[tuple]]:
    out = {}
    with admin.cursor() as cur:
        for table, cols in OLD_ROWS.items():
            cur.execute(f'SELECT {cols} FROM "{schema}".{table} ORDER BY seq')
            out[table] = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in cur.fetchall()]
    return out


def drop_retracted(admin, schema: str, mem: MemoryRegistry) -> int:
    """Remove from `mem` the later batches' copies an earlier batch's commit retracted (registry_stale):
    MemoryRegistry does not model retraction. Returns how many."""
    with admin.cursor() as cur:
        cur.execute(f'SELECT batch_id, doc_id FROM "{schema}".registry_stale')
        stale = cur.fetchall()
    for batch in {b for b, _ in stale}:
        fp = mem._batches[batch]
        gone = [d for b, d in stale if b == batch]
        mem._batches[batch] = fp.take(np.flatnonzero(~np.isin(fp.doc_id.astype(str), gone)))
    return len(stale)


@pytest.fixture
def v7_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 7) as name:
        yield name


def test_migration_0008_moves_every_fingerprint_into_one_documents_row(pg_dsn, v7_schema, admin, monkeypatch, tmp_path):
    pool = Pool(np.random.default_rng(8), size=200)
    mem = MemoryRegistry()
    # Schema 7's registry code, frozen (tests/registry/v7_postgres.py), with the version check bypassed.
    monkeypatch.setattr(v7, "check_version", lambda *a, **k: 7)
    old = v7.PostgresRegistry(pg_dsn, schema=v7_schema, num_perm=32)
    fill_both(old, mem, BATCHES, lambda batch_id: mixed_batch(pool, 400, batch_id))
    # A rerun of the compacted batch: its main-tier rows deleted, its new rows in the recent tier; being
    # the earliest, it retracts the later batches' copies of what it keeps.
    rerun0 = mixed_batch(pool, 150, BATCHES[0])
    commit_both(old, mem, BATCHES[0], rerun0)
    assert drop_retracted(admin, v7_schema, mem) > 0
    old.close()
    monkeypatch.undo()
    # A batch that began (registry_batches row, no rows registered): it keeps its snapshot.
    with admin.cursor() as cur:
        cur.execute(f'INSERT INTO "{v7_schema}".registry_batches (batch_id, snapshot_seq) VALUES (%s, 1)', ("2026-12-01T05",))
    before = old_rows(admin, v7_schema)
    counts = count_rows(admin, v7_schema)
    assert len(before["url_keys"]) > len(before["minhash_signatures"]) > 0
    assert len(before["content_hashes"]) < sum(len(fp) for fp in mem._batches.values())  # empty documents

    migrate_to_current(pg_dsn, v7_schema, 7)
    # Every old row is there, unchanged, through the views of the old tables; one documents row per
    # registered document; the old tables are gone.
    assert old_rows(admin, v7_schema) == before
    assert count_rows(admin, v7_schema) == counts
    with admin.cursor() as cur:
        cur.execute(f'SELECT count(*), count(DISTINCT seq) FROM "{v7_schema}".documents')
        docs, distinct = cur.fetchone()
        assert docs == distinct == sum(len(fp) for fp in mem._batches.values())
        cur.execute(f'SELECT count(*) FROM "{v7_schema}".documents_main')
        assert cur.fetchone()[0] == 0  # the compacted batch was rerun: its rows now sit in the recent tier
        cur.execute("SELECT relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE nspname = %s"
                    " AND relname IN ('url_keys', 'content_hashes', 'simhashes', 'minhash_signatures')", (v7_schema,))  # fmt: skip
        assert sorted(k for (k,) in cur.fetchall()) == ["v"] * 4
        cur.execute(f'SELECT batch_id, ord, snapshot_seq FROM "{v7_schema}".registry_batches ORDER BY batch_id')
        batches = cur.fetchall()
    assert [b for b, _, _ in batches] == [*BATCHES, "2026-12-01T05"]
    assert len({o for _, o, _ in batches}) == len(batches) and batches[-1][2] == 1

    registry = PostgresRegistry(pg_dsn, schema=v7_schema, num_perm=32, bloom_path=tmp_path / "bloom.npy")
    try:
        query = mixed_batch(pool, 300, "q")
        want = lookups(mem, query)
        assert all(len(v) > 0 for v in want.values())
        assert lookups(registry, query) == want  # the URL lookup through a filter built from documents
        # A rerun of a migrated recent batch, earlier than BATCHES[3]: it replaces its rows and retracts
        # BATCHES[3]'s copies of what it keeps (MemoryRegistry does not model retraction: by hand).
        rerun = mixed_batch(pool, 60, BATCHES[2])
        stale = commit_both(registry, mem, BATCHES[2], rerun).stale
        assert stale.get(BATCHES[3], 0) > 0
        with admin.cursor() as cur:
            cur.execute(f'SELECT doc_id FROM "{v7_schema}".registry_stale WHERE batch_id = %s', (BATCHES[3],))
            retracted = [d for (d,) in cur.fetchall()]
            cur.execute(f'SELECT count(*) FROM "{v7_schema}".documents d JOIN "{v7_schema}".registry_batches b'
                        " ON b.ord = d.batch_ord WHERE b.batch_id = %s AND d.doc_id = ANY(%s)", (BATCHES[3], retracted))  # fmt: skip
            assert cur.fetchone()[0] == 0
        drop_retracted(admin, v7_schema, mem)
        assert lookups(registry, query) == lookups(mem, query)
        new = mixed_batch(pool, 80, "2026-12-01T04")
        commit_both(registry, mem, "2026-12-01T04", new)
        want = lookups(mem, query)
        assert lookups(registry, query) == want
        done = registry.compact()
        assert done["moved"]["documents"] == sum(len(fp) for fp in mem._batches.values())
        assert lookups(registry, query) == want
        assert lookups(PostgresRegistry(pg_dsn, schema=v7_schema, num_perm=32), query) == want
    finally:
        registry.close()


def test_documents_rows_hold_each_fingerprint_only_where_the_document_has_it(make_registry, admin, schema):
    pool = Pool(np.random.default_rng(9), size=100)
    fp = mixed_batch(pool, 200, "b")
    fp.has_url[:5] = False
    fp.has_simhash[5:10] = False
    fp.has_minhash[10:15] = False
    pg = make_registry()
    pg.begin("b")
    pg.commit("b", fp)
    with admin.cursor() as cur:
        cur.execute(
            f'SELECT doc_id, url_key IS NOT NULL, has_content, simhash IS NOT NULL, signature IS NOT NULL,'
            f' url_key, content_hi, content_lo, simhash FROM "{schema}".documents ORDER BY seq'
        )
        rows = cur.fetchall()
    assert [r[0] for r in rows] == list(fp.doc_id)
    flags = np.array([r[1:5] for r in rows], bool)
    assert (flags[:, 0] == fp.has_url).all() and (flags[:, 1] == fp.content_mask()).all()
    assert (flags[:, 2] == fp.has_simhash).all() and (flags[:, 3] == fp.has_minhash).all()
    u = lambda v: v % 2**64  # noqa: E731 - bigint back to uint64
    for i, (_, has_url, _, has_sim, _, url, hi, lo, sim) in enumerate(rows):
        assert (u(hi), u(lo)) == tuple(int(x) for x in fp.content_hash[i])
        assert (u(url) if has_url else None) == (int(fp.url_key[i]) if fp.has_url[i] else None)
        assert (u(sim) if has_sim else None) == (int(fp.simhash[i]) if fp.has_simhash[i] else None)


def test_nullable_copy_columns_round_trip(admin, schema):
    """The binary COPY encoder's nullable columns (int8?, varbytea?) next to fixed and text ones."""
    import pyarrow as pa

    with admin.cursor() as cur:
        cur.execute(f'SET search_path TO "{schema}"')
        cur.execute("CREATE TEMP TABLE _t (a int8, b int8, c bool, d text, e bytea)")
        valid = np.array([True, False, True, False])
        copy_in(
            cur, "_t", ["a", "b", "c", "d", "e"],
            [("int8", np.arange(4)), ("int8?", (np.array([-1, 2, 2**62, 4]), valid)), ("bool", ~valid),
             ("text", ["x", "", "yz", "w"]), ("varbytea?", pa.array([b"\x00\x01", None, b"", None], pa.large_binary()))],
        )  # fmt: skip
        cur.execute("SELECT a, b, c, d, e FROM _t ORDER BY a")
        got = [(a, b, c, d, None if e is None else bytes(e)) for a, b, c, d, e in cur.fetchall()]
        cur.execute("RESET search_path")
    assert got == [(0, -1, False, "x", b"\x00\x01"), (1, None, True, "", None), (2, 2**62, False, "yz", b""), (3, None, True, "w", None)]

"""Migration 0009 on a registry filled under schema 8: lossless rows stay as they are, b-bit rows and
K-band documents join them (issue #14, docs/registry.md, "Signatures")."""

from __future__ import annotations

import dataclasses

import numpy as np
import psycopg2
import pytest

from dedup_tasks.registry import migrate as migrate_mod
from dedup_tasks.registry import postgres as pg_mod
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.migrate import RegistryVersionError, check_version
from dedup_tasks.registry.postgres import PostgresRegistry
from tests.registry.conftest import migrate_to_current, schema_at_version
from tests.registry.synth import NUM_PERM, Pool, canonical, commit_both, fill_both
from tests.registry.test_registry_migration_0008 import mixed_batch

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02", "2026-12-01T03"]
ASK = "2026-12-01T09"
K = 5


def minhash_lookup(registry, query):
    m = registry.minhash_candidates(ASK, query.minhash_bands)
    return canonical(m, "minhash"), canonical(m, "minhash_bits")


@pytest.fixture
def v8_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 8) as name:
        yield name


def test_migration_0009_keeps_lossless_rows_and_adds_bbit_ones(pg_dsn, v8_schema, admin, monkeypatch):
    pool = Pool(np.random.default_rng(9), size=200)
    mem = MemoryRegistry()
    # Schema 8's write path is this code's with 32 bits and every band (the layout did not change):
    # the version check is bypassed to fill the schema-8 registry with it.
    monkeypatch.setattr(pg_mod, "check_version", lambda *a, **k: 8)
    old = PostgresRegistry(pg_dsn, schema=v8_schema, num_perm=NUM_PERM)
    fill_both(old, mem, BATCHES[:2], lambda batch_id: mixed_batch(pool, 400, batch_id))
    old.close()
    monkeypatch.undo()
    with admin.cursor() as cur:
        cur.execute(f'SELECT seq, signature FROM "{v8_schema}".documents WHERE signature IS NOT NULL ORDER BY seq')
        before = [(s, bytes(b)) for s, b in cur.fetchall()]
    assert before and all(len(b) % 2 == 1 for _, b in before)  # lossless rows

    migrate_to_current(pg_dsn, v8_schema, 8)
    with admin.cursor() as cur:
        cur.execute(f'SELECT seq, signature FROM "{v8_schema}".documents WHERE signature IS NOT NULL ORDER BY seq')
        assert [(s, bytes(b)) for s, b in cur.fetchall()] == before
        cur.execute("SELECT col_description(%s::regclass, attnum) FROM pg_attribute WHERE attrelid = %s::regclass"
                    " AND attname = 'signature'", (f'"{v8_schema}".documents', f'"{v8_schema}".documents'))  # fmt: skip
        assert "b-bit" in cur.fetchone()[0]
    # Code of schema 8 refuses the migrated registry when it opens it (it cannot read b-bit rows).
    conn = psycopg2.connect(pg_dsn)
    try:
        monkeypatch.setattr(migrate_mod, "code_version", lambda: 8)
        with pytest.raises(RegistryVersionError):
            check_version(conn, v8_schema)
        monkeypatch.undo()
    finally:
        conn.close()

    registry = PostgresRegistry(pg_dsn, schema=v8_schema, num_perm=NUM_PERM)
    try:
        query = mixed_batch(pool, 300, "q")
        want = minhash_lookup(mem, query)
        assert want[0] and minhash_lookup(registry, query) == want
        # New batches register 8-bit signatures and K band keys; the old rows keep 32 bits and every band.
        for batch_id in BATCHES[2:]:
            fp = mixed_batch(pool, 300, batch_id)
            fp = dataclasses.replace(fp, minhash_bits=8, minhash_bands=np.ascontiguousarray(fp.minhash_bands[:, :K]))
            commit_both(registry, mem, batch_id, fp)
        with admin.cursor() as cur:
            cur.execute(f'SELECT length(d.signature) %% 2, count(*) FROM "{v8_schema}".documents d JOIN "{v8_schema}".registry_batches b'
                        " ON b.ord = d.batch_ord WHERE d.signature IS NOT NULL AND b.batch_id >= %s GROUP BY 1", (BATCHES[2],))  # fmt: skip
            assert [(odd, n > 0) for odd, n in cur.fetchall()] == [(0, True)]
            cur.execute(f'SELECT length(signature) FROM "{v8_schema}".documents WHERE length(signature) % 2 = 0 LIMIT 1')
            assert cur.fetchone()[0] == NUM_PERM * 8 // 8
        query = dataclasses.replace(query, minhash_bands=np.ascontiguousarray(query.minhash_bands[:, :K]))
        want = minhash_lookup(mem, query)
        bits = {b for *_, b in want[1]}
        assert {np.frombuffer(b, np.uint8)[0] for b in bits} == {8, 32}  # both kinds of rows found
        assert minhash_lookup(registry, query) == want
        registry.compact()
        got = minhash_lookup(registry, query)
        assert set(want[0]) <= set(got[0]) and set(want[1]) <= set(got[1])
    finally:
        registry.close()

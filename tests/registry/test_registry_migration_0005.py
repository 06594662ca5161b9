"""Migration 0005 on a registry filled under schema 4: the main tier's band rows become blocks."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.postgres import PostgresRegistry
from tests.registry import v7_postgres as v7
from tests.registry.conftest import migrate_to_current, schema_at_version
from tests.registry.old_recent import write_recent_rows_v6
from tests.registry.synth import Pool
from tests.registry.synth import all_lookups as synth_lookups

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02"]
ASK = "2026-12-01T09"


def lookups(registry, query) -> dict[str, object]:
    return synth_lookups(registry, query, ASK)


@pytest.fixture
def v4_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 4) as name:
        yield name


def compact_v4(admin, schema: str) -> None:
    """Schema 4's compaction, in SQL: every table's recent rows into its main partition."""
    with admin.cursor() as cur:
        cur.execute(f'SET search_path TO "{schema}"')
        for table in v7.TABLES:
            cur.execute(
                "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
                " WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attname <> 'tier'",
                (table,),
            )
            cols = cur.fetchone()[0]
            cur.execute(f"INSERT INTO {table}_main ({cols}, tier) SELECT {cols}, 0 FROM {table}_recent")
        cur.execute(f"TRUNCATE {', '.join(t + '_recent' for t in v7.TABLES)}")
        cur.execute("RESET search_path")


def test_migration_0005_moves_a_filled_v4_registry_into_blocks(pg_dsn, v4_schema, admin, monkeypatch):
    pool = Pool(np.random.default_rng(5), size=200)
    mem = MemoryRegistry()
    # Schema 4's commit path is this code's commit path (it writes only the recent tier) with schema 6's
    # recent band rows (one per document and band, as in schema 4), so the old registry is filled through
    # it with the version check bypassed; the old compaction runs in SQL.
    monkeypatch.setattr(v7, "check_version", lambda *a, **k: 4)
    monkeypatch.setattr(v7, "write_recent_run", write_recent_rows_v6)  # schema 4..6's recent rows
    old = v7.PostgresRegistry(pg_dsn, schema=v4_schema, num_perm=32)
    for i, batch in enumerate(BATCHES):
        fp = pool.batch(400, batch)
        old.begin(batch)
        old.commit(batch, fp)
        mem.commit(batch, fp)
        if i == 1:
            compact_v4(admin, v4_schema)  # two batches in the main tier, one in the recent tier
    old.close()
    monkeypatch.undo()
    with admin.cursor() as cur:
        cur.execute(f'SELECT count(*) FROM "{v4_schema}".minhash_bands_main')
        v4_main_rows = cur.fetchone()[0]
    assert v4_main_rows > 0

    migrate_to_current(pg_dsn, v4_schema, 4)
    with admin.cursor() as cur:
        cur.execute(f'SELECT run, entries, blocks FROM "{v4_schema}".minhash_band_runs')
        runs = cur.fetchall()
        cur.execute(f'SELECT count(*), sum(n), sum(length(entries)) FROM "{v4_schema}".minhash_bands_main')
        blocks, keys, nbytes = cur.fetchone()
        cur.execute(f"SELECT to_regclass('\"{v4_schema}\".minhash_bands_main_v4')")
        assert cur.fetchone()[0] is None
    assert runs == [(1, v4_main_rows, blocks)] and keys == v4_main_rows and nbytes == 8 * v4_main_rows

    registry = PostgresRegistry(pg_dsn, schema=v4_schema, num_perm=32)
    try:
        query = pool.batch(300, "q")
        want = lookups(mem, query)
        assert len(want["minhash"]) > 0
        assert lookups(registry, query) == want
        assert registry.table_stats()["minhash_bands"]["rows"] == 1200 * 8 - sum(
            int((~mem._batches[b].has_minhash).sum()) * 8 for b in BATCHES
        )
        # After a compaction every batch is in blocks; a rerun of the latest leaves dead entries in
        # them (its old seqs lose their signature rows), a new batch and another compaction follow.
        registry.compact()
        assert lookups(registry, query) == want
        rerun = pool.batch(50, BATCHES[-1])
        registry.begin(BATCHES[-1])
        registry.commit(BATCHES[-1], rerun)
        mem.commit(BATCHES[-1], rerun)
        assert lookups(registry, query) == lookups(mem, query)
        new = pool.batch(60, "2026-12-01T03")
        registry.begin("2026-12-01T03")
        registry.commit("2026-12-01T03", new)
        mem.commit("2026-12-01T03", new)
        registry.compact()
        assert lookups(registry, query) == lookups(mem, query)
        with admin.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{v4_schema}".minhash_band_runs')
            assert cur.fetchone()[0] == 3
    finally:
        registry.close()

"""Row 3: a rerun's commit must not pay for missing statistics. A commit that changed many rows
ANALYZEs the recent partitions it touched (and compaction the main ones), so the rerun's DELETE is
planned on real row counts. Timing is measured in bench (``python -m bench rerun-commit``), not here."""

from __future__ import annotations

import psycopg2

from bench.rerun_commit import hour_fingerprints
from dedup_tasks.registry.base import Fingerprints
from dedup_tasks.registry.postgres import TABLES

N = 3000
BANDS = 8


def fingerprints(n: int, seed: int) -> Fingerprints:
    return hour_fingerprints(n, seed, num_perm=32, bands=BANDS, rows=32 // BANDS)


def analyzed(dsn: str, schema: str) -> dict[str, tuple]:
    conn = psycopg2.connect(dsn)  # a fresh session: no cached statistics snapshot
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT relname, last_analyze, n_mod_since_analyze FROM pg_stat_user_tables WHERE schemaname = %s",
                (schema,),
            )
            return {name: (last, mods) for name, last, mods in cur.fetchall()}
    finally:
        conn.close()


def test_commit_and_rerun_commit_leave_fresh_statistics(registry_factory, pg_dsn, registry_schema):
    registry = registry_factory(num_perm=32)
    registry.begin("2026-12-01T00")
    registry.commit("2026-12-01T00", fingerprints(N, 1))
    first = analyzed(pg_dsn, registry_schema)
    for table in TABLES:
        last, mods = first[f"{table}_recent"]
        assert last is not None, table  # ANALYZE ran (autovacuum would set last_autoanalyze)
        assert mods == 0, (table, mods)

    registry.begin("2026-12-01T00")  # the rerun: deletes everything, registers it again
    registry.commit("2026-12-01T00", fingerprints(N, 2))
    second = analyzed(pg_dsn, registry_schema)
    for table in TABLES:
        last, mods = second[f"{table}_recent"]
        assert last > first[f"{table}_recent"][0] and mods == 0, table
    # The planner now knows the rows a rerun deletes: every recent table's estimate is its row count
    # (the batch), not a guess. Since schema 7 minhash_bands_recent holds the batch's N * BANDS band
    # keys packed in a few rows (one run per commit), so its row count is that of the run's rows.
    with registry._transaction() as cur:
        for table in TABLES:
            cur.execute(f"SELECT count(*) FROM {table}_recent")
            rows = cur.fetchone()[0]
            cur.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table}_recent")
            assert abs(cur.fetchone()[0][0]["Plan"]["Plan Rows"] - rows) <= rows * 0.05, table
        cur.execute("SELECT sum(n) FROM minhash_bands_recent")
        assert abs(cur.fetchone()[0] - N * BANDS) < N * BANDS * 0.05


def test_small_commits_do_not_analyze(registry_factory, pg_dsn, registry_schema):
    registry = registry_factory(num_perm=32)
    registry.begin("2026-12-01T00")
    registry.commit("2026-12-01T00", fingerprints(10, 3))
    assert all(last is None for name, (last, _) in analyzed(pg_dsn, registry_schema).items() if name.endswith("_recent"))


def test_compaction_analyzes_the_main_tier(registry_factory, pg_dsn, registry_schema):
    registry = registry_factory(num_perm=32)
    registry.begin("2026-12-01T00")
    registry.commit("2026-12-01T00", fingerprints(50, 4))
    registry.compact()
    stats = analyzed(pg_dsn, registry_schema)
    assert all(stats[f"{table}_main"][0] is not None for table in TABLES)

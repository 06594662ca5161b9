"""What a committed ``bench semantic`` result records of its settings."""

from __future__ import annotations

import pytest

from bench.semantic import bench_config
from dedup_tasks.config import DedupConfig


def test_a_cross_encoder_file_is_named_by_file_name_and_model_id_not_path(tmp_path) -> None:
    pytest.importorskip("torch")
    from tests.embed.fakes import write_cross_encoder

    model = write_cross_encoder(tmp_path / "cross_en.pt", bias=0.0)
    config = DedupConfig(semantic_sketch=True, semantic_cross_encoder_en=str(model),
                         semantic_cross_threshold_en=2.37)
    recorded = bench_config(config)
    assert recorded["semantic_cross_encoder_en"].startswith("cross_en.pt (cross-e5-")
    assert str(tmp_path) not in repr(recorded)
    assert recorded["semantic_cross_threshold_en"] == 2.37 and recorded["semantic_cross_encoder_zh"] == ""


def test_the_bench_registry_is_in_memory_or_a_scratch_postgres_schema_dropped_afterwards(pg_dsn, tmp_path) -> None:
    import psycopg2

    from bench.semantic import bench_registry
    from dedup_tasks.registry.base import MemoryRegistry
    from dedup_tasks.registry.postgres import PostgresRegistry

    config = DedupConfig(root=str(tmp_path))
    with bench_registry(config, None) as registry:
        assert isinstance(registry, MemoryRegistry)
    with bench_registry(config, pg_dsn) as registry:
        assert isinstance(registry, PostgresRegistry) and registry.schema.startswith("bench_semantic_")
        schema = registry.schema
        assert registry.embedding_store.generation("m") is None  # a migrated schema of its own
    conn = psycopg2.connect(pg_dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM information_schema.schemata WHERE schema_name = %s", (schema,))
            assert cur.fetchone()[0] == 0
    finally:
        conn.close()

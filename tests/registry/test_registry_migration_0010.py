"""Migration 0010 on a registry whose embeddings were written under schema 9: every model gets a
generation, and an index saved before (it records none) is rebuilt, never trusted."""

from __future__ import annotations

import numpy as np
import psycopg2
import pytest

from dedup_tasks.embed.faiss_index import PersistentIndex
from dedup_tasks.registry.embeddings import PostgresEmbeddingStore
from tests.registry.conftest import migrate_to_current, schema_at_version


@pytest.fixture
def v9_schema(pg_dsn, admin):
    with schema_at_version(pg_dsn, admin, 9) as name:
        yield name


def test_migration_0010_gives_written_models_a_generation(pg_dsn, v9_schema, admin, tmp_path) -> None:
    vectors = np.eye(3, 4, dtype=np.float32)
    with admin.cursor() as cur:  # schema 9's write path: the embeddings table alone
        for i, model in enumerate(["sketch:a", "sketch:a", "e5"]):
            cur.execute(f'INSERT INTO "{v9_schema}".embeddings (model_id, batch_id, doc_id, dim, vector) VALUES (%s, %s, %s, 4, %s)',
                        (model, "2026-12-01T00", f"d{i}", vectors[i].tobytes()))
    stale = PersistentIndex(tmp_path / "registry" / "faiss" / "sketch_a.index", 4)
    stale.add(np.array(["ghost"], object), np.array(["2026-12-01T00"], object), vectors[:1])
    stale.save()  # no generation: written before this version

    migrate_to_current(pg_dsn, v9_schema, 9)
    conn = psycopg2.connect(pg_dsn)
    try:
        store = PostgresEmbeddingStore(conn, v9_schema)
        assert store.generation("sketch:a").endswith(":1") and store.generation("e5").endswith(":1")
        assert store.generation("sketch:a") != store.generation("e5")  # a lineage per model
        index = PersistentIndex.mirror(tmp_path, "sketch:a", 4, store)
        assert sorted(index.doc_id.tolist()) == ["d0", "d1"] and index.generation == store.generation("sketch:a")
        store.put("sketch:a", np.array(["d3"], object), np.array(["2026-12-01T01"], object), vectors[2:])
        assert store.generation("sketch:a").endswith(":2")
    finally:
        conn.close()

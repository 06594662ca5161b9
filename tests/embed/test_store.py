"""EmbeddingStore: memory and PostgreSQL (migration 0002) keep vectors apart per model id."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pytest

from dedup_tasks.embed.faiss_index import search_flat
from dedup_tasks.registry.embeddings import (
    EmbeddingStore,
    MemoryEmbeddingStore,
    PostgresEmbeddingStore,
    store_for,
)
from dedup_tasks.registry.migrate import scratch_schema

DSN = os.environ.get("DEDUP_TEST_DB_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg_store() -> Iterator[PostgresEmbeddingStore]:
    psycopg2 = pytest.importorskip("psycopg2")
    try:
        conn = psycopg2.connect(DSN, connect_timeout=3)
    except psycopg2.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {DSN}: {exc}")
    try:
        with scratch_schema(conn, "test_emb") as schema:
            yield PostgresEmbeddingStore(conn, schema)
    finally:
        conn.close()


def check_store(store: EmbeddingStore) -> None:
    rng = np.random.default_rng(0)
    vec = rng.standard_normal((3, 8)).astype(np.float32)
    docs = np.array(["a", "b\tweird\\id", "c"], object)
    batches = np.array(["2026-12-01T00", "2026-12-01T00", "2026-12-01T01"], object)
    assert store.put("model-a", docs, batches, vec) == 3
    store.put("model-b", docs[:1], batches[:1], -vec[:1])

    found, got = store.get("model-a", np.array(["c", "zz", "a", "b\tweird\\id"], object), np.array(["2026-12-01T01", "x", "2026-12-01T00", "2026-12-01T00"], object))
    assert found.tolist() == [True, False, True, True]
    np.testing.assert_array_equal(got[[0, 2, 3]], vec[[2, 0, 1]])
    assert not got[1].any()

    found, got = store.get("model-b", docs, batches)
    assert found.tolist() == [True, False, False]
    np.testing.assert_array_equal(got[0], -vec[0])

    # Upsert: a rerun writes the same key again without duplicating it.
    store.put("model-a", docs[:1], batches[:1], vec[:1] * 2)
    d, b, v = store.scan("model-a")
    assert d.tolist() == ["a", "b\tweird\\id", "c"] and len(v) == 3
    np.testing.assert_array_equal(v[0], vec[0] * 2)
    assert store.scan("model-a", before_batch="2026-12-01T01")[0].tolist() == ["a", "b\tweird\\id"]
    assert store.get("model-a", np.empty(0, object), np.empty(0, object))[0].shape == (0,)
    check_generations(store, vec)


def check_generations(store: EmbeddingStore, vec: np.ndarray) -> None:
    """Each put moves its own model's generation on by one; a snapshot pairs rows with theirs."""
    assert store.generation("model-never-written") is None
    lineage, _, puts = store.generation("model-a").rpartition(":")
    other = store.generation("model-b")
    assert int(puts) == 2 and other.endswith(":1")
    store.put("model-a", np.array(["d"], object), np.array(["2026-12-01T02"], object), vec[:1])
    assert store.generation("model-a") == f"{lineage}:3" and store.generation("model-b") == other
    assert store.put("model-a", np.empty(0, object), np.empty(0, object), np.zeros((0, 8), np.float32)) == 0
    assert store.generation("model-a") == f"{lineage}:3"  # nothing written, nothing moved
    generation, docs, batches, vectors = store.snapshot("model-a")
    assert generation == f"{lineage}:3"
    assert docs.tolist() == ["a", "b\tweird\\id", "c", "d"] and batches.tolist()[-1] == "2026-12-01T02"
    np.testing.assert_array_equal(vectors[-1], vec[0])
    assert store.snapshot("model-never-written")[0] is None and len(store.snapshot("model-never-written")[1]) == 0


def test_stores_have_lineages_of_their_own() -> None:
    # An index written for one registry is never taken for another's (same number of puts).
    one, two = MemoryEmbeddingStore(), MemoryEmbeddingStore()
    for store in (one, two):
        store.put("m", np.array(["a"], object), np.array(["b"], object), np.ones((1, 2), np.float32))
    assert one.generation("m") != two.generation("m")


def test_memory_store() -> None:
    check_store(MemoryEmbeddingStore())


def test_postgres_store(pg_store: PostgresEmbeddingStore) -> None:
    check_store(pg_store)


def test_store_for_prefers_the_registry_store_and_keeps_one_memory_store_per_registry() -> None:
    class Reg:
        pass

    reg = Reg()
    assert store_for(reg) is store_for(reg)
    other = Reg()
    other.embedding_store = MemoryEmbeddingStore()
    assert store_for(other) is other.embedding_store


def test_search_flat_is_exact_cosine() -> None:
    vec = np.eye(4, dtype=np.float32)
    scores, idx = search_flat(vec, vec[[2]], 2)
    assert idx[0, 0] == 2 and scores[0, 0] == pytest.approx(1.0)

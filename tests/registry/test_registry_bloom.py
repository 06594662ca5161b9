"""URL Bloom filter: sizing, no false negatives, false-positive rate, persistence, catch-up, rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.bloom import BloomFilter, PersistedBloom, bloom_parameters
from tests.registry.synth import Pool, canonical, fingerprints


def test_sizing_for_100_million_urls_at_one_in_a_thousand():
    m, k = bloom_parameters(100_000_000, 0.001)
    assert 1.43e9 < m < 1.44e9 and m % 64 == 0
    assert k == 10
    assert m / 8 < 200e6  # ~180 MB


def test_no_false_negatives_and_false_positive_rate_near_target():
    rng = np.random.default_rng(0)
    bloom = BloomFilter.for_capacity(50_000, 0.001)
    keys = rng.integers(0, 2**64, 50_000, dtype=np.uint64)
    bloom.add(keys[:25_000])
    bloom.add(keys[25_000:])
    assert bloom.contains(keys).all()
    others = rng.integers(0, 2**64, 400_000, dtype=np.uint64)
    rate = bloom.contains(others).mean()
    assert 0.0005 < rate < 0.002, rate
    assert bloom.expected_fp_rate() == pytest.approx(0.001, rel=0.05)
    # Structured keys (small integers) are mixed before hashing: still no false negatives.
    small = np.arange(10_000, dtype=np.uint64)
    bloom.add(small)
    assert bloom.contains(small).all()


def test_persisted_file_round_trip_and_garbage(tmp_path):
    bloom = BloomFilter.for_capacity(1000, 0.01)
    bloom.add(np.arange(100, dtype=np.uint64))
    rid = "12345678-1234-5678-1234-567812345678"
    PersistedBloom(bloom, rid, 2**63 + 5 - 2**64).save(tmp_path / "f.npy")
    again = PersistedBloom.load(tmp_path / "f.npy")
    assert again is not None and again.registry_id == rid and again.watermark == 2**63 + 5 - 2**64
    assert np.array_equal(again.bloom.words, bloom.words) and again.bloom.k == bloom.k
    assert again.bloom.n_added == 100
    assert np.load(tmp_path / "f.npy").dtype == np.uint64  # a plain .npy file
    (tmp_path / "bad.npy").write_bytes(b"not a filter")
    assert PersistedBloom.load(tmp_path / "bad.npy") is None
    assert PersistedBloom.load(tmp_path / "missing.npy") is None
    np.save(tmp_path / "other.npy", np.zeros(20, np.uint64))
    assert PersistedBloom.load(tmp_path / "other.npy") is None
    assert not list(tmp_path.glob(".*tmp"))


def test_lookup_through_the_filter_equals_memory_registry_and_skips_the_database(make_registry, tmp_path):
    pool = Pool(np.random.default_rng(11))
    path = tmp_path / "registry" / "url_bloom.npy"
    pg = make_registry(bloom_path=path, bloom_capacity=10_000)
    mem = MemoryRegistry()
    for batch in ("b1", "b2"):
        fp = pool.batch(600, batch)
        pg.begin(batch)
        pg.commit(batch, fp)
        mem.commit(batch, fp)
    q = pool.batch(500, "q")
    for ask in ("b1", "b2", "b3"):
        got = pg.lookup_urls(ask, q.url_key)
        assert canonical(got, "content_hash") == canonical(mem.lookup_urls(ask, q.url_key), "content_hash")
    assert pg.stats["bloom_skipped"] > 0  # fresh URLs never reached PostgreSQL
    assert path.exists()


def test_a_filter_that_says_maybe_to_everything_still_answers_exactly(make_registry, tmp_path):
    path = tmp_path / "url_bloom.npy"
    pg = make_registry(bloom_path=path, bloom_capacity=1000)
    fp = fingerprints(["a", "b"], [10, 20], [(1, 1), (2, 2)], [1, 2])
    pg.begin("b1")
    pg.commit("b1", fp)
    pg.lookup_urls("b2", fp.url_key)
    pg._bloom.bloom.words[:] = np.uint64(2**64 - 1)
    got = pg.lookup_urls("b2", np.array([10, 30, 40], np.uint64))
    assert list(got.query) == [0] and list(got.doc_id) == ["a"]
    assert pg.stats["bloom_skipped"] == 0 or pg.stats["bloom_maybe"] >= 3


def test_persistence_incremental_catch_up_and_rebuild(make_registry, tmp_path, admin, schema):
    path = tmp_path / "url_bloom.npy"
    writer = make_registry()
    first = fingerprints(["a"], [111], [(1, 1)], [1])
    writer.begin("b1")
    writer.commit("b1", first)

    reader = make_registry(bloom_path=path, bloom_capacity=1000)
    assert len(reader.lookup_urls("b9", first.url_key)) == 1  # built from the registry, saved
    built = PersistedBloom.load(path)
    assert built is not None and built.bloom.n_added == 1
    watermark = built.watermark

    second = fingerprints(["b", "c"], [222, 333], [(2, 2), (3, 3)], [2, 3])
    writer.begin("b2")
    writer.commit("b2", second)
    # The same object catches up before answering: the new URLs are not ruled out.
    assert len(reader.lookup_urls("b9", second.url_key)) == 2
    reader.close()
    saved = PersistedBloom.load(path)
    assert saved is not None and saved.watermark > watermark and saved.bloom.n_added == 3

    # A new process loads the file and catches up only with rows above its watermark. A marker key
    # put into the file shows that the file was used rather than rebuilt.
    saved.bloom.add(np.array([999], np.uint64))
    saved.save(path)
    third = fingerprints(["d"], [444], [(4, 4)], [4])
    writer.begin("b3")
    writer.commit("b3", third)
    fresh = make_registry(bloom_path=path, bloom_capacity=1000)
    assert len(fresh.lookup_urls("b9", np.array([111, 222, 333, 444], np.uint64))) == 4
    assert fresh._bloom.bloom.contains(np.array([999, 444], np.uint64)).all()
    assert fresh._bloom.watermark > saved.watermark

    rebuilt = fresh.rebuild_bloom()
    assert rebuilt.bloom.n_added == 4 and not rebuilt.bloom.contains(np.array([999], np.uint64))[0]
    assert PersistedBloom.load(path).bloom.n_added == 4


def test_a_file_from_another_registry_is_rebuilt_not_trusted(make_registry, pg_dsn, tmp_path):
    from dedup_tasks.registry.migrate import migrate
    from dedup_tasks.registry.postgres import PostgresRegistry

    path = tmp_path / "url_bloom.npy"
    reg = make_registry(bloom_path=path, bloom_capacity=1000)
    reg.begin("b1")
    reg.commit("b1", fingerprints(["a"], [5], [(1, 1)], [1]))
    reg.lookup_urls("b2", np.array([5], np.uint64))
    reg.close()

    import psycopg2

    other_schema = "test_registry_other_" + np.random.default_rng().integers(0, 1 << 30).astype(str)
    conn = psycopg2.connect(pg_dsn)
    conn.autocommit = True
    try:
        migrate(conn, other_schema)
        other = PostgresRegistry(
            pg_dsn, schema=other_schema, bloom_path=path, bloom_capacity=1000, num_perm=32
        )
        other.begin("b1")
        other.commit("b1", fingerprints(["z"], [6], [(2, 2)], [2]))
        assert list(other.lookup_urls("b2", np.array([5, 6], np.uint64)).doc_id) == ["z"]
        assert other._bloom.bloom.n_added == 1  # rebuilt from this registry, not the old file's key 5
        other.close()
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{other_schema}" CASCADE')
        conn.close()

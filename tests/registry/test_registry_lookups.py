"""PostgresRegistry answers every lookup exactly as MemoryRegistry does."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_tasks.fingerprint.simhash import hamming
from dedup_tasks.registry.base import Matches, MemoryRegistry
from tests.registry.synth import NUM_PERM, Pool, canonical, count_rows, fingerprints

BATCHES = ["2026-12-01T00", "2026-12-01T01", "2026-12-01T02", "2026-12-01T03"]


@pytest.fixture
def loaded(make_registry):
    """The same ~3,000 random fingerprints (with planted collisions) in both registries."""
    pool = Pool(np.random.default_rng(7), size=250)
    pg = make_registry()
    mem = MemoryRegistry()
    for batch in BATCHES[:3]:
        fp = pool.batch(1000, batch)
        pg.begin(batch)
        assert pg.commit(batch, fp).registered == 1000
        mem.commit(batch, fp)
    return pool, pg, mem


@pytest.mark.parametrize("ask", BATCHES + ["2026-11-30T23", "9999"])
def test_every_lookup_equals_memory_registry(loaded, ask):
    pool, pg, mem = loaded
    q = pool.batch(800, "query")
    checks = [
        ("lookup_urls", q.url_key, "content_hash"),
        ("lookup_content", q.content_hash, None),
        ("simhash_candidates", q.simhash, "simhash"),
        ("minhash_candidates", q.minhash_bands, "minhash"),
    ]
    for method, arg, key in checks:
        got = getattr(pg, method)(ask, arg)
        want = getattr(mem, method)(ask, arg)
        assert canonical(got, key) == canonical(want, key), method
        assert got.query.dtype == np.int64
        assert got.doc_id.dtype == object and got.batch_id.dtype == object
        if ask > BATCHES[0]:
            assert len(got) > 0, f"{method}: the planted collisions should produce hits"
    assert pg.lookup_urls(ask, q.url_key).payload["content_hash"].dtype == np.uint64
    sig = pg.minhash_candidates(ask, q.minhash_bands).payload["minhash"]
    assert sig.dtype == np.uint32 and sig.shape[1:] == (NUM_PERM,)
    assert pg.simhash_candidates(ask, q.simhash).payload["simhash"].dtype == np.uint64


@pytest.mark.parametrize("max_distance", [3, 6])
def test_simhash_distance_filter_equals_filtered_memory_answer(loaded, max_distance):
    pool, pg, mem = loaded
    q = pool.batch(800, "query")
    got = pg.simhash_candidates("9999", q.simhash, max_distance=max_distance)
    want = mem.simhash_candidates("9999", q.simhash)
    ok = hamming(want.payload["simhash"], q.simhash[want.query]) <= max_distance
    want = Matches(
        want.query[ok], want.doc_id[ok], want.batch_id[ok], {"simhash": want.payload["simhash"][ok]}
    )
    assert len(want) > 0
    assert canonical(got, "simhash") == canonical(want, "simhash")


def test_lookups_never_see_own_or_later_batches(make_registry):
    pg = make_registry()
    same = fingerprints(["d"], [11], [(1, 2)], [0xABCD])
    for batch in ("2026-12-01T01", "2026-12-01T02"):
        pg.begin(batch)
        pg.commit(batch, same)
    seen = pg.lookup_content("2026-12-01T02", same.content_hash)
    assert list(seen.batch_id) == ["2026-12-01T01"]
    for method, arg in [
        ("lookup_urls", same.url_key),
        ("lookup_content", same.content_hash),
        ("simhash_candidates", same.simhash),
        ("minhash_candidates", same.minhash_bands),
    ]:
        assert len(getattr(pg, method)("2026-12-01T01", arg)) == 0, method
        assert len(getattr(pg, method)("2026-12-01T00", arg)) == 0, method


def test_batch_order_is_python_string_order_not_the_database_collation(make_registry):
    # In a linguistic collation "a" < "B"; in Python (code points) "B" < "a". The registry follows Python.
    pg, mem = make_registry(), MemoryRegistry()
    fp = fingerprints(["x"], [5], [(5, 5)], [5])
    for batch in ("B", "a"):
        pg.begin(batch)
        pg.commit(batch, fp)
        mem.commit(batch, fp)
    for ask in ("B", "a", "b", "C"):
        assert canonical(pg.lookup_content(ask, fp.content_hash), None) == canonical(
            mem.lookup_content(ask, fp.content_hash), None
        )
    assert list(pg.lookup_content("a", fp.content_hash).batch_id) == ["B"]


def test_uint64_extremes_and_awkward_doc_ids_round_trip(make_registry):
    pg = make_registry()
    top = 2**64 - 1
    ids = ["plain", 'comma,and"quote', "new\nline", "中文-é", ""]
    keys = [0, 2**63, top, 2**63 - 1, 1]
    content = [(top, 0), (2**63, 2**63 - 1), (0, top), (1, 1), (top, top)]
    sims = [top, 0, 2**63, 0x8000_8000_8000_8000, 0x7FFF_FFFF_FFFF_FFFF]
    sig = (
        np.array([[2**32 - 1, 0] * (NUM_PERM // 2)] * 5, dtype=np.uint32)
        + np.arange(5, dtype=np.uint32)[:, None]
    )
    fp = fingerprints(ids, keys, content, sims, sig)
    pg.begin("b1")
    pg.commit("b1", fp)
    mem = MemoryRegistry()
    mem.commit("b1", fp)
    for method, arg, key in [
        ("lookup_urls", fp.url_key, "content_hash"),
        ("lookup_content", fp.content_hash, None),
        ("simhash_candidates", fp.simhash, "simhash"),
        ("minhash_candidates", fp.minhash_bands, "minhash"),
    ]:
        got = getattr(pg, method)("b2", arg)
        assert canonical(got, key) == canonical(getattr(mem, method)("b2", arg), key), method
    urls = pg.lookup_urls("b2", fp.url_key)
    assert sorted(urls.doc_id) == sorted(ids)


def test_empty_queries_and_empty_registry_have_typed_payloads(make_registry):
    pg = make_registry()
    empty_u64 = np.empty(0, np.uint64)
    assert pg.lookup_urls("b", empty_u64).payload["content_hash"].shape == (0, 2)
    assert len(pg.lookup_content("b", np.empty((0, 2), np.uint64))) == 0
    assert pg.simhash_candidates("b", empty_u64).payload["simhash"].dtype == np.uint64
    assert pg.minhash_candidates("b", np.empty((0, 8), np.uint64)).payload["minhash"].shape == (0, NUM_PERM)
    fp = fingerprints(["a"], [1], [(1, 1)], [1])
    assert len(pg.lookup_urls("b", fp.url_key)) == 0
    assert pg.minhash_candidates("b", fp.minhash_bands).payload["minhash"].shape == (0, NUM_PERM)


def test_rerun_replaces_rows_and_leaves_counts_unchanged(make_registry, admin, schema):
    pool = Pool(np.random.default_rng(3))
    pg = make_registry()
    fp = pool.batch(300, "b1")
    pg.begin("b1")
    first = pg.commit("b1", fp)
    counts = count_rows(admin, schema)
    pg.begin("b1")
    second = pg.commit("b1", fp)
    assert first.registered == second.registered == 300
    assert count_rows(admin, schema) == counts
    # A rerun that keeps fewer documents removes the others.
    pg.begin("b1")
    pg.commit("b1", fp.take(np.arange(100)))
    assert count_rows(admin, schema)["content_hashes"] == 100
    assert set(pg.lookup_content("b2", fp.content_hash).doc_id) <= set(fp.doc_id[:100])


def test_rows_without_url_simhash_or_minhash_are_not_registered_there(make_registry, admin, schema):
    pg = make_registry()
    fp = fingerprints(["a", "b", "c"], [1, 2, 3], [(1, 1), (2, 2), (3, 3)], [1, 2, 3])
    fp.has_url[:] = [True, False, True]
    fp.has_simhash[:] = [False, True, True]
    fp.has_minhash[:] = [True, True, False]
    pg.begin("b1")
    pg.commit("b1", fp)
    counts = count_rows(admin, schema)
    assert counts["url_keys"] == 2 and counts["content_hashes"] == 3
    assert counts["simhashes"] == 2 and counts["minhash_signatures"] == 2
    assert counts["minhash_bands"] == 2 * fp.minhash_bands.shape[1]

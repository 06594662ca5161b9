"""Main-tier MinHash candidates need `main_min_bands` agreeing bands; the recent tier's need one. The
registry records the key space of its band keys and refuses another."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dedup_tasks.registry import _pg_lookups
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.migrate import RegistryKeySpaceError
from tests.registry.synth import BANDS, Pool, canonical

ASK = "2026-12-02T00"


def _with_bands(fp, bands: np.ndarray):
    return dataclasses.replace(fp, minhash_bands=bands, has_minhash=np.ones(len(fp), bool))


def _query_and_documents(rng: np.random.Generator):
    """A query and four documents: a shares one band with it, b two (in different shards, so two
    lookup parts find one each), c none, d one (registered after the compaction: recent)."""
    pool = Pool(rng, size=20)
    query = pool.batch(1, "q")
    keys = rng.integers(0, 2**64, (5, BANDS), dtype=np.uint64)
    # Band keys' top byte is their shard: b's two agreeing keys sit in an even and an odd one.
    keys[0, 0] = (keys[0, 0] & np.uint64(0x00FFFFFFFFFFFFFF)) | np.uint64(0x02 << 56)
    keys[0, 3] = (keys[0, 3] & np.uint64(0x00FFFFFFFFFFFFFF)) | np.uint64(0x03 << 56)
    query = _with_bands(query, keys[:1])
    docs = keys[1:].copy()
    docs[0, 0] = keys[0, 0]  # a: one band
    docs[1, 0], docs[1, 3] = keys[0, 0], keys[0, 3]  # b: two bands
    main = _with_bands(pool.batch(3, "main"), docs[:3])  # a, b, c
    recent = _with_bands(pool.batch(1, "recent"), docs[3:].copy())
    recent.minhash_bands[0, 5] = keys[0, 5]  # d: one band
    return query, main, recent


@pytest.mark.parametrize("whole", [0, 10**9], ids=["probed", "read-whole"])
def test_main_tier_documents_need_two_bands_recent_ones_one(make_registry, monkeypatch, whole):
    monkeypatch.setattr(_pg_lookups, "WHOLE_RUN_ENTRIES_PER_PROBE", whole)
    query, main, recent = _query_and_documents(np.random.default_rng(3))
    pg, mem = make_registry(), MemoryRegistry()
    for registry in (pg, mem):
        registry.begin("2026-12-01T00")
        registry.commit("2026-12-01T00", main)
        registry.compact()
        registry.begin("2026-12-01T01")
        registry.commit("2026-12-01T01", recent)

    def found(registry, min_bands: int) -> list[str]:
        return sorted(registry.minhash_candidates(ASK, query.minhash_bands, main_min_bands=min_bands).doc_id.tolist())

    for registry in (pg, mem):
        assert found(registry, 1) == ["main-0", "main-1", "recent-0"]
        assert found(registry, 2) == ["main-1", "recent-0"]  # a (one band, main tier) is no candidate
        assert found(registry, 3) == ["recent-0"]


def test_two_band_rule_matches_the_reference_on_a_mixed_registry(make_registry):
    """Many documents sharing 0-8 bands with the queries, in several main-tier runs and the recent tier."""
    rng = np.random.default_rng(11)
    pool = Pool(rng, size=60)
    pg, mem = make_registry(), MemoryRegistry()
    for h in range(4):
        batch = f"2026-12-01T{h:02d}"
        fp = pool.batch(120, batch)
        for registry in (pg, mem):
            registry.begin(batch)
            registry.commit(batch, fp)
            if h < 3:
                registry.compact()
    query = pool.batch(150, "q")
    for min_bands in (1, 2, 3):
        want = canonical(mem.minhash_candidates(ASK, query.minhash_bands, main_min_bands=min_bands), "minhash")
        got = canonical(pg.minhash_candidates(ASK, query.minhash_bands, main_min_bands=min_bands), "minhash")
        assert got == want
    one, two = (len(mem.minhash_candidates(ASK, query.minhash_bands, main_min_bands=k)) for k in (1, 2))
    assert 0 < two < one  # the rule removes some main-tier candidates and keeps others


def test_the_registry_refuses_band_keys_of_another_key_space(make_registry):
    query, main, _ = _query_and_documents(np.random.default_rng(4))
    first = make_registry(band_key_space="stoplist:a#1")
    first.begin("2026-12-01T00")
    first.commit("2026-12-01T00", main)
    assert len(make_registry(band_key_space="stoplist:a#1").minhash_candidates(ASK, query.minhash_bands))
    other = make_registry(band_key_space="stoplist:b#2")
    with pytest.raises(RegistryKeySpaceError, match="minhash_registry_stoplist=a "):
        other.minhash_candidates(ASK, query.minhash_bands)
    with pytest.raises(RegistryKeySpaceError):
        other.commit("2026-12-01T01", main)


def test_a_registry_filled_before_the_record_was_keyed_on_the_plain_signature(make_registry):
    query, main, _ = _query_and_documents(np.random.default_rng(5))
    legacy = make_registry()  # no key space: what every registry before the index signature did
    legacy.begin("2026-12-01T00")
    legacy.commit("2026-12-01T00", main)
    with pytest.raises(RegistryKeySpaceError, match="minhash_registry_stoplist=''"):
        make_registry(band_key_space="stoplist:en#3").minhash_candidates(ASK, query.minhash_bands)
    assert len(make_registry(band_key_space="signature").minhash_candidates(ASK, query.minhash_bands))

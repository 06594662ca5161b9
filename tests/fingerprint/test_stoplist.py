"""The registry's index signature: a stoplist of common shingles, and a MinHash over what it leaves."""

from __future__ import annotations

import numpy as np
import pytest

from bench.sample_corpus.stoplist import build
from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.minhash import MinHasher
from dedup_tasks.fingerprint.stoplist import (
    AUTO_STOPLIST,
    DEFAULT_STOPLIST,
    STOPLIST_DIR,
    Stoplist,
    band_key_space,
    index_signatures,
    learn_stoplist,
    load_stoplist,
    registry_band_keys,
)


def _sets(rng: np.random.Generator, stop: np.ndarray, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    sizes = rng.integers(0, 60, n)
    sizes[:3] = (0, 5, 7)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    pool = np.concatenate([stop, rng.integers(1, 2**32, 400, dtype=np.uint64).astype(np.uint32)])
    hashes = pool[rng.integers(0, len(pool), offsets[-1])]
    hashes[offsets[1] : offsets[2]] = stop[:5]  # a document of stoplisted shingles only
    hashes[offsets[2] : offsets[3]] = pool[-7:]  # one without any
    return hashes, offsets


def test_membership_is_exact_including_zero():
    rng = np.random.default_rng(1)
    members = np.concatenate([[0], rng.integers(1, 2**32, 3000, dtype=np.uint64)]).astype(np.uint32)
    stop = Stoplist.of("t", members)
    probe = np.concatenate([members, rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)])
    assert np.array_equal(stop.contains(probe), np.isin(probe, members))
    assert not Stoplist.of("t", members[1:]).contains(np.zeros(3, np.uint32)).any()


def test_index_signature_is_the_minhash_of_the_set_without_its_stoplisted_shingles():
    rng = np.random.default_rng(2)
    stop = Stoplist.of("t", rng.integers(1, 2**32, 50, dtype=np.uint64).astype(np.uint32))
    hashes, offsets = _sets(rng, stop.hashes)
    hasher = MinHasher()
    sig = hasher.signatures(hashes, offsets)
    a, b = hasher.permutations
    index = index_signatures(sig, hashes, offsets, a[:72], b[:72], stop)
    for d in range(len(offsets) - 1):
        own = hashes[offsets[d] : offsets[d + 1]]
        kept = own[~np.isin(own, stop.hashes)]
        if len(kept) == 0:  # nothing left (or nothing there): the whole set's values
            kept = own
        want = hasher.signatures(kept, np.array([0, len(kept)]))[0, :72]
        assert np.array_equal(index[d], want), d
    assert np.array_equal(index[1], sig[1, :72]) and np.array_equal(index[2], sig[2, :72])
    assert not np.array_equal(index[3:], sig[3:, :72])  # the rest changed where they held stopped shingles


def test_registry_band_keys_without_a_stoplist_are_the_signatures_first_bands():
    rng = np.random.default_rng(3)
    hashes, offsets = _sets(rng, rng.integers(1, 2**32, 50, dtype=np.uint64).astype(np.uint32))
    hasher = MinHasher()
    sig = hasher.signatures(hashes, offsets)
    assert np.array_equal(registry_band_keys(sig, (hashes, offsets), hasher, 24, None), hasher.band_keys(sig)[:, :24])
    stop = Stoplist.of("t", np.zeros(0, np.uint32))  # an empty stoplist changes nothing either
    assert np.array_equal(registry_band_keys(sig, (hashes, offsets), hasher, 24, stop), hasher.band_keys(sig)[:, :24])


def test_learned_stoplist_holds_the_shingles_above_the_document_frequency():
    hashes = np.array([1, 2, 2, 3, 1, 3, 1, 4, 9], np.uint32)
    offsets = np.array([0, 4, 6, 8, 9])  # documents {1,2,3}, {1,3}, {1,4}, {9}
    rows = np.array([True, True, True, False])
    assert learn_stoplist("t", hashes, offsets, rows, 0.5).hashes.tolist() == [1, 3]  # in 3 and 2 of 3
    assert learn_stoplist("t", hashes, offsets, rows, 0.7).hashes.tolist() == [1]
    assert learn_stoplist("t", hashes, offsets, np.ones(4, bool), 0.0).hashes.tolist() == [1, 2, 3, 4, 9]


def test_the_built_in_stoplist_is_the_sample_corpus_learned_again():
    """The shipped file is what the product's learner gives on the shipped sample corpus, byte for byte:
    a change to the shingles or their hash must come with a new stoplist name (a new key space)."""
    shipped = load_stoplist(DEFAULT_STOPLIST)
    assert np.array_equal(build().hashes, shipped.hashes)
    # The default follows the registry; a new one too small to learn from is keyed on this file.
    assert DedupConfig().minhash_registry_stoplist == AUTO_STOPLIST
    assert band_key_space(DEFAULT_STOPLIST) == shipped.key_space != band_key_space("") == "signature"
    assert 5_000 < len(shipped) < 20_000


def test_loading_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match=DEFAULT_STOPLIST):
        load_stoplist("no-such-stoplist")
    bad = tmp_path / "odd.u32"
    bad.write_bytes(b"\x01\x02\x03")
    with pytest.raises(ValueError, match="odd.u32"):
        load_stoplist(str(bad))
    good = tmp_path / "mine.u32"
    Stoplist.of("mine", np.array([5, 3, 9], np.uint32)).save(good)
    loaded = load_stoplist(str(good))
    assert loaded.name == "mine" and loaded.hashes.tolist() == [3, 5, 9]
    assert STOPLIST_DIR.joinpath(f"{DEFAULT_STOPLIST}.u32").is_file()


def test_document_frequency_counts_a_document_once_and_only_the_chosen_documents() -> None:
    from dedup_tasks.fingerprint.stoplist import learn_stoplist

    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 60, 40)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    hashes = rng.integers(0, 30, int(offsets[-1])).astype(np.uint32)  # many repeats within a document
    rows = rng.random(40) < 0.7
    df: dict[int, int] = {}
    for d in np.flatnonzero(rows):
        for h in set(hashes[offsets[d] : offsets[d + 1]].tolist()):
            df[h] = df.get(h, 0) + 1
    for cutoff in (0.1, 0.3, 0.5):
        want = sorted(h for h, c in df.items() if c > cutoff * rows.sum())
        assert learn_stoplist("t", hashes, offsets, rows, cutoff).hashes.tolist() == want


def test_a_large_first_batch_learns_from_an_even_spread_of_its_english_pages(monkeypatch) -> None:
    import dedup_tasks.fingerprint.stoplist as stoplist_mod

    rng = np.random.default_rng(4)
    offsets = np.arange(0, 501) * 20
    hashes = rng.integers(0, 50, int(offsets[-1])).astype(np.uint32)
    english = np.ones(500, bool)
    english[::7] = False
    monkeypatch.setattr(stoplist_mod, "LEARN_MAX_DOCS", 100)
    rows = np.flatnonzero(english)
    spread = np.zeros(500, bool)
    spread[rows[np.linspace(0, len(rows) - 1, 100).astype(np.int64)]] = True
    assert spread.sum() == 100
    hashes[offsets[:-1][english & ~spread]] = 999  # common on the pages left out, absent from the spread
    got = stoplist_mod.propose_stoplist("p", hashes, offsets, english, min_docs=50)
    assert 999 not in got.hashes
    assert got.key_space == stoplist_mod.learn_stoplist("p", hashes, offsets, spread, stoplist_mod.LEARN_CUTOFF).key_space
    assert got.key_space != stoplist_mod.learn_stoplist("p", hashes, offsets, english, stoplist_mod.LEARN_CUTOFF).key_space
    # Fewer English pages than min_docs: the built-in list.
    assert stoplist_mod.propose_stoplist("p", hashes, offsets, english, min_docs=1000).name == stoplist_mod.DEFAULT_STOPLIST

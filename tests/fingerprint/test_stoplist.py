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

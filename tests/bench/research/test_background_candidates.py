"""The background-candidate count: band agreements per pair and the banding's recall curve."""

from __future__ import annotations

import numpy as np
import pytest

from bench.research.background_candidates import Banding, band_agreements, exact_jaccard
from dedup_tasks.fingerprint.minhash import lsh_recall


def test_band_agreements_count_each_pair_once_per_shared_band() -> None:
    keys = np.array([[1, 7, 9], [1, 7, 5], [2, 7, 9], [3, 4, 6]], np.uint64)
    agree = band_agreements(keys)
    n = len(keys)
    assert agree == {0 * n + 1: 2, 0 * n + 2: 2, 1 * n + 2: 1}  # row 3 shares nothing


def test_one_band_recall_is_the_lsh_s_curve_and_two_bands_are_stricter() -> None:
    for j in (0.3, 0.5, 0.8):
        assert Banding(42, 3).recall(j) == pytest.approx(lsh_recall(j, 42, 3))
        assert Banding(42, 3, 2).recall(j) < Banding(42, 3).recall(j)
    # Two of 42 bands at J 0.5: 1 - P(0) - P(1) with p = 1/8.
    p = 0.125
    assert Banding(42, 3, 2).recall(0.5) == pytest.approx(1 - (1 - p) ** 42 - 42 * p * (1 - p) ** 41)


def test_exact_jaccard_reads_the_rows_sets() -> None:
    hashes = np.array([1, 2, 3, 3, 2, 3, 4], np.uint32)
    offsets = np.array([0, 4, 7], np.int64)  # {1, 2, 3} and {2, 3, 4}
    assert exact_jaccard(hashes, offsets, 0, 1) == pytest.approx(2 / 4)


# --- registry index variants (python -m bench.research.background_candidates --index) ---


def _sets(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    return np.array([h for r in rows for h in r], np.uint32), offsets


def _synthetic_language(rng: np.random.Generator, docs: int, common: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Documents of one 'language': each holds most of the language's common shingles and 40 of its own."""
    rows = []
    for _ in range(docs):
        shared = common[rng.random(len(common)) < 0.9]
        own = rng.integers(1 << 20, 1 << 32, 40, dtype=np.uint64).astype(np.uint32)
        rows.append(np.concatenate([shared, own]).tolist())
    return _sets(rows)


def test_stoplist_learned_elsewhere_removes_the_common_shingles_and_the_chance_candidates() -> None:
    from bench.research.background_candidates import (
        document_frequency_stoplist,
        drop_shingles,
        unique_keys,
        unique_sets,
    )
    from dedup_tasks.fingerprint.minhash import MinHasher

    rng = np.random.default_rng(7)
    common = np.arange(1, 41, dtype=np.uint32)  # the language's "ofthe", "ation", ...
    train = unique_sets(*_synthetic_language(rng, 300, common))
    measured = unique_sets(*_synthetic_language(rng, 300, common))
    everyone = np.ones(300, bool)
    stop = document_frequency_stoplist(*train, everyone, 0.05)
    assert set(stop.tolist()) == set(common.tolist())  # the common ones, none of any document's own

    hasher = MinHasher(128, 1, 42, 3)

    def chance_pairs(sets: tuple[np.ndarray, np.ndarray]) -> int:
        keys = unique_keys(hasher.signatures(*sets), np.diff(sets[1]) > 0, 16, 3)
        return sum(1 for k in band_agreements(keys).values() if k >= 1)

    before = chance_pairs(measured)
    filtered = drop_shingles(*measured, stop, everyone)
    assert np.diff(filtered[1]).tolist() == [40] * 300  # only the documents' own shingles are left
    after = chance_pairs(filtered)
    assert before > 1000  # J ~ 0.4 between unrelated documents: most pairs share a band
    assert after == 0


def test_drop_shingles_only_touches_the_given_rows_and_never_empties_a_set() -> None:
    from bench.research.background_candidates import drop_shingles

    hashes, offsets = _sets([[1, 2, 3], [1, 2], [1, 4]])
    out_h, out_o = drop_shingles(hashes, offsets, np.array([1, 2], np.uint32), np.array([True, True, False]))
    rows = [out_h[out_o[i] : out_o[i + 1]].tolist() for i in range(3)]
    assert rows == [[3], [1, 2], [1, 4]]  # row 1 would be empty: kept whole; row 2 is not English


def test_members_is_isin() -> None:
    from bench.research.background_candidates import members

    values = np.random.default_rng(3).integers(0, 1 << 32, 50_000, dtype=np.uint64).astype(np.uint32)
    of = np.unique(values[:300])
    assert np.array_equal(members(values, of), np.isin(values, of))
    assert not members(values, np.empty(0, np.uint32)).any()


def test_in_word_5grams_are_the_product_5grams_that_do_not_cross_a_space() -> None:
    import pyarrow as pa

    from bench.research.background_candidates import in_word_shingles, pick_sets
    from dedup_tasks.fingerprint import kernels
    from dedup_tasks.fingerprint.hashing import codepoints

    def product(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        cp, off = codepoints(pa.array(texts))
        modes = np.full(len(texts), kernels.CHARS, np.int64)
        per_doc = kernels.count_shingles(cp, off[:-1], off[1:], modes, 3, 5)
        out = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(per_doc, out=out[1:])
        return kernels.shingle_hashes(cp, off[:-1], off[1:], modes, 3, 5, out), out

    cp, off = codepoints(pa.array(["of the nation", "abc de", "", "international"]))
    hashes, offsets = in_word_shingles(cp, off, 5)
    assert np.diff(offsets).tolist() == [2, 0, 0, 9]  # "natio" "ation"; words under 5 give none
    expected, _ = product(["nation"])
    assert np.array_equal(hashes[:2], expected)
    whole, _ = product(["of the nation"])  # the product's set holds them, and 5-grams across spaces
    assert np.isin(hashes[:2], whole).all() and len(whole) == 7
    # Rows whose index set is empty keep the product's.
    chosen_h, chosen_o = pick_sets(product(["of the nation", "abc de", "", "international"]), (hashes, offsets), np.ones(4, bool))
    assert np.diff(chosen_o).tolist() == [2, 1, 0, 9]  # "abcde" across the space: the product's one


def test_pairwise_jaccard_matrix_and_candidate_probability() -> None:
    from bench.research.background_candidates import (
        candidate_probability,
        jaccard_matrix,
        set_sizes_and_intersections,
        unique_sets,
    )

    hashes, offsets = unique_sets(*_sets([[1, 2, 3, 3], [2, 3, 4], [9], [5, 6]]))
    jac = jaccard_matrix(*set_sizes_and_intersections(hashes, offsets, np.array([0, 1, 3])))
    assert jac[0, 1] == pytest.approx(exact_jaccard(hashes, offsets, 0, 1)) == pytest.approx(0.5)
    assert jac[0, 2] == 0 and jac[1, 1] == 1
    for banding in (Banding(16, 3), Banding(16, 3, 2), Banding(42, 3, 2)):
        for j in (0.05, 0.5, 0.8):
            assert candidate_probability(np.array([j]), banding)[0] == pytest.approx(banding.recall(j), rel=1e-9, abs=1e-15)
    # Far below float cancellation: two of 16 bands at J 0.02 is C(16, 2) (0.02^3)^2 to first order.
    assert candidate_probability(np.array([0.02]), Banding(16, 3, 2))[0] == pytest.approx(120 * 0.02**6, rel=1e-3)

"""The background-candidate count: band agreements per pair and the banding's recall curve."""

from __future__ import annotations

import numpy as np
import pytest

from bench.background_candidates import Banding, band_agreements, exact_jaccard
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

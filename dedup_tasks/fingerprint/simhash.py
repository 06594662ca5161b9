"""64-bit SimHash with four 16-bit bands."""

from __future__ import annotations

import numpy as np

BAND_BITS = 16
BANDS = 4


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.bitwise_count(np.bitwise_xor(a.astype(np.uint64), b.astype(np.uint64))).astype(np.int64)


def bands(simhash: np.ndarray) -> np.ndarray:
    """(n, 4) uint16 band values: any two hashes within distance 3 agree on at least one (pigeonhole)."""
    simhash = simhash.astype(np.uint64)
    return np.stack([((simhash >> np.uint64(BAND_BITS * i)) & np.uint64(0xFFFF)) for i in range(BANDS)], axis=1).astype(
        np.uint16
    )

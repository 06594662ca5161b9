"""``fingerprint.numbers.number_hashes`` against a plain-Python reading of its definition."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dedup_tasks.fingerprint.numbers import CONTEXT, number_hashes

FNV_OFFSET, FNV_PRIME, LOW32 = 2166136261, 16777619, 0xFFFFFFFF


def _digit(c: int) -> bool:
    return 48 <= c <= 57 or 0xFF10 <= c <= 0xFF19


def _reference(text: str) -> list[int]:
    """The state machine of the definition: a position is in a number when it is a digit, or a
    ``,`` ``.`` or space between two digits; each maximal run is one number, hashed with its frame."""
    cp = [ord(ch) for ch in text]
    n = len(cp)

    def inside(i: int) -> bool:
        if _digit(cp[i]):
            return True
        return cp[i] in (44, 46, 32) and 0 < i < n - 1 and _digit(cp[i - 1]) and _digit(cp[i + 1])

    def fnv(h: int, c: int) -> int:
        return ((h ^ c) * FNV_PRIME) & LOW32

    out, i = [], 0
    while i < n:
        if not inside(i):
            i += 1
            continue
        frame, got, j = FNV_OFFSET, 0, i - 1
        while j >= 0 and got < CONTEXT:
            if cp[j] != 32 and not _digit(cp[j]):
                frame, got = fnv(frame, cp[j]), got + 1
            j -= 1
        frame = frame if got else 0
        h = FNV_OFFSET
        while i < n and inside(i):
            c = cp[i] - (0xFF10 - 48) if 0xFF10 <= cp[i] <= 0xFF19 else cp[i]
            h, i = fnv(h, c), i + 1
        out.append((frame << 32) | h)
    return out


def _run(texts: list[str]) -> list[list[int]]:
    cp = np.array([ord(ch) for ch in "".join(texts)], np.uint32)
    lengths = np.array([len(t) for t in texts], np.int64)
    ends = np.cumsum(lengths)
    values, offsets = number_hashes(cp, ends - lengths, ends)
    assert offsets[0] == 0 and offsets[-1] == len(values)
    return [values[offsets[d] : offsets[d + 1]].tolist() for d in range(len(texts))]


def test_numbers_with_separators_frames_and_full_width_digits():
    texts = [
        "slaughter at about 250,000 to 270 000 head, 6.72 pct",
        "1,2",  # a number at both ends of the text
        ",5 and 5, and 5.",  # separators at the edges are not inside
        "price ３,５００ yen",  # full-width digits read as ASCII ones
        "",
        "no figures here",
        "7",
    ]
    got = _run(texts)
    assert got == [_reference(t) for t in texts]
    assert len(got[0]) == 3 and len(got[1]) == 1 and len(got[2]) == 3 and got[5] == [] and len(got[6]) == 1
    assert got[3][0] & LOW32 == _reference("price 3,500 yen")[0] & LOW32


@pytest.mark.parametrize("seed", range(5))
def test_random_texts_match_the_definition(seed):
    rng = random.Random(seed)
    alphabet = "0123456789,. ab\u4e2d\uff10\uff19x"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    assert _run(texts) == [_reference(t) for t in texts]

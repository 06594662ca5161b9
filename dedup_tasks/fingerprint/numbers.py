"""The numbers a text states (amounts, dates, counts) and the words before them, for the verifier's
facts check.

Reports written from one template (a daily market note, a list page, a bond issue notice) share most
of their 5-grams with each other and differ in their figures; a copy of one of them keeps its figures
where it keeps their sentence, whatever else was cut, typed wrong or added (an inserted sentence or an
added footer brings numbers of its own, in words the earlier text does not have). So each number is
taken with its frame: the CONTEXT letters before it. A number is a maximal run of digits, with a
``,``, ``.`` or space between two digits kept inside it ("250,000" and "6.72"; the near-duplicate view
writes them "250 000", "6 72"). Both are hashed to 32 bits (FNV-1a over code points) and packed into
one uint64 per number, frame in the high half.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)

CONTEXT = 6  # letters (not digits, not spaces) before a number that make its frame


@njit(cache=True)
def _digit(c):
    return 48 <= c <= 57 or 0xFF10 <= c <= 0xFF19


@njit(cache=True)
def _in_number(cp, i, lo, hi):
    if _digit(cp[i]):
        return True
    c = cp[i]
    if c == 44 or c == 46 or c == 32:  # between two digits
        return lo < i < hi - 1 and _digit(cp[i - 1]) and _digit(cp[i + 1])
    return False


_FNV_OFFSET = np.uint64(2166136261)
_FNV_PRIME = np.uint64(16777619)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True)
def _fnv(h, c):
    return ((h ^ np.uint64(c)) * _FNV_PRIME) & _LOW32


@njit(cache=True)
def _frame(cp, i, lo):
    """Hash of the CONTEXT letters before position i (0 when there are none)."""
    h = _FNV_OFFSET
    got = 0
    j = i - 1
    while j >= lo and got < CONTEXT:
        c = cp[j]
        if c != 32 and not _digit(c):
            h = _fnv(h, c)
            got += 1
        j -= 1
    return h if got > 0 else np.uint64(0)


@njit(inline="always", cache=True)
def _digit01(c):
    # ``_digit`` as 0 or 1 in uint32 lanes (one unsigned compare per range), for the vectorized count.
    return np.uint32(np.uint32(c - np.uint32(48)) <= np.uint32(9)) | np.uint32(np.uint32(c - np.uint32(0xFF10)) <= np.uint32(9))


@njit(inline="always", cache=True)
def _sep01(c):
    return np.uint32(c == np.uint32(44)) | np.uint32(c == np.uint32(46)) | np.uint32(c == np.uint32(32))


@njit(cache=True)
def _count_numbers(cp, lo, hi):
    """Numbers in ``cp[lo:hi]``: digits that do not continue one. A separator is inside a number only
    between two digits, so a number starts at a digit whose previous position is neither a digit nor
    a separator after a digit (``_in_number``); one branch-free pass that LLVM vectorizes."""
    x = cp[lo:hi]
    m = len(x)
    if m == 0:
        return 0
    count = np.uint32(_digit01(x[0]))
    if m > 1:
        count += _digit01(x[1]) & (np.uint32(1) ^ _digit01(x[0]))
    for i in range(2, m):
        prev = x[i - 1]
        count += _digit01(x[i]) & (np.uint32(1) ^ (_digit01(prev) | (_sep01(prev) & _digit01(x[i - 2]))))
    return np.int64(count)


@njit(parallel=True, nogil=True, cache=True)
def number_hashes(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 frame << 32 | value per number, offsets int64): the numbers of each text
    ``cp[starts[d]:ends[d]]``, in text order.

    A number is a maximal run of positions ``_in_number``: it starts at a digit (a separator inside
    one follows a digit), so the text between numbers is skipped on a digit test alone."""
    n = len(starts)
    counts = np.zeros(n, np.int64)
    for d in prange(n):
        counts[d] = _count_numbers(cp, starts[d], ends[d])
    offsets = np.zeros(n + 1, np.int64)
    for d in range(n):
        offsets[d + 1] = offsets[d] + counts[d]
    out = np.zeros(offsets[n], np.uint64)
    for d in prange(n):
        if counts[d] == 0:
            continue
        k = offsets[d]
        lo = starts[d]
        hi = ends[d]
        i = lo
        while i < hi:
            if not _digit01(cp[i]):
                i += 1
                continue
            h = _FNV_OFFSET
            frame = _frame(cp, i, lo)
            while i < hi and _in_number(cp, i, lo, hi):
                c = np.int64(cp[i])
                if 0xFF10 <= c <= 0xFF19:  # full-width digits read as ASCII ones
                    c -= 0xFF10 - 48
                h = _fnv(h, c)
                i += 1
            out[k] = (frame << np.uint64(32)) | h
            k += 1
    return out, offsets


@njit(cache=True)
def changed_numbers(nums, num_off, d, c):
    """(numbers of d whose frame c has but whose value c never states, numbers of d whose frame c has):
    distinct (frame, value) pairs of d."""
    mask = _LOW32
    changed = 0
    framed = 0
    for i in range(num_off[d], num_off[d + 1]):
        v = nums[i]
        repeat = False
        for k in range(num_off[d], i):
            if nums[k] == v:
                repeat = True
                break
        frame = v >> np.uint64(32)
        if repeat or frame == 0:
            continue
        has_frame = False
        has_value = False
        for k in range(num_off[c], num_off[c + 1]):
            w = nums[k]
            if (w >> np.uint64(32)) == frame:
                has_frame = True
            if (w & mask) == (v & mask):
                has_value = True
        if has_frame:
            framed += 1
            if not has_value:
                changed += 1
    return changed, framed


@njit(cache=True)
def facts_differ(nums, num_off, d, c, min_new, min_share):
    """The newer text d gives other figures in sentences the earlier c has: at least ``min_new`` of
    its framed numbers, and ``min_share`` of them, are values c does not state."""
    changed, framed = changed_numbers(nums, num_off, d, c)
    return changed >= min_new and framed > 0 and changed >= min_share * framed


def pair_facts_differ(
    nums: np.ndarray, num_off: np.ndarray, newer: np.ndarray, earlier: np.ndarray, min_new: int, min_share: float
) -> np.ndarray:
    """``facts_differ`` of each pair (newer[i], earlier[i])."""
    return _pair_facts_differ(
        np.ascontiguousarray(nums, np.uint64), np.asarray(num_off, np.int64), np.asarray(newer, np.int64),
        np.asarray(earlier, np.int64), int(min_new), float(min_share),
    )  # fmt: skip


@njit(cache=True)
def _pair_facts_differ(nums, num_off, newer, earlier, min_new, min_share):
    out = np.zeros(len(newer), np.bool_)
    for i in range(len(newer)):
        out[i] = facts_differ(nums, num_off, newer[i], earlier[i], min_new, min_share)
    return out

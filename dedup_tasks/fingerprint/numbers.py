"""The numbers a text states (amounts, dates, counts) and the words before them, for the verifier's
facts check.

Reports written from one template (a daily market note, a list page, a bond issue notice) share most
of their 5-grams with each other and differ in their figures; a copy of one of them keeps its figures
where it keeps their sentence, whatever else was cut, typed wrong or added (an inserted sentence or an
added footer brings numbers of its own, in words the earlier text does not have). So each number is
taken with its frame: the CONTEXT letters before it, and the CONTEXT letters after it. A number is a
maximal run of digits, with a ``,``, ``.`` or space between two digits kept inside it ("250,000" and
"6.72"; the near-duplicate view writes them "250 000", "6 72"). A date is one figure: a month name (or
its abbreviation) right before a number belongs to the value, not to the frame ("payable march 19"
and "payable march 26" are one frame with two values; "dec 21" and "december 21" the same value). The
frames and the value are hashed (FNV-1a over code points) and packed into one uint64 per number:
left frame in the top FRAME_BITS, right frame in the next FRAME_BITS, value in the low VALUE_BITS.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)

# The facts check (``facts_differ``; docs/near-copies.md, "Facts"): a pair accepted under
# FACTS_MAX_JACCARD is refused when the newer states new figures making FACTS_MIN_SHARE of its own.
FACTS_MAX_JACCARD = 0.8
FACTS_MIN_SHARE = 0.5
CONTEXT = 6  # letters (not digits, not spaces) before a number that make its frame (and after it, its right frame)
# One figure has at most this many digit groups: billions with thousands separators ("12,345,678,901"),
# millions with a decimal part ("1,234,567.89"), a fraction ("16-1/2", "102-3/8"). The near view writes
# a table's row of figures as one longer run ("04/09/87 03/09/87" -> "04 09 87 03 09 87"), which a
# deleted row or header changes in a copy: such a run gets no right frame (no place, see changed_in_place).
MAX_GROUPS = 4
FRAME_BITS = 20
VALUE_BITS = 24
_MONTHS = (
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec"),
)  # fmt: skip


def _word_code(word: str) -> int:
    code = 0
    for ch in word:
        code = code * 32 + (ord(ch) - 96)
    return code


# Month words as base-32 codes of their letters (at most 9 letters fit 45 bits), and their month.
MONTH_CODES = np.array([_word_code(w) for names in _MONTHS for w in names], np.int64)
MONTH_OF = np.array([m + 1 for m, names in enumerate(_MONTHS) for _ in names], np.int64)


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


@njit(cache=True)
def _right_frame(cp, i, hi):
    """Hash of the CONTEXT letters from position i on (0 when there are none)."""
    h = _FNV_OFFSET
    got = 0
    j = i
    while j < hi and got < CONTEXT:
        c = cp[j]
        if c != 32 and not _digit(c):
            h = _fnv(h, c)
            got += 1
        j += 1
    return h if got > 0 else np.uint64(0)


@njit(cache=True)
def _month_before(cp, i, lo, codes, months):
    """(month 1-12, start of its word) when the word right before position i (one space between at
    most) is a month name or abbreviation; (0, i) otherwise."""
    j = i - 1
    if j >= lo and cp[j] == 32:
        j -= 1
    end = j + 1
    code = 0
    while j >= lo and 97 <= cp[j] <= 122 and end - j <= 9:
        j -= 1
    start = j + 1
    if end - start < 3 or (j >= lo and 97 <= cp[j] <= 122):
        return 0, i
    for k in range(start, end):
        code = code * 32 + (np.int64(cp[k]) - 96)
    for m in range(len(codes)):
        if codes[m] == code:
            return months[m], start
    return 0, i


@njit(inline="always", cache=True)
def _fold_bits(h, bits):
    """A 32-bit FNV hash folded to ``bits`` bits (xor of its halves), 0 kept for 'no frame' only."""
    if h == 0:
        return np.uint64(0)
    v = (h ^ (h >> np.uint64(32 - bits))) & ((np.uint64(1) << np.uint64(bits)) - np.uint64(1))
    return v if v != 0 else np.uint64(1)


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


def number_hashes(cp: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 left frame | right frame | value per number, offsets int64): the numbers of each text
    ``cp[starts[d]:ends[d]]``, in text order (see the module docstring; ``left_frame``, ``right_frame``,
    ``value_of`` take them apart).

    A number is a maximal run of positions ``_in_number``: it starts at a digit (a separator inside
    one follows a digit), so the text between numbers is skipped on a digit test alone."""
    return _number_hashes(cp, starts, ends, MONTH_CODES, MONTH_OF)


_LEFT_SHIFT = np.uint64(64 - FRAME_BITS)
_RIGHT_SHIFT = np.uint64(VALUE_BITS)
_FRAME_MASK = np.uint64((1 << FRAME_BITS) - 1)
_VALUE_MASK = np.uint64((1 << VALUE_BITS) - 1)


@njit(inline="always", cache=True)
def left_frame(v):
    return v >> _LEFT_SHIFT


@njit(inline="always", cache=True)
def right_frame(v):
    return (v >> _RIGHT_SHIFT) & _FRAME_MASK


@njit(inline="always", cache=True)
def value_of(v):
    return v & _VALUE_MASK


@njit(parallel=True, nogil=True, cache=True)
def _number_hashes(cp, starts, ends, codes, months):
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
            month, at = _month_before(cp, i, lo, codes, months)
            if month > 0:
                h = _fnv(h, 0x10000 + month)  # a date: the month is part of the value
            frame = _frame(cp, at, lo)
            groups = 1
            while i < hi and _in_number(cp, i, lo, hi):
                c = np.int64(cp[i])
                if 0xFF10 <= c <= 0xFF19:  # full-width digits read as ASCII ones
                    c -= 0xFF10 - 48
                elif not _digit(c):
                    groups += 1
                h = _fnv(h, c)
                i += 1
            value = (h ^ (h >> np.uint64(32 - VALUE_BITS))) & _VALUE_MASK
            # More groups than one figure has is a table row read as one number: it has no place.
            right = _right_frame(cp, i, hi) if groups <= MAX_GROUPS else np.uint64(0)
            out[k] = (
                (_fold_bits(frame, FRAME_BITS) << _LEFT_SHIFT) | (_fold_bits(right, FRAME_BITS) << _RIGHT_SHIFT) | value
            )  # fmt: skip
            k += 1
    return out, offsets


@njit(cache=True)
def changed_numbers(nums, num_off, d, c):
    """(numbers of d whose frame c has but whose value c never states, numbers of d whose frame c has):
    distinct (frame, value) pairs of d."""
    changed = 0
    framed = 0
    for i in range(num_off[d], num_off[d + 1]):
        v = nums[i]
        repeat = False
        for k in range(num_off[d], i):
            if nums[k] == v:
                repeat = True
                break
        frame = left_frame(v)
        if repeat or frame == 0:
            continue
        has_frame = False
        has_value = False
        for k in range(num_off[c], num_off[c + 1]):
            w = nums[k]
            if left_frame(w) == frame:
                has_frame = True
            if value_of(w) == value_of(v):
                has_value = True
        if has_frame:
            framed += 1
            if not has_value:
                changed += 1
    return changed, framed


@njit(cache=True)
def absent_values(nums, num_off, d, c):
    """(distinct values of d that c never states, distinct values of d), frames aside: a rewrite keeps
    a story's figures but not the words around them, so the frame a copy keeps is no evidence there."""
    absent = 0
    total = 0
    for i in range(num_off[d], num_off[d + 1]):
        v = value_of(nums[i])
        repeat = False
        for k in range(num_off[d], i):
            if value_of(nums[k]) == v:
                repeat = True
                break
        if repeat:
            continue
        total += 1
        found = False
        for k in range(num_off[c], num_off[c + 1]):
            if value_of(nums[k]) == v:
                found = True
                break
        if not found:
            absent += 1
    return absent, total


@njit(cache=True)
def _pair_values_differ(nums, num_off, newer, earlier, min_new, min_share):
    out = np.zeros(len(newer), np.bool_)
    for i in range(len(newer)):
        absent, total = absent_values(nums, num_off, newer[i], earlier[i])
        out[i] = absent >= min_new and absent >= min_share * total
    return out


def pair_values_differ(
    nums: np.ndarray, num_off: np.ndarray, newer: np.ndarray, earlier: np.ndarray, min_new: int, min_share: float
) -> np.ndarray:
    """Per pair (newer[i], earlier[i]): the newer states at least ``min_new`` distinct values the earlier
    never states, and ``min_share`` of its distinct values. The facts check of a rewrite candidate."""
    return _pair_values_differ(
        np.ascontiguousarray(nums, np.uint64), np.asarray(num_off, np.int64), np.asarray(newer, np.int64),
        np.asarray(earlier, np.int64), int(min_new), float(min_share),
    )  # fmt: skip


@njit(cache=True)
def changed_in_place(nums, num_off, d, c):
    """Distinct numbers of d that stand where c states another figure: c has a number with both of its
    frames (the CONTEXT letters before *and* after it, a place in a sentence both texts have) and c
    never states its value. A copy keeps the figures of the sentences it keeps; a number an inserted
    sentence brings has 12 letters around it that the earlier rarely has at one number, and where a
    cut sentence or a swapped paragraph gives a kept number another right frame, c still states it."""
    changed = 0
    for i in range(num_off[d], num_off[d + 1]):
        v = nums[i]
        left = left_frame(v)
        right = right_frame(v)
        if left == 0 or right == 0:
            continue
        repeat = False
        for k in range(num_off[d], i):
            if nums[k] == v:
                repeat = True
                break
        if repeat:
            continue
        placed = False
        same = False
        for k in range(num_off[c], num_off[c + 1]):
            w = nums[k]
            if left_frame(w) == left and right_frame(w) == right:
                placed = True
            if value_of(w) == value_of(v):
                same = True
                break
        if placed and not same:
            changed += 1
    return changed


@njit(cache=True)
def facts_differ(nums, num_off, d, c, min_new, min_share, min_in_place):
    """The newer text d gives other figures in sentences the earlier c has: at least ``min_new`` of
    its framed numbers, and ``min_share`` of them, are values c does not state; or (``min_in_place``
    > 0) at least ``min_in_place`` of its numbers stand where c states another figure
    (``changed_in_place``)."""
    changed, framed = changed_numbers(nums, num_off, d, c)
    if changed >= min_new and framed > 0 and changed >= min_share * framed:
        return True
    return min_in_place > 0 and changed_in_place(nums, num_off, d, c) >= min_in_place


def pair_facts_differ(
    nums: np.ndarray, num_off: np.ndarray, newer: np.ndarray, earlier: np.ndarray, min_new: int, min_share: float,
    min_in_place: int = 0,
) -> np.ndarray:
    """``facts_differ`` of each pair (newer[i], earlier[i])."""
    return _pair_facts_differ(
        np.ascontiguousarray(nums, np.uint64), np.asarray(num_off, np.int64), np.asarray(newer, np.int64),
        np.asarray(earlier, np.int64), int(min_new), float(min_share), int(min_in_place),
    )  # fmt: skip


@njit(cache=True)
def _pair_facts_differ(nums, num_off, newer, earlier, min_new, min_share, min_in_place):
    out = np.zeros(len(newer), np.bool_)
    for i in range(len(newer)):
        out[i] = facts_differ(nums, num_off, newer[i], earlier[i], min_new, min_share, min_in_place)
    return out

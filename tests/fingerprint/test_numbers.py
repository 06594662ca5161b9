"""``fingerprint.numbers.number_hashes`` against a plain-Python reading of its definition."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dedup_tasks.fingerprint.numbers import (
    CONTEXT,
    FRAME_BITS,
    MAX_GROUPS,
    VALUE_BITS,
    absent_values,
    changed_in_place,
    changed_numbers,
    number_hashes,
    pair_values_differ,
)

FNV_OFFSET, FNV_PRIME, LOW32 = 2166136261, 16777619, 0xFFFFFFFF
MONTHS = {
    **{w: m + 1 for m, w in enumerate(("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"))},
    **{w: m + 1 for m, w in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))},
    "sept": 9,
}


def left_frame(v: int) -> int:
    return v >> (64 - FRAME_BITS)


def right_frame(v: int) -> int:
    return (v >> VALUE_BITS) & ((1 << FRAME_BITS) - 1)


def value_of(v: int) -> int:
    return v & ((1 << VALUE_BITS) - 1)


def _fold(h: int, bits: int, keep_zero: bool = True) -> int:
    if keep_zero and h == 0:
        return 0
    v = (h ^ (h >> (32 - bits))) & ((1 << bits) - 1)
    return v if v or not keep_zero else 1


def _digit(c: int) -> bool:
    return 48 <= c <= 57 or 0xFF10 <= c <= 0xFF19


def _reference(text: str) -> list[int]:
    """The state machine of the definition: a position is in a number when it is a digit, or a
    ``,`` ``.`` or space between two digits; each maximal run is one number, hashed with its frames
    (the CONTEXT letters before it, before its month word for a date, and after it)."""
    cp = [ord(ch) for ch in text]
    n = len(cp)

    def inside(i: int) -> bool:
        if _digit(cp[i]):
            return True
        return cp[i] in (44, 46, 32) and 0 < i < n - 1 and _digit(cp[i - 1]) and _digit(cp[i + 1])

    def fnv(h: int, c: int) -> int:
        return ((h ^ c) * FNV_PRIME) & LOW32

    def frame(positions) -> int:
        h, got = FNV_OFFSET, 0
        for j in positions:
            if got == CONTEXT:
                break
            if cp[j] != 32 and not _digit(cp[j]):
                h, got = fnv(h, cp[j]), got + 1
        return h if got else 0

    out, i = [], 0
    while i < n:
        if not inside(i):
            i += 1
            continue
        word_end = i - 1 if i > 0 and cp[i - 1] == 32 else i
        word_start = word_end
        while word_start > 0 and 97 <= cp[word_start - 1] <= 122:
            word_start -= 1
        month = MONTHS.get(text[word_start:word_end], 0) if word_end - word_start >= 3 else 0
        h = fnv(FNV_OFFSET, 0x10000 + month) if month else FNV_OFFSET
        left = frame(range((word_start if month else i) - 1, -1, -1))
        groups = 1
        while i < n and inside(i):
            c = cp[i] - (0xFF10 - 48) if 0xFF10 <= cp[i] <= 0xFF19 else cp[i]
            groups += not _digit(cp[i])
            h, i = fnv(h, c), i + 1
        right = frame(range(i, n)) if groups <= MAX_GROUPS else 0
        value = _fold(h, VALUE_BITS, keep_zero=False)
        out.append((_fold(left, FRAME_BITS) << (64 - FRAME_BITS)) | (_fold(right, FRAME_BITS) << VALUE_BITS) | value)
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
    assert value_of(got[3][0]) == value_of(_reference("price 3,500 yen")[0])


def test_a_date_keeps_its_month_in_the_value_and_a_number_its_place():
    texts = [
        "payable march 19 to holders of record march 12",
        "payable march 26 to holders of record march 12",
        "prior pay december 31 record nov 20",
        "prior pay dec 31 record november 20",
        "traders said 19 to 26 lots",
        "season 04 09 87 03 09 87 04 09 87 acreage",  # a table row read as one number: no place
    ]
    got = _run(texts)
    assert got == [_reference(t) for t in texts]
    (pay19, rec12), (pay26, rec12b) = got[0], got[1]
    assert left_frame(pay19) == left_frame(pay26) and right_frame(pay19) == right_frame(pay26)
    assert value_of(pay19) != value_of(pay26) and rec12 == rec12b
    # "March 19" is not the figure 19: the month belongs to the value, its word is not in the frame.
    assert value_of(pay19) != value_of(got[4][0])
    # "Dec 31" and "December 31" are one date in one place.
    assert [value_of(v) for v in got[2]] == [value_of(v) for v in got[3]]
    assert left_frame(got[2][0]) == left_frame(got[3][0])
    assert right_frame(got[5][0]) == 0 and left_frame(got[5][0]) != 0


def _numbers(*texts: str) -> tuple[np.ndarray, np.ndarray]:
    cp = np.array([ord(ch) for ch in "".join(texts)], np.uint32)
    lengths = np.array([len(t) for t in texts], np.int64)
    ends = np.cumsum(lengths)
    return number_hashes(cp, ends - lengths, ends)


def test_figures_in_place_count_other_values_where_both_texts_keep_the_sentence():
    earlier = "medco said it declared an initial dividend of 10 cts payable march 19 to holders of record march 12 reuter"
    other = earlier.replace("march 19", "march 26")  # one template, another payout date
    copy = earlier.replace("reuter", "volume was 5 000 lots payable later reuter")  # a sentence of its own
    moved = "payable march 26 to holders of record march 12 " + earlier  # the value stated elsewhere
    nums, off = _numbers(earlier, other, copy, moved)
    assert changed_in_place(nums, off, 1, 0) == 1
    assert changed_numbers(nums, off, 1, 0) == (1, 3)  # 1 of 3 framed: under the share a long text needs
    assert changed_in_place(nums, off, 2, 0) == 0  # the copy's own number stands in words the earlier lacks
    assert changed_in_place(nums, off, 0, 3) == 0  # the earlier states "march 26" elsewhere: not a change


def test_a_rewrite_keeps_its_values_in_other_words_and_another_report_does_not():
    earlier = "the nyse said a seat on the new york futures exchange sold for 200 dlrs the current bid is 200 dlrs and the offer 300 dlrs"
    rewrite = "a new york futures exchange seat went for 200 dlrs the nyse said with 200 dlrs bid and 300 dlrs offered"
    other_day = ("a seat changed hands on the nyfe at 200 dlrs unchanged from the sale on march 13 and a second went at "
                 "100 dlrs with 100 dlrs bid and 300 dlrs offered")
    one_new = rewrite + " volume was 12 seats"
    nums, off = _numbers(earlier, rewrite, other_day, one_new)
    assert absent_values(nums, off, 1, 0) == (0, 2)
    assert absent_values(nums, off, 2, 0) == (2, 4)  # "march 13" and 100 of {200, march 13, 100, 300}
    # The frames moved with the wording: the frame rule finds no figure in a place the earlier has.
    assert changed_numbers(nums, off, 2, 0) == (0, 0)
    got = pair_values_differ(nums, off, np.array([1, 2, 3]), np.array([0, 0, 0]), 2, 0.5)
    assert got.tolist() == [False, True, False]  # one new value is not another report
    assert pair_values_differ(nums, off, np.array([3]), np.array([0]), 1, 0.3).tolist() == [True]


@pytest.mark.parametrize("seed", range(5))
def test_random_texts_match_the_definition(seed):
    rng = random.Random(seed)
    alphabet = "0123456789,. ab\u4e2d\uff10\uff19x"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    assert _run(texts) == [_reference(t) for t in texts]

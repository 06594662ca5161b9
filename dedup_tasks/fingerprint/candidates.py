"""In-batch near-duplicate search in batch order: the earlier *kept* document wins.

Documents are visited in batch order; each one looks up its bucket keys (SimHash bands or LSH bands)
in an index holding only the documents kept so far, scores the candidates, and is either dropped
(naming its best qualifying candidate) or inserted. This is the same streaming semantics the
registry gives across batches, and a cluster of many copies costs one comparison per copy instead of
a quadratic number of pairs. Compiled with numba; the index is an open-addressing hash table from
key to the newest document in the bucket plus a per-(document, band) chain to the older ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)
from dedup_tasks.fingerprint.kernels import hash_slot, hash_table_size
from dedup_tasks.fingerprint.leadin import LEADIN_MIN_CHARS
from dedup_tasks.fingerprint.numbers import facts_differ, pair_facts_differ
from dedup_tasks.normalize.arrays import concat_ragged, gather_spans

_NO_SETS = np.empty(0, np.uint32)
_NO_OFFSETS = np.empty(0, np.int64)
_NO_NUMBERS = np.empty(0, np.uint64)
_NO_CHARS = np.empty(0, np.int32)


@dataclass(frozen=True)
class ShortTexts:
    """The near-duplicate view's code points of documents short enough for the short-text rule, indexed
    like the shingle sets they travel with: document d's are ``cp[offsets[d]:offsets[d + 1]]``, empty
    for a longer one (``layers.near.short_texts``)."""

    cp: np.ndarray  # int32
    offsets: np.ndarray  # int64, one more than documents

    def take(self, rows: np.ndarray) -> ShortTexts:
        """Documents ``rows``, in that order."""
        rows = np.asarray(rows, np.int64)
        return ShortTexts(*gather_spans(self.cp, self.offsets[rows], self.offsets[rows + 1]))

    def join(self, other: ShortTexts) -> ShortTexts:
        """These documents, then ``other``'s (as shingle sets are joined)."""
        return ShortTexts(*concat_ragged((self.cp, self.offsets), (other.cp, other.offsets)))


def _text_arrays(texts: ShortTexts | None) -> tuple[np.ndarray, np.ndarray]:
    if texts is None:
        return _NO_CHARS, _NO_OFFSETS
    return np.ascontiguousarray(texts.cp, np.int32), np.ascontiguousarray(texts.offsets, np.int64)


@dataclass
class StreamResult:
    matched: np.ndarray  # int64 row of the kept document a row duplicates, -1 if kept
    score: np.ndarray  # float64 score of that match (NaN if kept)
    suspect: np.ndarray  # int64 best near-miss candidate row, -1 if none
    suspect_score: np.ndarray  # float64
    # Of the match (MinHash with shingle sets; NaN otherwise): share of the newer document's
    # shingles found in the earlier one, and of the earlier one's found in the newer.
    covers_newer: np.ndarray | None = None
    covers_earlier: np.ndarray | None = None


@dataclass(frozen=True)
class Verifier:
    """A reader's rule for a candidate pair, on shingle sets (character 5-grams by default).

    A pair is a copy when its Jaccard reaches ``accept_jaccard``, or when one document is covered
    by the other (``min_coverage`` of its shingles, so typos are tolerated): the newer by the
    earlier (truncation, deleted sentences) from Jaccard ``min_jaccard``, or the earlier by the
    newer (added boilerplate, inserted sentences) from ``additions_min_jaccard``, higher because a
    longer article that quotes a whole shorter one is not a copy of it.

    Where both coverages reach only ``passage_min_coverage`` (a copy truncated *and* given a new
    sentence), the pair is read in text order: it is a copy when the differences come in whole
    passages, i.e. at most ``max_scattered`` of either document's 5-gram positions miss the other in
    short runs (under ``LONG_RUN``). Pages of one list article or template (other names, amounts)
    differ everywhere in short runs. This needs both sets, so it runs in the batch only. Where the
    caller gives ``runs`` (per row: a Chinese sentence is shorter in characters), a shorter run is a
    passage too when it is added on one side, not a replacement (``_scattered``).

    Where the newer covers nearly all of the earlier (``additions_passage_min_coverage``) but their
    Jaccard is under ``additions_min_jaccard`` (a short text doubled by an inserted sentence), the pair
    is a copy from ``additions_passage_min_jaccard`` when the passage rule above holds: what the newer
    adds is whole passages, not other names and amounts all through one template.

    A pair accepted under Jaccard ``facts_max_jaccard`` (on coverage, passages or its Jaccard) is refused when the
    newer states figures the earlier does not (``facts_min_new`` distinct numbers, ``facts_min_share``
    of its own; 0 turns the check off), or when ``facts_min_in_place`` of its numbers stand where the
    earlier states another figure (the same letters before and after: ``numbers.changed_in_place``):
    reports written from one template differ in their numbers, a copy keeps them. It needs both texts'
    numbers, so it runs where the texts are (batch, or the earlier text read back).

    Some rows are held to a plain Jaccard instead (``strict``, per row; NaN: the rule above): a page
    kept as a URL update (only a near-identical copy is dropped), a very short text. ``SHORT`` (a
    negative ``strict``) marks a short text judged by the rule above with a stricter facts check, at
    any Jaccard under ``facts_max_jaccard``: one changed figure refuses it (in a flash from a
    template the figures are most of what differs, and there are only a few).
    """

    accept_jaccard: float = 0.7
    min_jaccard: float = 0.45
    min_coverage: float = 0.8
    additions_min_jaccard: float = 0.55
    passage_min_coverage: float = 0.6
    max_scattered: float = 0.15
    facts_min_new: int = 0
    facts_min_share: float = 0.5
    facts_max_jaccard: float = 0.7
    facts_min_in_place: int = 0
    additions_passage_min_jaccard: float = 2.0  # off
    additions_passage_min_coverage: float = 1.0
    passage_bridge: int = 0  # off
    passage_min_shared: float = 0.0  # off
    passage_typo_run: int = 0  # off

    @property
    def rule(self) -> np.ndarray:
        return np.array([
            self.accept_jaccard, self.min_jaccard, self.min_coverage, self.additions_min_jaccard,
            self.passage_min_coverage, self.max_scattered, LONG_RUN, self.facts_min_new, self.facts_min_share,
            self.facts_max_jaccard, self.facts_min_in_place, self.additions_passage_min_jaccard,
            self.additions_passage_min_coverage, self.passage_bridge, self.passage_min_shared, self.passage_typo_run,
        ])  # fmt: skip

    def accepts(self, jaccard, covers_newer, covers_earlier, strict=np.nan):
        """Elementwise over numpy arrays (or scalars)."""
        loose = (
            (jaccard >= self.accept_jaccard)
            | ((jaccard >= self.min_jaccard) & (covers_newer >= self.min_coverage))
            | ((jaccard >= self.additions_min_jaccard) & (covers_earlier >= self.min_coverage))
        )
        plain = np.asarray(strict, np.float64) >= 0
        return np.where(plain, jaccard >= np.where(plain, strict, 2.0), loose)


SHORT = -1.0  # a ``strict`` value: the loose rule, and any changed figure refuses the pair
SHORT_FACTS_SHARE = 1e-9  # facts_differ's share for SHORT rows: one changed framed number is enough
# 5-gram positions: a run this long is a passage (a sentence), shorter ones are edits. A changed span of
# 16 space-free characters, about three English words. A long Chinese text counts shorter runs that are
# added on one side (not replacements) as passages too (layers.near.PASSAGE_RUN_ZH, _scattered).
LONG_RUN = 20


@njit(cache=True)
def _accepts(j, c_new, c_old, strict, rule):
    if strict >= 0:  # not NaN nor SHORT: a plain Jaccard rule for this row
        return j >= strict
    return j >= rule[0] or (j >= rule[1] and c_new >= rule[2]) or (j >= rule[3] and c_old >= rule[2])


# The exact checks read two documents' shingle sets through one open-addressing table per pair,
# O(|a| + |b|): sorting every checked document's set first (the earlier design) cost ten times the
# band search on the bench hour. The table is reused pair after pair; a slot belongs to the current
# pair when its stamp is the pair's generation, so nothing is cleared between pairs.
IN_A = np.uint8(1)
IN_B = np.uint8(2)
# Marks in _scattered's positions: a shingle not yet seen in the other document, and one seen there twice or more.
UNSEEN = -(2**40)
REPEATED = -(2**41)


@njit(cache=True)
def _pair_table(offsets):
    """Scratch for pair checks of the documents ``offsets`` delimits: (values, stamps, membership
    bits, [generation, mask], positions), room for the two largest sets at most two-thirds full
    (positions: of a shingle in one document of the pair, written by ``_scattered`` when it needs them)."""
    first = 0
    second = 0
    for d in range(len(offsets) - 1):
        size = offsets[d + 1] - offsets[d]
        if size > first:
            second = first
            first = size
        elif size > second:
            second = size
    slots = hash_table_size(first + second)
    return (
        np.empty(slots, np.uint32), np.zeros(slots, np.int32), np.zeros(slots, np.uint8), np.zeros(2, np.int64),
        np.zeros(slots, np.int64),
    )  # fmt: skip


@njit(inline="always", cache=True)
def _slot(values, stamps, gen, mask, v):
    # Shingle values are already the top bits of a 64-bit hash: their low bits index the table.
    i = np.int64(v) & mask
    while stamps[i] == gen and values[i] != v:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def _overlap(hashes, offsets, table, a, b):
    """(common, distinct in a, distinct in b) of two documents' shingle sets (the 32-bit values
    their signatures are taken over). Leaves the pair's sets in ``table`` for ``_scattered``."""
    values, stamps, bits, state, _ = table
    lo_a, hi_a, lo_b, hi_b = offsets[a], offsets[a + 1], offsets[b], offsets[b + 1]
    state[0] += 1
    gen = np.int32(state[0])
    mask = hash_table_size(hi_a - lo_a + hi_b - lo_b) - 1
    state[1] = mask
    size_b = 0
    for k in range(lo_b, hi_b):
        v = hashes[k]
        i = _slot(values, stamps, gen, mask, v)
        if stamps[i] != gen:
            stamps[i] = gen
            values[i] = v
            bits[i] = IN_B
            size_b += 1
    common = 0
    only_a = 0
    for k in range(lo_a, hi_a):
        v = hashes[k]
        i = _slot(values, stamps, gen, mask, v)
        if stamps[i] != gen:
            stamps[i] = gen
            values[i] = v
            bits[i] = IN_A
            only_a += 1
        elif bits[i] == IN_B:
            bits[i] = IN_A | IN_B
            common += 1
    return common, common + only_a, size_b


@njit(cache=True)
def _exact_jaccard(hashes, offsets, table, a, b):
    common, size_a, size_b = _overlap(hashes, offsets, table, a, b)
    union = size_a + size_b - common
    return common / union if union > 0 else 0.0


@njit(cache=True)
def _scattered(hashes, offsets, table, d, o, other_bit, long_run, added_run, bridge, typo_run):
    """Share of document d's shingle positions (in text order) that miss the other document's set
    in runs shorter than ``long_run``: differences scattered through the text (other names and
    amounts in one template, dense typos) rather than whole passages added or cut.

    With ``added_run`` under ``long_run``, a shorter run of at least ``added_run`` positions is a
    passage too when it is *added*, not a replacement: in the other document o the shared text on
    either side of the run is (nearly) contiguous, the text between (positions apart, less the 5 of
    a 5-gram) under half of the run's own changed characters (its length less 4). A sentence
    inserted into a copy (or cut from it) is added on one side; a template's other name or amount
    replaces one on the other side, in runs as long on both. Where o is located by shingles that
    occur once in o, followed along the shared stretch next to the run (a repeated name there); a
    run with no such anchor before or after it, up to the next difference, is not known to be added.

    Runs of at most ``typo_run`` positions (one character typed wrong, added or dropped: the 5-grams
    that hold it) are not counted (0: every run under ``long_run`` is). A stretch of fewer than
    ``bridge`` shared positions between two misses belongs to the run around it: inside a sentence the other text does not have, common 5-grams of the language ("ofthe",
    "ation") now and then occur in the other text by chance, and would cut an inserted or deleted
    sentence into short runs that look like scattered edits (0 turns this off).

    Reads the pair ``_overlap`` last put in ``table`` (d and o its two documents; ``other_bit`` the
    membership bit of o)."""
    values, stamps, bits, state, pos = table
    gen = np.int32(state[0])
    mask = state[1]
    added = added_run < long_run
    lo, hi = offsets[d], offsets[d + 1]
    size_o = offsets[o + 1] - offsets[o]
    if added:
        # Where each of o's shingles occurs in o; REPEATED where it occurs more than once.
        for k in range(offsets[o], offsets[o + 1]):
            pos[_slot(values, stamps, gen, mask, hashes[k])] = UNSEEN
        for k in range(offsets[o], offsets[o + 1]):
            slot = _slot(values, stamps, gen, mask, hashes[k])
            pos[slot] = k - offsets[o] if pos[slot] == UNSEEN else REPEATED
    run = 0
    short = 0
    # o's position of the shared 5-gram before position i: an anchor, or one followed along the shared
    # stretch since; -5 a virtual one before o's start; REPEATED unknown.
    before = np.int64(-5)
    i = lo
    while i <= hi:
        hit = True
        slot = 0
        if i < hi:
            slot = _slot(values, stamps, gen, mask, hashes[i])
            hit = (bits[slot] & other_bit) != 0
        if not hit:
            run += 1
            i += 1
            continue
        if run > 0 and bridge > 0 and i < hi:
            j = i + 1
            while j < hi and j - i < bridge and (bits[_slot(values, stamps, gen, mask, hashes[j])] & other_bit) != 0:
                j += 1
            if j < hi and j - i < bridge:
                run += j - i
                i = j
                continue
        at = before + 1 if before != REPEATED else REPEATED
        if added:
            at = _anchor_at(hashes, values, stamps, bits, pos, gen, mask, i, hi, other_bit, size_o) if run > 0 else (
                pos[slot] if i < hi and pos[slot] >= 0 else at
            )
        if typo_run < run < long_run:
            one_sided = before != REPEATED and at != REPEATED and 2 * (at - before - 5) < run - 4
            if not (added and run >= added_run and one_sided):
                short += run
        run = 0
        before = at
        i += 1
    return short / (hi - lo) if hi > lo else 0.0


@njit(cache=True)
def _shared_in_passages(hashes, offsets, table, d, other_bit, long_run, typo_run):
    """Share of document d's shingle positions found in the other document that lie in stretches of
    at least ``long_run`` consecutive shared positions. What a copy shares with its source is whole
    passages between the edits; a retelling of the same story shares phrases ("the world bank said")
    between its own wording. A stretch goes on over a run of at most ``typo_run`` misses (a typo in
    the passage). Reads the pair ``_overlap`` last put in ``table``."""
    values, stamps, bits, state, _ = table
    gen = np.int32(state[0])
    mask = state[1]
    lo, hi = offsets[d], offsets[d + 1]
    stretch = 0
    gap = 0
    shared = 0
    in_passages = 0
    for i in range(lo, hi + 1):
        if i < hi and (bits[_slot(values, stamps, gen, mask, hashes[i])] & other_bit) != 0:
            stretch += 1
            gap = 0
            continue
        gap += 1
        if gap > typo_run or i == hi:
            shared += stretch
            if stretch >= long_run:
                in_passages += stretch
            stretch = 0
    return in_passages / shared if shared > 0 else 0.0


@njit(cache=True)
def _anchor_at(hashes, values, stamps, bits, pos, gen, mask, i, hi, other_bit, size_o):
    """o's position of d's shared 5-gram at i (the first after a run): its own if it occurs once in
    o, else the first such anchor further on along the shared stretch, less the distance walked;
    REPEATED if a difference (or nothing) comes first. Past d's end, a virtual 5-gram after o's."""
    for j in range(i, hi):
        slot = _slot(values, stamps, gen, mask, hashes[j])
        if (bits[slot] & other_bit) == 0:
            return REPEATED
        if pos[slot] >= 0:
            return pos[slot] - (j - i)
    return size_o + 4 - (hi - i)


# What differs decides a short text (a SHORT row, under ``simhash_min_chars``): it is no copy where a
# passage was replaced, i.e. one text misses a run of the other's 5-gram positions longer than
# SHORT_TYPO_RUN while the other misses one longer than SHORT_JOIN_RUN (a typo or a join) too. A wrong character misses 5
# positions, two wrong characters up to three apart 9 (a run at the text's start or end counts as if the
# text went on); a cut or an insertion misses positions on one side and at most the 4 that span the
# join on the other (or a typo's 5). Another headline after a site's shared lead-in
# misses 10 or more on one side and more than 4 on the other, however long the lead-in the two share
# (bench quality: short_leadin pages and their reposts with typos). Where no run on either side is
# longer than a typo's, the pair is a copy from the Jaccard floor whatever its coverage
# (``_short_noise_only``); the facts check still refuses a changed figure.
SHORT_TYPO_RUN = 9
SHORT_JOIN_RUN = 5
# Additions are bounded: a newer text whose new positions (ADDED_MIN_SHARE of its 5-grams or more) lie
# in one block (ADDED_BLOCK_CONCENTRATION of them, misses bridged over stretches of fewer than
# ADDED_BRIDGE shared positions, which chance 5-grams like "ofthe" make) of at least ADDED_BLOCK_EN
# positions (ADDED_BLOCK_ZH in a long Chinese text: a sentence there is 0.4 of an English one) adds an
# article, not a sentence or two: not a copy of the text it starts with, under any URL. On the bench,
# inserted sentences reach 480 positions in one block only together with other edits spread elsewhere
# (docs/near-copies.md, "Additions").
ADDED_MIN_SHARE = 0.3
ADDED_BLOCK_CONCENTRATION = 0.9
ADDED_BRIDGE = 16
ADDED_BLOCK_EN = 300
ADDED_BLOCK_ZH = 100


@njit(cache=True)
def _longest_miss(hashes, offsets, table, d, other_bit, bridge, edges):
    """(longest run, total) of document d's positions missing from the other document of the pair
    ``_overlap`` last put in ``table``; a stretch of fewer than ``bridge`` shared positions between two
    misses belongs to the run (0: every shared position ends it). With ``edges``, a run at the text's
    start or end counts 4 more: there a change of k characters misses k positions, not k + 4, as the
    5-grams past the edge do not exist."""
    values, stamps, bits, state, _ = table
    gen = np.int32(state[0])
    mask = state[1]
    lo, hi = offsets[d], offsets[d + 1]
    longest = 0
    total = 0
    run = 0
    gap = 0
    starts_at_edge = False
    for i in range(lo, hi):
        if (bits[_slot(values, stamps, gen, mask, hashes[i])] & other_bit) == 0:
            if gap > 0:
                run = run + gap if run > 0 and gap < bridge else 0
            if run == 0:
                starts_at_edge = i == lo
            run += 1
            total += 1
            gap = 0
            at_edge = edges and (starts_at_edge or i == hi - 1)
            if run + (4 if at_edge else 0) > longest:
                longest = run + (4 if at_edge else 0)
        else:
            gap += 1
    return longest, total


# What a short pair replaced, in characters: past the longer of the prefix and the suffix the two texts
# share (a site's lead-in counts for nothing), every stretch of an alignment where both sides have
# characters of their own (another word, another headline) counts its shorter side; what only one side
# has (a cut, an insertion) counts nothing. Past SHORT_REPLACED_CHARS characters (two typos), or
# SHORT_REPLACED_SHARE of that rest if more, the pair is two items (bench quality: short_leadin pages and
# their reposts with typos; docs/near-copies.md, "Short texts"). Read on the texts' characters (spaces
# aside, as the 5-grams read them) where both are at hand (``ShortTexts``), else estimated from the
# 5-grams: a stretch of k shared-free positions is at least ceil(k / 5) wrong characters.
SHORT_REPLACED_CHARS = 2
SHORT_REPLACED_SHARE = 0.15
# Beyond this many differing positions on a side a short pair is not aligned: that much is never a typo.
SHORT_ALIGN_MAX = 256
# A shared run of fewer characters inside a differing stretch is chance, not an anchor of the alignment.
SHORT_ANCHOR_CHARS = 2
# A differing stretch this long or longer (one 5-character window) may be moved material (a swapped
# paragraph, cut into pieces by the chance anchors of the alignment), which replaces nothing.
SHORT_MOVED_MIN_CHARS = 5


@njit(cache=True)
def _shared_ends(a, b):
    """(shared prefix, shared suffix not overlapping it) of sequences a and b, and what each has between."""
    na, nb = len(a), len(b)
    p = 0
    while p < na and p < nb and a[p] == b[p]:
        p += 1
    s = 0
    while s < na - p and s < nb - p and a[na - 1 - s] == b[nb - 1 - s]:
        s += 1
    return p, s, na - p - s, nb - p - s


@njit(cache=True)
def _lcs_table(a, b, p, ma, mb):
    """Longest common subsequence lengths of the suffixes of a[p:p + ma] and b[p:p + mb]."""
    lcs = np.zeros((ma + 1, mb + 1), np.int32)
    for i in range(ma - 1, -1, -1):
        for j in range(mb - 1, -1, -1):
            if a[p + i] == b[p + j]:
                lcs[i, j] = lcs[i + 1, j + 1] + 1
            else:
                lcs[i, j] = max(lcs[i + 1, j], lcs[i, j + 1])
    return lcs


@njit(cache=True)
def _short_replaced(hashes, offsets, d, c):
    """(characters replaced, characters past the shared prefix or suffix) of the short pair (d, c):
    the stretches of a longest common subsequence of their 5-gram positions where both sides differ."""
    a = hashes[offsets[d] : offsets[d + 1]]
    b = hashes[offsets[c] : offsets[c + 1]]
    p, s, ma, mb = _shared_ends(a, b)
    rest = max(len(a), len(b)) - max(p, s)
    if ma == 0 or mb == 0:
        return 0, rest
    if ma > SHORT_ALIGN_MAX or mb > SHORT_ALIGN_MAX:
        return (min(ma, mb) + 4) // 5, rest
    lcs = _lcs_table(a, b, p, ma, mb)
    replaced = 0
    i = 0
    j = 0
    ga = 0
    gb = 0
    while i < ma or j < mb:
        if i < ma and j < mb and a[p + i] == b[p + j] and lcs[i, j] == lcs[i + 1, j + 1] + 1:
            if ga > 0 and gb > 0:
                replaced += (min(ga, gb) + 4) // 5
            ga = 0
            gb = 0
            i += 1
            j += 1
        elif i < ma and (j >= mb or lcs[i + 1, j] >= lcs[i, j + 1]):
            ga += 1
            i += 1
        else:
            gb += 1
            j += 1
    if ga > 0 and gb > 0:
        replaced += (min(ga, gb) + 4) // 5
    return replaced, rest


@njit(cache=True)
def _replaced_chars(cp, cp_off, d, c):
    """(characters replaced, characters past the shared prefix or suffix) of d and c on their characters
    (``cp[cp_off[d]:cp_off[d + 1]]``, spaces skipped): the shorter side of every stretch of a longest
    common subsequence where both differ (what only one side has, a cut, an insertion or a moved
    paragraph, counts nothing)."""
    a = cp[cp_off[d] : cp_off[d + 1]]
    b = cp[cp_off[c] : cp_off[c + 1]]
    a = a[a != 32]
    b = b[b != 32]
    p, s, ma, mb = _shared_ends(a, b)
    rest = max(len(a), len(b)) - max(p, s)
    if ma == 0 or mb == 0:
        return 0, rest
    if ma > SHORT_ALIGN_MAX or mb > SHORT_ALIGN_MAX:
        return min(ma, mb), rest
    lcs = _lcs_table(a, b, p, ma, mb)
    # Walk the alignment; a shared run shorter than SHORT_ANCHOR_CHARS between two differing stretches
    # is chance ("the" against "ifit" share a "t") and belongs to the stretch.
    replaced = 0
    i = 0
    j = 0
    ga = 0
    gb = 0
    run = 0
    while i < ma or j < mb:
        if i < ma and j < mb and a[p + i] == b[p + j] and lcs[i, j] == lcs[i + 1, j + 1] + 1:
            run += 1
            i += 1
            j += 1
            if run == SHORT_ANCHOR_CHARS:
                replaced += _stretch_replaced(a, b, p + i - run, p + j - run, ga, gb)
                ga = 0
                gb = 0
            continue
        if run < SHORT_ANCHOR_CHARS:  # the middle starts on a difference: a short run follows one
            ga += run
            gb += run
        run = 0
        if i < ma and (j >= mb or lcs[i + 1, j] >= lcs[i, j + 1]):
            ga += 1
            i += 1
        else:
            gb += 1
            j += 1
    return replaced + _stretch_replaced(a, b, p + i - run, p + j - run, ga, gb), rest


@njit(cache=True)
def _stretch_replaced(a, b, a_end, b_end, ga, gb):
    """What a differing stretch (a[a_end - ga:a_end] against b[b_end - gb:b_end]) replaced: its shorter
    side, unless one side is material the other text holds elsewhere (a moved paragraph: half its
    5-character windows or more occur in the other text), which then counts as one-sided."""
    if ga == 0 or gb == 0:
        return 0
    if _held_elsewhere(a, a_end - ga, a_end, b) or _held_elsewhere(b, b_end - gb, b_end, a):
        return 0
    return min(ga, gb)


@njit(cache=True)
def _held_elsewhere(x, lo, hi, y):
    if hi - lo < SHORT_MOVED_MIN_CHARS:
        return False
    found = 0
    for k in range(lo, hi - 4):
        for m in range(len(y) - 4):
            if x[k] == y[m] and x[k + 1] == y[m + 1] and x[k + 2] == y[m + 2] and x[k + 3] == y[m + 3] and x[k + 4] == y[m + 4]:
                found += 1
                break
    return 2 * found >= hi - lo - 4


@njit(cache=True)
def _levenshtein(a, b):
    row = np.arange(len(b) + 1, dtype=np.int64)
    for i in range(len(a)):
        diagonal = row[0]
        row[0] = i + 1
        for j in range(len(b)):
            above = row[j + 1]
            row[j + 1] = min(above + 1, row[j] + 1, diagonal + (a[i] != b[j]))
            diagonal = above
    return row[len(b)]


@njit(cache=True)
def _leadin_items_differ(cp, cp_off, lead, d, c):
    """Whether two items behind one site lead-in differ in more than noise: past the part of d's lead-in
    (``fingerprint.leadin``: its first ``lead`` code points) that c shares, if that is a lead-in's
    length still, what follows is more than SHORT_REPLACED_CHARS character edits apart (spaces aside),
    or SHORT_REPLACED_SHARE of the longer item if more. There a cut or an added word is another
    item, not a truncated repost."""
    if lead < LEADIN_MIN_CHARS or len(cp_off) <= max(d, c) + 1:
        return False
    lo_d, hi_d, lo_c, hi_c = cp_off[d], cp_off[d + 1], cp_off[c], cp_off[c + 1]
    shared = 0
    limit = min(lead, hi_d - lo_d, hi_c - lo_c)
    while shared < limit and cp[lo_d + shared] == cp[lo_c + shared]:
        shared += 1
    if shared < LEADIN_MIN_CHARS:
        return False
    lead = shared
    a = cp[lo_d + lead : hi_d]
    b = cp[lo_c + lead : hi_c]
    a = a[a != 32]
    b = b[b != 32]
    if len(a) > SHORT_ALIGN_MAX or len(b) > SHORT_ALIGN_MAX:
        return True
    return _levenshtein(a, b) > max(SHORT_REPLACED_CHARS, SHORT_REPLACED_SHARE * max(len(a), len(b)))


@njit(cache=True)
def _short_items_differ(hashes, offsets, cp, cp_off, d, c):
    """Whether the short pair (d, c) replaced more than a typo's worth: on their characters where
    ``cp`` holds both (``ShortTexts``), else on their 5-grams (``_short_replaced``)."""
    if len(cp_off) > max(d, c) + 1 and cp_off[d + 1] > cp_off[d] and cp_off[c + 1] > cp_off[c]:
        replaced, rest = _replaced_chars(cp, cp_off, d, c)
    else:
        replaced, rest = _short_replaced(hashes, offsets, d, c)
    return replaced > max(SHORT_REPLACED_CHARS, SHORT_REPLACED_SHARE * rest)


def leadin_items_differ(texts: ShortTexts, newer: np.ndarray, earlier: np.ndarray, leadin: np.ndarray) -> np.ndarray:
    """``_leadin_items_differ`` of the pairs (newer[i], earlier[i]) of ``texts``, ``leadin`` per pair (its newer's)."""
    return _pairs_leadin_differ(
        *_text_arrays(texts), np.asarray(newer, np.int64), np.asarray(earlier, np.int64), np.asarray(leadin, np.int64)
    )


@njit(cache=True)
def _pairs_leadin_differ(cp, cp_off, newer, earlier, leadin):
    out = np.zeros(len(newer), np.bool_)
    for i in range(len(newer)):
        out[i] = _leadin_items_differ(cp, cp_off, leadin[i], newer[i], earlier[i])
    return out


@njit(cache=True)
def _short_noise_only(hashes, offsets, table, d, c):
    """Whether every difference of the short pair (d, c) that ``_overlap`` last put in ``table`` is
    noise: no run of missed positions on either side longer than a typo's (SHORT_TYPO_RUN). Such a
    pair is a copy from the verifier's Jaccard floor, whatever its coverage (two typos in a 40-character
    text leave it 0.75)."""
    a, _ = _longest_miss(hashes, offsets, table, d, IN_B, 0, True)
    b, _ = _longest_miss(hashes, offsets, table, c, IN_A, 0, True)
    return max(a, b) <= SHORT_TYPO_RUN


@njit(cache=True)
def _refused_by_bounds(hashes, offsets, table, d, c, c_new, strict_d, run_d, cp, cp_off, lead_d):
    """Whether the pair (newer d, earlier c) that ``_overlap`` last put in ``table`` and the rules
    accepted is still no copy: a short text whose differences are not noise, or a newer text that adds
    a whole article (the constants above)."""
    if strict_d == SHORT:
        a, _ = _longest_miss(hashes, offsets, table, d, IN_B, 0, True)
        b, _ = _longest_miss(hashes, offsets, table, c, IN_A, 0, True)
        return (
            (max(a, b) > SHORT_TYPO_RUN and min(a, b) > SHORT_JOIN_RUN)
            or _short_items_differ(hashes, offsets, cp, cp_off, d, c)
            or _leadin_items_differ(cp, cp_off, lead_d, d, c)
        )
    if 1.0 - c_new < ADDED_MIN_SHARE:
        return False
    longest, total = _longest_miss(hashes, offsets, table, d, IN_B, ADDED_BRIDGE, False)
    block = ADDED_BLOCK_ZH if run_d < LONG_RUN else ADDED_BLOCK_EN
    return longest >= block and longest >= ADDED_BLOCK_CONCENTRATION * total


@njit(cache=True)
def _passage_candidate(j, c_new, c_old, strict, rule):
    """Whether the passage rule may accept a pair the coverage rules refused: both coverages reach
    ``passage_min_coverage``, or the newer covers ``additions_passage_min_coverage`` of the earlier from
    ``additions_passage_min_jaccard``."""
    if strict >= 0:
        return False
    return (j >= rule[1] and min(c_new, c_old) >= rule[4]) or (j >= rule[11] and c_old >= rule[12])


@njit(cache=True)
def _by_passages(hashes, offsets, table, d, c, rule, added_run):
    """The passage rule on the pair (d, c) that ``_overlap(..., d, c)`` last put in ``table``: runs of
    ``LONG_RUN`` positions are passages, added ones from ``added_run`` (the newer row's ``runs``). A pair
    whose differences are passages only once chance matches are bridged (``passage_bridge``) must also
    share passages: ``passage_min_shared`` of each one's shared positions in stretches of ``added_run``
    (a Chinese passage is shorter in characters, as for added runs)."""
    long_run = int(rule[6])
    if (
        _scattered(hashes, offsets, table, d, c, IN_B, long_run, added_run, 0, 0) <= rule[5]
        and _scattered(hashes, offsets, table, c, d, IN_A, long_run, added_run, 0, 0) <= rule[5]
    ):
        return True
    bridge = int(rule[13])
    # Only where a passage is shorter (a long Chinese text): there a wrong character is a wrong word, while
    # English retellings differ in short words ("a" / "the") that a typo tolerance would heal.
    typo_run = int(rule[15]) if added_run < long_run else 0
    # Bridged (and over typos), the runs say less about a retelling (its own wording is one long run
    # too), so the pair must also share whole passages.
    return (
        (bridge > 0 or typo_run > 0)
        and _scattered(hashes, offsets, table, d, c, IN_B, long_run, added_run, bridge, typo_run) <= rule[5]
        and _scattered(hashes, offsets, table, c, d, IN_A, long_run, added_run, bridge, typo_run) <= rule[5]
        and _shared_in_passages(hashes, offsets, table, d, IN_B, added_run, typo_run) >= rule[14]
        and _shared_in_passages(hashes, offsets, table, c, IN_A, added_run, typo_run) >= rule[14]
    )


def verify_pairs(
    hashes: np.ndarray, offsets: np.ndarray, newer: np.ndarray, earlier: np.ndarray, verifier: Verifier, strict: np.ndarray,
    numbers: tuple[np.ndarray, np.ndarray] | None = None, runs: np.ndarray | None = None, texts: ShortTexts | None = None,
    leadin: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The verifier on pairs of documents whose shingle sets are at hand (``pair_overlap``'s layout):
    (accepted, Jaccard, covers newer, covers earlier), the in-batch rule of ``stream_minhash``
    (``numbers``: the documents' number hashes and offsets, same indexing, for the facts check;
    ``runs``: per pair the added-passage run length of its newer row, ``layers.near.passage_runs``;
    None: ``LONG_RUN`` for all, see ``_scattered``)."""
    jac, covers_newer, covers_earlier = pair_overlap(hashes, offsets, newer, earlier)
    strict = np.asarray(strict, np.float64)
    ok = np.asarray(verifier.accepts(jac, covers_newer, covers_earlier, strict), bool)
    rule = verifier.rule
    maybe = np.flatnonzero(
        ~ok & ~(strict >= 0)
        & (((jac >= rule[1]) & (np.minimum(covers_newer, covers_earlier) >= rule[4])) | ((jac >= rule[11]) & (covers_earlier >= rule[12])))
    )  # fmt: skip
    added = int(rule[6]) if runs is None else runs
    if len(maybe):
        ok[maybe] = _check_pairs(BY_PASSAGES, hashes, offsets, newer, earlier, maybe, rule, added, covers_newer, strict)
    short = np.flatnonzero(~ok & (strict == SHORT) & (jac >= rule[1]))
    if len(short):
        ok[short] = _check_pairs(SHORT_NOISE_ONLY, hashes, offsets, newer, earlier, short, rule, added, covers_newer, strict)
    if numbers is not None:
        ok = facts_veto(verifier, numbers, newer, earlier, jac, ok, strict)
    bounded = np.flatnonzero(ok & ~(strict >= 0))
    if len(bounded):
        run = LONG_RUN if runs is None else runs
        ok[bounded] = ~_check_pairs(
            REFUSED_BY_BOUNDS, hashes, offsets, newer, earlier, bounded, rule, run, covers_newer, strict, texts, leadin
        )
    return ok, jac, covers_newer, covers_earlier


def facts_veto(
    verifier: Verifier, numbers: tuple[np.ndarray, np.ndarray], newer: np.ndarray, earlier: np.ndarray,
    jac: np.ndarray, ok: np.ndarray, strict: np.ndarray,
) -> np.ndarray:
    """``ok`` with the facts check applied: a pair accepted under ``facts_max_jaccard`` on a loose
    (non-strict) row is refused when the newer states other figures (``numbers``: hashes + offsets,
    indexed like ``newer``/``earlier``)."""
    ok = np.array(ok, bool)
    if verifier.facts_min_new <= 0:
        return ok
    strict = np.asarray(strict, np.float64)
    weak = np.flatnonzero(ok & ~(strict >= 0) & (np.asarray(jac) < verifier.facts_max_jaccard))
    for rows, share in ((weak[np.isnan(strict[weak])], verifier.facts_min_share), (weak[strict[weak] < 0], SHORT_FACTS_SHARE)):
        if len(rows):
            ok[rows] = ~pair_facts_differ(
                *numbers, np.asarray(newer)[rows], np.asarray(earlier)[rows], verifier.facts_min_new, share,
                verifier.facts_min_in_place,
            )
    return ok


def pair_scattered(
    hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, long_run: int = LONG_RUN,
    added_run: int | np.ndarray | None = None, bridge: int = 0, typo_run: int = 0,
) -> np.ndarray:
    """``_scattered`` of each pair (a[i] against b[i]); ``added_run`` one length or one per pair
    (None: ``long_run``, every run under it scattered); ``bridge`` and ``typo_run`` as the verifier's."""
    a = np.asarray(a, np.int64)
    added = np.broadcast_to(np.asarray(long_run if added_run is None else added_run, np.int64), a.shape)
    return _pair_scattered(
        np.ascontiguousarray(hashes, np.uint32), np.asarray(offsets, np.int64), a, np.asarray(b, np.int64), int(long_run),
        np.ascontiguousarray(added), int(bridge), int(typo_run),
    )


def pair_shared_in_passages(
    hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, long_run: int = LONG_RUN, typo_run: int = 0
) -> np.ndarray:
    """``_shared_in_passages`` of each pair: the share of a[i]'s positions shared with b[i] that lie
    in shared stretches of at least ``long_run``."""
    return _pair_shared_in_passages(
        np.ascontiguousarray(hashes, np.uint32), np.asarray(offsets, np.int64), np.asarray(a, np.int64),
        np.asarray(b, np.int64), int(long_run), int(typo_run),
    )  # fmt: skip


@njit(cache=True)
def _pair_scattered(hashes, offsets, a, b, long_run, added_run, bridge, typo_run):
    table = _pair_table(offsets)
    out = np.zeros(len(a))
    for i in range(len(a)):
        _overlap(hashes, offsets, table, a[i], b[i])
        out[i] = _scattered(hashes, offsets, table, a[i], b[i], IN_B, long_run, added_run[i], bridge, typo_run)
    return out


@njit(cache=True)
def _pair_shared_in_passages(hashes, offsets, a, b, long_run, typo_run):
    table = _pair_table(offsets)
    out = np.zeros(len(a))
    for i in range(len(a)):
        _overlap(hashes, offsets, table, a[i], b[i])
        out[i] = _shared_in_passages(hashes, offsets, table, a[i], IN_B, long_run, typo_run)
    return out


BY_PASSAGES, SHORT_NOISE_ONLY, REFUSED_BY_BOUNDS = 0, 1, 2  # what ``_pair_check`` asks of each pair


@njit(cache=True)
def _pair_check(hashes, offsets, newer, earlier, check, rule, added_run, covers_newer, strict, cp, cp_off, lead):
    """One of the stream's per-pair checks on each (newer[i], earlier[i]), the pair's overlap put in
    the table first: ``_by_passages`` (the passage verdict), ``_short_noise_only`` or
    ``_refused_by_bounds`` (per pair: ``added_run``, ``covers_newer``, ``strict``)."""
    table = _pair_table(offsets)
    out = np.zeros(len(newer), np.bool_)
    for i in range(len(newer)):
        d, c = newer[i], earlier[i]
        _overlap(hashes, offsets, table, d, c)
        if check == BY_PASSAGES:
            out[i] = _by_passages(hashes, offsets, table, d, c, rule, added_run[i])
        elif check == SHORT_NOISE_ONLY:
            out[i] = _short_noise_only(hashes, offsets, table, d, c)
        else:
            out[i] = _refused_by_bounds(
                hashes, offsets, table, d, c, covers_newer[i], strict[i], added_run[i], cp, cp_off, lead[i]
            )
    return out


def _check_pairs(
    check: int, hashes, offsets, newer, earlier, rows, rule, added_run, covers_newer, strict, texts: ShortTexts | None = None,
    leadin: np.ndarray | None = None,
) -> np.ndarray:
    """``_pair_check`` on the pairs ``rows`` of (newer, earlier); the per-pair arrays are taken at ``rows``."""
    def at(values, dtype):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(values, dtype), np.shape(newer))[rows])

    return _pair_check(
        np.ascontiguousarray(hashes, np.uint32), np.asarray(offsets, np.int64), at(newer, np.int64), at(earlier, np.int64), check,
        rule, at(added_run, np.int64), at(covers_newer, np.float64), at(strict, np.float64), *_text_arrays(texts),
        at(0 if leadin is None else leadin, np.int64),
    )  # fmt: skip


def pair_overlap(hashes: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact (Jaccard, share of a's shingles in b, share of b's in a) of the pairs (a[i], b[i])
    of documents whose 32-bit shingle values are ``hashes[offsets[d]:offsets[d + 1]]``."""
    return _pair_overlap(
        np.ascontiguousarray(hashes, np.uint32), np.asarray(offsets, np.int64), np.asarray(a, np.int64), np.asarray(b, np.int64)
    )


@njit(cache=True)
def _pair_overlap(hashes, offsets, a, b):
    table = _pair_table(offsets)
    jac = np.zeros(len(a))
    in_b = np.zeros(len(a))
    in_a = np.zeros(len(a))
    for i in range(len(a)):
        common, size_a, size_b = _overlap(hashes, offsets, table, a[i], b[i])
        union = size_a + size_b - common
        jac[i] = common / union if union > 0 else 0.0
        in_b[i] = common / size_a if size_a > 0 else 0.0
        in_a[i] = common / size_b if size_b > 0 else 0.0
    return jac, in_b, in_a


@njit(cache=True)
def _stream(
    keys, active, values, is_simhash, max_distance, min_jaccard, suspect_bound, hashes, hash_off, exact_floor, exact_ceiling,
    strict, rule, nums, num_off, runs, cp, cp_off, leadin,
):
    n, n_bands = keys.shape
    table = _pair_table(hash_off)
    matched = np.full(n, -1, np.int64)
    score = np.full(n, np.nan)
    suspect = np.full(n, -1, np.int64)
    suspect_score = np.full(n, np.nan)
    covers_newer = np.full(n, np.nan)
    covers_earlier = np.full(n, np.nan)
    verify = len(hash_off) > 0 and len(rule) >= 7
    facts = verify and len(num_off) > 0 and rule[7] > 0
    # Key -> newest kept document with it. A numba typed Dict costs several times more per
    # operation, and the stream does one lookup and one insert per (document, band).
    table_keys = np.zeros(hash_table_size(int(active.sum()) * n_bands), np.uint64)
    table_docs = np.full(len(table_keys), -1, np.int32)
    chain = np.full((n, n_bands), -1, np.int32)
    seen_by = np.full(n, -1, np.int64)
    for d in range(n):
        if not active[d]:
            continue
        best = -1
        best_score = 0.0
        best_new = np.nan
        best_old = np.nan
        near = -1
        near_score = 0.0
        for b in range(n_bands):
            c = table_docs[hash_slot(table_keys, table_docs, keys[d, b])]
            while c >= 0:
                if seen_by[c] != d:
                    seen_by[c] = d
                    if is_simhash:
                        x = values[d, 0] ^ values[c, 0]
                        dist = 0
                        while x:
                            x &= x - np.uint64(1)
                            dist += 1
                        s = float(dist)
                        if dist <= max_distance:
                            if best < 0 or s < best_score or (s == best_score and c < best):
                                best = c
                                best_score = s
                        elif dist <= suspect_bound and (near < 0 or s < near_score):
                            near = c
                            near_score = s
                    else:
                        eq = 0
                        width = values.shape[1]
                        for k in range(width):
                            if values[d, k] == values[c, k]:
                                eq += 1
                        s = eq / width
                        ok = False
                        c_new = np.nan
                        c_old = np.nan
                        if verify and s >= exact_floor:
                            # In the batch the shingle sets are at hand: the verifier reads them.
                            common, size_d, size_c = _overlap(hashes, hash_off, table, d, c)
                            union = size_d + size_c - common
                            s = common / union if union > 0 else 0.0
                            c_new = common / size_d if size_d > 0 else 0.0
                            c_old = common / size_c if size_c > 0 else 0.0
                            ok = _accepts(s, c_new, c_old, strict[d], rule)
                            if not ok and _passage_candidate(s, c_new, c_old, strict[d], rule):
                                ok = _by_passages(hashes, hash_off, table, d, c, rule, runs[d] if len(runs) else int(rule[6]))
                            if not ok and strict[d] == SHORT and s >= rule[1]:
                                ok = _short_noise_only(hashes, hash_off, table, d, c)
                            if ok and facts and s < rule[9] and not strict[d] >= 0:
                                share = rule[8] if strict[d] != strict[d] else SHORT_FACTS_SHARE
                                ok = not facts_differ(nums, num_off, d, c, int(rule[7]), share, int(rule[10]))
                            if ok and not strict[d] >= 0:
                                ok = not _refused_by_bounds(
                                    hashes, hash_off, table, d, c, c_new, strict[d], runs[d] if len(runs) else LONG_RUN, cp, cp_off,
                                    leadin[d] if len(leadin) else 0,
                                )
                        else:
                            if len(hash_off) > 0 and exact_floor <= s < exact_ceiling:
                                # In the batch the shingle sets are at hand: settle the estimate exactly.
                                s = _exact_jaccard(hashes, hash_off, table, d, c)
                            ok = s >= min_jaccard
                        if ok:
                            if best < 0 or s > best_score or (s == best_score and c < best):
                                best = c
                                best_score = s
                                best_new = c_new
                                best_old = c_old
                        elif s >= suspect_bound and (near < 0 or s > near_score):
                            near = c
                            near_score = s
                c = chain[c, b]
        if best >= 0:
            matched[d] = best
            score[d] = best_score
            covers_newer[d] = best_new
            covers_earlier[d] = best_old
            continue
        if near >= 0:
            suspect[d] = near
            suspect_score[d] = near_score
        for b in range(n_bands):
            i = hash_slot(table_keys, table_docs, keys[d, b])
            chain[d, b] = table_docs[i]
            table_keys[i] = keys[d, b]
            table_docs[i] = d
    return matched, score, suspect, suspect_score, covers_newer, covers_earlier


_NO_RULE = np.empty(0, np.float64)


def stream_simhash(
    simhash: np.ndarray, active: np.ndarray, max_distance: int, suspect_max_distance: int
) -> StreamResult:
    """Hamming <= max_distance against earlier kept rows sharing one of the four 16-bit bands."""
    simhash = np.ascontiguousarray(simhash, dtype=np.uint64)
    shifts = np.arange(4, dtype=np.uint64) * np.uint64(16)
    keys = ((simhash[:, None] >> shifts) & np.uint64(0xFFFF)) | (np.arange(4, dtype=np.uint64) << np.uint64(16))
    out = _stream(
        np.ascontiguousarray(keys), active.astype(np.bool_), simhash.reshape(-1, 1), True,
        int(max_distance), 2.0, float(suspect_max_distance), _NO_SETS, _NO_OFFSETS, 2.0, 2.0,
        np.full(len(simhash), np.nan), _NO_RULE, _NO_NUMBERS, _NO_OFFSETS, _NO_OFFSETS, _NO_CHARS, _NO_OFFSETS, _NO_OFFSETS,
    )
    return StreamResult(*out)


def stream_minhash(
    band_keys: np.ndarray,
    signatures: np.ndarray,
    active: np.ndarray,
    threshold: float,
    suspect_min: float,
    shingles: tuple[np.ndarray, np.ndarray] | None = None,
    exact_floor: float = 0.65,
    exact_ceiling: float = 0.9,
    verifier: Verifier | None = None,
    strict: np.ndarray | None = None,
    numbers: tuple[np.ndarray, np.ndarray] | None = None,
    runs: np.ndarray | None = None,
    texts: ShortTexts | None = None,
    leadin: np.ndarray | None = None,
) -> StreamResult:
    """Jaccard >= threshold against earlier kept rows sharing an LSH band.

    With ``shingles`` (the rows' 32-bit shingle values and per-row offsets), a candidate whose
    estimate falls in [exact_floor, exact_ceiling) is judged on its exact Jaccard instead: with 128
    permutations the estimate's standard deviation near 0.8 is 0.035, so a true 0.8 lands anywhere in
    about 0.7-0.9 while outside that band the estimate alone is reliable.

    With ``shingles`` and a ``verifier``, every candidate estimated at ``exact_floor`` or more is
    decided by the verifier on the exact sets (``strict``: per row NaN, or the plain Jaccard that row
    needs instead); the coverage of each match is returned with it. ``numbers`` (per-row number
    hashes and offsets) enable the verifier's facts check; ``runs`` (per row, ``layers.near.passage_runs``)
    is the passage rule's added-run length for the row as the newer of a pair (None: ``LONG_RUN``);
    ``texts`` the short rows' characters (``ShortTexts``, same indexing) for the short-text rules,
    ``leadin`` (per row) the code points of its site lead-in (``fingerprint.leadin``).
    """
    sets, set_off = shingles if shingles is not None else (_NO_SETS, _NO_OFFSETS)
    rule = verifier.rule if verifier is not None and shingles is not None else _NO_RULE
    strict = np.full(len(active), np.nan) if strict is None else np.asarray(strict, np.float64)
    nums, num_off = numbers if numbers is not None else (_NO_NUMBERS, _NO_OFFSETS)
    out = _stream(
        np.ascontiguousarray(band_keys, dtype=np.uint64), active.astype(np.bool_),
        np.ascontiguousarray(signatures), False, 0, float(threshold), float(suspect_min),
        sets, set_off, float(exact_floor), float(exact_ceiling), strict, rule,
        np.ascontiguousarray(nums, np.uint64), np.asarray(num_off, np.int64),
        _NO_OFFSETS if runs is None else np.ascontiguousarray(runs, np.int64), *_text_arrays(texts),
        _NO_OFFSETS if leadin is None else np.ascontiguousarray(leadin, np.int64),
    )
    return StreamResult(*out)

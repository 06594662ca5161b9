"""Site lead-ins: the fixed prefix a site puts before every short item ("BRIEF via Reuters UK energy
(automated summary, not reviewed by an editor): ", "【二手转让】重庆同城，个人闲置，…：").

A short text's lead-in is the longest prefix of its near-duplicate view that at least
``LEADIN_MIN_TEXTS`` distinct short texts of its site (host) in the batch share, when it is
``LEADIN_MIN_CHARS`` code points or more. Two items behind one lead-in are judged on what follows it
(``candidates._leadin_items_differ``): the lead-in counts for nothing, as the repeated-line stoplist
does for whole lines. Copies of a story sit on other sites (mirrors), so they do not make one.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)
from dedup_tasks.fingerprint.hashing import codepoints

# Three items of one site: two pages sharing a prefix may be one story's copies; a third distinct one
# sharing it makes it the site's. 12 code points: under it a shared prefix is a few common words.
LEADIN_MIN_TEXTS = 3
LEADIN_MIN_CHARS = 12


@njit(cache=True)
def _common_prefix(cp, offsets, a, b):
    lo_a, lo_b = offsets[a], offsets[b]
    n = min(offsets[a + 1] - lo_a, offsets[b + 1] - lo_b)
    k = 0
    while k < n and cp[lo_a + k] == cp[lo_b + k]:
        k += 1
    return k


@njit(cache=True)
def _leadins(cp, offsets, order, site, min_texts, min_chars):
    """Per text (in ``order``, sorted by site then text) its lead-in length: the longest prefix common
    to a run of ``min_texts`` consecutive distinct texts of its site holding it."""
    n = len(order)
    out = np.zeros(n, np.int32)
    # Distinct texts in sorted order: equal ones (a refetch, an exact copy) count once.
    first = np.zeros(n, np.int64)
    distinct = np.zeros(n, np.int64)  # sorted position of each distinct text's first copy
    m = 0
    for i in range(n):
        same = i > 0 and site[order[i]] == site[order[i - 1]]
        if same:
            k = _common_prefix(cp, offsets, order[i], order[i - 1])
            length_a = offsets[order[i] + 1] - offsets[order[i]]
            length_b = offsets[order[i - 1] + 1] - offsets[order[i - 1]]
            same = k == length_a and k == length_b
        if not same:
            distinct[m] = i
            m += 1
        first[i] = m - 1
    # lcp[j]: common prefix of distinct texts j and j + 1 (0 across sites).
    lcp = np.zeros(max(m - 1, 0), np.int64)
    for j in range(m - 1):
        a, b = order[distinct[j]], order[distinct[j + 1]]
        lcp[j] = _common_prefix(cp, offsets, a, b) if site[a] == site[b] else 0
    best = np.zeros(m, np.int64)
    span = min_texts - 1
    for start in range(0, m - span):
        shared = lcp[start]
        for j in range(start + 1, start + span):
            shared = min(shared, lcp[j])
        if shared >= min_chars:
            for j in range(start, start + span + 1):
                best[j] = max(best[j], shared)
    for i in range(n):
        out[order[i]] = best[first[i]]
    return out


def site_leadins(texts: pa.Array | pa.ChunkedArray, sites: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """Per row the code points of its site lead-in in ``texts`` (the near-duplicate view; 0: none),
    among the ``eligible`` rows (the short ones) of each site code in ``sites``."""
    n = len(texts)
    out = np.zeros(n, np.int32)
    rows = np.flatnonzero(eligible)
    if len(rows) < LEADIN_MIN_TEXTS:
        return out
    sub = pa.table({"site": pa.array(np.asarray(sites)[rows]), "text": pc.fill_null(texts.take(pa.array(rows)), "")})
    order = pc.sort_indices(sub, [("site", "ascending"), ("text", "ascending")]).to_numpy().astype(np.int64)
    cp, offsets = codepoints(sub.column("text"))
    site_of = sub.column("site").to_numpy()
    got = _leadins(
        np.ascontiguousarray(cp), np.asarray(offsets, np.int64), order, np.ascontiguousarray(site_of), LEADIN_MIN_TEXTS,
        LEADIN_MIN_CHARS,
    )
    out[rows] = got
    return out

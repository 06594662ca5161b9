"""Text normalization over whole Arrow columns (no per-document Python loop on the hot path).

Three views of a document are used by the cascade:

* ``normalize_text``: NFKC (which also folds full-width ASCII and the ideographic space to half
  width), lower case, whitespace collapsed. The exact layer hashes this view.
* ``token_text``: ``normalize_text`` with punctuation and symbols replaced by spaces. SimHash and
  MinHash shingle this view, so punctuation noise does not change a near-duplicate fingerprint.
* ``strip_boilerplate``: lines repeated across many documents of one site within the batch (menus,
  copyright footers, related-links blocks) removed before shingling, so different articles under one
  heavy template are not mistaken for copies of each other.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_WHITESPACE = r"\s+"
# Punctuation, symbols and whitespace (RE2 Unicode classes).
_NON_WORD = r"[\p{P}\p{S}\s]+"


def as_string_array(values: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """One contiguous string array with nulls as empty strings."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.string())
    if pa.types.is_large_string(values.type):
        values = values.cast(pa.string())
    return pc.fill_null(values, "")


def nfkc_lower(values: pa.Array) -> pa.StringArray:
    """NFKC then lower case: the width and case folding every other view starts from."""
    return pc.utf8_lower(pc.utf8_normalize(as_string_array(values), form="NFKC"))


def collapse_whitespace(values: pa.Array) -> pa.StringArray:
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(values, _WHITESPACE, " "))


def normalize_text(values: pa.Array) -> pa.StringArray:
    """NFKC, full/half width folded, lower-cased, whitespace collapsed and trimmed."""
    return collapse_whitespace(nfkc_lower(values))


def token_text(values: pa.Array) -> pa.StringArray:
    """Words separated by single spaces: punctuation and symbols become separators."""
    return pc.utf8_trim_whitespace(pc.replace_substring_regex(as_string_array(values), _NON_WORD, " "))


def strip_boilerplate(
    folded: pa.StringArray,
    site: np.ndarray,
    min_docs: int = 4,
    min_residual_chars: int = 40,
) -> pa.StringArray:
    """Remove lines that occur in at least ``min_docs`` documents of the same site in this batch.

    ``folded`` is ``nfkc_lower`` output (line breaks intact); ``site`` is a per-row site key (host).
    A document whose residual would be shorter than ``min_residual_chars`` keeps its full text: it is
    then mostly template (or one of many copies on its own site), and its full text is the honest
    fingerprint. Lines are compared after whitespace collapse.
    """
    n = len(folded)
    if n == 0:
        return folded
    lines = pc.split_pattern(folded, "\n")
    flat = collapse_whitespace(lines.flatten())
    line_offsets = lines.offsets.to_numpy()
    counts = np.diff(line_offsets)
    doc_of_line = np.repeat(np.arange(n), counts)
    # Site and line text identify a template line; factorize both to integer codes.
    site_codes = _factorize(pa.array(site.astype(object), pa.string()))
    line_codes = _factorize(flat)
    nonempty = pc.greater(pc.utf8_length(flat), 0).to_numpy(zero_copy_only=False)
    key = site_codes[doc_of_line].astype(np.int64) * (int(line_codes.max(initial=0)) + 1) + line_codes
    # Count distinct documents per (site, line): a line repeated inside one document is not template.
    doc_key = np.unique(np.stack([key, doc_of_line]), axis=1)
    uniq_keys, doc_counts = np.unique(doc_key[0], return_counts=True)
    docs_with_line = doc_counts[np.searchsorted(uniq_keys, key)]
    boiler = nonempty & (docs_with_line >= min_docs)
    if not boiler.any():
        return collapse_whitespace(folded)
    kept_lines = flat.filter(pa.array(~boiler))
    kept_per_doc = np.bincount(doc_of_line[~boiler], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(kept_per_doc)]).astype(np.int32)
    stripped = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), kept_lines), " ")
    stripped = collapse_whitespace(stripped)
    full = collapse_whitespace(folded)
    short = pc.less(pc.utf8_length(stripped), min_residual_chars)
    return pc.if_else(short, full, stripped)


def _factorize(values: pa.Array) -> np.ndarray:
    encoded = pc.dictionary_encode(values)
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def cjk_share(values: pa.StringArray) -> np.ndarray:
    """Share of CJK ideographs (and kana/hangul) among non-space characters, per row."""
    total = pc.utf8_length(pc.replace_substring_regex(values, r"\s+", "")).to_numpy(zero_copy_only=False)
    cjk = pc.utf8_length(
        pc.replace_substring_regex(values, r"[^\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+", "")
    ).to_numpy(zero_copy_only=False)
    return np.divide(cjk, total, out=np.zeros(len(total), float), where=total > 0)


def detect_lang(values: pa.StringArray, given: pa.Array | None = None, threshold: float = 0.3) -> np.ndarray:
    """'zh' where CJK characters dominate, else 'en'; a non-null ``given`` language wins."""
    detected = np.where(cjk_share(values) > threshold, "zh", "en").astype(object)
    if given is None:
        return detected
    given_np = as_string_array(given).to_numpy(zero_copy_only=False).astype(object)
    has = given_np != ""
    out = detected.copy()
    out[has] = np.where(np.char.startswith(given_np[has].astype(str), "zh"), "zh", "en")
    return out

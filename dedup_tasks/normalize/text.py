"""Text normalization over whole Arrow columns (no per-document Python loop on the hot path).

Three views of a document are used by the cascade:

* ``normalize_text``: NFKC (which also folds full-width ASCII and the ideographic space to half
  width), lower case, whitespace collapsed. The exact layer hashes this view.
* ``token_text``: the same with punctuation and symbols as separators: words joined by single
  spaces. SimHash and MinHash shingle this view, so punctuation noise does not move a fingerprint.
* ``strip_boilerplate``: lines repeated across several documents of one site within the batch
  (menus, copyright footers, related-links blocks) removed before shingling, so different articles
  under one heavy template are not mistaken for copies of each other.

NFKC and lower-casing run in Arrow; the character-class passes run as compiled kernels over code
points (``codepoint_kernels``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.normalize import codepoint_kernels as ck
from dedup_tasks.normalize.arrays import as_string_array, codepoints, nfkc_lower, strings_from_codepoints
from dedup_tasks.normalize.fold import fold_codepoints

BOILERPLATE_MIN_DOCS = 4
BOILERPLATE_MIN_RESIDUAL = 40


def collapse_codepoints(cp: np.ndarray, offsets: np.ndarray, punctuation: bool) -> tuple[np.ndarray, np.ndarray]:
    """Whitespace runs (and punctuation/symbols when ``punctuation``) to one space, trimmed."""
    return ck.collapse(cp, offsets, ck.CLASSES, punctuation)


def normalize_text(values: pa.Array) -> pa.StringArray:
    """NFKC, full/half width folded, lower-cased, whitespace collapsed and trimmed."""
    return strings_from_codepoints(*collapse_codepoints(*codepoints(nfkc_lower(values)), punctuation=False))


def token_text(values: pa.Array) -> pa.StringArray:
    """Words separated by single spaces: punctuation and symbols become separators."""
    return strings_from_codepoints(*collapse_codepoints(*codepoints(nfkc_lower(values)), punctuation=True))


def template_lines(
    line_doc: np.ndarray, line_hash: np.ndarray, site_code: np.ndarray, min_docs: int = BOILERPLATE_MIN_DOCS
) -> np.ndarray:
    """Sorted hashes of lines found in >= ``min_docs`` documents of one site (from ``ck.token_lines``).

    ``line_doc`` numbers documents batch-wide and ``site_code`` is each line's site. The set is
    applied to every site afterwards: a mirror that copies a page with its source site's header and
    footer must fingerprint like the source.
    """
    if len(line_hash) == 0:
        return np.empty(0, np.uint64)
    line_doc = np.asarray(line_doc, np.int64)
    key = line_hash ^ (site_code.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    if np.any(line_doc[1:] < line_doc[:-1]):  # prepare's lines come in document order; others may not
        order = np.argsort(line_doc, kind="stable")
        line_doc, key, line_hash = line_doc[order], key[order], line_hash[order]
    return np.unique(line_hash[ck.frequent_line_keys(key, line_doc, min_docs)])


def strip_lines(
    cp: np.ndarray, offsets: np.ndarray, templates: np.ndarray, min_residual: int = BOILERPLATE_MIN_RESIDUAL
) -> tuple[np.ndarray, np.ndarray]:
    """Token text of each document without its template lines (see ``template_lines``).

    ``cp``/``offsets`` are folded texts (NFKC, lower case) with line breaks intact. A document whose
    residual would be shorter than ``min_residual`` characters keeps its full text: it is then
    mostly template (or one of many copies on its own site), and its full text is the honest
    fingerprint.
    """
    if len(templates) == 0 or len(offsets) < 2:
        return collapse_codepoints(cp, offsets, punctuation=True)
    doc, line_hash, starts, ends = ck.token_lines(cp, offsets, ck.CLASSES)
    boiler = np.isin(line_hash, templates, assume_unique=False)
    if not boiler.any():
        return collapse_codepoints(cp, offsets, punctuation=True)
    stripped = collapse_codepoints(*ck.remove_spans(cp, offsets, starts[boiler], ends[boiler], doc[boiler]), punctuation=True)
    short = np.diff(stripped[1]) < min_residual
    if not short.any():
        return stripped
    # Only the few documents that are mostly template need their full text as well.
    full_of_short = collapse_codepoints(*ck.gather(cp, offsets, short), punctuation=True)
    return ck.replace_rows(stripped[0], stripped[1], full_of_short[0], full_of_short[1], short)


def story_lengths(content: pa.Array | pa.ChunkedArray, templates: np.ndarray | None) -> np.ndarray:
    """Characters of each document's own text: its content's token text without its site's template
    lines, and without the title.

    Unlike the near-duplicate view, a page that is mostly template is not given its template back:
    a headline under a site's menus and copyright footer is as short as the headline.
    """
    cp, offsets = fold_codepoints(content)
    if templates is None or len(templates) == 0:
        return np.diff(collapse_codepoints(cp, offsets, punctuation=True)[1])
    return np.diff(strip_lines(cp, offsets, templates, min_residual=0)[1])


def strip_boilerplate(
    cp: np.ndarray,
    offsets: np.ndarray,
    site: np.ndarray,
    min_docs: int = BOILERPLATE_MIN_DOCS,
    min_residual: int = BOILERPLATE_MIN_RESIDUAL,
) -> tuple[np.ndarray, np.ndarray]:
    """``template_lines`` + ``strip_lines`` over one in-memory set of documents."""
    doc, line_hash, _, _ = ck.token_lines(cp, offsets, ck.CLASSES)
    site_codes = site_codes_of(site)
    templates = template_lines(doc, line_hash, site_codes[doc], min_docs)
    return strip_lines(cp, offsets, templates, min_residual)


def site_codes_of(site: np.ndarray) -> np.ndarray:
    return pc.dictionary_encode(pa.array(site.astype(object), pa.string())).indices.to_numpy(zero_copy_only=False)


def detect_lang(cp: np.ndarray, offsets: np.ndarray, given: pa.Array | None = None, threshold: float = 0.3) -> np.ndarray:
    """'zh' where CJK characters are more than ``threshold`` of the word characters, else 'en'.

    A given language wins when it is 'zh*' or 'en*'; other given languages are detected.
    """
    return lang_from_counts(*ck.cjk_counts(cp, offsets, ck.CLASSES), given, threshold)


def lang_from_counts(cjk: np.ndarray, word: np.ndarray, given: pa.Array | None = None, threshold: float = 0.3) -> np.ndarray:
    """``detect_lang`` from per-document (CJK count, word-character count)."""
    share = np.divide(cjk, word, out=np.zeros(len(word), float), where=word > 0)
    detected = np.where(share > threshold, "zh", "en").astype(object)
    if given is None:
        return detected
    given_np = np.char.lower(as_string_array(given).to_numpy(zero_copy_only=False).astype(str))
    out = detected.copy()
    out[np.char.startswith(given_np, "zh")] = "zh"
    out[np.char.startswith(given_np, "en")] = "en"
    return out

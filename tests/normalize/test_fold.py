"""The compiled views equal the Arrow/reference compositions they replace."""

import random

import numpy as np
import pyarrow as pa
import pytest

from dedup_tasks.fingerprint.content_hash import content_hashes
from dedup_tasks.fingerprint.hashing import codepoints, strings_from_codepoints
from dedup_tasks.normalize import codepoint_kernels as ck
from dedup_tasks.normalize.fold import fold_codepoints, fold_scratch_size
from dedup_tasks.normalize.text import (
    collapse_codepoints,
    detect_lang,
    nfkc_lower,
    site_codes_of,
    strip_lines,
    template_lines,
)
from dedup_tasks.normalize.views import (
    hash_view,
    pack,
    region_size,
    strip_template_lines,
    token_view,
)


def _same(a, b):
    assert np.array_equal(a[1], b[1])
    assert np.array_equal(a[0], b[0])


def test_fold_equals_arrow_nfkc_lower_on_every_character_alone():
    chars = [chr(c) for c in range(0x30000) if not 0xD800 <= c <= 0xDFFF]
    values = pa.array(chars + [None, ""])
    _same(fold_codepoints(values), codepoints(nfkc_lower(values)))


@pytest.mark.parametrize("seed", [0, 1])
def test_fold_equals_arrow_where_neighbours_interact(seed):
    # Combining marks, Hangul jamo, voiced half-width kana and the starters that compose with
    # what precedes them send their document to Arrow; everything else is folded by the table.
    rng = random.Random(seed)
    interacting = [0x301, 0x308, 0x1100, 0x1161, 0x11A8, 0xFF76, 0xFF9E, 0x0B3E, 0x0CD5, 0x3099, 0x212B, 0xFB01]
    pool = [0x41, 0x65, 0x49, 0x130, 0x3A3, 0x4E2D, 0xFF21, 0x3000, 0x2026, 0x1D400, 0x20000, 0x2F800, 0xAC00] + interacting
    docs = ["".join(chr(rng.choice(pool)) for _ in range(rng.randint(0, 6))) for _ in range(5000)]
    values = pa.array(docs)
    _same(fold_codepoints(values), codepoints(nfkc_lower(values)))


def test_utf8_kernels_round_trip_every_width():
    values = pa.array(["a😀b", "", "𠀀中文", "x", "ÀÉ€", None]).fill_null("")
    cp, offsets = codepoints(values)
    assert offsets.tolist() == [0, 3, 3, 6, 7, 10, 10]
    assert cp[:3].tolist() == [0x61, 0x1F600, 0x62]
    assert strings_from_codepoints(cp, offsets).to_pylist() == values.to_pylist()
    sliced = values.slice(2, 2)
    assert strings_from_codepoints(*codepoints(sliced)).to_pylist() == ["𠀀中文", "x"]


def test_hash_view_hashes_like_title_separator_content():
    title, content = pa.array(["A  Title ", "", "t"]), pa.array([" Body\n text", "only body", ""])
    t = collapse_codepoints(*codepoints(nfkc_lower(title)), punctuation=False)
    c = collapse_codepoints(*codepoints(nfkc_lower(content)), punctuation=False)
    sep = np.array([0x1F], np.uint32)
    joined = [np.concatenate([t[0][t[1][i] : t[1][i + 1]], sep, c[0][c[1][i] : c[1][i + 1]]]) for i in range(3)]
    offsets = np.concatenate([[0], np.cumsum([len(j) for j in joined])])
    view = hash_view(fold_codepoints(title), fold_codepoints(content))
    _same(pack(*view), (np.concatenate(joined), offsets))
    assert np.array_equal(content_hashes(*view), content_hashes(np.concatenate(joined), offsets[:-1], np.diff(offsets)))


def _reference_near_view(titles, contents, templates, max_chars, min_residual=40):
    """title token text + " " + content token text without template lines, cut: the composition of
    the readable reference functions."""
    title_tok = collapse_codepoints(*codepoints(nfkc_lower(titles)), punctuation=True)
    content_tok = strip_lines(*codepoints(nfkc_lower(contents)), templates, min_residual)
    rows = []
    for d in range(len(title_tok[1]) - 1):
        title = title_tok[0][title_tok[1][d] : title_tok[1][d + 1]]
        content = content_tok[0][content_tok[1][d] : content_tok[1][d + 1]]
        space = [32] if len(title) and len(content) else []
        rows.append(np.concatenate([title, np.array(space, np.uint32), content]).astype(np.uint32))
    full = np.array([len(r) for r in rows])
    rows = [r[:max_chars] for r in rows]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return (np.concatenate(rows), offsets), full > max_chars


def _near_view(titles, contents, templates, max_chars, min_residual=40):
    """Both passes of prepare's near-duplicate view, packed: (rows, truncated, CJK, words, view)."""
    title, content = fold_codepoints(titles), fold_codepoints(contents)
    view = token_view(title, content, np.empty(region_size(title, content) + 1, np.uint32))
    lengths, truncated, cjk, words = strip_template_lines(view, templates, min_residual, max_chars)
    return pack(view.buffer, view.starts, lengths), truncated, cjk, words, view


def test_near_view_equals_strip_join_truncate():
    rng = random.Random(3)
    header, footer = "Home | World | Sports", "© 2026 Example. All rights reserved."
    words = ["alpha", "beta", "中文", "新闻", "gamma,", "delta!", "ＦＵＬＬ", "e\u0301"]
    titles, contents, sites = [], [], []
    for i in range(400):
        body = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 4)))
        site = f"s{i % 7}.com"
        if i % 3 == 0:
            body = f"{header}\n{body}\n{footer}"
        titles.append("" if i % 11 == 0 else f"Title {i % 5}: {rng.choice(words)}")
        contents.append(body)
        sites.append(site)
    titles, contents, sites = pa.array(titles), pa.array(contents), np.array(sites, object)
    doc, line_hash, _, _ = ck.token_lines(*codepoints(nfkc_lower(contents)), ck.CLASSES)
    templates = template_lines(doc, line_hash, site_codes_of(sites)[doc])
    expected, expected_truncated = _reference_near_view(titles, contents, templates, 60)
    (cp, off), truncated, cjk, word, _ = _near_view(titles, contents, templates, 60)
    assert len(templates) > 0 and truncated.any()
    _same((cp, off), expected)
    assert truncated.tolist() == expected_truncated.tolist()
    assert np.array_equal(np.stack([cjk, word]), np.stack(ck.cjk_counts(cp, off, ck.SPACE_SEPARATORS)))
    assert detect_lang(cp, off).tolist().count("zh") > 0


@pytest.mark.parametrize(("min_residual", "max_chars", "with_templates"), [(40, 10**5, True), (5, 30, True), (0, 10**5, True), (40, 10**5, False)])
def test_token_view_then_strip_equals_the_reference(min_residual, max_chars, with_templates):
    # Pass 1 writes the view before the templates are known; pass 2 strips them in place.
    rng = random.Random(3)
    header, footer = "Home | World | Sports", "© 2026 Example. All rights reserved."
    words = ["alpha", "beta", "中文", "新闻", "gamma,", "delta!", "ＦＵＬＬ", "e\u0301", "\n", "...", " ", "𠀀"]
    titles, contents = [], []
    for i in range(1500):
        body = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) for _ in range(rng.randint(0, 5)))
        if i % 3 == 0:
            body = f"{header}\n{body}\n{footer}"
        if i % 5 == 0:
            body = f"{footer}\n\n{body}"
        titles.append("" if i % 4 == 0 else f"Title {i % 5}: {rng.choice(words)}")
        contents.append(body)
    titles, contents = pa.array(titles), pa.array(contents)
    lines = ck.token_lines(*fold_codepoints(contents), ck.CLASSES)
    templates = np.unique(lines[1])[::3] if with_templates else np.empty(0, np.uint64)
    expected, expected_truncated = _reference_near_view(titles, contents, templates, max_chars, min_residual)
    rows, truncated, cjk, word, view = _near_view(titles, contents, templates, max_chars, min_residual)
    assert np.array_equal(view.line_doc, lines[0]) and np.array_equal(view.line_hash, lines[1])
    _same(rows, expected)
    assert np.array_equal(truncated, expected_truncated) and truncated.any() == (max_chars < 100)
    assert np.array_equal(np.stack([cjk, word]), np.stack(ck.cjk_counts(*rows, ck.SPACE_SEPARATORS)))


def test_token_view_chunks_share_one_buffer():
    titles = pa.array(["One", "", "三 two", "Four"])
    contents = pa.array(["alpha beta\ngamma", "中文新闻", "", "delta, epsilon!"])
    whole, *_ = _near_view(titles, contents, np.empty(0, np.uint64), 10**5)
    halves = [(titles.slice(0, 2), contents.slice(0, 2)), (titles.slice(2), contents.slice(2))]
    folded = [(fold_codepoints(t), fold_codepoints(c)) for t, c in halves]
    shared = np.full(sum(region_size(t, c) for t, c in folded) + 1, 0xFFFF, np.uint32)
    spans, at = [], 0
    for t, c in folded:
        view = token_view(t, c, shared, at)
        assert view.buffer is shared
        spans.append((view.starts, view.lengths))
        at += region_size(t, c)
    starts, lengths = (np.concatenate(x) for x in zip(*spans, strict=True))
    _same(pack(shared, starts, lengths), whole)
    with pytest.raises(ValueError, match="smaller"):
        token_view(*folded[1], shared, len(shared) - 2)



def test_fold_with_a_scratch_buffer_equals_without():
    values = pa.chunked_array([pa.array(["ＡＢＣ", None, "中文 ﷺ"]), pa.array(["x\u0301", "Straße"])])
    need = fold_scratch_size(values)
    scratch = np.full(need, 7, np.uint32)
    _same(fold_codepoints(values, scratch), fold_codepoints(values))
    _same(fold_codepoints(values.chunk(0).slice(1), scratch), fold_codepoints(values.chunk(0).slice(1)))
    with pytest.raises(ValueError, match="scratch"):
        fold_codepoints(values, np.empty(need - 1, np.uint32))


def test_saved_fold_table_equals_a_fresh_build_and_a_bad_file_is_rebuilt(tmp_path, monkeypatch):
    from dedup_tasks.normalize import fold

    built = fold._built_tables()
    path = tmp_path / "__pycache__" / "fold-table.npz"
    assert fold.save_tables(path, built)
    loaded = fold._load_tables(path)
    assert loaded is not None
    for a, b in zip(loaded, built, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)

    # A truncated or foreign file is not used: the process builds the table and saves it again.
    path.write_bytes(path.read_bytes()[:1000])
    assert fold._load_tables(path) is None
    monkeypatch.setattr(fold, "table_path", lambda: path)
    fold._tables.cache_clear()
    try:
        tables = fold._tables()
        assert np.array_equal(tables[0], built[0]) and fold._load_tables(path) is not None
    finally:
        fold._tables.cache_clear()


def test_saved_char_classes_equal_a_fresh_build_and_a_bad_file_is_rebuilt(tmp_path, monkeypatch):
    built = ck._char_classes()
    assert np.array_equal(ck.CLASSES, built)  # what this process loaded (or built) at import
    path = tmp_path / "__pycache__" / "char-classes-x.npy"
    monkeypatch.setattr(ck, "_classes_path", lambda: path)
    # No file: built and saved; then loaded from the file.
    assert np.array_equal(ck._cached_char_classes(), built) and path.exists()
    loaded = ck._load_classes(path)
    assert loaded is not None and loaded.dtype == np.uint8 and np.array_equal(loaded, built)
    # A truncated file, or one with values no class has, is not used: built and saved again.
    for bad in (path.read_bytes()[:1000], None):
        if bad is None:
            np.save(path, np.full(len(built), 9, np.uint8))
        else:
            path.write_bytes(bad)
        assert ck._load_classes(path) is None
        assert np.array_equal(ck._cached_char_classes(), built)
        assert np.array_equal(ck._load_classes(path), built)

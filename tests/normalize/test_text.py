import numpy as np
import pyarrow as pa
import pytest

from dedup_tasks.fingerprint.hashing import codepoints, strings_from_codepoints
from dedup_tasks.normalize import codepoint_kernels as ck
from dedup_tasks.normalize.fold import fold_codepoints
from dedup_tasks.normalize.text import (
    detect_lang,
    nfkc_lower,
    normalize_text,
    story_lengths,
    strip_boilerplate,
    strip_lines,
    template_lines,
    token_text,
)
from dedup_tasks.normalize.tokens import segment_words, shingles


def test_normalize_folds_width_case_and_whitespace():
    out = normalize_text(pa.array(["ＶＩＰ　Ｃａｒ\t\n  Ｎｏ．１ ", "Straße  ÀB", None, "ｶﾀｶﾅ"])).to_pylist()
    assert out == ["vip car no.1", "straße àb", "", "カタカナ"]


def test_token_text_drops_punctuation_and_symbols():
    out = token_text(pa.array(["Hello, world!! -- it's $5 (approx.)", "深圳地铁，将设立“头等车厢”。"])).to_pylist()
    assert out == ["hello world it s 5 approx", "深圳地铁 将设立 头等车厢"]


def test_codepoints_round_trip_with_astral_characters():
    values = pa.array(["a😀b", "", "𠀀中文", "x"])
    cp, offsets = codepoints(values)
    assert offsets.tolist() == [0, 3, 3, 6, 7]
    assert strings_from_codepoints(cp, offsets).to_pylist() == values.to_pylist()


def test_strip_boilerplate_removes_template_lines():
    header = "Home | World | Business | Sports | Contact us"
    footer = "Copyright 2026 Example News. All rights reserved."
    bodies = [f"Article number {i} reports a different event with its own details and quotes." for i in range(5)]
    docs = [f"{header}\n{body}\n{footer}" for body in bodies]
    # A mirror copying a page with its source's template is stripped the same way.
    docs.append(f"{header}\nA mirror copy of article number 0 with its own details and quotes.\n{footer}")
    # A line shared by three sites, fewer than four documents each, is content, not template.
    shared = "Breaking: markets close higher on strong earnings"
    docs += [f"{shared}\nStory {i} has a body long enough to stand on its own here." for i in range(3)]
    sites = np.array(["a.com"] * 5 + ["mirror.net"] + ["x.com", "y.com", "z.com"], object)
    cp, offsets = codepoints(nfkc_lower(pa.array(docs)))
    out = strings_from_codepoints(*strip_boilerplate(cp, offsets, sites)).to_pylist()
    assert out[0] == "article number 0 reports a different event with its own details and quotes"
    assert out[5] == "a mirror copy of article number 0 with its own details and quotes"
    assert all(text.startswith("breaking markets close higher") for text in out[6:])


def test_strip_boilerplate_keeps_full_text_when_residual_is_tiny():
    docs = ["same line for everyone\nok"] * 5
    cp, offsets = codepoints(nfkc_lower(pa.array(docs)))
    out = strings_from_codepoints(*strip_boilerplate(cp, offsets, np.array(["s"] * 5, object))).to_pylist()
    assert out == ["same line for everyone ok"] * 5


def test_detect_lang_uses_given_language_first():
    texts = pa.array(["这是一个中文句子", "an english sentence", "mostly english 一", "日本語", "x"])
    cp, offsets = codepoints(texts)
    assert detect_lang(cp, offsets).tolist() == ["zh", "en", "en", "zh", "en"]
    given = pa.array([None, "zh-CN", None, "ja", "EN"])
    assert detect_lang(cp, offsets, given).tolist() == ["zh", "zh", "en", "zh", "en"]


def test_segmentation_is_jieba_compatible():
    import jieba

    text = "深圳地铁将设立头等车厢买双倍票可享坐票"
    out = segment_words(pa.array([text, "english words"]), np.array([True, False])).to_pylist()
    assert out[0] == " ".join(w for w in jieba.cut(text) if w.strip())
    assert out[1] == "english words"


def test_shingle_definitions():
    assert shingles("深圳 地铁将设立", "zh") == ["深圳地铁将", "圳地铁将设", "地铁将设立"]
    assert shingles("a b c d", "en") == ["a b c", "b c d"]
    assert shingles("a b", "en") == ["a b"]
    assert shingles("", "zh") == []


@pytest.mark.parametrize("doc_order", ["sorted", "shuffled"])
def test_template_lines_counts_distinct_documents_per_site(doc_order):
    rng = np.random.default_rng(5)
    n_lines = 5000
    line_doc = np.sort(rng.integers(0, 600, n_lines))
    line_hash = rng.integers(0, 2**63, 40, dtype=np.uint64)[rng.integers(0, 40, n_lines)]
    site_code = (line_doc % 3).astype(np.int64)  # a document's lines share its site
    if doc_order == "shuffled":
        order = rng.permutation(n_lines)
        line_doc, line_hash, site_code = line_doc[order], line_hash[order], site_code[order]
    docs_per = {}
    for doc, h, site in zip(line_doc.tolist(), line_hash.tolist(), site_code.tolist(), strict=True):
        docs_per.setdefault((h, site), set()).add(doc)
    for min_docs in (2, 4, 9):
        expected = sorted({h for (h, _), docs in docs_per.items() if len(docs) >= min_docs})
        assert template_lines(line_doc, line_hash, site_code, min_docs).tolist() == expected


def test_line_slots_count_the_class_tables_line_breaks():
    import random

    import numpy as np

    from dedup_tasks.normalize import codepoint_kernels as ck

    rng = random.Random(0)
    breaks = np.flatnonzero(ck.CLASSES == ck.NEWLINE).tolist()
    # Every line break, their neighbours, and ordinary text.
    alphabet = [*breaks, *(b - 1 for b in breaks), *(b + 1 for b in breaks), 32, 65, 0x4E2D, 0x1F600]
    docs = [[rng.choice(alphabet) for _ in range(rng.randint(0, 30))] for _ in range(200)]
    cp = np.array([c for d in docs for c in d], np.uint32)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    expected = [1 + sum(ck.CLASSES[c] == ck.NEWLINE for c in d if c < len(ck.CLASSES)) for d in docs]
    assert np.diff(ck.line_slots(cp, offsets)).tolist() == expected


def test_story_lengths_leave_out_template_lines_even_where_little_else_is_left() -> None:
    menu, footer = "Home | World | Sport", "Copyright 2026 Example"
    content = pa.array([f"{menu}\n{body}\n{footer}" for body in ["A short flash.", "Another page " * 10, "x " * 30, "y " * 40]] + [None])
    cp, off = fold_codepoints(content)
    doc, line_hash, _, _ = ck.token_lines(cp, off, ck.CLASSES)
    templates = template_lines(doc, line_hash, np.zeros(len(doc), np.int64), 4)
    assert len(templates) == 2
    lengths = story_lengths(content, templates)
    assert lengths.tolist() == [len("a short flash"), len(("another page " * 10).strip()), 59, 79, 0]
    # The near view's rule gives the short page its template back; the story does not.
    assert np.diff(strip_lines(cp, off, templates)[1])[0] > 40 > lengths[0]
    assert story_lengths(content, None)[0] == len("home world sport a short flash copyright 2026 example")

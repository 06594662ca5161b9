import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.hashing import codepoints, span_hash64
from dedup_tasks.fingerprint.simhash import bands, hamming
from dedup_tasks.normalize.text import token_text


def simhash_reference(token: str, lang: str) -> int:
    """Plain-Python weighted SimHash: every feature (zh char bigram, en word bigram) occurrence votes."""
    if lang == "zh":
        chars = token.replace(" ", "")
        width = min(2, len(chars))
        feats = [chars[i : i + width] for i in range(len(chars) - width + 1)] if chars else []
    else:
        words = token.split()
        width = min(2, len(words))
        feats = [" ".join(words[i : i + width]) for i in range(len(words) - width + 1)] if words else []
    votes = [0] * 64
    for f in feats:
        h = span_hash64(f)
        for b in range(64):
            votes[b] += 1 if (h >> b) & 1 else -1
    return sum(1 << b for b in range(64) if votes[b] > 0)


def kernel_simhash(texts, langs):
    tokens = token_text(pa.array(texts))
    cp, offsets = codepoints(tokens)
    modes = np.array([kernels.CHARS if lang == "zh" else kernels.WORDS for lang in langs], np.int64)
    return tokens.to_pylist(), kernels.weighted_simhash(cp, offsets[:-1], offsets[1:], modes, 2, 2)


def test_kernel_equals_reference(en_articles, zh_articles):
    texts = [a["text"] for a in en_articles[:5]] + [a["text"] for a in zh_articles[:5]] + ["", "x"]
    langs = ["en"] * 5 + ["zh"] * 5 + ["en", "zh"]
    tokens, sims = kernel_simhash(texts, langs)
    for token, lang, value in zip(tokens, langs, sims, strict=True):
        assert int(value) == simhash_reference(token, lang)


def test_small_edit_small_distance_distinct_texts_far(en_articles):
    a = next(art["text"] for art in en_articles if len(art["text"].split()) >= 300)
    words = a.split()
    words[len(words) // 2] = "zebra"
    _, sims = kernel_simhash([a, " ".join(words), en_articles[2]["text"]], ["en"] * 3)
    assert hamming(sims[:1], sims[1:2])[0] <= 3
    assert hamming(sims[:1], sims[2:3])[0] > 12


def test_bands_pigeonhole():
    rng = np.random.default_rng(1)
    base = rng.integers(0, 2**63, 500, dtype=np.uint64)
    flips = np.zeros(500, np.uint64)
    for i in range(500):
        for bit in rng.choice(64, 3, replace=False):
            flips[i] |= np.uint64(1) << np.uint64(bit)
    other = base ^ flips
    assert (hamming(base, other) == 3).all()
    assert (bands(base) == bands(other)).any(axis=1).all()

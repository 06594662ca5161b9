"""Word segmentation (jieba-compatible, via rjieba) and the shingle definitions.

Shingles are defined over ``token_text`` (words separated by single spaces):

* Chinese: character n-grams (default 5) over the text with spaces removed;
* English: word n-grams (default 3), each shingle the words joined by one space.

A non-empty text with fewer units than n yields one shingle: the whole text. The compiled kernels
in ``fingerprint.kernels`` implement exactly these definitions; ``shingles`` is the readable reference.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.normalize.text import as_string_array


def segment_words(values: pa.Array, mask: np.ndarray) -> pa.StringArray:
    """Rows in ``mask`` re-written as jieba words joined by spaces (rjieba: same output, Rust speed)."""
    import rjieba

    texts = as_string_array(values).to_pylist()
    for i in np.flatnonzero(mask):
        words = rjieba.cut(texts[i])
        texts[i] = " ".join(w for w in words if w.strip())
    return pa.array(texts, pa.string())


def shingles(text: str, lang: str, zh_chars: int = 5, en_words: int = 3) -> list[str]:
    """Reference shingling of one token text (slow; tests and interoperability with datasketch)."""
    if lang == "zh":
        chars = text.replace(" ", "")
        if not chars:
            return []
        width = min(zh_chars, len(chars))
        return [chars[i : i + width] for i in range(len(chars) - width + 1)]
    words = text.split()
    if not words:
        return []
    width = min(en_words, len(words))
    return [" ".join(words[i : i + width]) for i in range(len(words) - width + 1)]

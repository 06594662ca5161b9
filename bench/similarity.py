"""The bench's true similarity of two documents: Jaccard of character 5-grams of the folded text.

One measure for both languages, and the one a reader's sense of "the same article" tracks best
under typos: a wrong character breaks at most five 5-grams, where it breaks every word n-gram that
contains the word. The text is ``bench.corpus.reference_text`` (NFKC, lower case, punctuation to
spaces, whitespace collapsed) with the spaces removed, so spacing and punctuation noise do not count.
The word-3-gram / char-5-gram measure of ``bench.corpus.doc_shingles`` stays as a second column
(``true_jaccard_words``) so results stay comparable with earlier runs of the bench.
"""

from __future__ import annotations

from bench.corpus import jaccard, reference_text

CHAR_GRAM = 5


def char_text(title: str | None, content: str | None) -> str:
    return reference_text(title, content).replace(" ", "")


def char_shingles(title: str | None, content: str | None, n: int = CHAR_GRAM) -> set[str]:
    """Character n-grams of the folded, space-free text ({text} when shorter than n)."""
    text = char_text(title, content)
    if len(text) <= n:
        return {text}
    return {text[i : i + n] for i in range(len(text) - n + 1)}


def char_jaccard(a: tuple[str | None, str | None], b: tuple[str | None, str | None]) -> float:
    """True Jaccard of two (title, content) documents on character 5-grams."""
    return jaccard(char_shingles(*a), char_shingles(*b))

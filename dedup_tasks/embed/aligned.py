"""Sentence-aligned confirmation of a rewrite candidate: how well each sentence of the newer text
finds a counterpart in the earlier one.

One head embedding of a whole document saturates: in Chinese two question lists on one topic score
0.97+ whether or not they ask the same things, and in English a same-topic story that says something
else scores like a rewrite (docs/semantic.md). A rewrite keeps its story sentence by sentence (merged,
split or reordered, but each statement is somewhere), a same-topic text does not. So both texts are
cut into sentences (at most ``max_sentences``; a full stop after an abbreviation or an initial ends
none; long ones cut into ``max_chars`` pieces, Latin ones at ``max_latin_chars``, so an unpunctuated
run still gives several), every sentence is embedded (short texts, batched: a few dozen
tokens each), and the pair's score is the mean over the newer's sentences of the best cosine to any
sentence of the earlier one. Only the sketch candidates are scored this way; it never runs on the
near-miss path.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

# Sentence ends: Latin ".!?;" before a space (closing quotes and brackets after the mark belong to the
# sentence: 'effort." A 32-year-old ...' is two), CJK full stops/marks (and their closing quotes)
# anywhere, line breaks.
_END = re.compile(r"[.!?;][\"'”’)\]]*\s+|[。！？；][”’」』）]*|\n+")
# A full stop after these (or after an initial, "U.S.", "J.C.") ends no sentence: split there, a news
# sentence falls into pieces ("President George W." / "Bush said ...") that are no one's counterpart.
_ABBREVIATIONS = frozenset(
    [
        "mr", "mrs", "ms", "dr", "prof", "sen", "rep", "gov", "gen", "col", "lt", "sgt", "capt", "rev", "st", "mt", "ft",
        "jr", "sr", "inc", "corp", "co", "ltd", "bros", "vs", "etc",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    ]
)
_INITIALS = re.compile(r"(?:[A-Za-z]\.)*[A-Za-z]")


_FOLD = re.compile(r"[\W_]+", re.UNICODE)


def punctuated_text(title: str | None, content: str | None, near_text: str | None, max_chars: int = 2000) -> str:
    """The text sentences are cut from: the document's own lines (title, then content), punctuation
    kept, without the lines its near-duplicate view lost (site template lines).

    ``_near_text`` is folded (lower case, punctuation to spaces), so the sentence splitter finds no
    sentence end in it and cuts 120-character pieces at random places instead (measured: the
    aligned score on the planted crawl at en recall 0.27 against 0.61 on the same stories punctuated).
    A raw line is kept when its folded form is in the view (``near_text`` None: every line). A title
    the body opens with is left out: it would be the body's first sentence twice, once cut short."""
    heading = _kept_lines(title, near_text, max_chars)
    body = _kept_lines(content, near_text, max_chars)
    if heading and body and _opens_with(body[0][1], " ".join(f for _, f in heading)):
        heading = []
    text = "\n".join(line for line, _ in heading + body)
    return text[:max_chars] if max_chars and max_chars > 0 else text


def _opens_with(folded: str, head: str) -> bool:
    """``folded`` starts with the words of ``head`` (a Latin word is not cut: "cat" does not open "catalog")."""
    if not folded.startswith(head):
        return False
    return len(folded) == len(head) or folded[len(head)] == " " or not head[-1].isascii()


def _kept_lines(text: str | None, near_text: str | None, max_chars: int) -> list[tuple[str, str]]:
    """(line, folded line) of ``text`` whose folded form is in the view, up to ``max_chars``."""
    kept, size = [], 0
    for line in (text or "").splitlines():
        folded = _FOLD.sub(" ", unicodedata.normalize("NFKC", line).lower()).strip()
        if folded and (near_text is None or folded in near_text):
            kept.append((line.strip(), folded))
            size += len(kept[-1][0]) + 1
            if max_chars and size >= max_chars:
                break
    return kept


def sentences(text: str, max_sentences: int = 8, max_chars: int = 120, min_chars: int = 4, max_latin_chars: int = 400) -> list[str]:
    """The first ``max_sentences`` sentences of ``text``; a sentence longer than ``max_chars`` is cut
    into pieces of about that many characters (at a space where there is one). A Latin-script sentence
    (mostly ASCII) is cut at ``max_latin_chars`` instead: an English news sentence is ~120 characters
    (~30 tokens), and cut at 120 a third of MRPC's fell into halves that align with no one."""
    out: list[str] = []
    for part in _split(text or ""):
        part = part.strip()
        latin = len(part.encode("ascii", "ignore")) > 0.8 * len(part)
        limit = max(max_chars, max_latin_chars) if latin else max_chars
        while len(part) > limit:
            cut = part.rfind(" ", limit // 2, limit)
            cut = cut if cut > 0 else limit
            out.append(part[:cut].strip())
            part = part[cut:].strip()
        if len(part) >= min_chars:
            out.append(part)
        if len(out) >= max_sentences:
            break
    return [s for s in out if len(s) >= min_chars][:max_sentences]


def _split(text: str) -> list[str]:
    """``text`` cut at its sentence ends; a full stop ends a sentence unless it closes an abbreviation
    or an initial. (A lower-case word after it is no sign: a third of STS-B's sentences start so.)"""
    parts, start = [], 0
    for m in _END.finditer(text):
        if m.group()[0] == ".":
            word = text[max(text.rfind(" ", start, m.start()) + 1, start) : m.start()].lstrip("\"'([")
            number_sign = word.lower() == "no" and text[m.end() : m.end() + 1].isdigit()  # "ranked No. 121"
            if word.lower() in _ABBREVIATIONS or _INITIALS.fullmatch(word) or number_sign:
                continue
        end = m.start() if m.group()[0] == "\n" else m.start() + len(m.group().rstrip())  # marks stay with their sentence
        parts.append(text[start:end])
        start = m.end()
    parts.append(text[start:])
    return parts


def aligned_scores(embed, newer: list[str], earlier: list[str], max_sentences: int = 8, max_chars: int = 120) -> np.ndarray:
    """Per pair (newer[i], earlier[i]): mean over the sentences of the text with fewer of them (the
    newer's on a tie) of the best cosine to a sentence of the other (-1 where either has no
    sentence). ``embed(texts)`` -> L2-normalized rows.

    The shorter side: a headline retold inside a long article has all of its statements there, while
    most of the article's sentences have no counterpart in the headline (docs/semantic.md, "Confirmer").
    Every distinct sentence is embedded once, in one call: texts shared by several pairs cost nothing
    more."""
    out = np.full(len(newer), -1.0)
    for i, _, _, sim in _alignments(embed, newer, earlier, max_sentences, max_chars):
        out[i] = float(sim.max(axis=1).mean() if sim.shape[0] <= sim.shape[1] else sim.max(axis=0).mean())
    return out


def aligned_pairs(
    embed, newer: list[str], earlier: list[str], max_sentences: int = 8, max_chars: int = 120
) -> list[tuple[int, str, str, float]]:
    """The alignment ``aligned_scores`` averages, pair by pair: (i, a sentence of newer[i], its best
    counterpart in earlier[i], their cosine), for a pair model that reads the two sentences together."""
    return [
        (i, s, b[int(sim[r].argmax())], float(sim[r].max()))
        for i, a, b, sim in _alignments(embed, newer, earlier, max_sentences, max_chars)
        for r, s in enumerate(a)
    ]


def _alignments(embed, newer: list[str], earlier: list[str], max_sentences: int, max_chars: int):
    """Per pair with sentences on both sides: (i, newer's sentences, earlier's, their cosine matrix)."""
    split_new, split_old, index, vec = embedded_sentences(embed, newer, earlier, max_sentences, max_chars)
    for i, (a, b) in enumerate(zip(split_new, split_old, strict=True)):
        if a and b:
            yield i, a, b, vec[[index[s] for s in a]] @ vec[[index[s] for s in b]].T


def embedded_sentences(
    embed, newer: list[str], earlier: list[str], max_sentences: int = 8, max_chars: int = 120
) -> tuple[list[list[str]], list[list[str]], dict[str, int], np.ndarray]:
    """Each text's sentences and one embedding matrix holding every distinct sentence once (one call of
    ``embed``): (newer's sentences per text, earlier's, sentence -> row, the L2-normalized rows)."""
    split_new = [sentences(t, max_sentences, max_chars) for t in newer]
    split_old = [sentences(t, max_sentences, max_chars) for t in earlier]
    index: dict[str, int] = {}
    for parts in (*split_new, *split_old):
        for s in parts:
            index.setdefault(s, len(index))
    vec = np.asarray(embed(list(index)), np.float32) if index else np.zeros((0, 0), np.float32)
    return split_new, split_old, index, vec

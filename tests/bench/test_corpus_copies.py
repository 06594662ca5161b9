"""bench.corpus_copies: which later originals retell an earlier story (the corpus_copy label)."""

from __future__ import annotations

from bench.corpus_copies import (
    find_corpus_copies,
    gram_hashes,
    lede,
    reviewed_pairs,
    reviewed_same_story,
    story_text,
)

STORY = (
    "Ferruzzi Finanziaria said it would raise its stake in the sugar group to 51 pct by buying shares "
    "from minority holders over the next three months. The company said the purchase would be financed "
    "from its own resources and a bank credit line. Analysts in Milan said the move was expected and "
    "would strengthen the group's position in the European sugar market ahead of the new season. "
    "Shares in the sugar group rose sharply on the Milan bourse after the announcement on Tuesday."
)


def _texts(*bodies: str) -> list[str]:
    return [story_text(None, b) for b in bodies]


def test_a_trimmed_retelling_is_a_copy_of_the_earlier() -> None:
    trimmed = STORY.rsplit(". ", 1)[0] + "."  # the last sentence cut
    assert find_corpus_copies(_texts(STORY, STORY[:120]), [0, 1], [True, True]) == []  # a lede alone: J < 0.4
    other = "A quite different story about grain exports from the United States to the Soviet Union " * 3
    texts = _texts(STORY, other, trimmed)
    found = find_corpus_copies(texts, [0, 1, 2], [True, True, True])
    assert [(c.later, c.earlier) for c in found] == [(2, 0)]
    assert found[0].covers_later == 1.0 and found[0].covers_earlier < 1.0
    # Crawl order decides which one is the copy; only eligible texts may be relabelled.
    assert [(c.later, c.earlier) for c in find_corpus_copies(texts, [2, 1, 0], [True, True, True])] == [(0, 2)]
    assert find_corpus_copies(texts, [0, 1, 2], [True, True, False]) == []


def test_template_reports_with_other_figures_or_names_are_not_copies() -> None:
    figures = STORY.replace("51 pct", "49 pct")
    names = STORY.replace("Ferruzzi Finanziaria", "Montedison Holding").replace("Milan", "Turin")
    assert find_corpus_copies(_texts(STORY, figures), [0, 1], [True, True]) == []
    # Another company in the same sentences: short runs only, so it is the lede's names that refuse it.
    ledes = [lede(STORY.split(". ")[0]), lede(names.split(". ")[0])]
    assert find_corpus_copies(_texts(STORY, names), [0, 1], [True, True], ledes) == []
    assert len(find_corpus_copies(_texts(STORY, names), [0, 1], [True, True])) == 1
    # The same story with one more sentence is a copy: the difference is a passage.
    longer = STORY + " A spokesman declined to comment on the price paid for the shares by the company."
    assert [(c.later, c.earlier) for c in find_corpus_copies(_texts(STORY, longer), [0, 1], [True, True])] == [(1, 0)]


def test_gram_hashes_are_deterministic_and_positional() -> None:
    h = gram_hashes("abcdefabcde")
    assert len(h) == 7 and h[0] == h[6] and len(set(h.tolist())) == 6
    assert (gram_hashes("abcdefabcde") == h).all()


def test_reviewed_pairs_are_unordered_and_a_bad_row_is_refused_by_its_line(tmp_path) -> None:
    import pytest

    path = tmp_path / "reviewed.csv"
    path.write_text(
        "later_article,earlier_article,verdict,why,found\n"
        "reuters-2,reuters-1,same_story,a correction,test\n"
        "reuters-3,reuters-1,distinct,another company,test\n",
        encoding="utf-8",
    )
    pairs = reviewed_pairs(path)
    assert pairs[frozenset(("reuters-1", "reuters-2"))] == ("same_story", "a correction")
    assert pairs[frozenset(("reuters-1", "reuters-3"))] == ("distinct", "another company")
    path.write_text(path.read_text(encoding="utf-8") + "reuters-4,reuters-4,same_story,itself,test\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"reviewed.csv:4: expected two article ids"):
        reviewed_pairs(path)


def test_the_shipped_review_holds_both_verdicts_with_a_reason_each() -> None:
    pairs = reviewed_pairs()
    verdicts = [v for v, _ in pairs.values()]
    assert verdicts.count("same_story") > 0 and verdicts.count("distinct") > 0
    assert all(why for _, why in pairs.values())
    assert set(reviewed_same_story()) == {p for p, (v, _) in pairs.items() if v == "same_story"}

"""Look-alikes and page updates (docs/near-copies.md "Short texts", "Additions", "Page identity"): a
short page is judged on what differs, an appended article is no copy under any URL, and a page is one
page over either scheme."""

from __future__ import annotations

from tests.layers.test_near_copies import decisions, long_article

LEAD_IN = "BRIEF via Reuters UK energy (automated summary, not reviewed by an editor): "


def test_a_short_look_alike_behind_a_site_lead_in_is_kept() -> None:
    d = decisions([
        {"doc_id": "a", "url": "https://s.com/a", "content": LEAD_IN + "Centrica wins licence"},
        {"doc_id": "b", "url": "https://s.com/b", "content": LEAD_IN + "Drax profit falls"},
        {"doc_id": "c", "url": "https://s.com/c", "content": "【二手转让】重庆同城，个人闲置，价格可议，非诚勿扰，有意私聊13912345678：九成新儿童自行车一辆", "lang": "zh"},
        {"doc_id": "e", "url": "https://s.com/e", "content": "【二手转让】重庆同城，个人闲置，价格可议，非诚勿扰，有意私聊13912345678：全新电饭煲便宜出", "lang": "zh"},
    ])  # fmt: skip
    assert d["b"]["action"] == "keep", d["b"]["reason"]
    assert d["e"]["action"] == "keep", d["e"]["reason"]


def test_a_short_typo_copy_is_dropped() -> None:
    text = LEAD_IN + "Centrica wins licence"
    d = decisions([
        {"doc_id": "a", "url": "https://s.com/a", "content": text},
        {"doc_id": "b", "url": "https://m.com/b", "content": text.replace("licence", "licnce").replace("automated", "autmated")},
    ])  # fmt: skip
    assert d["b"]["action"] == "drop" and d["b"]["matched_doc_id"] == "a", d["b"]["reason"]


def _two_articles(en_articles) -> tuple[dict, dict]:
    first = long_article(en_articles, 200)
    second = next(a for a in en_articles if a is not first and 0.7 < len(a["text"]) / len(first["text"]) < 1.4)
    return first, second


def _refetch(first: dict, content: str, old_url: str, new_url: str) -> dict:
    """The decision on a page with ``first``'s title and ``content`` at ``new_url``, fetched after
    ``first`` at ``old_url``."""
    return decisions([
        {"doc_id": "old", "url": old_url, "title": first["title"], "content": first["text"]},
        {"doc_id": "new", "url": new_url, "title": first["title"], "content": content},
    ])["new"]  # fmt: skip


def test_an_appended_update_under_https_is_kept(en_articles) -> None:
    first, second = _two_articles(en_articles)
    new = _refetch(first, first["text"] + "\n" + second["text"], "http://news.site.com:80/c/x/", "https://news.site.com/c/x")
    assert new["action"] == "keep"
    assert "update" in new["reason"]  # one page over either scheme: L1 sees the update


def test_an_unchanged_refetch_under_https_is_dropped_by_l1(en_articles) -> None:
    first = long_article(en_articles, 200)
    new = _refetch(first, first["text"], "http://news.site.com:80/c/x/", "https://NEWS.site.com/c/x#top")
    assert new["action"] == "drop" and new["layer"] == "url"


def test_an_appended_article_under_another_url_is_kept(en_articles) -> None:
    first, second = _two_articles(en_articles)
    new = _refetch(first, first["text"] + "\n" + second["text"], "https://a.com/story", "https://b.com/other")
    assert new["action"] == "keep", new["reason"]


def test_a_two_sentence_insertion_is_dropped(en_articles) -> None:
    first = long_article(en_articles, 200)
    sentences = [s for a in en_articles for s in a["text"].replace("\n", " ").split(". ") if 80 < len(s) < 200][:2]
    paragraphs = first["text"].split("\n")
    middle = max(1, len(paragraphs) // 2)
    inserted = "\n".join(paragraphs[:middle] + [". ".join(sentences) + "."] + paragraphs[middle:])
    new = _refetch(first, inserted, "https://a.com/story", "https://b.com/copy")
    assert new["action"] == "drop" and new["matched_doc_id"] == "old", new["reason"]

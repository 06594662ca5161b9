"""Look-alikes and page updates (docs/near-copies.md "Short texts", "Additions", "Page identity"): a
short page is judged on what differs, an appended article is no copy under any URL, and a page is one
page over either scheme."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.candidates import _replaced_chars
from dedup_tasks.layers.near import short_texts
from dedup_tasks.prepare import prepare
from tests.layers.test_near_copies import CONFIG, decisions, long_article, make_batch, run_hours

LEAD_IN = "BRIEF via Reuters UK energy (automated summary, not reviewed by an editor): "
ZH_LEAD_IN = "【重庆头条快讯】本条消息由长江快报自动推送，未经编辑审核，仅供参考："
# Items of one site whose 5-grams differ only in runs as short as two typos' (the verifier's run rule
# took them for copies): other words in the same places, the headline's end replaced.
LOOK_ALIKES = (
    (ZH_LEAD_IN + "蚂蚁借呗可以永久删除", ZH_LEAD_IN + "蚂蚁借呗可以短期借款吗", "zh"),
    (ZH_LEAD_IN + "不是本人身份证可以开通花呗嘛", ZH_LEAD_IN + "同一张身份证可以开通几个借呗", "zh"),
    (LEAD_IN + "Foster said the", LEAD_IN + "Snyder said it may", "en"),
    (LEAD_IN + "The company said if it", LEAD_IN + "The company said the", "en"),
)


def _replaced(a: str, b: str, lang: str) -> int:
    batch = prepare(make_batch([{"doc_id": "a", "url": "https://a.com/", "content": a, "lang": lang},
                                {"doc_id": "b", "url": "https://b.com/", "content": b, "lang": lang}]), DedupConfig())  # fmt: skip
    texts = short_texts(batch, np.arange(2), DedupConfig())
    return int(_replaced_chars(texts.cp, texts.offsets, 0, 1)[0])


def test_a_short_pair_counts_the_characters_both_sides_replaced() -> None:
    text = LEAD_IN + "Oil prices rise on supply fears, traders said"
    assert _replaced(text, text.replace("supply", "suppli"), "en") == 1
    assert _replaced(text, text.replace("prices", "prics").replace("traders", "tradres"), "en") <= 2
    # What one side alone has is a cut or an insertion, not a replacement.
    assert _replaced(text, text[:-12], "en") == 0
    assert _replaced(text, text.replace("rise", "rise sharply"), "en") == 0
    # Paragraphs swapped and the last cut: the moved one is held elsewhere in the other text.
    report = "Net loss 347,849 vs loss 103,489\n\nShr loss 12 cts vs loss five cts\n\nSales 222,697 vs 150,534"
    assert _replaced("Shr loss 12 cts vs loss five cts\n\nNet loss 347,849 vs loss 103,489", report, "en") == 0
    # A letter the two headlines share by chance does not split what they replaced ("ifit" / "the").
    assert _replaced(LEAD_IN + "The company said if it", LEAD_IN + "The company said the", "en") == 3
    assert _replaced(ZH_LEAD_IN + "蚂蚁借呗可以永久删除", ZH_LEAD_IN + "蚂蚁借呗可以短期借款吗", "zh") == 4


@pytest.mark.parametrize("across_hours", [False, True])
def test_short_look_alikes_that_differ_in_short_runs_are_kept(tmp_path, across_hours) -> None:
    for i, (first, second, lang) in enumerate(LOOK_ALIKES):
        rows = [{"doc_id": "a", "url": "https://s.com/a", "content": first, "lang": lang},
                {"doc_id": "b", "url": "https://s.com/b", "content": second, "lang": lang}]  # fmt: skip
        root = tmp_path / str(i)
        config = DedupConfig(layers=CONFIG.layers, root=str(root))
        got, stats = run_hours([rows[:1], rows[1:]] if across_hours else [rows], root, config)[-1]
        assert got["b"]["action"] == "keep", (second, got["b"]["reason"])
        # Kept on the texts' characters: the candidate was verified, not missed.
        assert got["b"]["suspect_doc_id"] == "a" or not across_hours or stats["registry_verified_on_text"] >= 1


@pytest.mark.parametrize("across_hours", [False, True])
def test_short_typo_copies_of_a_lead_in_page_are_dropped_in_the_batch_and_across_hours(tmp_path, across_hours) -> None:
    for i, (first, _, lang) in enumerate(LOOK_ALIKES):
        typo = first[:-3] + ("侯" if lang == "zh" else "x") + first[-2:]
        rows = [{"doc_id": "a", "url": "https://s.com/a", "content": first, "lang": lang},
                {"doc_id": "b", "url": "https://m.com/b", "content": typo, "lang": lang}]  # fmt: skip
        root = tmp_path / str(i)
        config = DedupConfig(layers=CONFIG.layers, root=str(root))
        got, _ = run_hours([rows[:1], rows[1:]] if across_hours else [rows], root, config)[-1]
        assert got["b"]["action"] == "drop" and got["b"]["matched_doc_id"] == "a", (typo, got["b"]["reason"])


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


def test_a_site_lead_in_is_a_prefix_three_distinct_short_texts_of_the_host_share() -> None:
    from dedup_tasks.fingerprint.leadin import LEADIN_MIN_CHARS, site_leadins

    items = [LEAD_IN + h for h in ("Centrica wins licence", "Drax profit falls", "SSE cuts outlook")]
    texts = [*items, items[0], LEAD_IN + "Centrica wins", "Short one", "Short two"]
    sites = np.array([0, 0, 0, 0, 1, 2, 2])
    got = site_leadins(pa.array(texts), sites, np.ones(len(texts), bool))
    # The three items share the lead-in (and no more); a refetch of one counts once.
    assert got[:4].tolist() == [len(LEAD_IN)] * 4
    # One page of another host, or two of a third, make no lead-in; nor a shared prefix under the minimum.
    assert got[4:].tolist() == [0, 0, 0]
    assert len("Short ") < LEADIN_MIN_CHARS
    two = site_leadins(pa.array(items[:2] + [items[0]]), np.zeros(3, np.int64), np.ones(3, bool))
    assert two.tolist() == [0, 0, 0]


@pytest.mark.parametrize("across_hours", [False, True])
def test_a_headline_that_is_a_cut_of_another_behind_a_site_lead_in_is_kept(tmp_path, across_hours) -> None:
    site = [{"doc_id": f"s{i}", "url": f"https://s.com/{i}", "content": LEAD_IN + h}
            for i, h in enumerate(("Drax profit falls", "SSE cuts outlook"))]  # fmt: skip
    first = {"doc_id": "a", "url": "https://s.com/a", "content": LEAD_IN + "The company also said"}
    cut = {"doc_id": "b", "url": "https://s.com/b", "content": LEAD_IN + "The company also"}
    # A typo repost of the first on a mirror that reposts the site's items is still a copy.
    mirror = [{"doc_id": f"m{i}", "url": f"https://m.com/{i}", "content": LEAD_IN + h}
              for i, h in enumerate(("Drax profit fals", "SSE cuts outlok"))]  # fmt: skip
    typo = {"doc_id": "t", "url": "https://m.com/t", "content": LEAD_IN + "The compamy also said"}
    # A lead-in is the batch's: the site's items of the newer hour make it there.
    later = [{"doc_id": f"l{i}", "url": f"https://s.com/l{i}", "content": LEAD_IN + h}
             for i, h in enumerate(("Ofgem caps tariffs", "BP sells stake"))]  # fmt: skip
    hours = [[first, *site], [cut, typo, *later, *mirror]] if across_hours else [[first, *site, cut, typo, *mirror]]
    root = tmp_path / "run"
    got, _ = run_hours(hours, root, DedupConfig(layers=CONFIG.layers, root=str(root)))[-1]
    assert got["b"]["action"] == "keep", got["b"]["reason"]
    assert got["t"]["action"] == "drop" and got["t"]["matched_doc_id"] == "a", got["t"]["reason"]
    assert all(got[f"m{i}"]["action"] == "drop" for i in range(2))

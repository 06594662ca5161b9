"""The synthetic crawl generator: contract, determinism, and that each planted kind is what it claims."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from bench.corpus import (
    Article,
    doc_shingles,
    exact_key,
    fold_corpus_duplicates,
    jaccard,
    load_corpus,
    pair_files,
    reference_text,
    text_shingles,
)
from bench.generate import (
    CRAWL_SCHEMA,
    DUPLICATE_KINDS,
    KINDS,
    MUST_KEEP_KINDS,
    TRUTH_SCHEMA,
    GeneratedCrawl,
    Mix,
    generate_crawl,
    main,
    noisy_url,
    page_key,
)
from bench.similarity import char_shingles

from .conftest import DOCS_PER_HOUR, HOURS


@pytest.fixture(scope="module")
def frame(crawl: GeneratedCrawl) -> pd.DataFrame:
    """Crawl rows joined with their truth, indexed by doc_id."""
    docs = crawl.crawl().set_index("doc_id")
    truth = crawl.truth().set_index("doc_id").drop(columns="lang")
    assert len(docs) == len(truth)
    return docs.join(truth, how="inner")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- contract -----------------------------------------------------------------------------------


def test_partitions_follow_the_input_contract(crawl: GeneratedCrawl) -> None:
    assert crawl.batch_ids == ("2026-12-01T00", "2026-12-01T01")
    assert [p.relative_to(crawl.root).as_posix() for p in crawl.partitions] == [
        "crawl/dt=2026-12-01/hour=00/part-00000.parquet",
        "crawl/dt=2026-12-01/hour=01/part-00000.parquet",
    ]
    for h, path in enumerate(crawl.partitions):
        table = pq.read_table(path)
        assert table.schema.equals(CRAWL_SCHEMA, check_metadata=False)
        df = table.to_pandas()
        assert len(df) == DOCS_PER_HOUR
        start = pd.Timestamp("2026-12-01", tz="UTC") + pd.Timedelta(hours=h)
        assert df["fetched_at"].between(start, start + pd.Timedelta(hours=1), inclusive="left").all()
        assert df["fetched_at"].is_monotonic_increasing  # written in crawl order
        assert set(df["lang"]) == {"zh", "en"}
        assert df["doc_id"].notna().all() and df["url"].notna().all() and df["content"].notna().all()
        assert df["site"].str.len().gt(0).all()


def test_truth_schema_and_one_row_per_doc(crawl: GeneratedCrawl, frame: pd.DataFrame) -> None:
    truth = pq.read_table(crawl.truth_path)
    assert truth.schema.equals(TRUTH_SCHEMA, check_metadata=False)
    assert truth.num_rows == crawl.n_docs == DOCS_PER_HOUR * HOURS
    t = truth.to_pandas()
    assert t["doc_id"].is_unique
    assert set(t["kind"]) <= set(KINDS)
    assert (t["is_duplicate"] == t["kind"].isin(DUPLICATE_KINDS)).all()
    assert (t["must_keep"] == t["kind"].isin(MUST_KEEP_KINDS)).all()
    assert (t["batch_id"] == t["hour"].map(dict(enumerate(crawl.batch_ids)))).all()
    assert (frame["batch_id"].map(crawl.batch_ids.index) == frame["hour"]).all()


def test_doc_ids_unique_across_the_crawl(crawl: GeneratedCrawl) -> None:
    ids = pd.concat([pq.read_table(p).to_pandas()["doc_id"] for p in crawl.partitions])
    assert ids.is_unique
    assert len(ids) == DOCS_PER_HOUR * HOURS


def test_clusters(frame: pd.DataFrame) -> None:
    kind = frame["kind"]
    roots = frame[~frame["is_duplicate"]]
    assert (roots.index == roots["cluster_id"]).all()  # originals and must-keep docs: own cluster
    assert (
        roots["source_doc_id"].isna().sum()
        == (kind.isin(["original", "template_distinct", "short_distinct", "short_leadin"])).sum()
        + (kind.eq("list_page") & frame["edits"].map(len).eq(0)).sum()  # a list's first page
    )
    dups = frame[frame["is_duplicate"]]
    # A repost of a short lead-in page names that page's cluster.
    assert frame.loc[dups["cluster_id"], "kind"].isin(["original", "short_leadin"]).all()
    assert (frame.loc[dups["source_doc_id"], "cluster_id"].values == dups["cluster_id"].values).all()
    assert dups.index.isin(dups["cluster_id"]).sum() == 0


def test_derived_docs_fetched_after_their_source(frame: pd.DataFrame) -> None:
    derived = frame[frame["source_doc_id"].notna()]
    assert len(derived) > 0
    mine = derived["fetched_at"].to_numpy(dtype="datetime64[us]")
    theirs = frame.loc[derived["source_doc_id"], "fetched_at"].to_numpy(dtype="datetime64[us]")
    assert (mine > theirs).all()


def test_kind_fractions_as_configured(frame: pd.DataFrame) -> None:
    expected = Mix().counts(DOCS_PER_HOUR)
    for _, hour in frame.groupby("hour"):
        got = Counter(hour["kind"])
        for kind in KINDS:
            if kind in ("corpus_dup", "near_copy"):
                continue  # missing natural duplicates are planted as near copies instead
            assert got[kind] == expected[kind], kind
        assert got["corpus_dup"] + got["near_copy"] == expected["corpus_dup"] + expected["near_copy"]
    assert Counter(frame["kind"])["corpus_dup"] > 0  # the mini corpus holds natural duplicates
    zh = (frame["lang"] == "zh").mean()
    assert 0.35 < zh < 0.65


def test_cross_hour_sources_exist(frame: pd.DataFrame) -> None:
    derived = frame[(frame["hour"] == 1) & frame["source_doc_id"].notna()]
    share = (frame.loc[derived["source_doc_id"], "hour"].values == 0).mean()
    assert 0.15 < share < 0.5  # Mix.cross_hour = 0.3


# --- per kind -----------------------------------------------------------------------------------


def test_url_repeats_are_the_same_page_spelled_differently(frame: pd.DataFrame) -> None:
    rep = frame[frame["kind"] == "url_repeat"]
    src = frame.loc[rep["source_doc_id"]]
    assert len(rep) > 0
    assert (rep["url"].values != src["url"].values).all()
    assert [page_key(u) for u in rep["url"]] == [page_key(u) for u in src["url"]]
    assert (rep["content"].values == src["content"].values).all()
    assert (rep["title"].fillna("").values == src["title"].fillna("").values).all()
    assert (rep["true_jaccard"] == 1.0).all()
    assert all(all(e.startswith("url:") for e in edits) and len(edits) for edits in rep["edits"])


def test_url_updates_keep_the_page_and_rewrite_the_content(frame: pd.DataFrame) -> None:
    upd = frame[frame["kind"] == "url_update"]
    src = frame.loc[upd["source_doc_id"]]
    assert len(upd) > 0
    assert (src["kind"] == "original").all()
    assert [page_key(u) for u in upd["url"]] == [page_key(u) for u in src["url"]]
    assert (upd["content"].values != src["content"].values).all()
    assert (upd["true_jaccard"] < 0.5).all()
    assert (~upd["is_duplicate"] & upd["must_keep"]).all()
    for (_, u), (_, s) in zip(upd.iterrows(), src.iterrows(), strict=True):
        assert jaccard(doc_shingles(u["title"], u["content"]), doc_shingles(s["title"], s["content"])) < 0.5


def test_exact_copies_normalize_to_their_source(frame: pd.DataFrame) -> None:
    ex = frame[frame["kind"] == "exact_copy"]
    src = frame.loc[ex["source_doc_id"]]
    assert len(ex) > 0
    for (_, e), (_, s) in zip(ex.iterrows(), src.iterrows(), strict=True):
        assert exact_key(e["title"], e["content"]) == exact_key(s["title"], s["content"])
        assert page_key(e["url"]) != page_key(s["url"])
    assert (ex["site"].values != src["site"].values).all()  # under another domain
    assert (ex["content"].values != src["content"].values).any()  # some carry width/space noise


def test_near_copies_record_their_true_jaccard(frame: pd.DataFrame) -> None:
    near = frame[frame["kind"] == "near_copy"]
    assert len(near) > 0
    assert near["true_jaccard"].between(0.5, 1.0).all()
    assert near["true_jaccard"].mean() >= 0.7
    assert (near["true_jaccard"] < 0.9).any() and (near["true_jaccard"] >= 0.9).any()
    for doc_id, row in near.iterrows():
        src = frame.loc[row["source_doc_id"]]
        j = jaccard(char_shingles(row["title"], row["content"]), char_shingles(src["title"], src["content"]))
        assert j == pytest.approx(row["true_jaccard"], abs=1e-6), doc_id
        jw = jaccard(doc_shingles(row["title"], row["content"]), doc_shingles(src["title"], src["content"]))
        assert jw == pytest.approx(row["true_jaccard_words"], abs=1e-6), doc_id
        assert exact_key(row["title"], row["content"]) != exact_key(src["title"], src["content"])
        assert 1 <= len(row["edits"]) <= 3


def test_near_copies_take_one_to_three_edits_in_every_band(frame: pd.DataFrame) -> None:
    near = frame[frame["kind"] == "near_copy"]
    n_edits = near["edits"].map(len)
    assert set(n_edits) == {1, 2, 3}
    assert (near.loc[n_edits == 1, "true_jaccard"] < 0.8).any()  # one strong edit reaches the low bands
    assert (near.loc[n_edits == 3, "true_jaccard"] >= 0.8).any()


def test_typos_are_a_character_rate_in_english() -> None:
    from bench.generate import _typo_chars_en

    text = "the quick brown fox jumps over the lazy dog " * 400
    for rate in (0.003, 0.025):
        typed = _typo_chars_en(text, rate, random.Random(1))
        # Every edit changes a letter's neighbourhood; a word rate of 1% would touch ~0.2% of letters.
        changed = sum(a != b for a, b in zip(text.split(), typed.split(), strict=False)) / len(text.split())
        assert 2 * rate < changed < 8 * rate  # 3.9 letters a word: ~3.9 x rate of the words


def test_list_pages_share_the_template_not_the_entries(frame: pd.DataFrame) -> None:
    pages = frame[frame["kind"] == "list_page"]
    assert len(pages) > 0 and pages["must_keep"].all() and not pages["is_duplicate"].any()
    later = pages[pages["source_doc_id"].notna()]
    assert len(later) > 0
    for _, page in later.iterrows():
        prev = frame.loc[page["source_doc_id"]]
        assert prev["kind"] == "list_page" and prev["site"] == page["site"]
        assert prev["content"].splitlines()[0] == page["content"].splitlines()[0]  # the same intro
        entries = set(page["content"].splitlines()[1:-1]) & set(prev["content"].splitlines()[1:-1])
        assert not entries  # every entry differs
        j = jaccard(char_shingles(page["title"], page["content"]), char_shingles(prev["title"], prev["content"]))
        assert j == pytest.approx(page["true_jaccard"], abs=1e-6)


def test_template_docs_share_long_boilerplate(frame: pd.DataFrame) -> None:
    tpl = frame[frame["kind"] == "template_distinct"]
    assert len(tpl) > 0
    for _, site_docs in tpl.groupby("site"):
        if len(site_docs) < 2:
            continue
        a, b = (set(c.split("\n")) for c in site_docs["content"].iloc[:2])
        shared = sum(len(line) for line in a & b)
        assert shared >= 300  # menus, related links, copyright: as long as a short article
        assert site_docs["content"].iloc[0] != site_docs["content"].iloc[1]
    keys = {exact_key(t, c) for t, c in zip(tpl["title"], tpl["content"], strict=True)}
    assert len(keys) == len(tpl)


def test_short_distinct_docs_are_short_and_distinct(frame: pd.DataFrame) -> None:
    short = frame[frame["kind"] == "short_distinct"]
    assert len(short) > 0
    assert short["content"].str.len().between(20, 120).all()
    keys = {exact_key(t, c) for t, c in zip(short["title"], short["content"], strict=True)}
    assert len(keys) == len(short)
    assert short["title"].isna().any()  # title is nullable in the contract


def test_no_hidden_duplicates_among_non_duplicates(frame: pd.DataFrame) -> None:
    keep = frame[~frame["is_duplicate"]]
    keys = [exact_key(t, c) for t, c in zip(keep["title"], keep["content"], strict=True)]
    assert len(set(keys)) == len(keys)
    assert keep["url"].map(page_key).drop(keep.index[keep["kind"].isin(["url_update", "url_append"])]).is_unique


# --- determinism and CLI --------------------------------------------------------------------------


def test_every_document_names_its_corpus_article(frame: pd.DataFrame) -> None:
    own = frame[frame["kind"].isin(["original", "template_distinct", "corpus_dup", "url_update"])]
    assert own["article_id"].notna().all() and own["article_id"].is_unique  # an article is handed out once
    copies = frame[frame["kind"].isin(["url_repeat", "exact_copy", "near_copy"])]
    leadin_reposts = frame.loc[copies["source_doc_id"], "kind"].values == "short_leadin"
    assert frame.loc[copies.index[leadin_reposts], "article_id"].isna().all()  # a short page has no article
    copies = copies[~leadin_reposts]
    assert len(copies) and (copies["article_id"].values == frame.loc[copies["source_doc_id"], "article_id"].values).all()
    assert frame.loc[frame["kind"].isin(["short_distinct", "short_leadin", "list_page"]), "article_id"].isna().all()


def test_a_pair_of_articles_a_reader_judged_one_story_makes_the_later_a_corpus_copy(
    mini_data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench.generate

    before = generate_crawl(tmp_path / "before", 120, hours=2, seed=3, data_dir=mini_data_dir).truth()
    originals = before[before["kind"] == "original"].sort_values("hour")
    earlier, later = originals.iloc[0], originals.iloc[-1]
    assert earlier["hour"] < later["hour"]
    # The pair is unordered: the file may name the later article first or second.
    monkeypatch.setattr(bench.generate, "reviewed_same_story", lambda: {frozenset((later["article_id"], earlier["article_id"])): "one deal"})
    after = generate_crawl(tmp_path / "after", 120, hours=2, seed=3, data_dir=mini_data_dir).truth().set_index("doc_id")
    copy = after.loc[later["doc_id"]]
    assert copy["kind"] == "corpus_copy" and copy["source_doc_id"] == earlier["doc_id"]
    assert copy["cluster_id"] == earlier["cluster_id"] and list(copy["edits"]) == ["corpus_twin:reviewed: one deal"]
    assert not copy["is_duplicate"] and not copy["must_keep"]  # unjudged: bench.score reports it apart
    assert after.loc[earlier["doc_id"], "kind"] == "original"
    changed = after.index[after["kind"] != before.set_index("doc_id")["kind"]].tolist()
    assert changed == [later["doc_id"]]  # the same documents; one label moved


def test_same_seed_same_bytes(mini_data_dir: Path, tmp_path: Path) -> None:
    a = generate_crawl(tmp_path / "a", 120, hours=2, seed=3, data_dir=mini_data_dir)
    b = generate_crawl(tmp_path / "b", 120, hours=2, seed=3, data_dir=mini_data_dir)
    c = generate_crawl(tmp_path / "c", 120, hours=2, seed=4, data_dir=mini_data_dir)
    assert _files(a.root) == _files(b.root)
    assert _files(a.root)["truth.parquet"] != _files(c.root)["truth.parquet"]
    pd.testing.assert_frame_equal(a.truth(), b.truth())


def test_cli_writes_the_crawl(
    mini_data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    args = [
        "--docs",
        "80",
        "--hours",
        "1",
        "--seed",
        "1",
        "--out",
        str(out),
        "--data-dir",
        str(mini_data_dir),
    ]
    assert main([*args, "--mix", "near_copy=0.3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["docs"] == 80 and summary["batches"] == ["2026-12-01T00"]
    assert (out / "crawl/dt=2026-12-01/hour=00/part-00000.parquet").exists()
    manifest = json.loads((out / "generate_manifest.json").read_text())
    assert manifest["mix"]["near_copy"] == 0.3
    # Rerunning into the same directory replaces the earlier run.
    assert main(args) == 0
    assert len(pd.read_parquet(out / "truth.parquet")) == 80


def test_refuses_to_replace_a_foreign_crawl_dir(mini_data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "crawl").mkdir()
    with pytest.raises(FileExistsError):
        generate_crawl(tmp_path, 50, data_dir=mini_data_dir)


def test_mix_validation() -> None:
    with pytest.raises(ValueError):
        Mix(original=0.9)
    mix = Mix.from_overrides({"near_copy": 0.3})
    assert mix.original == pytest.approx(Mix().original - 0.1)
    with pytest.raises(ValueError):
        Mix.from_overrides({"bogus": 0.1})
    assert sum(Mix().counts(1234).values()) == 1234


# --- URLs, corpus and reference shingling ---------------------------------------------------------


def test_noisy_urls_name_the_same_page() -> None:
    rng = random.Random(0)
    urls = [
        "https://www.example.com/business/2026/12/01/some-story-12345",
        "http://news.example.cn/article.php?id=42&cat=news&page=1",
        "https://example.org/news/20261201/n1234.shtml",
    ]
    for url in urls:
        for _ in range(50):
            noisy, ops = noisy_url(url, rng)
            assert noisy != url and ops
            assert page_key(noisy) == page_key(url)
    assert page_key("http://a.com/x") == page_key("https://a.com/x")  # one page over either scheme (SURT)
    noisy, ops = noisy_url(urls[0], rng, other_scheme=True)
    assert noisy.startswith("http://") and ops[0] == "url:scheme" and page_key(noisy) == page_key(urls[0])
    assert page_key("https://A.com:443/x/?utm_source=t&b=2&a=1#c") == page_key("https://a.com/x?a=1&b=2")
    assert page_key("https://a.com/x?id=1") != page_key("https://a.com/x?id=2")


def test_reference_shingling() -> None:
    zh = text_shingles(reference_text("标题", "深圳地铁将设立ＶＩＰ头等车厢，买双倍票可享坐票。"))
    assert all(isinstance(s, str) and len(s) == 5 for s in zh)
    assert text_shingles(reference_text(None, "深圳 地铁，将设立")) == text_shingles(
        reference_text(None, "深圳地铁将设立")
    )
    en = text_shingles(reference_text("Title", "The Quick, brown fox -- jumps!"))
    assert ("title", "the", "quick") in en and all(len(s) == 3 for s in en)
    assert text_shingles(reference_text(None, "")) == {""}
    assert jaccard({1, 2}, {2, 3}) == pytest.approx(1 / 3)
    assert exact_key("Ａｂｃ", "x  y\n") == exact_key("abc", "x y")


def test_held_out_pair_files_are_never_used(mini_data_dir: Path) -> None:
    names = [p.name for p in pair_files(mini_data_dir, "zh")]
    assert "zh_lcqmc_test.jsonl" not in names and "zh_lcqmc_dev.jsonl" in names
    test_texts = set(pd.read_json(mini_data_dir / "pairs/zh_lcqmc_test.jsonl", lines=True)["text1"])
    dev_texts = set(
        pd.read_json(mini_data_dir / "pairs/zh_lcqmc_dev.jsonl", lines=True)[["text1", "text2"]].stack()
    )
    pool = set(load_corpus(mini_data_dir).sentences["zh"])
    assert not {t for t in test_texts - dev_texts if t in pool or t + "。" in pool}


def test_corpus_duplicates_are_folded() -> None:
    def art(i: str, body: str, title: str = "t") -> Article:
        return Article(id=i, lang="en", title=title, paragraphs=((body,),), origin="test")

    base = " ".join(f"word{i}" for i in range(60)) + "."
    near = base.replace("word30", "changed")
    reps, variants, stats = fold_corpus_duplicates(
        [
            art("a", base),
            art("b", "Something else entirely, a different story here."),
            art("c", base, "other title"),
            art("d", near),
        ]
    )
    assert [a.id for a in reps] == ["a", "b"]
    assert sorted(v.id for v, _ in variants["a"]) == ["c", "d"]
    assert stats["variants"] == 2


def test_sample_source_needs_no_evaluation_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.corpus import SAMPLE_DATA_DIR, resolve_data_dir
    from bench.generate import main

    monkeypatch.setenv("DEDUP_EVAL_DATA", str(tmp_path / "absent"))
    assert resolve_data_dir("auto") == SAMPLE_DATA_DIR
    with pytest.raises(FileNotFoundError, match="DEDUP_EVAL_DATA"):
        resolve_data_dir("eval")
    assert main(["--source", "sample", "--docs", "150", "--hours", "2", "--out", str(tmp_path / "out")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["corpus_source"] == "sample"
    # Every planted kind but corpus_dup (the sample corpus has no natural duplicates).
    assert {k for k, n in summary["kind_counts"].items() if n} == set(KINDS) - {"corpus_dup"}
    truth = pd.read_parquet(tmp_path / "out" / "truth.parquet")
    assert len(truth) == 300


def test_harsh_edits_take_two_to_four_edits_and_denser_typos(mini_data_dir: Path, tmp_path: Path) -> None:
    from bench.generate import HARSH_EDITS

    harsh = generate_crawl(tmp_path / "harsh", 400, seed=3, data_dir=mini_data_dir, mix=HARSH_EDITS)
    truth = pd.read_parquet(harsh.truth_path).set_index("doc_id", drop=False)
    near = truth.query("kind == 'near_copy'")
    near = near[truth.loc[near["source_doc_id"], "kind"].values != "short_leadin"]  # reposts: one small edit
    assert set(near["edits"].map(len)) <= {2, 3, 4} and (near["edits"].map(len) == 4).any()
    with pytest.raises(ValueError):
        Mix(min_edits=3, max_edits=2)
    with pytest.raises(ValueError):
        Mix(typo_rate_min=0.05, typo_rate_max=0.01)

"""Synthetic hourly web crawl with planted duplicates, and its truth file.

``python -m bench.generate --docs 20000 --hours 3 --seed 0 --out DIR`` writes

* ``DIR/crawl/dt=YYYY-MM-DD/hour=HH/part-00000.parquet`` in DESIGN.md's input contract: doc_id
  (unique across the whole crawl), url, title (nullable), content, fetched_at (timestamp[us, UTC],
  inside the hour; a derived document is always fetched after its source), lang, site (passes
  through);
* ``DIR/truth.parquet``: one row per generated document (``TRUTH_SCHEMA``);
* ``DIR/generate_manifest.json``: parameters, kind counts and corpus statistics (no timings, so it is
  as deterministic as the Parquet files).

The same arguments give byte-identical files: every random choice comes from ``random.Random``
instances seeded from ``seed``, and no clock or hash-salted value reaches the output.

Document kinds (fractions per hour, ``Mix``):

===================  ==========  ======================================================================
kind                 duplicate?  how it is made
===================  ==========  ======================================================================
original             no          a never-used article (real corpus first, then sentence recombination)
corpus_dup           yes         a natural duplicate already in the corpora, of an emitted original
url_repeat           yes         the same page refetched: identical title/content, URL with noise
                                 (host case, default port, trailing slash, fragment, reordered
                                 query, utm_*/gclid/fbclid) that canonicalizes to the same page
exact_copy           yes         same title/content on another domain, with whitespace, width or
                                 ASCII case noise that NFKC + case folding + whitespace collapse undo
near_copy            yes         1-3 realistic edits on another domain (typos are a 0.3-2.5%
                                 character rate); a target band of true Jaccard is drawn first and
                                 edit strength adapted until the copy lands in it
template_distinct    no (keep)   a different article under a heavy site template (menus, related
                                 links, copyright lines as long as a short body)
short_distinct       no (keep)   a 20-120 character flash from a shared template, different facts
short_leadin         no (keep)   a page under 100 characters: a site's fixed lead-in (40-75
                                 characters, the same on every item of that site), then its own
                                 headline; a share of them is reposted with a typo, punctuation or
                                 width change (kind near_copy, counted in the near-copy budget)
url_update           no (keep)   an earlier page's URL (exact or with noise) with rewritten content
                                 (Jaccard < 0.5 with the earlier version)
url_append           no (keep)   an earlier page refetched under another spelling of its URL (the
                                 other scheme, plus port, host case, trailing slash or fragment) with a
                                 whole other article appended (2/3) or its second half replaced by one
                                 (1/3): half of the newer text is new, so it is not a copy
list_page            no (keep)   the next page of a multi-page list article: same site, template and
                                 intro, other names and amounts in every entry
corpus_copy          unjudged    not planted: an original that retells an earlier original's or
                                 template page's story (bench.corpus_copies), or an original or
                                 template page whose article a reader judged the same story as an
                                 earlier document's (bench/reviewed_copies.csv), labelled after the
                                 last hour; bench.score leaves it out of every rate and reports it apart
===================  ==========  ======================================================================

Truth columns (``TRUTH_SCHEMA``): ``doc_id``; ``batch_id`` ("YYYY-MM-DDTHH", the partition's hour);
``hour`` (0-based index of that hour within this crawl); ``lang``; ``kind``; ``cluster_id`` (the
original's doc_id for every member of a duplicate cluster, a non-duplicate's own doc_id);
``source_doc_id`` (what the doc was derived from; null for original, template_distinct and
short_distinct); ``edits`` (names of the edits applied: ``url:*`` URL noise, exact-copy noise,
near-copy edits, ``rewrite`` for updates, ``natural:<corpus id>`` for corpus duplicates);
``true_jaccard`` (Jaccard of character 5-grams of the NFKC-folded text, ``bench.similarity``, vs
the source: 1.0 for url_repeat and exact_copy, the measured
value for near_copy and corpus_dup, the value vs the earlier version for url_update and the
previous page for list_page, null otherwise); ``true_jaccard_words`` (the same with the earlier
reference shingling, word 3-grams for English, ``bench.corpus.doc_shingles``); ``is_duplicate`` (url_repeat, exact_copy, near_copy, corpus_dup); ``must_keep``
(template_distinct, short_distinct, url_update); ``article_id`` (the corpus article whose text the
doc carries: its own for original, template_distinct, corpus_dup, url_update and corpus_copy, its
source's for url_repeat, exact_copy and near_copy, null for short_distinct and list_page).

A duplicate's cluster is its original's doc_id; a named source may be the original or an identical
copy of it (url_repeat / exact_copy), so a system matching either is right about provenance. Near
copies are always derived from the original's content, never from another near copy, so their
``true_jaccard`` (vs the named source, with ``bench.corpus``'s reference shingling) is also their
Jaccard vs the original. About ``Mix.cross_hour`` of the derived documents take a source from an
earlier hour (when there is one), so cross-batch duplicates exist.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from bench.corpus import (
    SAMPLE_DATA_DIR,
    SOURCES,
    Article,
    ArticleStream,
    Corpus,
    doc_shingles,
    exact_key,
    jaccard,
    load_corpus,
    render_body,
    resolve_data_dir,
)
from bench.corpus_copies import find_corpus_copies, lede, reviewed_same_story, story_text
from bench.evaldata import eval_data_dir
from bench.similarity import char_shingles

KINDS = (
    "original",
    "corpus_dup",
    "url_repeat",
    "exact_copy",
    "near_copy",
    "template_distinct",
    "short_distinct",
    "short_leadin",
    "url_update",
    "url_append",
    "list_page",
)
# "reworded" / "same_topic" are planted from real paraphrase pairs by bench.reworded, not generated here.
DUPLICATE_KINDS = frozenset({"url_repeat", "exact_copy", "near_copy", "corpus_dup", "reworded"})
MUST_KEEP_KINDS = frozenset(
    {"template_distinct", "short_distinct", "short_leadin", "url_update", "url_append", "list_page", "same_topic"}
)
# Kinds assigned after generation, not planted (no Mix share): an original whose story an earlier
# original or template page already told (bench.corpus_copies). Neither a copy a system must find nor
# a document it must keep: bench.score reports them apart.
LABELLED_KINDS = ("corpus_copy",)
# Kinds whose text is a corpus article of their own, so a reviewed pair of articles can name them
# (corpus copies are labelled in the same pass, from these).
_REVIEWED_KINDS = ("original", "template_distinct", "url_update", "url_append")
NEAR_BANDS: tuple[tuple[float, float], ...] = ((0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0))
# Bumped whenever the same arguments give other documents or labels: bench caches crawls by it.
# 3: originals that retell an earlier story are labelled corpus_copy (same documents as 2).
# 4: truth names each document's corpus article (article_id), and originals a reader judged to retell an
#    earlier story (bench/reviewed_copies.csv) are labelled corpus_copy too (same documents as 3).
# 5: short pages behind a site's lead-in (and reposts of them), updates that append or replace half an
#    article under a URL of the other scheme; "same page" ignores the scheme (SURT).
GENERATOR_VERSION = 5
TYPO_RATE = (0.003, 0.025)  # share of characters a "typos" edit gets wrong
# Harsher edits than a crawl's usual copies, for a robustness check that no threshold is read on
# (`python -m bench quality --edits harsh`): two to four edits per near copy, typos at 1-5% of
# characters (a poor OCR), twice as many per unit of strength.
HARSH_EDITS = {"min_edits": 2, "max_edits": 4, "typo_rate_min": 0.01, "typo_rate_max": 0.05, "typo_rate_per_strength": 0.016}
TRACKING_PARAMS = ("gclid", "fbclid")  # plus every utm_* parameter

CRAWL_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("title", pa.string()),
        pa.field("content", pa.string()),
        pa.field("fetched_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("lang", pa.string()),
        pa.field("site", pa.string()),
    ]
)
TRUTH_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("batch_id", pa.string(), nullable=False),
        pa.field("hour", pa.int32(), nullable=False),
        pa.field("lang", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("cluster_id", pa.string(), nullable=False),
        pa.field("source_doc_id", pa.string()),
        pa.field("edits", pa.list_(pa.string()), nullable=False),
        pa.field("true_jaccard", pa.float64()),
        pa.field("true_jaccard_words", pa.float64()),
        pa.field("is_duplicate", pa.bool_(), nullable=False),
        pa.field("must_keep", pa.bool_(), nullable=False),
        pa.field("article_id", pa.string()),
    ]
)
HOUR_US = 3_600_000_000


@dataclass(frozen=True)
class Mix:
    """Share of each kind per hour (the kind shares sum to 1) and other generation knobs."""

    original: float = 0.42
    corpus_dup: float = 0.01
    url_repeat: float = 0.08
    exact_copy: float = 0.08
    near_copy: float = 0.20
    template_distinct: float = 0.06
    short_distinct: float = 0.04
    short_leadin: float = 0.03
    url_update: float = 0.04
    url_append: float = 0.02
    list_page: float = 0.02
    cross_hour: float = 0.30  # share of derived docs whose source is from an earlier hour
    zh_share: float = 0.5
    light_boilerplate: float = 0.4  # share of originals with a site byline/footer line
    copy_of_copy: float = 0.1  # share of exact/near copies naming an identical copy as source
    # Target Jaccard bands of near copies and their weights: most mass in 0.7-1.0.
    near_band_weights: tuple[float, ...] = (0.15, 0.20, 0.30, 0.35)
    # Edits per near copy (drawn evenly from min_edits..max_edits) and the character rate of a
    # "typos" edit: typo_rate_per_strength x the edit strength, clipped to [typo_rate_min, typo_rate_max].
    min_edits: int = 1
    max_edits: int = 3
    typo_rate_min: float = TYPO_RATE[0]
    typo_rate_max: float = TYPO_RATE[1]
    typo_rate_per_strength: float = 0.008

    def __post_init__(self) -> None:
        shares = [getattr(self, k) for k in KINDS]
        if any(s < 0 for s in shares) or abs(sum(shares) - 1.0) > 1e-6:
            raise ValueError(
                f"kind shares must be >= 0 and sum to 1, got {dict(zip(KINDS, shares, strict=True))}"
            )
        if len(self.near_band_weights) != len(NEAR_BANDS):
            raise ValueError("near_band_weights needs one weight per NEAR_BANDS entry")
        if not 1 <= self.min_edits <= self.max_edits:
            raise ValueError(f"need 1 <= min_edits <= max_edits, got {self.min_edits}..{self.max_edits}")
        if not 0 <= self.typo_rate_min <= self.typo_rate_max <= 1:
            raise ValueError(f"need 0 <= typo_rate_min <= typo_rate_max <= 1, got {self.typo_rate_min}..{self.typo_rate_max}")

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float]) -> Mix:
        """Defaults with some values replaced; ``original`` absorbs the change unless given."""
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown mix keys: {sorted(unknown)}")
        values: dict[str, Any] = {f.name: getattr(cls(), f.name) for f in fields(cls)}
        values.update(overrides)
        if "original" not in overrides:
            values["original"] = 1.0 - sum(values[k] for k in KINDS if k != "original")
        return cls(**values)

    def counts(self, n: int) -> dict[str, int]:
        """Per-kind document counts for an hour of ``n`` docs (rounding goes to ``original``)."""
        counts = {k: int(round(getattr(self, k) * n)) for k in KINDS if k != "original"}
        counts["original"] = n - sum(counts.values())
        if counts["original"] < 1 and n > 0:
            raise ValueError(f"{n} docs per hour leave no room for originals with this mix")
        return counts


@dataclass(frozen=True)
class GeneratedCrawl:
    """Where a generated crawl was written and what it holds."""

    root: Path
    crawl_root: Path
    truth_path: Path
    manifest_path: Path
    batch_ids: tuple[str, ...]
    partitions: tuple[Path, ...]
    n_docs: int
    kind_counts: dict[str, int]
    seconds: float

    def truth(self) -> pd.DataFrame:
        return pd.read_parquet(self.truth_path)

    def crawl(self, batch_id: str | None = None) -> pd.DataFrame:
        paths = self.partitions if batch_id is None else [self.partitions[self.batch_ids.index(batch_id)]]
        return pa.concat_tables([pq.read_table(p, schema=CRAWL_SCHEMA) for p in paths]).to_pandas()


# ---------------------------------------------------------------------------------------------
# URLs


def is_tracking_param(name: str) -> bool:
    name = name.lower()
    return name.startswith("utm_") or name in TRACKING_PARAMS


def page_key(url: str) -> str:
    """The page a URL names, as the generator defines "same page".

    Lower-case host, default port dropped, fragment dropped, tracking parameters (utm_*, gclid,
    fbclid) dropped, remaining query sorted, trailing slash folded, and the scheme dropped (a crawler's
    SURT form): ``http`` and ``https`` of one host and path are one page.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    query = sorted(
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_tracking_param(k)
    )
    return urlunsplit(("", host, path, urlencode(query), ""))


_FRAGMENTS = ("comments", "top", "main", "respond", "section-2", "gallery", "share")
_UTM_SOURCES = ("twitter", "facebook", "newsletter", "weibo", "wechat", "google", "rss", "partner")
_UTM_MEDIUMS = ("social", "email", "cpc", "referral", "feed")


def _token(rng: random.Random, n: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
    return "".join(rng.choice(alphabet) for _ in range(n))


def noisy_url(url: str, rng: random.Random, other_scheme: bool = False) -> tuple[str, list[str]]:
    """Another spelling of the same page (``page_key`` equal, text different) and the ops applied;
    with ``other_scheme`` the URL also moves to the other of http/https (op ``url:scheme``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ops = ["host_case", "default_port", "fragment", "tracking"]
    if len(query) >= 2:
        ops.append("reorder_query")
    last = parts.path.rsplit("/", 1)[-1]
    if parts.path and not parts.path.endswith("/") and "." not in last:
        ops.append("trailing_slash")  # only on directory-like paths: "a.shtml/" is not a real spelling
    chosen = rng.sample(ops, rng.randint(1, min(3, len(ops))))
    scheme, netloc, path, fragment = parts.scheme, parts.netloc, parts.path, ""
    if other_scheme:
        scheme = "http" if scheme == "https" else "https"
        if parts.port is not None and (parts.scheme, parts.port) in (("http", 80), ("https", 443)):
            netloc = netloc.rsplit(":", 1)[0]
    for op in chosen:
        if op == "host_case":
            host = parts.hostname or ""
            style = rng.randrange(3)
            if style == 0:
                cased = host.upper()
            elif style == 1:
                cased = ".".join(label.capitalize() for label in host.split("."))
            else:
                cased = "".join(c.upper() if c.isalpha() and rng.random() < 0.3 else c for c in host)
            netloc = (cased if cased != host else host.upper()) + netloc[len(host) :]
        elif op == "default_port":
            netloc = f"{netloc}:{443 if scheme == 'https' else 80}"
        elif op == "fragment":
            fragment = rng.choice(_FRAGMENTS)
        elif op == "tracking":
            extra: list[tuple[str, str]] = []
            style = rng.randrange(3)
            if style == 0:
                extra = [("utm_source", rng.choice(_UTM_SOURCES)), ("utm_medium", rng.choice(_UTM_MEDIUMS))]
                if rng.random() < 0.5:
                    extra.append(("utm_campaign", f"news_{rng.randint(1, 999)}"))
            elif style == 1:
                extra = [("gclid", _token(rng, 24))]
            else:
                extra = [("fbclid", "IwAR" + _token(rng, 28))]
            query = extra + query if rng.random() < 0.3 else query + extra
        elif op == "reorder_query":
            reordered = query[:]
            while reordered == query:
                rng.shuffle(reordered)
            query = reordered
        elif op == "trailing_slash":
            path = path + "/"
    noisy = urlunsplit((scheme, netloc, path, urlencode(query), fragment))
    if noisy == url:  # cannot happen with the ops above; kept as a guard for odd inputs
        noisy, chosen = url + "#" + rng.choice(_FRAGMENTS), ["fragment"]
    return noisy, (["url:scheme"] if other_scheme else []) + [f"url:{op}" for op in chosen]


# ---------------------------------------------------------------------------------------------
# Sites and page furniture

_EN_A = (
    "daily", "metro", "global", "city", "national", "coastal", "valley", "capital", "harbor", "summit",
    "prairie", "river", "union", "liberty", "northern", "southern", "eastern", "western", "pacific", "atlantic",
)  # fmt: skip
_EN_B = (
    "news", "times", "post", "herald", "wire", "journal", "tribune", "gazette", "observer", "ledger",
    "courier", "chronicle", "report", "dispatch", "bulletin", "review",
)  # fmt: skip
_ZH_A = (
    ("dongfang", "东方"), ("huaxia", "华夏"), ("nanfang", "南方"), ("beifang", "北方"), ("zhongyuan", "中原"),
    ("xibu", "西部"), ("jinri", "今日"), ("caijing", "财经"), ("keji", "科技"), ("renmin", "人民"),
    ("haixia", "海峡"), ("changjiang", "长江"), ("huanghe", "黄河"), ("tianfu", "天府"), ("jiangnan", "江南"),
    ("lingnan", "岭南"), ("qilu", "齐鲁"), ("jingcheng", "京城"), ("hucheng", "沪城"), ("chutian", "楚天"),
)  # fmt: skip
_ZH_B = (
    ("news", "新闻网"), ("online", "在线"), ("daily", "日报"), ("morning", "晨报"), ("kuaibao", "快报"),
    ("zixun", "资讯网"), ("toutiao", "头条"), ("wang", "网"),
)  # fmt: skip
_EN_SECTIONS = ("world", "business", "markets", "politics", "tech", "science", "sports", "health", "local")
_ZH_SECTIONS = ("news", "finance", "tech", "society", "world", "sports", "ent", "auto", "house")
_ZH_SURNAMES = "王李张刘陈杨赵黄周吴徐孙马朱胡郭何林罗高"
_ZH_GIVEN = (
    "伟",
    "芳",
    "娜",
    "敏",
    "静",
    "丽",
    "强",
    "磊",
    "洋",
    "艳",
    "勇",
    "军",
    "杰",
    "娟",
    "涛",
    "明",
    "超",
    "秀英",
    "华",
    "慧",
)
_EN_FIRST = ("James", "Mary", "Robert", "Linda", "Michael", "Sarah", "David", "Karen", "Daniel", "Emily",
             "Thomas", "Anna", "Peter", "Laura", "Mark", "Julia", "Paul", "Grace", "Steven", "Alice")  # fmt: skip
_EN_LAST = ("Smith", "Johnson", "Lee", "Brown", "Garcia", "Miller", "Davis", "Wilson", "Clark", "Lewis",
            "Walker", "Young", "King", "Wright", "Scott", "Green", "Baker", "Adams", "Nelson", "Hill")  # fmt: skip


@dataclass
class _Site:
    host: str
    name: str
    lang: str
    scheme: str
    url_style: str  # "slug" | "query" | "shtml"
    header: tuple[str, ...] = ()
    footer: tuple[str, ...] = ()
    weight: float = 1.0


def _editor(lang: str, rng: random.Random) -> str:
    if lang == "zh":
        return rng.choice(_ZH_SURNAMES) + rng.choice(_ZH_GIVEN)
    return f"{rng.choice(_EN_FIRST)} {rng.choice(_EN_LAST)}"


def _link_title(lang: str, pool: Sequence[str], rng: random.Random) -> str:
    s = pool[rng.randrange(len(pool))]
    if lang == "zh":
        return s.rstrip("。！？，")[:24]
    return " ".join(s.split()[:9]).rstrip(".,;:")


def _heavy_template(
    site: _Site, pool: Sequence[str], rng: random.Random
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Header and footer lines of a template-heavy site: as long as a short article body."""
    links = [_link_title(site.lang, pool, rng) for _ in range(18)]
    if site.lang == "zh":
        header = (
            f"{site.name} - 首页 | 新闻 | 财经 | 科技 | 体育 | 娱乐 | 汽车 | 房产 | 教育 | 旅游 | 健康 | 视频 | 图片 | 专题 | 论坛",
            "登录 | 注册 | 手机版 | 客户端下载 | 网站导航 | 设为首页 | 加入收藏 | 无障碍浏览",
            "热门搜索：" + " ".join(link[:6] for link in links[:6]),
            "当前位置：首页 > 新闻中心 > 社会新闻 > 正文",
        )
        footer = (
            "相关阅读：",
            *(f"· {link}" for link in links[6:14]),
            "热门排行：" + " | ".join(links[14:18]),
            "关于我们 | 联系我们 | 广告服务 | 招聘信息 | 法律声明 | 隐私政策 | 网站地图 | 意见反馈 | 投稿须知",
            f"Copyright © 2003-2026 {site.host} All Rights Reserved {site.name} 版权所有",
            f"京ICP证0{rng.randint(10000, 99999)}号 京公网安备110{rng.randint(100000, 999999)}号 "
            f"互联网新闻信息服务许可证：{rng.randint(10000000, 99999999)}",
            "未经授权禁止转载、摘编、复制或建立镜像，违者将依法追究法律责任。举报电话：010-12345678",
        )
    else:
        header = (
            f"{site.name} | Home | World | Business | Markets | Tech | Science | Health | Sports | Opinion | Video",
            "Sign in | Subscribe | Newsletters | Podcasts | Events | Today's Paper | Customer Service",
            "Trending: " + " | ".join(" ".join(link.split()[:3]) for link in links[:5]),
            "You are here: Home > News > Latest",
        )
        footer = (
            "Related stories:",
            *(f"- {link}" for link in links[5:13]),
            "Most read: " + " | ".join(links[13:18]),
            "About us | Contact | Advertise | Careers | Terms of Use | Privacy Policy | Cookie Settings | Sitemap",
            f"(c) 2026 {site.name} Media Group. All rights reserved. Reproduction in whole or in part "
            "without written permission is prohibited.",
            "This material may not be published, broadcast, rewritten or redistributed.",
        )
    return header, footer


def _site_name(lang: str, a: Any, b: Any) -> tuple[str, str]:
    if lang == "zh":
        return f"{a[0]}{b[0]}", f"{a[1]}{b[1]}"
    return f"{a}{b}", f"The {a.title()} {b.title()}"


def _make_sites(lang: str, pool: Sequence[str], rng: random.Random) -> dict[str, list[_Site]]:
    """Normal sites (originals, repeats, updates), mirrors (copies), template sites, flash sites."""
    combos = [(a, b) for a in (_ZH_A if lang == "zh" else _EN_A) for b in (_ZH_B if lang == "zh" else _EN_B)]
    rng.shuffle(combos)
    sites: list[_Site] = []
    for i, (a, b) in enumerate(combos[:110]):
        stem, name = _site_name(lang, a, b)
        if lang == "zh":
            host = rng.choice((f"www.{stem}.com.cn", f"news.{stem}.cn", f"www.{stem}.com"))
            style = rng.choice(("shtml", "shtml", "query", "slug"))
            scheme = "http" if rng.random() < 0.3 else "https"
        else:
            host = rng.choice((f"www.{stem}.com", f"{stem}.com", f"www.{stem}.net", f"news.{stem}.org"))
            style = rng.choice(("slug", "slug", "query", "shtml"))
            scheme = "https" if rng.random() < 0.85 else "http"
        # Zipf-like popularity: a few sites publish most of the originals.
        sites.append(
            _Site(host=host, name=name, lang=lang, scheme=scheme, url_style=style, weight=1.0 / (1 + i))
        )
    groups = {
        "normal": sites[:60],
        "mirror": sites[60:100],
        "template": sites[100:104],
        "flash": sites[104:107],
        "leadin": sites[107:110],
    }
    for site in groups["template"]:
        site.header, site.footer = _heavy_template(site, pool, rng)
    for site in groups["mirror"]:
        site.weight = 1.0  # aggregators copy evenly
    return groups


def _light_boilerplate(site: _Site, rng: random.Random) -> tuple[tuple[str, ...], tuple[str, ...]]:
    editor = _editor(site.lang, rng)
    if site.lang == "zh":
        return (f"来源：{site.name}",), (f"（责任编辑：{editor}）",)
    return (f"By {editor}, {site.name}",), (f"(c) 2026 {site.name}. All rights reserved.",)


def _mirror_lines(
    site: _Site, source_name: str, pool: Sequence[str], rng: random.Random, n: int
) -> list[str]:
    """Syndication chrome a mirror adds around a copied article (``boilerplate_add``)."""
    if site.lang == "zh":
        templates = (
            "本文来源：{src}，转载请注明出处。", "分享到：微信 微博 QQ空间 豆瓣 复制链接", "【纠错】【责任编辑：{ed}】",
            "相关新闻：{link}", "热门推荐：{link}", "扫描二维码关注{name}官方微信，获取更多资讯",
            "声明：本文仅代表作者观点，不代表{name}立场。", "点击进入{name}首页 >>", "更多精彩内容请下载{name}客户端",
            "猜你喜欢：{link}", "网友评论（{n}条）", "延伸阅读：{link}",
        )  # fmt: skip
    else:
        templates = (
            "Originally published by {src}.", "Share this article: Facebook | Twitter | LinkedIn | Email",
            "Related: {link}", "Read more: {link}", "Advertisement",
            "Sign up for the {name} newsletter to get the latest headlines in your inbox.",
            "Copyright {name}. All rights reserved.", "Comments ({n})", "Most popular: {link}",
            "Follow {name} on social media for the latest updates.", "Trending now: {link}", "Skip to main content",
        )  # fmt: skip
    # Without replacement while templates last: a mirror does not print the same line three times.
    picks = rng.sample(templates, min(n, len(templates))) + [
        rng.choice(templates) for _ in range(n - len(templates))
    ]
    return [
        template.format(
            src=source_name,
            ed=_editor(site.lang, rng),
            link=_link_title(site.lang, pool, rng),
            name=site.name,
            n=rng.randint(2, 999),
        )
        for template in picks
    ]


# ---------------------------------------------------------------------------------------------
# Short flashes (short_distinct): one template per family, different facts per document

_ZH_CO = ("华信科技", "东方电气", "长城汽车", "海天味业", "中远海控", "万科企业", "美的集团", "格力电器", "比亚迪",
          "宁德时代", "招商银行", "中国平安", "顺丰控股", "京东方", "海康威视", "伊利股份", "三一重工", "恒瑞医药")  # fmt: skip
_ZH_CITY = ("北京", "上海", "广州", "深圳", "杭州", "成都", "重庆", "武汉", "西安", "南京", "天津", "苏州", "长沙",
            "郑州", "青岛", "沈阳", "厦门", "昆明", "合肥", "济南")  # fmt: skip
_ZH_TEAM = ("北京国安", "上海海港", "山东泰山", "广州队", "成都蓉城", "武汉三镇", "浙江队", "天津津门虎", "河南队",
            "长春亚泰", "青岛西海岸", "沧州雄狮")  # fmt: skip
_EN_CO = ("Acme Corp", "Globex", "Initech", "Umbrella Holdings", "Stark Industries", "Wayne Enterprises", "Hooli",
          "Vandelay Imports", "Soylent Co", "Cyberdyne Systems", "Tyrell Corp", "Wonka Foods", "Oscorp", "Dunder Mifflin")  # fmt: skip
_EN_CITY = ("Boston", "Denver", "Seattle", "Austin", "Chicago", "Atlanta", "Phoenix", "Portland", "Dallas", "Miami",
            "Detroit", "Houston", "Oakland", "Tampa", "Omaha", "Raleigh", "Tucson", "Buffalo")  # fmt: skip
_EN_TEAM = ("Rovers", "United", "City", "Wanderers", "Athletic", "Rangers", "Albion", "Hotspur", "Villa", "Forest",
            "Orient", "County")  # fmt: skip


def _list_items(lang: str, style: int, first_rank: int, rng: random.Random) -> tuple[str, ...]:
    """One page of a ranked list article: the same sentence template for every entry, different
    names, places and amounts (the pages a SimHash hit alone would wrongly call copies)."""
    items = []
    for rank in range(first_rank, first_rank + 10):
        pct = f"{rng.randint(1, 400) / 10:.1f}"
        amount = f"{rng.randint(10, 9999) / 10:.1f}"
        if lang == "zh":
            name = rng.choice(_ZH_SURNAMES) + rng.choice(_ZH_GIVEN)
            city, co = rng.choice(_ZH_CITY), rng.choice(_ZH_CO)
            updown = rng.choice(("增长", "下降"))
            items.append(
                f"第{rank}名：{name}（{city}），{co}，财富{amount}亿元，较去年{updown}{pct}%。"
                if style == 0
                else f"{rank}. {name}，常住{city}，所在企业{co}，资产规模{amount}亿元，年度排名变化{pct}%。"
            )
        else:
            name = f"{rng.choice(_EN_FIRST)} {rng.choice(_EN_LAST)}"
            city, co = rng.choice(_EN_CITY), rng.choice(_EN_CO)
            updown = rng.choice(("up", "down"))
            items.append(
                f"No. {rank}: {name} of {city}, {co}, net worth ${amount} million, {updown} {pct}% from last year."
                if style == 0
                else f"{rank}. {name} ({co}, {city}) reported assets of ${amount} million, a change of {pct}% on the year."
            )
    return tuple(items)


def _flash(lang: str, family: int, rng: random.Random) -> tuple[str, str]:
    """(family title, text) of one short flash; the slots make two flashes differ in substance."""
    r = rng
    pct = f"{r.randint(1, 600) / 10:.1f}"
    if lang == "zh":
        if family == 0:
            return "快讯", (
                f"【快讯】{r.choice(_ZH_CO)}{r.choice(('一季度', '上半年', '前三季度', '全年'))}实现营业收入"
                f"{r.randint(10, 9999) / 10:.1f}亿元，同比{r.choice(('增长', '下降'))}{pct}%。"
            )
        if family == 1:
            lo = r.randint(-15, 25)
            return "天气预报", (
                f"{r.choice(_ZH_CITY)}{r.randint(1, 12)}月{r.randint(1, 28)}日天气："
                f"{r.choice(('晴', '多云', '阴', '小雨', '雷阵雨', '小雪', '雾', '晴转多云'))}，气温{lo}℃至{lo + r.randint(3, 12)}℃，"
                f"{r.choice(('东风', '南风', '西风', '北风', '东北风'))}{r.randint(1, 6)}级。"
            )
        if family == 2:
            return "特价", (
                f"{r.choice(('无线蓝牙耳机', '智能手环', '空气净化器', '电动牙刷', '扫地机器人', '机械键盘', '移动电源'))}"
                f"（{r.choice(('黑色标准版', '白色增强版', '升级款', '家用款', '大号'))}）限时特价{r.randint(29, 2999)}元，"
                f"{r.choice(_ZH_CITY)}仓发货，{r.randint(6, 72)}小时内送达。"
            )
        if family == 3:
            a, b = r.sample(_ZH_TEAM, 2)
            s1, s2 = r.randint(0, 5), r.randint(0, 5)
            res = "战胜" if s1 > s2 else ("战平" if s1 == s2 else "负于")
            return (
                "赛果",
                f"{a}主场{s1}比{s2}{res}{b}，第{r.randint(1, 30)}轮积分榜排名升至第{r.randint(1, 16)}位。",
            )
        if family == 4:
            return "楼市", (
                f"{r.choice(_ZH_CITY)}{r.randint(1, 12)}月新建商品住宅成交{r.randint(300, 30000)}套，"
                f"均价每平方米{r.randint(8000, 120000)}元，环比{r.choice(('上涨', '下跌'))}{pct}%。"
            )
        return "股市", (
            f"{r.choice(_ZH_CO)}今日收盘报{r.randint(100, 99999) / 100:.2f}元，{r.choice(('上涨', '下跌'))}{pct}%，"
            f"成交额{r.randint(1, 999) / 10:.1f}亿元。"
        )
    if family == 0:
        return "Market brief", (
            f"BRIEF-{r.choice(_EN_CO)} {r.choice(('Q1', 'Q2', 'Q3', 'Q4', 'full-year'))} revenue "
            f"{r.choice(('up', 'down'))} {pct}% to ${r.randint(10, 9999)} mln"
        )
    if family == 1:
        lo = r.randint(-5, 80)
        return "Weather", (
            f"{r.choice(_EN_CITY)} weather for {r.choice(('Monday', 'Tuesday', 'Friday', 'Sunday'))}: "
            f"{r.choice(('sunny', 'cloudy', 'light rain', 'storms', 'snow', 'fog'))}, high {lo + r.randint(5, 25)}F, "
            f"low {lo}F, winds {r.randint(2, 40)} mph."
        )
    if family == 2:
        return "Deal", (
            f"{r.choice(('Wireless earbuds', 'Fitness band', 'Air purifier', 'Robot vacuum', 'Power bank', 'Desk lamp'))} "
            f"({r.choice(('black', 'white', 'pro', 'mini', 'XL'))}) now ${r.randint(9, 999)}.{r.randint(0, 99):02d}. "
            f"Ships from {r.choice(_EN_CITY)} in {r.randint(1, 9)} days."
        )
    if family == 3:
        a, b = r.sample(_EN_CITY, 2)
        return "Score", (
            f"{a} {r.choice(_EN_TEAM)} beat {b} {r.choice(_EN_TEAM)} {r.randint(1, 6)}-{r.randint(0, 5)} "
            f"in round {r.randint(1, 38)}."
        )
    if family == 4:
        return "Housing", (
            f"{r.choice(_EN_CITY)} home sales {r.choice(('rose', 'fell'))} {pct}% in "
            f"{r.choice(('January', 'March', 'May', 'July', 'September', 'November'))}; median price "
            f"${r.randint(1500, 25000) * 100:,}."
        )
    return "Stocks", (
        f"{r.choice(_EN_CO)} shares closed {r.choice(('up', 'down'))} {pct}% at "
        f"${r.randint(100, 99999) / 100:.2f} on volume of {r.randint(1, 99)}.{r.randint(0, 9)} million."
    )


_N_FLASH_FAMILIES = 6


# Lead-ins a site puts before every short item (``short_leadin``): long, fixed per site, a few slots
# (time, phone) that change per item. Shapes after what crawls show: wire briefs, portal
# "trending" lines, classified-ad boilerplate.
_LEADINS = {
    "en": (
        "BRIEF via {wire} {sector} (automated summary, not reviewed by an editor): ",
        "Trending now on {name} {sector} | Top story at {hh}:{mm} GMT: ",
        "{name} {sector} alert, from our partners' feed: ",
    ),
    "zh": (
        "【二手转让】{city}同城，个人闲置，价格可议，非诚勿扰，有意私聊{phone}：",
        "【{city}头条快讯】本条消息由{name}自动推送，未经编辑审核，仅供参考：",
        "{name}{sector}频道 | 今日热点 {hh}:{mm} 更新，点击查看全文：",
    ),
}
_EN_WIRES = ("Reuters", "AP", "Bloomberg", "AFP", "Dow Jones")
_EN_SECTORS = ("UK energy", "autos", "US markets", "tech", "health care", "commodities", "EU politics")
_ZH_SECTORS = ("财经", "汽车", "科技", "房产", "体育", "娱乐")


def _leadin(lang: str, family: int, site: _Site, rng: random.Random) -> str:
    """The site's lead-in with this item's slot values (the site fixes wire, sector and city)."""
    fixed = random.Random(site.host)
    return _LEADINS[lang][family].format(
        wire=fixed.choice(_EN_WIRES), sector=fixed.choice(_ZH_SECTORS if lang == "zh" else _EN_SECTORS),
        name=site.name, city=fixed.choice(_ZH_CITY), hh=f"{rng.randrange(24):02d}", mm=f"{rng.randrange(60):02d}",
        phone=f"1{rng.randint(3, 9)}{rng.randrange(10**9):09d}",
    )  # fmt: skip


def _headline(lang: str, pool: Sequence[str], rng: random.Random, room: int) -> str:
    """A headline-length piece of a corpus sentence (10-22 characters, or 4-10 words), cut to fit in
    ``room`` characters."""
    sentence = pool[rng.randrange(len(pool))]
    if lang == "zh":
        return sentence.rstrip("。！？；，")[: min(room, rng.randint(10, 22))]
    words = sentence.rstrip(".!?;,").split()[: rng.randint(4, 10)]
    while words and len(" ".join(words)) > room:
        words.pop()
    return " ".join(words)


def _short_edit(text: str, lang: str, rng: random.Random) -> tuple[str, str]:
    """A repost's small edit of a short page: one or two typos, punctuation, or width (zh)."""
    roll = rng.random()
    if roll < 0.5:
        out = list(text)
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(len(out))
            if lang == "zh":
                out[i] = rng.choice(_ZH_TYPO_CHARS)
            elif out[i].isalpha():
                out[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
            else:
                out.insert(i, rng.choice("aeiou"))
        return "".join(out), "typos"
    if roll < 0.8 or lang != "zh":
        swaps = {"：": ":", ":": " -", "，": ",", "|": "-", "(": "[", ")": "]", "【": "[", "】": "]"}
        out = "".join(swaps.get(c, c) if rng.random() < 0.7 else c for c in text)
        if out == text:
            out = text + "。" if lang == "zh" else text + "."
        return out, "whitespace_punct"
    return _to_fullwidth(text, rng, 0.5), "width_swap"


# ---------------------------------------------------------------------------------------------
# Documents and edits


@dataclass(frozen=True)
class _Layout:
    """Content as site chrome lines around paragraphs of sentences."""

    header: tuple[str, ...]
    paragraphs: tuple[tuple[str, ...], ...]
    footer: tuple[str, ...]

    def render(self, lang: str) -> str:
        body = render_body(lang, self.paragraphs)
        return "\n".join(part for part in (*self.header, body, *self.footer) if part)


@dataclass
class _Doc:
    doc_id: str
    hour: int
    t_us: int
    url: str
    site: str
    lang: str
    title: str | None
    content: str
    kind: str
    cluster_id: str = ""
    source_doc_id: str | None = None
    edits: tuple[str, ...] = ()
    true_jaccard: float | None = None
    true_jaccard_words: float | None = None
    # The corpus article whose text the doc carries (original, template page, natural duplicate,
    # update); copies carry their origin's (``_truth_table``).
    article_id: str | None = None
    # Generation state, not written: the original whose content this doc carries (itself for an
    # original), its layout, the site object, and the source's key in the exact-key registry.
    layout: _Layout | None = None
    origin: _Doc | None = None
    site_obj: _Site | None = None
    key: int = 0
    variants: list[tuple[Article, float]] = field(default_factory=list)
    updated: bool = False


_FULLWIDTH = {c: c + 0xFEE0 for c in range(0x21, 0x7F)}
_HALFWIDTH = {c + 0xFEE0: c for c in range(0x21, 0x7F)}
_ZH_TYPO_CHARS = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞"


def _to_fullwidth(text: str, rng: random.Random, share: float = 1.0) -> str:
    if share >= 1.0:
        return text.translate(_FULLWIDTH)
    return "".join(
        chr(_FULLWIDTH[ord(c)]) if c.isascii() and c.isalnum() and rng.random() < share else c for c in text
    )


def _exact_noise(
    title: str | None, content: str, lang: str, rng: random.Random
) -> tuple[str | None, str, list[str]]:
    """Changes an exact-copy republisher makes that NFKC + case folding + whitespace collapse undo."""
    ops: list[str] = []
    if rng.random() < 0.25:
        return title, content, ops  # a verbatim republication
    candidates = ["whitespace", "fullwidth"]
    if lang == "zh" and any(0xFF01 <= ord(c) <= 0xFF5E for c in (title or "") + content):
        candidates.append("halfwidth")
    if lang == "en" and title and title.isascii() and title.upper() != title:
        candidates.append("case")
    for op in rng.sample(candidates, rng.randint(1, min(2, len(candidates)))):
        if op == "whitespace":
            # Only existing whitespace changes: inserting a space between two CJK characters would
            # change the normalized text.
            content = content.replace(
                "\n", rng.choice(("\n\n", " \n", "\n\u3000\u3000" if lang == "zh" else "\n  "))
            )
            content = content.replace(". ", ".  ") if lang == "en" else content
            content = ("\u3000\u3000" if lang == "zh" else "  ") + content + rng.choice((" ", "\n", "\t"))
            title = f" {title} " if title else title
        elif op == "fullwidth":
            if lang == "zh":
                content, title = content.translate(_FULLWIDTH), (title or "").translate(_FULLWIDTH) or title
            else:
                content = "".join(chr(ord(c) + 0xFEE0) if "0" <= c <= "9" else c for c in content)
        elif op == "halfwidth":
            content, title = content.translate(_HALFWIDTH), (title or "").translate(_HALFWIDTH) or title
        elif op == "case":
            title = title.upper() if title else title
        ops.append(op)
    return title, content, ops


def _sentences(paragraphs: tuple[tuple[str, ...], ...]) -> list[tuple[int, int]]:
    return [(i, j) for i, p in enumerate(paragraphs) for j in range(len(p))]


_EN_TYPO_CHARS = "etaoinshrdlucmfwypvbgkqjxz"


def _typo_chars_en(text: str, rate: float, rng: random.Random) -> str:
    """Re-typed or OCR'd English: each letter is wrong with probability ``rate`` (a character
    rate, as in keyboard and OCR error studies): swapped with the next, dropped, doubled or replaced."""
    out: list[str] = []
    chars = list(text)
    i = 0
    while i < len(chars):
        c = chars[i]
        if c.isalpha() and rng.random() < rate:
            op = rng.randrange(4)
            if op == 0 and i + 1 < len(chars) and chars[i + 1].isalpha():
                out += [chars[i + 1], c]
                i += 2
                continue
            if op == 1:
                i += 1
                continue
            if op == 2:
                out += [c, c]
            else:
                out.append(rng.choice(_EN_TYPO_CHARS))
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _typo_zh(text: str, rate: float, rng: random.Random) -> str:
    out = []
    for c in text:
        if "\u4e00" <= c <= "\u9fff" and rng.random() < rate:
            op = rng.randrange(3)
            if op == 0:
                continue
            if op == 1:
                out.append(rng.choice(_ZH_TYPO_CHARS))
                continue
            out.append(c)
        out.append(c)
    return "".join(out)


def _punct_noise(sentence: str, lang: str, rng: random.Random) -> str:
    if lang == "zh":
        swaps = (
            ("，", rng.choice((",", "、", " ，"))),
            ("。", rng.choice((".", "。 ", "！"))),
            ("：", ":"),
            ("“", '"'),
            ("”", '"'),
        )
    else:
        swaps = (
            (", ", rng.choice((" , ", " ", ",  "))),
            (". ", rng.choice((".  ", " . "))),
            ("'", "’"),
            ('"', "''"),
            (" - ", " -- "),
        )
    for a, b in swaps:
        if a in sentence and rng.random() < 0.5:
            sentence = sentence.replace(a, b, 1)
    return sentence


# Application order: structural edits first, string-level noise last (so noise also hits inserted
# sentences); the source's chrome is removed before a mirror adds its own.
EDITS_ALL = (
    "boilerplate_remove",
    "boilerplate_add",
    "truncate",
    "sentence_delete",
    "sentence_insert",
    "paragraph_swap",
    "typos",
    "whitespace_punct",
    "width_swap",
)


class _Editor:
    """Applies near-copy edits to a source layout with a strength knob ``s`` (about 0.1-3)."""

    def __init__(self, lang: str, pool: Sequence[str], rng: random.Random, mix: Mix | None = None) -> None:
        self.lang, self.pool, self.rng = lang, pool, rng
        self.mix = mix or Mix()

    def applicable(self, layout: _Layout) -> list[str]:
        n_sent = sum(len(p) for p in layout.paragraphs)
        ok = ["boilerplate_add", "whitespace_punct", "typos", "sentence_insert"]
        if layout.header or layout.footer:
            ok.append("boilerplate_remove")
        if self.lang == "zh":
            ok.append("width_swap")
        if n_sent >= 3:
            ok += ["truncate", "sentence_delete"]
        if len(layout.paragraphs) >= 2:
            ok.append("paragraph_swap")
        return ok

    def apply(
        self,
        title: str | None,
        layout: _Layout,
        edits: Sequence[str],
        s: float,
        mirror: _Site,
        source_name: str,
    ) -> tuple[str | None, str]:
        rng, lang = self.rng, self.lang
        header, footer = list(layout.header), list(layout.footer)
        paras = [list(p) for p in layout.paragraphs]
        for edit in sorted(edits, key=EDITS_ALL.index):
            n_sent = sum(len(p) for p in paras)
            if edit == "boilerplate_remove":
                header, footer = [], []
            elif edit == "boilerplate_add":
                n = 1 + round(s * 4)
                lines = _mirror_lines(mirror, source_name, self.pool, rng, n)
                cut = rng.randint(0, n)
                header, footer = lines[:cut] + header, footer + lines[cut:]
                if title and rng.random() < 0.5:
                    title = f"{title}_{mirror.name}" if lang == "zh" else f"{title} - {mirror.name}"
            elif edit == "truncate":
                total = sum(len(x) for p in paras for x in p)
                target = total * (0.05 + 0.15 * min(1.0, s))
                removed = 0
                while removed < target and sum(len(p) for p in paras) > 1:
                    while not paras[-1]:
                        paras.pop()
                    removed += len(paras[-1].pop())
                paras = [p for p in paras if p]
                if rng.random() < 0.5:
                    paras.append(["……阅读全文" if lang == "zh" else "Read more..."])
            elif edit == "sentence_delete":
                k = min(n_sent - 1, max(1, round(s * 0.12 * n_sent)))
                for i, j in sorted(rng.sample(_sentences(tuple(map(tuple, paras))), k), reverse=True):
                    del paras[i][j]
                paras = [p for p in paras if p]
            elif edit == "sentence_insert":
                k = max(1, round(s * 0.12 * n_sent))
                for _ in range(k):
                    p = paras[rng.randrange(len(paras))]
                    p.insert(rng.randint(0, len(p)), self.pool[rng.randrange(len(self.pool))])
            elif edit == "paragraph_swap" and len(paras) >= 2:
                i, j = rng.sample(range(len(paras)), 2)
                paras[i], paras[j] = paras[j], paras[i]
            elif edit == "typos":
                # A character rate in both languages, 0.3-2.5% by default (re-typed and OCR'd copies).
                mix = self.mix
                rate = min(mix.typo_rate_max, max(mix.typo_rate_min, mix.typo_rate_per_strength * s))
                typo = _typo_zh if lang == "zh" else _typo_chars_en
                paras = [[typo(x, rate, rng) for x in p] for p in paras]
            elif edit == "whitespace_punct":
                paras = [
                    [_punct_noise(x, lang, rng) if rng.random() < min(1.0, 0.3 + s / 2) else x for x in p]
                    for p in paras
                ]
                # At least one visible punctuation change, so the copy is not an exact copy.
                last = paras[-1][-1]
                paras[-1][-1] = (
                    last[:-1] if last and not last[-1].isalnum() else last + ("。" if lang == "zh" else ".")
                )
                if lang == "en":
                    paras = [[x.replace(" ", "  ", 1) if rng.random() < 0.2 else x for x in p] for p in paras]
            elif edit == "width_swap":
                paras = [
                    [x.translate(_HALFWIDTH) if rng.random() < 0.5 else _to_fullwidth(x, rng, 0.7) for x in p]
                    for p in paras
                ]
        return title, _Layout(tuple(header), tuple(tuple(p) for p in paras if p), tuple(footer)).render(lang)


# ---------------------------------------------------------------------------------------------
# The generator


def _parse_start(start: str) -> datetime:
    for fmt in ("%Y-%m-%dT%H", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"):
        try:
            return datetime.strptime(start, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    parsed = datetime.fromisoformat(start)
    parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return parsed.replace(minute=0, second=0, microsecond=0)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Generator:
    def __init__(self, corpus: Corpus, mix: Mix, seed: int, start: datetime) -> None:
        self.corpus, self.mix, self.seed, self.start = corpus, mix, seed, start
        # Independent streams per concern: adding a draw in one place does not shift the others.
        self.rng = random.Random(f"{seed}:main")
        self.lead_rng = random.Random(f"{seed}:leadins")
        self.leadins: dict[str, int] = {}  # site host -> its lead-in template
        self.edit_rng = random.Random(f"{seed}:edits")
        self.streams = {
            lang: ArticleStream(corpus, lang, random.Random(f"{seed}:articles:{lang}"))
            for lang in ("en", "zh")
        }
        site_rng = random.Random(f"{seed}:sites")
        self.sites = {lang: _make_sites(lang, corpus.sentences[lang], site_rng) for lang in ("en", "zh")}
        self.editors = {lang: _Editor(lang, corpus.sentences[lang], self.edit_rng, mix) for lang in ("en", "zh")}
        self.docs: list[_Doc] = []
        self.ids: set[str] = set()
        self.keys: dict[int, str] = {}  # exact key -> cluster_id
        self.pages: set[str] = set()
        self.url_counter = 0
        self.doc_counter = 0
        self.shingle_cache: dict[str, set] = {}
        self.char_cache: dict[str, set] = {}
        self.list_series: list[dict[str, Any]] = []
        # Source pools: this hour's and all earlier hours' originals, and identical copies
        # (url_repeat / exact_copy) likewise. Earlier-hour pools only grow at an hour boundary.
        self.originals: list[_Doc] = []
        self.identical: list[_Doc] = []
        self.past_originals: list[_Doc] = []
        self.past_identical: list[_Doc] = []
        self.with_variants: list[_Doc] = []
        self.corpus_dup_shortfall = 0

    # -- helpers ---------------------------------------------------------------------------------

    def _new_id(self) -> str:
        while True:
            self.doc_counter += 1
            doc_id = "d" + xxhash.xxh64_hexdigest(f"{self.seed}:{self.doc_counter}".encode())
            if doc_id not in self.ids:
                self.ids.add(doc_id)
                return doc_id

    def _shingles(self, doc: _Doc) -> set:
        """Reference shingles of a source; a bounded cache, since all sources' sets would not fit."""
        cached = self.shingle_cache.get(doc.doc_id)
        if cached is None:
            cached = doc_shingles(doc.title, doc.content)
            if len(self.shingle_cache) >= 4096:
                self.shingle_cache.pop(next(iter(self.shingle_cache)))
            self.shingle_cache[doc.doc_id] = cached
        return cached

    def _char_shingles(self, doc: _Doc) -> set:
        """``bench.similarity.char_shingles`` of a source, cached like ``_shingles``."""
        cached = self.char_cache.get(doc.doc_id)
        if cached is None:
            cached = char_shingles(doc.title, doc.content)
            if len(self.char_cache) >= 4096:
                self.char_cache.pop(next(iter(self.char_cache)))
            self.char_cache[doc.doc_id] = cached
        return cached

    def _pick_site(self, lang: str, group: str, avoid: str | None = None) -> _Site:
        sites = [s for s in self.sites[lang][group] if s.host != avoid]
        return self.rng.choices(sites, weights=[s.weight for s in sites])[0]

    def _new_url(self, site: _Site, hour_start: datetime, title: str | None) -> str:
        rng = self.rng
        while True:
            self.url_counter += 1
            uid = 100000 + self.url_counter * 37 + rng.randrange(37)
            section = rng.choice(_ZH_SECTIONS if site.lang == "zh" else _EN_SECTIONS)
            day = hour_start.strftime("%Y%m%d")
            if site.url_style == "query":
                params = [("id", str(uid)), ("cat", section)]
                if rng.random() < 0.4:
                    params.append(("page", "1"))
                url = f"{site.scheme}://{site.host}/article.php?{urlencode(params)}"
            elif site.url_style == "shtml":
                url = f"{site.scheme}://{site.host}/{section}/{day}/n{uid}.shtml"
            else:
                words = "".join(
                    c if c.isalnum() else " " for c in (title or "").lower() if c.isascii()
                ).split()[:6]
                slug = "-".join(words) or "story"
                url = f"{site.scheme}://{site.host}/{section}/{day[:4]}/{day[4:6]}/{day[6:]}/{slug}-{uid}"
            key = page_key(url)
            if key not in self.pages:
                self.pages.add(key)
                return url

    def _register(self, doc: _Doc) -> None:
        doc.key = doc.key or exact_key(doc.title, doc.content)
        self.keys.setdefault(doc.key, doc.cluster_id)
        self.docs.append(doc)

    def _key_free(self, key: int, cluster: str | None = None) -> bool:
        owner = self.keys.get(key)
        return owner is None or (cluster is not None and owner == cluster)

    # -- kinds -------------------------------------------------------------------------------

    def _original(self, hour: int, hour_start: datetime, base_us: int) -> _Doc:
        rng = self.rng
        lang = "zh" if rng.random() < self.mix.zh_share else "en"
        while True:
            article = self.streams[lang].next()
            site = None
            url = None
            if article.url and page_key(article.url) not in self.pages:
                # Real crawl URLs (Sogou) keep their host; such sites get no extra chrome.
                url = article.url
                self.pages.add(page_key(url))
                host = (urlsplit(url).hostname or "").lower()
                site = _Site(host=host, name=host, lang=lang, scheme=urlsplit(url).scheme, url_style="real")
            else:
                site = self._pick_site(lang, "normal")
            header: tuple[str, ...] = ()
            footer: tuple[str, ...] = ()
            if site.url_style != "real" and rng.random() < self.mix.light_boilerplate:
                header, footer = _light_boilerplate(site, rng)
            layout = _Layout(header, article.paragraphs, footer)
            title = article.title or None
            content = layout.render(lang)
            key = exact_key(title, content)
            if not self._key_free(key):
                continue  # cannot happen with a folded corpus; kept so a bad corpus never plants a hidden dup
            doc_id = self._new_id()
            doc = _Doc(
                doc_id=doc_id, hour=hour, t_us=base_us + rng.randrange(HOUR_US), url=url or self._new_url(site, hour_start, title),
                site=site.host, lang=lang, title=title, content=content, kind="original", cluster_id=doc_id,
                layout=layout, site_obj=site, key=key, article_id=article.id,
            )  # fmt: skip
            doc.origin = doc
            doc.variants = list(self.corpus.variants.get(article.id, ()))
            if doc.variants:
                self.with_variants.append(doc)
            self._register(doc)
            return doc

    def _template(self, hour: int, hour_start: datetime, base_us: int) -> _Doc:
        rng = self.rng
        lang = "zh" if rng.random() < self.mix.zh_share else "en"
        site = self._pick_site(lang, "template")
        while True:
            article = self.streams[lang].next()
            t_us = base_us + rng.randrange(HOUR_US)
            stamp = (_EPOCH + timedelta(microseconds=t_us)).strftime("%Y-%m-%d %H:%M")
            editor = _editor(lang, rng)
            dateline = (
                f"发布时间：{stamp}　来源：{site.name}　作者：{editor}"
                if lang == "zh"
                else f"Published {stamp} UTC | By {editor}"
            )
            layout = _Layout((*site.header, article.title, dateline), article.paragraphs, site.footer)
            content = layout.render(lang)
            title = f"{article.title}_{site.name}" if lang == "zh" else f"{article.title} | {site.name}"
            key = exact_key(title, content)
            if self._key_free(key):
                break
        doc_id = self._new_id()
        doc = _Doc(
            doc_id=doc_id, hour=hour, t_us=t_us, url=self._new_url(site, hour_start, article.title), site=site.host,
            lang=lang, title=title, content=content, kind="template_distinct", cluster_id=doc_id, layout=layout, site_obj=site,
            key=key, article_id=article.id,
        )  # fmt: skip
        self._register(doc)
        return doc

    def _short(self, hour: int, hour_start: datetime, base_us: int) -> _Doc:
        rng = self.rng
        lang = "zh" if rng.random() < self.mix.zh_share else "en"
        site = self._pick_site(lang, "flash")
        family = rng.randrange(_N_FLASH_FAMILIES)
        while True:
            family_title, text = _flash(lang, family, rng)
            title = family_title if rng.random() < 0.5 else None
            key = exact_key(title, text)
            if 20 <= len(text) <= 120 and self._key_free(key):
                break
        doc_id = self._new_id()
        doc = _Doc(
            doc_id=doc_id, hour=hour, t_us=base_us + rng.randrange(HOUR_US), url=self._new_url(site, hour_start, title),
            site=site.host, lang=lang, title=title, content=text, kind="short_distinct", cluster_id=doc_id, key=key,
        )  # fmt: skip
        self._register(doc)
        return doc

    def _list_page(self, hour: int, hour_start: datetime, base_us: int) -> _Doc:
        """The next page of a multi-page list article (same site, template and intro; other
        entries), or the first page of a new one. Must be kept: a reader sees different entries."""
        rng = self.rng
        open_series = [x for x in self.list_series if x["last"].t_us < base_us + HOUR_US - 1000 and x["page"] < 8]
        if open_series and rng.random() < 0.8:
            series = open_series[rng.randrange(len(open_series))]
        else:
            lang = "zh" if rng.random() < self.mix.zh_share else "en"
            site = self._pick_site(lang, "normal")
            pool = self.corpus.sentences[lang]
            intro = tuple(pool[rng.randrange(len(pool))] for _ in range(rng.randint(2, 8)))
            place = rng.choice(_ZH_CITY if lang == "zh" else _EN_CITY)
            title = f"{place}财富榜{hour_start.year}" if lang == "zh" else f"The {place} rich list {hour_start.year}"
            series = {"lang": lang, "site": site, "intro": intro, "title": title, "style": rng.randrange(2),
                      "url": self._new_url(site, hour_start, title), "page": 0, "last": None}  # fmt: skip
            self.list_series.append(series)
        lang, site, page = series["lang"], series["site"], series["page"] + 1
        prev: _Doc | None = series["last"]
        while True:
            items = _list_items(lang, series["style"], 10 * (page - 1) + 1, rng)
            title = f"{series['title']}（第{page}页）" if lang == "zh" else f"{series['title']} (page {page})"
            nav = f"第{page}页 下一页" if lang == "zh" else f"Page {page} | Next page"
            layout = _Layout((), (series["intro"],), (*items, nav))  # one entry per line
            content = layout.render(lang)
            key = exact_key(title, content)
            if self._key_free(key):
                break
        base = series["url"]
        url = f"{base}{'&' if '?' in base else '?'}page={page}" if page > 1 else base
        self.pages.add(page_key(url))
        t_us = self._after(prev, hour, base_us) if prev is not None else base_us + rng.randrange(HOUR_US // 2)
        doc_id = self._new_id()
        doc = _Doc(
            doc_id=doc_id, hour=hour, t_us=t_us, url=url, site=site.host, lang=lang, title=title, content=content,
            kind="list_page", cluster_id=doc_id, source_doc_id=prev.doc_id if prev else None, layout=layout,
            site_obj=site, key=key,
        )  # fmt: skip
        if prev is not None:
            doc.true_jaccard = round(jaccard(self._char_shingles(prev), char_shingles(title, content)), 6)
            doc.true_jaccard_words = round(jaccard(self._shingles(prev), self._shingles(doc)), 6)
            doc.edits = ("list_next_page",)
        series["page"], series["last"] = page, doc
        self._register(doc)
        return doc

    def _pick(self, now: list[_Doc], past: list[_Doc], hour: int, end_us: int, ok: Any = None) -> _Doc | None:
        """A source: from an earlier hour with probability ``cross_hour``, else from this hour.

        A same-hour source must leave room to fetch the copy after it; ``ok`` filters candidates.
        """
        rng = self.rng
        order = [past, now] if past and rng.random() < self.mix.cross_hour else [now, past]
        for candidates in order:
            if not candidates:
                continue
            for _ in range(30):
                d = candidates[rng.randrange(len(candidates))]
                if (d.hour < hour or d.t_us < end_us - 1000) and (ok is None or ok(d)):
                    return d
            good = [
                d for d in candidates if (d.hour < hour or d.t_us < end_us - 1000) and (ok is None or ok(d))
            ]
            if good:
                return good[rng.randrange(len(good))]
        return None

    def _after(self, src: _Doc, hour: int, base_us: int) -> int:
        end = base_us + HOUR_US
        lo = src.t_us + 1 if src.hour == hour else base_us
        return lo + self.rng.randrange(end - lo)

    def _content_source(self, hour: int, end_us: int) -> _Doc | None:
        """A named source for an exact or near copy: the original, or sometimes an identical copy."""
        if self.rng.random() < self.mix.copy_of_copy and (self.identical or self.past_identical):
            src = self._pick(self.identical, self.past_identical, hour, end_us)
            if src is not None:
                return src
        return self._pick(self.originals, self.past_originals, hour, end_us)

    def _url_repeat(self, hour: int, base_us: int) -> _Doc | None:
        src = self._pick(self.originals, self.past_originals, hour, base_us + HOUR_US)
        if src is None:
            return None
        # A quarter are refetched under the other scheme (a site moving to https, a crawler trying both).
        url, ops = noisy_url(src.url, self.rng, other_scheme=self.lead_rng.random() < 0.25)
        doc = _Doc(
            doc_id=self._new_id(), hour=hour, t_us=self._after(src, hour, base_us), url=url, site=src.site, lang=src.lang,
            title=src.title, content=src.content, kind="url_repeat", cluster_id=src.cluster_id, source_doc_id=src.doc_id,
            edits=tuple(ops), true_jaccard=1.0, origin=src, key=src.key,
        )  # fmt: skip
        self._register(doc)
        self.identical.append(doc)
        return doc

    def _exact_copy(self, hour: int, hour_start: datetime, base_us: int) -> _Doc | None:
        src = self._content_source(hour, base_us + HOUR_US)
        if src is None:
            return None
        origin = src.origin or src
        title, content, ops = _exact_noise(origin.title, origin.content, src.lang, self.rng)
        if exact_key(title, content) != origin.key:  # a noise op the exact layer would not undo
            title, content, ops = origin.title, origin.content, []
        site = self._pick_site(src.lang, "mirror", avoid=src.site)
        doc = _Doc(
            doc_id=self._new_id(), hour=hour, t_us=self._after(src, hour, base_us), url=self._new_url(site, hour_start, title),
            site=site.host, lang=src.lang, title=title, content=content, kind="exact_copy", cluster_id=src.cluster_id,
            source_doc_id=src.doc_id, edits=tuple(ops), true_jaccard=1.0, origin=origin, key=origin.key,
        )  # fmt: skip
        self._register(doc)
        self.identical.append(doc)
        return doc

    def _corpus_dup(self, hour: int, hour_start: datetime, base_us: int) -> _Doc | None:
        # Originals with unplanted natural duplicates are few: pick from that short list directly.
        self.with_variants = [d for d in self.with_variants if d.variants]
        now = [d for d in self.with_variants if d.hour == hour]
        past = [d for d in self.with_variants if d.hour < hour]
        src = self._pick(now, past, hour, base_us + HOUR_US)
        if src is None:
            return None
        article, _ = src.variants.pop(0)
        title = article.title or None
        content = article.body()
        key = exact_key(title, content)
        if not self._key_free(key, src.cluster_id):
            return None
        site = self._pick_site(src.lang, "mirror", avoid=src.site)
        url = article.url if article.url and page_key(article.url) not in self.pages else None
        if url:
            self.pages.add(page_key(url))
        doc = _Doc(
            doc_id=self._new_id(), hour=hour, t_us=self._after(src, hour, base_us),
            url=url or self._new_url(site, hour_start, title), site=(urlsplit(url).hostname or "") if url else site.host,
            lang=src.lang, title=title, content=content, kind="corpus_dup", cluster_id=src.cluster_id,
            source_doc_id=src.doc_id, edits=(f"natural:{article.id}",), key=key, article_id=article.id,
        )  # fmt: skip
        doc.true_jaccard = round(jaccard(self._char_shingles(src), char_shingles(doc.title, doc.content)), 6)
        doc.true_jaccard_words = round(jaccard(self._shingles(src), self._shingles(doc)), 6)
        self._register(doc)
        return doc

    def _near_copy(self, hour: int, hour_start: datetime, base_us: int) -> _Doc | None:
        src = self._content_source(hour, base_us + HOUR_US)
        if src is None:
            return None
        origin = src.origin or src
        assert origin.layout is not None
        rng, editor = self.edit_rng, self.editors[src.lang]
        lo, hi = rng.choices(NEAR_BANDS, weights=self.mix.near_band_weights)[0]
        s = {0.5: 2.2, 0.7: 1.2, 0.8: 0.7, 0.9: 0.25}[lo]
        mirror = self._pick_site(src.lang, "mirror", avoid=src.site)
        src_shingles = self._char_shingles(origin)
        applicable = editor.applicable(origin.layout)
        best: tuple[float, str | None, str, tuple[str, ...], int, float] | None = None
        for _ in range(10):
            # One to three edits in every band by default, as copies in a crawl come.
            n_edits = rng.choice(range(self.mix.min_edits, self.mix.max_edits + 1))
            edits = tuple(sorted(rng.sample(applicable, min(n_edits, len(applicable))), key=EDITS_ALL.index))
            title, content = editor.apply(origin.title, origin.layout, edits, s, mirror, origin.site_obj.name)
            key = exact_key(title, content)
            if key == origin.key or not self._key_free(key, src.cluster_id):
                s *= 1.5
                continue
            j = jaccard(src_shingles, char_shingles(title, content))
            miss = 0.0 if lo <= j <= hi else min(abs(j - lo), abs(j - hi))
            if j >= 0.5 and (best is None or miss < best[0]):
                best = (miss, title, content, edits, key, j)
            if miss == 0.0:
                break
            s = s * 1.6 if j > hi else s / 1.6
        if best is None:
            # Tiny documents where any content edit falls below 0.5: punctuation noise only.
            edits = ("whitespace_punct",)
            title, content = editor.apply(
                origin.title, origin.layout, edits, 0.1, mirror, origin.site_obj.name
            )
            key = exact_key(title, content)
            if key == origin.key or not self._key_free(key, src.cluster_id):
                return None
            best = (0.0, title, content, edits, key, jaccard(src_shingles, char_shingles(title, content)))
        _, title, content, edits, key, j = best
        j_words = jaccard(self._shingles(origin), doc_shingles(title, content))
        doc = _Doc(
            doc_id=self._new_id(), hour=hour, t_us=self._after(src, hour, base_us), url=self._new_url(mirror, hour_start, title),
            site=mirror.host, lang=src.lang, title=title, content=content, kind="near_copy", cluster_id=src.cluster_id,
            source_doc_id=src.doc_id, edits=edits, true_jaccard=round(j, 6), true_jaccard_words=round(j_words, 6),
            origin=origin, key=key,
        )  # fmt: skip
        self._register(doc)
        return doc

    def _url_update(self, hour: int, base_us: int) -> _Doc | None:
        rng = self.rng
        src = self._pick(
            self.originals, self.past_originals, hour, base_us + HOUR_US, ok=lambda d: not d.updated
        )
        if src is None:
            return None
        assert src.layout is not None
        old = [x for p in src.layout.paragraphs for x in p]
        src_shingles = self._shingles(src)
        for attempt in range(5):
            fresh = self.streams[src.lang].next()
            keep = 0 if attempt else rng.randint(0, len(old) // 4)  # updates often keep the lede
            paragraphs = ((tuple(old[:keep]),) if keep else ()) + fresh.paragraphs
            roll = rng.random()
            if roll < 0.5 and src.title:
                title: str | None = src.title
            elif roll < 0.75 and src.title:
                title = (
                    f"（更新）{src.title}" if src.lang == "zh" else f"UPDATE {rng.randint(1, 3)}-{src.title}"
                )
            else:
                title = fresh.title or None
            layout = _Layout(src.layout.header, paragraphs, src.layout.footer)
            content = layout.render(src.lang)
            key = exact_key(title, content)
            if not self._key_free(key):
                continue
            doc = _Doc(
                doc_id=self._new_id(), hour=hour, t_us=self._after(src, hour, base_us), url=src.url, site=src.site,
                lang=src.lang, title=title, content=content, kind="url_update", source_doc_id=src.doc_id, key=key,
                article_id=fresh.id,
            )  # fmt: skip
            j = jaccard(src_shingles, self._shingles(doc))
            if j >= 0.5 or jaccard(self._char_shingles(src), char_shingles(title, content)) >= 0.5:
                self.ids.discard(doc.doc_id)
                self.shingle_cache.pop(doc.doc_id, None)
                continue
            if rng.random() < 0.5:
                doc.url, ops = noisy_url(src.url, rng)
                doc.edits = ("rewrite", *ops)
            else:
                doc.edits = ("rewrite",)
            return self._keep_update(doc, src, words_jaccard=j)
        return None

    def _keep_update(self, doc: _Doc, src: _Doc, words_jaccard: float | None = None) -> _Doc:
        """Register ``doc``, a kept update of page ``src``: its own cluster, its true Jaccards to ``src``."""
        doc.cluster_id = doc.doc_id
        doc.true_jaccard = round(jaccard(self._char_shingles(src), char_shingles(doc.title, doc.content)), 6)
        if words_jaccard is None:
            words_jaccard = jaccard(self._shingles(src), self._shingles(doc))
        doc.true_jaccard_words = round(words_jaccard, 6)
        src.updated = True
        self._register(doc)
        return doc

    def _short_leadin(self, hour: int, hour_start: datetime, base_us: int) -> int:
        """A short page: its site's lead-in, then its own headline (kept: two items of one site are
        two items, however long the shared lead-in); a share reposted with a small edit (returned:
        how many reposts, taken from the near-copy budget)."""
        rng = self.lead_rng
        lang = "zh" if rng.random() < self.mix.zh_share else "en"
        site = self._pick_site(lang, "leadin")
        family = self.leadins.setdefault(site.host, len(self.leadins) % len(_LEADINS[lang]))
        pool = self.corpus.sentences[lang]
        while True:
            lead = _leadin(lang, family, site, rng)
            text = lead + _headline(lang, pool, rng, 99 - len(lead))
            key = exact_key(None, text)
            if len(text) - len(lead) >= 10 and self._key_free(key):
                break
        doc_id = self._new_id()
        doc = _Doc(
            doc_id=doc_id, hour=hour, t_us=base_us + rng.randrange(HOUR_US), url=self._new_url(site, hour_start, None),
            site=site.host, lang=lang, title=None, content=text, kind="short_leadin", cluster_id=doc_id, key=key,
        )  # fmt: skip
        self._register(doc)
        if rng.random() >= 0.3:
            return 0
        for _ in range(10):
            edited, edit = _short_edit(text, lang, rng)
            if exact_key(None, edited) != key and self._key_free(exact_key(None, edited)):
                break
        else:
            return 0
        mirror = self._pick_site(lang, "mirror")
        copy = _Doc(
            doc_id=self._new_id(), hour=hour, t_us=doc.t_us + rng.randrange(1, 600_000_000),
            url=self._new_url(mirror, hour_start, None), site=mirror.host, lang=lang, title=None, content=edited,
            kind="near_copy", cluster_id=doc_id, source_doc_id=doc_id, edits=(edit,),
            true_jaccard=round(jaccard(char_shingles(None, text), char_shingles(None, edited)), 6),
        )  # fmt: skip
        copy.true_jaccard_words = round(jaccard(self._shingles(doc), self._shingles(copy)), 6)
        self._register(copy)
        return 1

    def _append_content(self, hour: int, base_us: int) -> tuple[_Doc, Article, str, int, str] | None:
        """A source page and its text with a second article of similar length (0.6-1.6 of the first)
        appended or put in place of its second half; None when this source finds none."""
        rng = self.lead_rng
        src = self._pick(self.originals, self.past_originals, hour, base_us + HOUR_US, ok=lambda d: not d.updated)
        if src is None or src.layout is None:
            return None
        old = src.layout.paragraphs
        old_chars = sum(len(x) for p in old for x in p)
        for _ in range(20):
            fresh = self.streams[src.lang].next()
            new_chars = sum(len(x) for p in fresh.paragraphs for x in p)
            if not 0.6 * old_chars <= new_chars <= 1.6 * old_chars:
                continue
            if rng.random() < 2 / 3 or len(old) < 2:
                paragraphs, edit = old + fresh.paragraphs, "append_article"
            else:
                paragraphs, edit = old[: (len(old) + 1) // 2] + fresh.paragraphs, "replace_half"
            content = _Layout(src.layout.header, paragraphs, src.layout.footer).render(src.lang)
            key = exact_key(src.title, content)
            if self._key_free(key):
                return src, fresh, content, key, edit
        return None

    def _url_append(self, hour: int, base_us: int) -> _Doc | None:
        """An earlier page refetched under the other scheme with a whole other article appended, or
        its second half replaced by one: half of the newer text is new (kept)."""
        rng = self.lead_rng
        for _ in range(50):
            found = self._append_content(hour, base_us)
            if found is not None:
                break
        else:
            return None
        src, fresh, content, key, edit = found
        url, ops = noisy_url(src.url, rng, other_scheme=True)
        doc = _Doc(
            doc_id=self._new_id(), hour=hour, t_us=self._after(src, hour, base_us), url=url, site=src.site,
            lang=src.lang, title=src.title, content=content, kind="url_append", source_doc_id=src.doc_id, key=key,
            article_id=fresh.id, edits=(edit, *ops),
        )  # fmt: skip
        return self._keep_update(doc, src)

    # -- one hour ----------------------------------------------------------------------------

    def hour(self, hour: int, n: int) -> None:
        hour_start = self.start + timedelta(hours=hour)
        base_us = (hour_start - _EPOCH) // timedelta(microseconds=1)
        counts = self.mix.counts(n)
        self.past_originals.extend(self.originals)
        self.past_identical.extend(self.identical)
        self.originals, self.identical = [], []
        for _ in range(counts["original"]):
            self.originals.append(self._original(hour, hour_start, base_us))
        for _ in range(counts["template_distinct"]):
            self._template(hour, hour_start, base_us)
        for _ in range(counts["short_distinct"]):
            self._short(hour, hour_start, base_us)
        for _ in range(counts["list_page"]):
            self._list_page(hour, hour_start, base_us)
        reposts = 0
        for _ in range(counts["short_leadin"]):
            reposts += self._short_leadin(hour, hour_start, base_us)
        # Identical copies first: exact and near copies may name them as their source.
        for _ in range(counts["url_repeat"]):
            self._require(self._url_repeat(hour, base_us), "url_repeat")
        for _ in range(counts["exact_copy"]):
            self._require(self._exact_copy(hour, hour_start, base_us), "exact_copy")
        near = max(0, counts["near_copy"] - reposts)
        for _ in range(counts["corpus_dup"]):
            if self._corpus_dup(hour, hour_start, base_us) is None:
                near += 1  # the corpora ran out of natural duplicates: plant a near copy instead
                self.corpus_dup_shortfall += 1
        for _ in range(near):
            # None means this source could not yield a fresh near copy; another source will.
            self._require(
                next((d for _ in range(50) if (d := self._near_copy(hour, hour_start, base_us))), None),
                "near_copy",
            )
        for _ in range(counts["url_update"]):
            self._require(self._url_update(hour, base_us), "url_update")
        for _ in range(counts["url_append"]):
            self._require(self._url_append(hour, base_us), "url_append")

    def label_corpus_copies(self) -> None:
        """Relabel originals that retell an earlier original's or template page's story as
        ``corpus_copy`` of it (``bench.corpus_copies``), and originals and template pages whose
        article a reader judged the same story as an earlier document's (``reviewed_same_story``):
        same documents, other truth."""
        pool = sorted(
            (d for d in self.docs if d.kind in ("original", "template_distinct") and d.layout is not None),
            key=lambda d: (d.t_us, d.doc_id),
        )
        # A template page's title carries the site's name; its article's title is the header's last
        # line but one (before the dateline).
        titles = [d.title if d.kind == "original" else d.layout.header[-2] for d in pool]  # type: ignore[union-attr]
        bodies = [d.layout.paragraphs for d in pool]  # type: ignore[union-attr]
        texts = [story_text(t, render_body(d.lang, b)) for t, d, b in zip(titles, pool, bodies, strict=True)]
        ledes = [lede(b[0][0] if b and b[0] else "") for b in bodies]
        copies = find_corpus_copies(texts, range(len(pool)), [d.kind == "original" for d in pool], ledes)
        relabels = [
            (pool[c.later], pool[c.earlier], f"corpus_twin:covers {c.covers_later:.2f} of later / {c.covers_earlier:.2f} of earlier")
            for c in copies
        ]
        # Reviewed pairs are unordered: whichever of the two this crawl hands out later is the copy.
        # An update's fresh article may be the earlier telling; only an original or a template page
        # is relabelled.
        by_article = {d.article_id: d for d in self.docs if d.article_id and d.kind in _REVIEWED_KINDS}
        for pair, why in reviewed_same_story().items():
            docs = [by_article.get(a) for a in sorted(pair)]
            if None not in docs:
                earlier, later = sorted(docs, key=lambda d: (d.t_us, d.doc_id))  # type: ignore[union-attr]
                if later.kind in ("original", "template_distinct"):
                    relabels.append((later, earlier, f"corpus_twin:reviewed: {why}"))
        renamed: dict[str, str] = {}
        done: set[str] = set()
        # In crawl order of the later one, so an earlier copy's cluster is final.
        for later, earlier, edit in sorted(relabels, key=lambda r: (r[0].t_us, r[0].doc_id, r[2])):
            if later.doc_id in done:
                continue
            done.add(later.doc_id)
            cluster = renamed.get(earlier.cluster_id, earlier.cluster_id)
            renamed[later.cluster_id] = cluster
            later.kind, later.source_doc_id, later.cluster_id = "corpus_copy", earlier.doc_id, cluster
            later.edits = (edit,)
            later.true_jaccard = round(
                jaccard(char_shingles(earlier.title, earlier.content), char_shingles(later.title, later.content)), 6
            )
            later.true_jaccard_words = round(
                jaccard(doc_shingles(earlier.title, earlier.content), doc_shingles(later.title, later.content)), 6
            )
        for d in self.docs:  # copies made of a relabelled original join its new cluster
            d.cluster_id = renamed.get(d.cluster_id, d.cluster_id)
        self.corpus_copies = len(done)

    @staticmethod
    def _require(doc: _Doc | None, kind: str) -> None:
        if doc is None:
            raise RuntimeError(f"could not generate a {kind} document (no usable source)")


def _write_parquet(table: pa.Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def _crawl_table(docs: Sequence[_Doc]) -> pa.Table:
    return pa.table(
        {
            "doc_id": [d.doc_id for d in docs],
            "url": [d.url for d in docs],
            "title": [d.title for d in docs],
            "content": [d.content for d in docs],
            "fetched_at": pa.array([d.t_us for d in docs], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "lang": [d.lang for d in docs],
            "site": [d.site for d in docs],
        },
        schema=CRAWL_SCHEMA,
    )


def _truth_table(docs: Sequence[_Doc], batch_ids: Sequence[str]) -> pa.Table:
    return pa.table(
        {
            "doc_id": [d.doc_id for d in docs],
            "batch_id": [batch_ids[d.hour] for d in docs],
            "hour": pa.array([d.hour for d in docs], pa.int32()),
            "lang": [d.lang for d in docs],
            "kind": [d.kind for d in docs],
            "cluster_id": [d.cluster_id for d in docs],
            "source_doc_id": [d.source_doc_id for d in docs],
            "edits": [list(d.edits) for d in docs],
            "true_jaccard": [d.true_jaccard for d in docs],
            "true_jaccard_words": [d.true_jaccard_words for d in docs],
            "is_duplicate": [d.kind in DUPLICATE_KINDS for d in docs],
            "must_keep": [d.kind in MUST_KEEP_KINDS for d in docs],
            "article_id": [d.article_id or (d.origin.article_id if d.origin is not None else None) for d in docs],
        },
        schema=TRUTH_SCHEMA,
    )


def batch_id_for(start: datetime, hour: int) -> str:
    return (start + timedelta(hours=hour)).strftime("%Y-%m-%dT%H")


def generate_crawl(
    out_root: Path,
    n_docs_per_hour: int,
    hours: int = 1,
    seed: int = 0,
    start: str = "2026-12-01T00",
    *,
    mix: Mix | Mapping[str, float] | None = None,
    data_dir: Path | None = None,
    source: str = "auto",
) -> GeneratedCrawl:
    """Generate ``hours`` hourly partitions of ``n_docs_per_hour`` documents plus the truth file.

    ``out_root/crawl`` is replaced when ``out_root`` holds an earlier generator run (its manifest);
    an unrelated existing ``crawl`` directory is refused rather than deleted. ``truth.parquet`` is
    written last, so its presence means the crawl is complete. Source texts come from ``data_dir``
    when given, else from ``bench.corpus.resolve_data_dir(source)`` (auto: eval data when present,
    else the shipped sample corpus).
    """
    t0 = time.perf_counter()
    if n_docs_per_hour < 1 or hours < 1:
        raise ValueError("n_docs_per_hour and hours must be >= 1")
    mix = mix if isinstance(mix, Mix) else Mix.from_overrides(mix or {})
    out_root = Path(out_root)
    crawl_root = out_root / "crawl"
    manifest_path = out_root / "generate_manifest.json"
    if crawl_root.exists() and not manifest_path.exists():
        raise FileExistsError(
            f"{crawl_root} exists and was not written by bench.generate; refusing to replace it"
        )
    if manifest_path.exists():
        (out_root / "truth.parquet").unlink(missing_ok=True)
        if crawl_root.exists():
            shutil.rmtree(crawl_root)
    start_dt = _parse_start(start)
    corpus_dir = Path(data_dir) if data_dir is not None else resolve_data_dir(source)
    corpus = load_corpus(corpus_dir)
    gen = _Generator(corpus, mix, seed, start_dt)
    for h in range(hours):
        gen.hour(h, n_docs_per_hour)
    gen.label_corpus_copies()

    batch_ids = tuple(batch_id_for(start_dt, h) for h in range(hours))
    kind_counts = {k: sum(1 for d in gen.docs if d.kind == k) for k in (*KINDS, *LABELLED_KINDS)}
    manifest = {
        "generator": "bench.generate",
        "n_docs_per_hour": n_docs_per_hour,
        "hours": hours,
        "seed": seed,
        "start": start,
        "batch_ids": list(batch_ids),
        "mix": asdict(mix),
        "kind_counts": kind_counts,
        "corpus_dup_shortfall_planted_as_near_copy": gen.corpus_dup_shortfall,
        "articles_used": {
            lang: {"real": s.used_real, "synthetic": s.used_synthetic} for lang, s in gen.streams.items()
        },
        "corpus": corpus.stats,
        # Which texts, without this machine's path: "sample", "eval" or the given folder's name.
        "corpus_source": _source_label(corpus_dir),
    }
    # The manifest goes first: it marks out_root as ours, so a rerun after a crash mid-write may
    # replace the partial crawl.
    out_root.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    ordered = sorted(gen.docs, key=lambda d: (d.t_us, d.doc_id))  # crawl order: what fetched_at says
    partitions: list[Path] = []
    for h in range(len(batch_ids)):
        hour_start = start_dt + timedelta(hours=h)
        path = crawl_root / f"dt={hour_start:%Y-%m-%d}" / f"hour={hour_start:%H}" / "part-00000.parquet"
        _write_parquet(_crawl_table([d for d in ordered if d.hour == h]), path)
        partitions.append(path)
    truth_path = out_root / "truth.parquet"
    _write_parquet(_truth_table(ordered, batch_ids), truth_path)

    return GeneratedCrawl(
        root=out_root,
        crawl_root=crawl_root,
        truth_path=truth_path,
        manifest_path=manifest_path,
        batch_ids=batch_ids,
        partitions=tuple(partitions),
        n_docs=len(gen.docs),
        kind_counts=kind_counts,
        seconds=time.perf_counter() - t0,
    )


def _source_label(corpus_dir: Path) -> str:
    if corpus_dir.resolve() == SAMPLE_DATA_DIR:
        return "sample"
    if corpus_dir.resolve() == eval_data_dir().resolve():
        return "eval"
    return corpus_dir.name


def _parse_mix(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, _, value = item.partition("=")
        out[name.strip()] = float(value)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20000, help="documents per hour (default 20000)")
    parser.add_argument("--hours", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", default="2026-12-01T00", help="first hour, YYYY-MM-DDTHH (UTC)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mix", default="", help="overrides, e.g. near_copy=0.25,cross_hour=0.5")
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="auto",
        help="source texts: eval (research corpora under $DEDUP_EVAL_DATA), sample (shipped in "
        "bench/sample_corpus), auto (eval when present, else sample; the default)",
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="a folder with corpora/ (and pairs/); overrides --source")
    args = parser.parse_args(argv)
    result = generate_crawl(
        args.out,
        args.docs,
        args.hours,
        args.seed,
        args.start,
        mix=_parse_mix(args.mix),
        data_dir=args.data_dir,
        source=args.source,
    )
    summary = {
        "out": str(result.root),
        "batches": list(result.batch_ids),
        "docs": result.n_docs,
        "corpus_source": json.loads((result.root / "generate_manifest.json").read_text())["corpus_source"],
        "kind_counts": result.kind_counts,
        "seconds": round(result.seconds, 1),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

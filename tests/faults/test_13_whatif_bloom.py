"""#16 row 13: the what-if page took ``nan`` and ``inf`` as thresholds; the URL Bloom file was trusted
by its header alone, so zeroed bits hid registered URLs from L1 (their repeats were kept).

Decision: the file is a cache of the registry. One that fails its checksum is rebuilt from the
registry (and saved again), never used; a format-1 file (no checksum) is rebuilt once.
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from dedup_tasks.registry.bloom import _HEADER_WORDS, PersistedBloom
from tests.plugins.conftest import WEEK, audited_root, auth_manager, mint, plugin_app  # noqa: F401 - fixtures
from tests.registry.conftest import admin, make_registry, schema  # noqa: F401 - fixtures
from tests.registry.synth import fingerprints


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999", "1.5", "-0.1"])
def test_whatif_refuses_non_finite_and_out_of_range_thresholds(plugin_app, mint, value):  # noqa: F811
    client = TestClient(plugin_app)
    client.headers["Authorization"] = f"Bearer {mint('alice')}"
    r = client.get(f"/weeks/{WEEK}/whatif", params={"minhash": value})
    assert r.status_code == 422, r.text[:300]
    assert "minhash" in r.json()["detail"]
    assert client.get(f"/weeks/{WEEK}/whatif", params={"semantic": "0.95", "simhash": "2"}).status_code == 200




def test_a_corrupted_bloom_file_is_detected_and_rebuilt(make_registry, tmp_path, caplog):  # noqa: F811
    path = tmp_path / "url_bloom.npy"
    writer = make_registry()
    urls = np.array([111, 222, 333], np.uint64)
    writer.begin("b1")
    writer.commit("b1", fingerprints(["a", "b", "c"], urls.tolist(), [(1, 1), (2, 2), (3, 3)], [1, 2, 3]))
    first = make_registry(bloom_path=path, bloom_capacity=1000)
    assert len(first.lookup_urls("b9", urls)) == 3  # builds and saves the file
    first.close()
    assert PersistedBloom.load(path) is not None

    data = np.load(path, mmap_mode="r+")
    data[_HEADER_WORDS:] = 0  # header intact, bits gone
    data.flush()
    del data

    with caplog.at_level("INFO", logger="dedup_tasks.registry.postgres"):
        fresh = make_registry(bloom_path=path, bloom_capacity=1000)
        hits = fresh.lookup_urls("b9", urls)
    # Every registered URL is still found: the filter was rebuilt from the registry, not trusted.
    assert sorted(hits.doc_id.tolist()) == ["a", "b", "c"]
    assert "rebuilt (file corrupt: checksum mismatch)" in caplog.text
    fresh.close()
    again = PersistedBloom.load(path)  # and the rebuilt filter was saved over the corrupt file
    assert again is not None and again.bloom.contains(urls).all()


def test_a_flipped_header_word_is_detected(tmp_path):
    from dedup_tasks.registry.bloom import BloomFilter

    bloom = BloomFilter.for_capacity(1000, 0.01)
    bloom.add(np.arange(50, dtype=np.uint64))
    path = tmp_path / "f.npy"
    PersistedBloom(bloom, "12345678-1234-5678-1234-567812345678", 7).save(path)
    data = np.load(path, mmap_mode="r+")
    data[4] = 3  # the watermark: a stale one would skip catching up on registered rows
    data.flush()
    del data
    assert PersistedBloom.load_checked(path)[1] == "corrupt: checksum mismatch"


@pytest.mark.parametrize("value", ["nan", "inf", "2"])
def test_cli_whatif_refuses_them_too(audited_root, value, capsys):  # noqa: F811
    from dedup_tasks.cli import main

    root, _ = audited_root
    assert main(["audit", "--root", str(root), "--week", WEEK, "whatif", "--threshold", f"minhash={value}"]) == 2
    assert "minhash" in capsys.readouterr().err

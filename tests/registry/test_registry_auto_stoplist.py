"""minhash_registry_stoplist="auto": a new registry learns its stoplist from its first batch's English
pages and keeps it; every later run, task or engine follows what the registry records."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from bench.sample_corpus.stoplist import sample_english
from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint import stoplist
from dedup_tasks.fingerprint.stoplist import AUTO_STOPLIST, DEFAULT_STOPLIST, band_key_space, load_stoplist
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import publish, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from dedup_tasks.registry.migrate import RegistryKeySpaceError
from dedup_tasks.stoplist_learn import learn_from_table
from tests.layers.test_near_copies import typos
from tests.registry.test_registry_main_min_bands import ASK, _query_and_documents

B0, B1 = "2026-12-01T00", "2026-12-01T01"
LAYERS = ("url", "exact", "simhash", "minhash")


def never() -> None:
    pytest.fail("a registry that has recorded its key space must not learn or propose another")


@pytest.fixture(autouse=True)
def _learn_from_150_pages(monkeypatch) -> None:
    """The test batches are a few hundred pages: a registry learns from 150 English pages here."""
    monkeypatch.setattr(stoplist, "LEARN_MIN_DOCS", 150)


def _config(tmp_path) -> DedupConfig:
    return DedupConfig(layers=LAYERS, root=str(tmp_path))


def _copy_of(table: pa.Table, row: int) -> pa.Table:
    """A near copy (typos) of one page, on another site an hour later."""
    page = table.slice(row, 1).to_pylist()[0]
    return pa.table({
        "doc_id": ["copy"], "url": ["https://elsewhere.example/copy"], "title": [page["title"]],
        "content": [typos(page["content"], 0.004, seed=3)],
        "fetched_at": pa.array([datetime(2026, 12, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")), "lang": ["en"],
    })


def test_a_new_registry_learns_its_stoplist_from_its_first_batch_and_keeps_it(make_registry, tmp_path) -> None:
    first = sample_english().slice(0, 200)
    config = _config(tmp_path)
    publish(BatchPaths(tmp_path, B0), run_batch(first, B0, config, make_registry(num_perm=128, band_key_space=AUTO_STOPLIST)))
    learned = learn_from_table(first, "learned-" + B0, config)
    assert learned.key_space != load_stoplist(DEFAULT_STOPLIST).key_space  # 200 pages, not the built-in's 404
    # Another process (a later hour's task) reads the same hashes back from the registry.
    again = make_registry(num_perm=128, band_key_space=AUTO_STOPLIST).band_key_stoplist(never)
    assert again.key_space == learned.key_space and np.array_equal(again.hashes, learned.hashes)
    # Its band keys are the ones L3 registered: a near copy an hour later is found through them.
    result = run_batch(_copy_of(first, 7), B1, config, make_registry(num_perm=128, band_key_space=AUTO_STOPLIST))
    got = result.decisions.to_pylist()[0]
    assert got["action"] == "drop" and got["matched_batch_id"] == B0, got["reason"]
    assert got["matched_doc_id"] == first.column("doc_id")[7].as_py()
    # A run that names another stoplist is refused, and told it can follow the registry.
    other = make_registry(num_perm=128, band_key_space=band_key_space(DEFAULT_STOPLIST))
    with pytest.raises(RegistryKeySpaceError, match="learned-2026-12-01T00.*auto"):
        other.minhash_candidates(ASK, np.zeros((1, config.registry_bands), np.uint64))


def test_a_first_batch_too_small_to_learn_from_keys_the_registry_on_the_built_in_stoplist(make_registry, tmp_path) -> None:
    run_batch(sample_english().slice(0, 100), B0, _config(tmp_path), make_registry(num_perm=128, band_key_space=AUTO_STOPLIST))
    recorded = make_registry(num_perm=128, band_key_space=AUTO_STOPLIST).band_key_stoplist(never)
    assert recorded.key_space == load_stoplist(DEFAULT_STOPLIST).key_space
    # The built-in one is recorded by name only: no hashes beside it.
    assert make_registry(num_perm=128, band_key_space=band_key_space(DEFAULT_STOPLIST)).minhash_candidates(
        ASK, np.zeros((1, 24), np.uint64)
    ).doc_id.size == 0


def test_auto_follows_a_registry_keyed_before_it_existed(make_registry) -> None:
    _, main, _ = _query_and_documents(np.random.default_rng(6))
    legacy = make_registry()  # documents, no record: keyed on the plain signature
    legacy.begin(B0)
    legacy.commit(B0, main)
    assert make_registry(band_key_space=AUTO_STOPLIST).band_key_stoplist(never) is None


def test_the_memory_registry_learns_and_keeps_its_stoplist_too(tmp_path) -> None:
    first = sample_english().slice(0, 200)
    registry = MemoryRegistry()
    config = _config(tmp_path)
    publish(BatchPaths(tmp_path, B0), run_batch(first, B0, config, registry))
    assert registry.band_key_stoplist(never).key_space == learn_from_table(first, "learned-" + B0, config).key_space
    got = run_batch(_copy_of(first, 11), B1, config, registry).decisions.to_pylist()[0]
    assert got["action"] == "drop" and got["matched_doc_id"] == first.column("doc_id")[11].as_py()


def test_the_spark_driver_learns_a_new_registrys_stoplist_from_the_first_batch(make_registry, tmp_path) -> None:
    from dedup_tasks.engines.spark import index_stoplist_setting
    from tests.conftest import write_partition

    first = sample_english().slice(0, 200)
    write_partition(tmp_path, B0, first)
    config = _config(tmp_path)
    setting = index_stoplist_setting(config, make_registry(num_perm=128, band_key_space=AUTO_STOPLIST), BatchPaths(tmp_path, B0))
    assert load_stoplist(setting).key_space == learn_from_table(first, "learned-" + B0, config).key_space
    # Recorded: the local engine's next batch follows it.
    assert make_registry(num_perm=128, band_key_space=AUTO_STOPLIST).band_key_stoplist(never).key_space == load_stoplist(setting).key_space


def test_the_spark_executors_get_the_registrys_learned_stoplist_as_a_file(make_registry, tmp_path) -> None:
    from dedup_tasks.engines.spark import index_stoplist_setting

    first = sample_english().slice(0, 200)
    config = _config(tmp_path)
    run_batch(first, B0, config, make_registry(num_perm=128, band_key_space=AUTO_STOPLIST))
    setting = index_stoplist_setting(config, make_registry(num_perm=128, band_key_space=AUTO_STOPLIST))
    assert setting.endswith("learned-2026-12-01T00.u32") and str(tmp_path) in setting
    assert load_stoplist(setting).key_space == learn_from_table(first, "learned-" + B0, config).key_space
    assert index_stoplist_setting(config, MemoryRegistry(plain_band_keys=True)) == ""
    assert index_stoplist_setting(config.replace(minhash_registry_stoplist=""), MemoryRegistry()) == ""


def test_auto_follows_a_registry_keyed_on_a_named_file(make_registry, tmp_path) -> None:
    first = sample_english().slice(0, 200)
    config = _config(tmp_path)
    path = tmp_path / "en-mine-v1.u32"
    learn_from_table(sample_english().slice(200, 200), "en-mine-v1", config).save(path)
    named = config.replace(minhash_registry_stoplist=str(path))
    publish(BatchPaths(tmp_path, B0), run_batch(first, B0, named, make_registry(num_perm=128, band_key_space=band_key_space(str(path)))))
    # Recorded with its hashes: a run under "auto" follows it without the file.
    followed = make_registry(num_perm=128, band_key_space=AUTO_STOPLIST).band_key_stoplist(never)
    assert followed.key_space == load_stoplist(str(path)).key_space
    path.unlink()
    result = run_batch(_copy_of(first, 3), B1, config, make_registry(num_perm=128, band_key_space=AUTO_STOPLIST))
    assert result.decisions.to_pylist()[0]["matched_doc_id"] == first.column("doc_id")[3].as_py()


def test_two_first_batches_at_once_agree_on_one_stoplist(make_registry) -> None:
    import threading
    import time

    from dedup_tasks.fingerprint.stoplist import Stoplist

    first, second = make_registry(band_key_space=AUTO_STOPLIST), make_registry(band_key_space=AUTO_STOPLIST)
    learning = threading.Event()
    got: dict[str, object] = {}

    def slow_learner() -> Stoplist:
        learning.set()
        time.sleep(0.5)  # learning inside the record's lock: the other batch must wait, then follow
        return Stoplist.of("learned-a", np.arange(100, dtype=np.uint32))

    thread = threading.Thread(target=lambda: got.setdefault("a", first.band_key_stoplist(slow_learner)))
    thread.start()
    assert learning.wait(10)
    got["b"] = second.band_key_stoplist(lambda: Stoplist.of("learned-b", np.arange(200, dtype=np.uint32)))
    thread.join(10)
    assert got["a"].key_space == got["b"].key_space == Stoplist.of("learned-a", np.arange(100, dtype=np.uint32)).key_space

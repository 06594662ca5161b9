"""L2's registry lookup is off by default (DedupConfig.simhash_registry_lookup): it reads every registered
SimHash (linear in the registry) and its hits can only be near misses, never drops."""

from __future__ import annotations

from pathlib import Path

from dedup_tasks.config import DedupConfig
from dedup_tasks.io import BatchPaths
from dedup_tasks.pipeline import publish, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import make_batch

STORY = " ".join(
    f"The harbour board met on day {i} to weigh the dredging budget, the ferry timetable and the new pier lights."
    for i in range(12)
)


class CountingRegistry(MemoryRegistry):
    """A MemoryRegistry that counts its SimHash lookups."""

    def __init__(self) -> None:
        super().__init__()
        self.simhash_lookups = 0

    def simhash_candidates(self, batch_id, simhash):
        self.simhash_lookups += 1
        return super().simhash_candidates(batch_id, simhash)


def _hours(config: DedupConfig) -> tuple[CountingRegistry, dict]:
    """Two published hours (L3 reads the earlier one back to verify its registered near copy)."""
    registry = CountingRegistry()
    first = [{"doc_id": "orig", "url": "https://a.example/1", "title": "Harbour board", "content": STORY}]
    # The same story with a new closing paragraph: SimHash within the suspect distance of the original.
    edited = STORY + " A spokesman said the board would publish its minutes next week, with the votes."
    second = [{"doc_id": "later", "url": "https://b.example/1", "title": "Harbour board", "content": edited}]
    publish(BatchPaths(Path(config.root), "2026-12-01T00"), run_batch(make_batch(first), "2026-12-01T00", config, registry))
    result = run_batch(make_batch(second), "2026-12-01T01", config, registry)
    return registry, {row["doc_id"]: row for row in result.decisions.to_pylist()}


def test_the_registry_simhash_lookup_is_off_by_default_and_decides_the_same(tmp_path):
    layers = ("url", "exact", "simhash", "minhash")
    off_registry, off = _hours(DedupConfig(layers=layers, root=str(tmp_path / "off")))
    on_registry, on = _hours(DedupConfig(layers=layers, root=str(tmp_path / "on"), simhash_registry_lookup=True))
    assert off_registry.simhash_lookups == 0
    assert on_registry.simhash_lookups == 2  # one lookup per batch
    # L3's registry lookup decides the registered near copy either way.
    assert off["later"]["action"] == on["later"]["action"] == "drop"
    assert off["later"]["layer"] == on["later"]["layer"] == "minhash"
    assert off["later"]["reason"] == on["later"]["reason"]

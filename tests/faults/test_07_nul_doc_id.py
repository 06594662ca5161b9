"""Row 7: a NUL inside a doc_id fails validation naming the row; ids ``x`` and ``x\\0`` are not conflated."""

from __future__ import annotations

import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.contract import ContractError
from dedup_tasks.pipeline import run_batch
from dedup_tasks.registry.base import MemoryRegistry
from tests.faults.conftest import docs, make_batch


def test_nul_in_doc_id_is_refused_naming_the_row():
    rows = docs("d", [1, 2, 3])
    rows[2]["doc_id"] = "bad\x00id"
    with pytest.raises(ContractError, match=r"NUL.*row\(s\) 2"):
        run_batch(make_batch(rows), "2026-12-01T00", DedupConfig(), MemoryRegistry(), source="crafted.parquet")


def test_x_and_x_nul_are_not_reported_as_duplicate_ids():
    rows = docs("d", [1, 2])
    rows[0]["doc_id"], rows[1]["doc_id"] = "x", "x\x00"
    with pytest.raises(ContractError) as caught:
        run_batch(make_batch(rows), "2026-12-01T00", DedupConfig(), MemoryRegistry(), source="crafted.parquet")
    # The NUL is the fault, not a duplicate: numpy's fixed-width strings drop trailing NULs.
    assert "NUL" in str(caught.value) and "unique" not in str(caught.value)
    assert "row(s) 1" in str(caught.value)

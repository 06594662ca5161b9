"""bench.research.sketch_history: the flat search and the HNSW mirror agree on a small history."""

from __future__ import annotations

import os

import numpy as np
import pytest

from bench.research.sketch_history import measure

DSN = os.environ.get("DEDUP_TEST_DB_URL", "postgresql://postgres@127.0.0.1:5432/test")


def test_the_mirror_finds_what_the_exact_search_finds_on_a_small_history() -> None:
    psycopg2 = pytest.importorskip("psycopg2")
    try:
        psycopg2.connect(DSN, connect_timeout=3).close()
    except psycopg2.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {DSN}: {exc}")
    row = measure(2_000, 400, DSN, np.random.default_rng(1), [64, 128])
    assert row["sources"] == 200  # half the hour rewrites a stored sketch
    assert [r["ef_search"] for r in row["mirror_search"]] == [64, 128]
    assert all(r["source_first"] == 1.0 and r["recall_at_4"] >= 0.95 for r in row["mirror_search"])

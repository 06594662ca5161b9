"""Small prepared batches for the layer tests: one English text a row, each on its own site."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from dedup_tasks.config import DedupConfig
from dedup_tasks.pipeline import prepare


def prepared_batch(
    texts: list[str], prefix: str, hour: int = 0, page: str = "story", site: bool = False, lang: str = "en"
) -> pa.Table:
    """Rows ``{prefix}0..`` fetched a minute apart from 2026-12-01 ``hour``:00 UTC, prepared by the pipeline;
    ``site`` adds an explicit ``site`` column (one site per row)."""
    n = len(texts)
    start = datetime(2026, 12, 1, hour, tzinfo=UTC)
    columns = {
        "doc_id": [f"{prefix}{i}" for i in range(n)],
        "url": [f"https://site{i}.{prefix}.example/{page}-{i}" for i in range(n)],
        "title": [None] * n,
        "content": texts,
        "fetched_at": pa.array([start + timedelta(minutes=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "lang": [lang] * n,
    }
    if site:
        columns["site"] = [f"site{i}.{prefix}.example" for i in range(n)]
    return prepare(pa.table(columns), DedupConfig())

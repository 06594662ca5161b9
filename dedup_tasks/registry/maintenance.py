"""Registry maintenance outside the hourly pipeline: compaction of the recent tier, and the age limit
of the L4 sentence-vector cache.

Commits only ever insert into the small recent tier; moving it into the main tier is this separate
step, so no batch's commit pays for it. Run it from the dedup_registry_maintenance DAG, or by hand
(`python -m dedup_tasks db compact`).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def compact_registry(config: Any, min_docs: int | None = None) -> dict[str, Any]:
    """Compact the registry of `config` (a DedupConfig) when its recent tier holds >= `min_docs` docs.

    min_docs defaults to config.compact_threshold_docs; 0 compacts whatever the recent tier holds.
    Returns {"recent_docs", "compacted", "moved", "seconds", "steps"}.
    """
    from dedup_tasks.registry.connect import open_registry

    threshold = config.compact_threshold_docs if min_docs is None else int(min_docs)
    with open_registry(config, schema=config.db_schema) as registry:
        recent = registry.recent_docs()
        if recent < max(threshold, 1):
            log.info("registry recent tier holds %d documents (threshold %d): nothing to do", recent, threshold)
            return {"recent_docs": recent, "compacted": False, "moved": {}, "seconds": 0.0, "steps": {}}
        done = registry.compact(min_docs=threshold)
    return {"recent_docs": recent, "compacted": bool(done["moved"]), **done}


def prune_sentence_vectors(config: Any, older_than_days: float | None = None) -> dict[str, Any]:
    """Delete the L4 sentence vectors (``embed.stored``, a cache keyed by text) of `config`'s registry
    written more than `older_than_days` ago (default config.sentence_vector_retention_days; None: keep
    them all). Returns {"older_than_days", "deleted": {model id: rows}}."""
    from dedup_tasks.registry.connect import open_registry

    days = config.sentence_vector_retention_days if older_than_days is None else float(older_than_days)
    if days is None:
        return {"older_than_days": None, "deleted": {}}
    with open_registry(config, schema=config.db_schema) as registry:
        deleted = registry.embedding_store.prune_content_keyed(days)
    log.info("pruned %d sentence vectors older than %g days", sum(deleted.values()), days)
    return {"older_than_days": days, "deleted": deleted}

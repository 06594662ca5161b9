"""The content hash column shared by L1 (update detection) and the exact layer."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dedup_tasks.fingerprint.content_hash import content_hashes_of_text
from dedup_tasks.layers.base import set_column


def ensure_content_hash(batch: pa.Table) -> pa.Table:
    """Add _ch_hi/_ch_lo unless ``prepare`` already did."""
    if "_ch_hi" in batch.column_names:
        return batch
    hashes = content_hashes_of_text(batch.column("title"), batch.column("content"))
    batch = set_column(batch, "_ch_hi", pa.array(hashes[:, 0], pa.uint64()))
    return set_column(batch, "_ch_lo", pa.array(hashes[:, 1], pa.uint64()))


def content_hash_columns(batch: pa.Table) -> np.ndarray:
    return np.stack([batch.column("_ch_hi").to_numpy(), batch.column("_ch_lo").to_numpy()], axis=1).astype(np.uint64)

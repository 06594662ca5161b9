"""L4 semantic layer. Until the embedding layer lands it keeps every row and says so."""

from __future__ import annotations

import pyarrow as pa

from dedup_tasks.layers.base import Drops, Layer, LayerContext


class SemanticLayer(Layer):
    name = "semantic"

    @property
    def threshold(self) -> float | None:
        return float(self.config.semantic_threshold)

    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        return batch, Drops.none()

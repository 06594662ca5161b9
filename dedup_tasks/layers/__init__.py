"""One module per layer of the cascade, in cost order."""

from dedup_tasks.layers.base import Layer, LayerContext, LayerOutput, LayerStats
from dedup_tasks.layers.exact import ExactLayer
from dedup_tasks.layers.minhash import MinHashLayer
from dedup_tasks.layers.semantic import SemanticLayer
from dedup_tasks.layers.simhash import SimHashLayer
from dedup_tasks.layers.url import UrlLayer

LAYER_CLASSES: dict[str, type[Layer]] = {
    "url": UrlLayer,
    "exact": ExactLayer,
    "simhash": SimHashLayer,
    "minhash": MinHashLayer,
    "semantic": SemanticLayer,
}

__all__ = ["LAYER_CLASSES", "Layer", "LayerContext", "LayerOutput", "LayerStats"]

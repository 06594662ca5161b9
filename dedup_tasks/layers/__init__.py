"""One module per layer of the cascade, in cost order."""

from collections.abc import Iterator, Mapping
from importlib import import_module

from dedup_tasks.layers.base import Layer, LayerContext, LayerOutput, LayerStats

# Layer name -> (module, class). A layer's module is imported when its class is first looked up, so a
# run without L4 never imports the semantic layer and what it needs (the embedders, psycopg2 for the
# vector store): ~0.04 CPU-s of a whole `python -m dedup_tasks run` process (docs/performance.md).
_LAYER_PATHS = {
    "url": ("dedup_tasks.layers.url", "UrlLayer"),
    "exact": ("dedup_tasks.layers.exact", "ExactLayer"),
    "simhash": ("dedup_tasks.layers.simhash", "SimHashLayer"),
    "minhash": ("dedup_tasks.layers.minhash", "MinHashLayer"),
    "semantic": ("dedup_tasks.layers.semantic", "SemanticLayer"),
}


class _LayerClasses(Mapping[str, type[Layer]]):
    """``LAYER_CLASSES``: a read-only mapping whose classes are imported on first lookup."""

    def __getitem__(self, name: str) -> type[Layer]:
        module, cls = _LAYER_PATHS[name]
        return getattr(import_module(module), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(_LAYER_PATHS)

    def __len__(self) -> int:
        return len(_LAYER_PATHS)


LAYER_CLASSES: Mapping[str, type[Layer]] = _LayerClasses()


def __getattr__(name: str) -> type[Layer]:
    """``from dedup_tasks.layers import SemanticLayer`` etc. keep working, imported on use."""
    for module, cls in _LAYER_PATHS.values():
        if cls == name:
            return getattr(import_module(module), cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LAYER_CLASSES", "Layer", "LayerContext", "LayerOutput", "LayerStats"]

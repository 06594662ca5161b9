"""Fingerprint registries: the interface, an in-memory one, and PostgreSQL."""

from dedup_tasks.registry.base import CommitResult, Fingerprints, Matches, MemoryRegistry, Registry

__all__ = ["CommitResult", "Fingerprints", "Matches", "MemoryRegistry", "Registry"]
